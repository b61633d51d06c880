/*
 * test_cpu_ops.c — every op of the CPU plugin against a scalar computation
 * written plainly here (straight loops in double over the same stored
 * inputs), through the application API.
 *
 * Inputs are read back after rounding to their storage type, so F16/BF16
 * cases compare like with like; tolerances then only cover the rounding of
 * the result itself.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "cpu_test_util.h"
#include "suite_main.h"

/* ------------------------------------------------------------- MUL_MAT */

/* W [K, N, d2, d3] times X [K, M, e2, e3]; X built transposed when asked. */
static void check_mul_mat(enum bp_type tw, enum bp_type tx, int64_t K, int64_t N, int64_t M,
                          int64_t d2, int64_t d3, int64_t e2, int64_t e3, bool x_transposed)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *w = bp_tensor_new_4d(f.ctx, tw, K, N, d2, d3);
    struct bp_tensor *xb = x_transposed ? bp_tensor_new_4d(f.ctx, tx, M, K, e2, e3)
                                        : bp_tensor_new_4d(f.ctx, tx, K, M, e2, e3);
    struct bp_tensor *x = x_transposed ? bp_transpose(f.ctx, xb) : xb;
    struct bp_tensor *y = bp_mul_mat(f.ctx, w, x);
    fx_alloc(&f);
    double *wv = fill(w, 11, 1.0), *xv = fill(xb, 12, 1.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);

    ck_assert_int_eq(y->type, BP_TYPE_F32);
    double *got = fetch(y);
    double *want = calloc((size_t)(N * M * e2 * e3), sizeof *want);
    for (int64_t i3 = 0; i3 < e3; i3++)
        for (int64_t i2 = 0; i2 < e2; i2++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    const int64_t w2 = i2 / (e2 / d2), w3 = i3 / (e3 / d3);
                    double s = 0.0;
                    for (int64_t k = 0; k < K; k++) {
                        double a = wv[k + K * (n + N * (w2 + d2 * w3))];
                        double b = x_transposed ? xv[m + M * (k + K * (i2 + e2 * i3))]
                                                : xv[k + K * (m + M * (i2 + e2 * i3))];
                        s += a * b;
                    }
                    want[n + N * (m + M * (i2 + e2 * i3))] = s;
                }
    expect_close(got, want, N * M * e2 * e3, 1e-6, 1e-6, "mul_mat");
    free(wv); free(xv); free(got); free(want);
    fx_free(&f);
}

START_TEST(test_mul_mat_matches_scalar_reference_for_odd_sizes)
{
    const int64_t ks[] = { 1, 3, 17, 33 };
    const int64_t nm[][2] = { { 1, 1 }, { 3, 5 }, { 17, 2 }, { 1, 33 } };
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++)
            check_mul_mat(BP_TYPE_F32, BP_TYPE_F32, ks[i], nm[j][0], nm[j][1], 1, 1, 1, 1, false);
}
END_TEST

START_TEST(test_mul_mat_accepts_f16_and_bf16_weights_and_f16_input)
{
    check_mul_mat(BP_TYPE_F16, BP_TYPE_F32, 33, 5, 3, 1, 1, 1, 1, false);
    check_mul_mat(BP_TYPE_BF16, BP_TYPE_F32, 17, 4, 7, 1, 1, 1, 1, false);
    check_mul_mat(BP_TYPE_F16, BP_TYPE_F16, 9, 3, 2, 1, 1, 1, 1, false);
}
END_TEST

START_TEST(test_mul_mat_broadcasts_weights_over_dims_2_and_3)
{
    check_mul_mat(BP_TYPE_F32, BP_TYPE_F32, 5, 3, 4, 2, 1, 6, 2, false);
    check_mul_mat(BP_TYPE_F16, BP_TYPE_F32, 7, 2, 3, 1, 2, 3, 4, false);
}
END_TEST

START_TEST(test_mul_mat_reads_transposed_input)
{
    check_mul_mat(BP_TYPE_F32, BP_TYPE_F32, 17, 5, 3, 1, 1, 1, 1, true);
    check_mul_mat(BP_TYPE_F32, BP_TYPE_F16, 6, 4, 9, 2, 1, 4, 1, true);
}
END_TEST

START_TEST(test_mul_mat_declines_activation_only_q8_K_weights)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *w = bp_tensor_new_2d(f.ctx, BP_TYPE_Q8_K, 256, 2);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 256, 1);
    struct bp_tensor *y = bp_mul_mat(f.ctx, w, x);
    ck_assert_ptr_nonnull(y);
    ck_assert(!bp_device_supports_op(cpu_device(), y));
    fx_alloc(&f);
    ck_assert_int_eq(fx_compute(&f, y), BP_ERR_UNSUPPORTED);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------------ ADD, MUL */

/* a is a permuted view of base [n1, n0, n2, n3]; b [b0, b1, b2, b3] repeats. */
static void check_binary(enum bp_type type, bool is_mul, const int64_t ne[4], const int64_t bne[4])
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *base = bp_tensor_new_4d(f.ctx, type, ne[1], ne[0], ne[2], ne[3]);
    struct bp_tensor *a = bp_permute(f.ctx, base, 1, 0, 2, 3);
    struct bp_tensor *b = bp_tensor_new_4d(f.ctx, type, bne[0], bne[1], bne[2], bne[3]);
    struct bp_tensor *y = is_mul ? bp_mul(f.ctx, a, b) : bp_add(f.ctx, a, b);
    fx_alloc(&f);
    double *av = fill(base, 21, 2.0), *bv = fill(b, 22, 2.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(y->type, type);

    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    double *got = fetch(y), *want = calloc((size_t)n, sizeof *want);
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    double x = av[i1 + ne[1] * (i0 + ne[0] * (i2 + ne[2] * i3))];
                    double z = bv[(i0 % bne[0]) + bne[0] * ((i1 % bne[1]) + bne[1] *
                                  ((i2 % bne[2]) + bne[2] * (i3 % bne[3])))];
                    want[i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3))] = is_mul ? x * z : x + z;
                }
    expect_close(got, want, n, type_atol(type), type_rtol(type), is_mul ? "mul" : "add");
    free(av); free(bv); free(got); free(want);
    fx_free(&f);
}

START_TEST(test_add_and_mul_broadcast_b_over_permuted_a)
{
    const int64_t ne[4] = { 5, 4, 3, 2 };
    const int64_t b_row[4] = { 5, 1, 1, 1 }, b_mixed[4] = { 5, 1, 3, 1 }, b_full[4] = { 5, 4, 3, 2 };
    const int64_t b_scalar[4] = { 1, 1, 1, 1 };
    const int64_t *bs[] = { b_row, b_mixed, b_full, b_scalar };
    for (int i = 0; i < 4; i++) {
        check_binary(BP_TYPE_F32, false, ne, bs[i]);
        check_binary(BP_TYPE_F32, true, ne, bs[i]);
    }
    check_binary(BP_TYPE_F16, false, ne, b_mixed);
    check_binary(BP_TYPE_F16, true, ne, b_mixed);
    const int64_t odd[4] = { 17, 3, 1, 1 }, odd_b[4] = { 1, 3, 1, 1 };
    check_binary(BP_TYPE_F32, false, odd, odd_b);
}
END_TEST

/* ------------------------------------------ SCALE, SILU, SQR, TANH */

enum unary { U_SCALE, U_SILU, U_SQR, U_TANH };

static double unary_ref(enum unary u, double x)
{
    switch (u) {
    case U_SCALE: return x * -1.5 + 0.25;
    case U_SILU: return x / (1.0 + exp(-x));
    case U_SQR: return x * x;
    default: return tanh(x);
    }
}

/* Input: rows 1..3 of a [7, 5] base, a view with an offset. */
static void check_unary(enum bp_type type, enum unary u)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *base = bp_tensor_new_2d(f.ctx, type, 7, 5);
    const int64_t vne[2] = { 7, 3 };
    const size_t vnb[2] = { 0, base->nb[1] };
    struct bp_tensor *x = bp_view(f.ctx, base, 2, vne, vnb, base->nb[1]);
    struct bp_tensor *y = u == U_SCALE ? bp_scale(f.ctx, x, -1.5f, 0.25f)
                        : u == U_SILU  ? bp_silu(f.ctx, x)
                        : u == U_SQR   ? bp_sqr(f.ctx, x)
                                       : bp_tanh(f.ctx, x);
    fx_alloc(&f);
    double *bv = fill(base, 31, 4.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(y->type, type);
    double *got = fetch(y), want[21];
    for (int64_t i = 0; i < 21; i++)
        want[i] = unary_ref(u, bv[7 + i]);
    expect_close(got, want, 21, type_atol(type), type_rtol(type), "unary");
    free(bv); free(got);
    fx_free(&f);
}

START_TEST(test_scale_silu_sqr_tanh_match_formulas_on_offset_views)
{
    for (int u = U_SCALE; u <= U_TANH; u++) {
        check_unary(BP_TYPE_F32, (enum unary)u);
        check_unary(BP_TYPE_F16, (enum unary)u);
        check_unary(BP_TYPE_BF16, (enum unary)u);
    }
}
END_TEST

/* ---------------------------------------------------------------- GELU */

/* ggml-cpu's GELU, from its definition: a table of F16 results indexed by
 * the F16 bits of x, each worked out in float with libm's tanhf, and x
 * itself outside (-10, 10). The conversions here are the compiler's
 * _Float16 ones, not the plugin's bp_f32_to_f16. */
static float ggml_gelu_table[1 << 16];

static void ggml_gelu_table_fill(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const uint16_t bits = (uint16_t)i;
        _Float16 hh;
        memcpy(&hh, &bits, 2);
        const float h = (float)hh;
        const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, a = 0.044715f;
        const float g = 0.5f * h * (1.0f + tanhf(sqrt_2_over_pi * h * (1.0f + a * h * h)));
        ggml_gelu_table[i] = (float)(_Float16)g;
    }
}

static float ggml_gelu(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const _Float16 h = (_Float16)x;
    uint16_t bits;
    memcpy(&bits, &h, 2);
    return ggml_gelu_table[bits];
}

/* Inputs that reach every part of the definition: a sweep across
 * [-12, 12], the edges +-10 and their neighbours, zeros, values that round
 * to F16 subnormals, and F16 rounding ties (1 + 2^-11 and 1 + 3 * 2^-11 go
 * to even, down and up). */
static int gelu_inputs(float *x, int cap)
{
    int n = 0;
    for (int i = 0; i <= 4800 && n < cap; i++) x[n++] = -12.0f + (float)i * 0.005f;
    const float special[] = { -10.0f, 10.0f, nextafterf(-10.0f, 0.0f), nextafterf(-10.0f, -20.0f),
                              nextafterf(10.0f, 0.0f), nextafterf(10.0f, 20.0f), 0.0f, -0.0f,
                              3e-6f, -3e-6f, 1e-9f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                              -(1.0f + 0x1p-11f), 0.5f + 0x1p-12f, 9.99f, -9.99f, 7.3e-3f };
    for (size_t i = 0; i < sizeof special / sizeof special[0] && n < cap; i++) x[n++] = special[i];
    return n;
}

/* F32: every result equals ggml's bit for bit. F16 and BF16 x: the stored
 * input goes through the same definition, the result is rounded to the
 * result type. */
static void check_gelu(enum bp_type type)
{
    enum { CAP = 4900 };
    float xs[CAP];
    const int n = gelu_inputs(xs, CAP);
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_1d(f.ctx, type, n);
    struct bp_tensor *y = bp_gelu(f.ctx, x);
    fx_alloc(&f);
    double *xv = malloc((size_t)n * sizeof *xv);
    for (int i = 0; i < n; i++) xv[i] = xs[i];
    store_values(x, xv);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(y);
    int mismatches = 0;
    for (int i = 0; i < n; i++) {
        const double want = round_to(type, ggml_gelu((float)xv[i]));
        if (memcmp(&got[i], &want, sizeof want) != 0 && mismatches++ < 5)
            fprintf(stderr, "gelu(%.9g) in %s: got %.9g, ggml gives %.9g\n", xv[i],
                    bp_type_name(type), got[i], want);
    }
    ck_assert_msg(mismatches == 0, "%d GELU results in %s differ from ggml's", mismatches,
                  bp_type_name(type));
    free(xv); free(got);
    fx_free(&f);
}

START_TEST(test_gelu_equals_ggml_cpu_table_bit_for_bit)
{
    ggml_gelu_table_fill();
    check_gelu(BP_TYPE_F32);
    check_gelu(BP_TYPE_F16);
    check_gelu(BP_TYPE_BF16);
    /* The table is not the exact formula: at x = 1.2 the two differ by
     * F16's rounding, which is what llama.cpp's logits carry. */
    const double exact = 0.5 * 1.2 * (1.0 + tanh(sqrt(2.0 / M_PI) * (1.2 + 0.044715 * 1.2 * 1.2 * 1.2)));
    ck_assert_double_ne(ggml_gelu(1.2f), (float)exact);
    ck_assert_double_eq_tol(ggml_gelu(1.2f), exact, 1e-3);
}
END_TEST

/* ------------------------------------------------------------ RMS_NORM */

static void check_rms_norm(enum bp_type type, int64_t n, int64_t rows, int64_t d2)
{
    struct fx f;
    fx_init(&f);
    /* x [n, rows, d2] is the transpose of base [rows, n, d2]. */
    struct bp_tensor *base = bp_tensor_new_3d(f.ctx, type, rows, n, d2);
    struct bp_tensor *x = bp_transpose(f.ctx, base);
    struct bp_tensor *y = bp_rms_norm(f.ctx, x, 1e-5f);
    fx_alloc(&f);
    double *bv = fill(base, 41, 3.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(y), *want = calloc((size_t)(n * rows * d2), sizeof *want);
    for (int64_t i2 = 0; i2 < d2; i2++)
        for (int64_t r = 0; r < rows; r++) {
            double ss = 0.0;
            for (int64_t i = 0; i < n; i++) {
                double v = bv[r + rows * (i + n * i2)];
                ss += v * v;
            }
            double inv = 1.0 / sqrt(ss / (double)n + (double)1e-5f);
            for (int64_t i = 0; i < n; i++)
                want[i + n * (r + rows * i2)] = bv[r + rows * (i + n * i2)] * inv;
        }
    expect_close(got, want, n * rows * d2, type_atol(type), type_rtol(type), "rms_norm");
    free(bv); free(got); free(want);
    fx_free(&f);
}

START_TEST(test_rms_norm_normalises_each_row_of_transposed_input)
{
    check_rms_norm(BP_TYPE_F32, 1, 3, 1);
    check_rms_norm(BP_TYPE_F32, 17, 3, 2);
    check_rms_norm(BP_TYPE_F32, 33, 1, 1);
    check_rms_norm(BP_TYPE_F16, 33, 5, 2);
}
END_TEST

/* ------------------------------------------------------------ SOFT_MAX */

/* x [n, r, d2, 1], mask [n, r + 2, m2, 1] (or none); mask row 2 of mask
 * slice 1 is all -inf so those rows of x are fully masked. */
static void check_soft_max(enum bp_type mtype, bool with_mask, int64_t n, int64_t r, int64_t d2,
                           int64_t m2)
{
    struct fx f;
    fx_init(&f);
    const float scale = 0.7f;
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, n, r, d2);
    struct bp_tensor *m = with_mask ? bp_tensor_new_3d(f.ctx, mtype, n, r + 2, m2) : NULL;
    struct bp_tensor *y = bp_soft_max(f.ctx, x, m, scale);
    fx_alloc(&f);
    double *xv = fill(x, 51, 3.0), *mv = NULL;
    if (m) {
        const int64_t mn = n * (r + 2) * m2;
        mv = malloc((size_t)mn * sizeof *mv);
        unsigned seed = 52;
        for (int64_t i = 0; i < mn; i++) {
            int64_t i0 = i % n, i1 = (i / n) % (r + 2), i2 = i / (n * (r + 2));
            double v = rnd(&seed);
            if ((i2 == 1 && i1 == 2) || (i0 == 1 && i1 == 0))
                v = -INFINITY;
            mv[i] = v;
        }
        store_values(m, mv);
    }
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(y->type, BP_TYPE_F32);
    double *got = fetch(y), *want = calloc((size_t)(n * r * d2), sizeof *want);
    double *row = malloc((size_t)n * sizeof *row);
    int fully_masked = 0;
    for (int64_t i2 = 0; i2 < d2; i2++)
        for (int64_t i1 = 0; i1 < r; i1++) {
            double mx = -INFINITY;
            for (int64_t i0 = 0; i0 < n; i0++) {
                row[i0] = xv[i0 + n * (i1 + r * i2)] * (double)scale;
                if (mv) row[i0] += mv[i0 + n * (i1 + (r + 2) * (i2 % m2))];
                if (row[i0] > mx) mx = row[i0];
            }
            double *out = want + n * (i1 + r * i2);
            if (mx == -INFINITY) {
                fully_masked++;
                continue; /* stays zero */
            }
            double sum = 0.0;
            for (int64_t i0 = 0; i0 < n; i0++) sum += exp(row[i0] - mx);
            for (int64_t i0 = 0; i0 < n; i0++) out[i0] = exp(row[i0] - mx) / sum;
        }
    if (with_mask && m2 > 1 && r > 2)
        ck_assert_int_gt(fully_masked, 0);
    expect_close(got, want, n * r * d2, 1e-6, 1e-5, "soft_max");
    free(xv); free(mv); free(got); free(want); free(row);
    fx_free(&f);
}

START_TEST(test_soft_max_applies_scale_and_broadcast_mask)
{
    check_soft_max(BP_TYPE_F32, false, 7, 3, 2, 1);
    check_soft_max(BP_TYPE_F32, true, 7, 3, 4, 2);
    check_soft_max(BP_TYPE_F16, true, 33, 5, 2, 2);
    check_soft_max(BP_TYPE_F32, true, 1, 4, 2, 1);
}
END_TEST

START_TEST(test_soft_max_gives_zeros_for_fully_masked_rows)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 4, 2);
    struct bp_tensor *m = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 4, 2);
    struct bp_tensor *y = bp_soft_max(f.ctx, x, m, 1.0f);
    fx_alloc(&f);
    const float xv[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    const float mv[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0 };
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(m, mv, 0, sizeof mv), BP_OK);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    float out[8];
    ck_assert_int_eq(bp_tensor_get(y, out, 0, sizeof out), BP_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(out[i] == 0.0f, "fully masked row element %d is %g, not 0", i, out[i]);
    const double e5 = exp(5.0), e6 = exp(6.0), e8 = exp(8.0), s = e5 + e6 + e8;
    ck_assert_double_eq_tol(out[4], e5 / s, 1e-6);
    ck_assert_double_eq_tol(out[5], e6 / s, 1e-6);
    ck_assert_float_eq(out[6], 0.0f);
    ck_assert_double_eq_tol(out[7], e8 / s, 1e-6);
    fx_free(&f);
}
END_TEST

/* ---------------------------------------------------------------- ROPE */

static void check_rope(enum bp_type type, int mode, int n_dims)
{
    struct fx f;
    fx_init(&f);
    const int64_t hd = 8, nh = 3, nt = 4;
    const float base = 10000.0f, fs = 0.5f;
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, type, hd, nh, nt);
    struct bp_tensor *pos = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt);
    struct bp_tensor *y = bp_rope(f.ctx, x, pos, n_dims, mode, base, fs);
    fx_alloc(&f);
    const int32_t pv[4] = { 0, 1, 5, 100 };
    ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof pv), BP_OK);
    double *xv = fill(x, 61, 2.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(y), *want = malloc((size_t)(hd * nh * nt) * sizeof *want);
    memcpy(want, xv, (size_t)(hd * nh * nt) * sizeof *want);
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++) {
            const double *in = xv + hd * (h + nh * t);
            double *out = want + hd * (h + nh * t);
            for (int i = 0; i < n_dims / 2; i++) {
                double theta = pv[t] * (double)fs * pow((double)base, -2.0 * i / n_dims);
                int a = mode == BP_ROPE_MODE_NEOX ? i : 2 * i;
                int b = mode == BP_ROPE_MODE_NEOX ? i + n_dims / 2 : 2 * i + 1;
                out[a] = in[a] * cos(theta) - in[b] * sin(theta);
                out[b] = in[a] * sin(theta) + in[b] * cos(theta);
            }
        }
    expect_close(got, want, hd * nh * nt, type_atol(type), type_rtol(type), "rope");
    free(xv); free(got); free(want);
    fx_free(&f);
}

START_TEST(test_rope_rotates_normal_and_neox_pairs_with_partial_dims)
{
    const int modes[2] = { BP_ROPE_MODE_NORMAL, BP_ROPE_MODE_NEOX };
    for (int m = 0; m < 2; m++) {
        check_rope(BP_TYPE_F32, modes[m], 8);
        check_rope(BP_TYPE_F32, modes[m], 4);
        check_rope(BP_TYPE_F16, modes[m], 6);
    }
}
END_TEST

/* A chain of ROPE nodes in one graph, as a decode step runs them (a thread
 * keeps a node's angles for the next): each changes one of base, n_dims,
 * freq_scale and the positions, or nothing, and must turn by its own
 * angles. */
START_TEST(test_rope_chain_turns_each_node_by_its_own_angles)
{
    static const struct { float base, fs; int n_dims, pos_set; } st[] = {
        { 10000.0f, 0.5f, 8, 0 }, { 10000.0f, 0.5f, 8, 0 }, { 500.0f, 0.5f, 8, 0 },
        { 500.0f, 0.5f, 6, 0 },   { 500.0f, 1.0f, 6, 0 },   { 500.0f, 1.0f, 6, 1 },
    };
    enum { NS = sizeof st / sizeof st[0] };
    const int64_t hd = 8, nh = 3, nt = 2;
    static const int32_t pv[2][2] = { { 3, 7 }, { 4, 9 } };
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, hd, nh, nt), *y = x;
    struct bp_tensor *pos[2] = { bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt),
                                 bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt) };
    for (int s = 0; s < NS; s++)
        y = bp_rope(f.ctx, y, pos[st[s].pos_set], st[s].n_dims, BP_ROPE_MODE_NORMAL, st[s].base, st[s].fs);
    fx_alloc(&f);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(bp_tensor_set(pos[i], pv[i], 0, sizeof pv[i]), BP_OK);
    double *want = fill(x, 62, 2.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    for (int s = 0; s < NS; s++)
        for (int64_t t = 0; t < nt; t++)
            for (int64_t h = 0; h < nh; h++) {
                double *r = want + hd * (h + nh * t);
                for (int i = 0; i < st[s].n_dims / 2; i++) {
                    const double theta = pv[st[s].pos_set][t] * (double)st[s].fs *
                                         pow((double)st[s].base, -2.0 * i / st[s].n_dims);
                    const double a = r[2 * i], b = r[2 * i + 1];
                    r[2 * i] = a * cos(theta) - b * sin(theta);
                    r[2 * i + 1] = a * sin(theta) + b * cos(theta);
                }
            }
    double *got = fetch(y);
    expect_close(got, want, hd * nh * nt, 1e-5, 1e-5, "rope chain");
    free(got); free(want);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------------ ROPE_EXT */

/* ggml's rope_yarn for pair i at position p, written out from bp_ops.h:
 * cos and sin of the pair's angle times the magnitude. ff is the pair's
 * frequency factor (1 without). */
static void rope_yarn_ref(const struct bp_rope_ext_params *rp, double ff, int i, double p, double *c,
                          double *s, double *ramp_out)
{
    const double theta_ext = p * pow((double)rp->freq_base, -2.0 * i / rp->n_dims) / ff;
    const double theta_int = (double)rp->freq_scale * theta_ext;
    double theta = theta_int, m = rp->attn_factor, ramp = 0.0;
    if (rp->ext_factor != 0.0f) {
        const double two_pi = 2.0 * M_PI, lb = log((double)rp->freq_base);
        const double c_fast = rp->n_dims * log(rp->n_ctx_orig / (two_pi * rp->beta_fast)) / (2.0 * lb);
        const double c_slow = rp->n_dims * log(rp->n_ctx_orig / (two_pi * rp->beta_slow)) / (2.0 * lb);
        const double lo = floor(c_fast) > 0.0 ? floor(c_fast) : 0.0;
        const double hi = ceil(c_slow) < rp->n_dims - 1 ? ceil(c_slow) : rp->n_dims - 1;
        double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        y = y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y;
        ramp = (1.0 - y) * rp->ext_factor;
        theta = theta_int * (1.0 - ramp) + theta_ext * ramp;
        m = rp->attn_factor * (1.0 + 0.1 * log(1.0 / rp->freq_scale));
    }
    *c = cos(theta) * m;
    *s = sin(theta) * m;
    if (ramp_out) *ramp_out = ramp;
}

/* x [hd, nh, nt] turned by ROPE_EXT with rp, with factors when with_ff;
 * returns how many pairs had a YaRN ramp strictly between 0 and 1. */
static int check_rope_ext(enum bp_type type, const struct bp_rope_ext_params *rp, bool with_ff,
                          int64_t hd)
{
    struct fx f;
    fx_init(&f);
    const int64_t nh = 3, nt = 5;
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, type, hd, nh, nt);
    struct bp_tensor *pos = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt);
    struct bp_tensor *ff = with_ff ? bp_tensor_new_1d(f.ctx, BP_TYPE_F32, rp->n_dims / 2) : NULL;
    struct bp_tensor *y = bp_rope_ext(f.ctx, x, pos, ff, rp);
    ck_assert_msg(y != NULL, "%s", bp_last_error());
    fx_alloc(&f);
    const int32_t pv[5] = { 0, 1, 17, 1000, 3071 };
    ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof pv), BP_OK);
    double *xv = fill(x, 63, 2.0), *fv = NULL;
    if (ff) { /* Llama 3's factors run from 1 to tens; these from 1 to 32 */
        fv = malloc((size_t)(rp->n_dims / 2) * sizeof *fv);
        for (int i = 0; i < rp->n_dims / 2; i++) fv[i] = 1.0 + 31.0 * i / (rp->n_dims / 2) + 0.25 * (i % 3);
        store_values(ff, fv);
    }
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(y), *want = malloc((size_t)(hd * nh * nt) * sizeof *want);
    memcpy(want, xv, (size_t)(hd * nh * nt) * sizeof *want);
    int ramped = 0;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++) {
            const double *in = xv + hd * (h + nh * t);
            double *out = want + hd * (h + nh * t);
            for (int i = 0; i < rp->n_dims / 2; i++) {
                double c, sn, ramp;
                rope_yarn_ref(rp, fv ? fv[i] : 1.0, i, pv[t], &c, &sn, &ramp);
                if (t == 0 && h == 0 && ramp > 0.0 && ramp < rp->ext_factor) ramped++;
                const int a = rp->mode == BP_ROPE_MODE_NEOX ? i : 2 * i;
                const int b = rp->mode == BP_ROPE_MODE_NEOX ? i + rp->n_dims / 2 : 2 * i + 1;
                out[a] = in[a] * c - in[b] * sn;
                out[b] = in[a] * sn + in[b] * c;
            }
        }
    /* The angles reach 3071 radians: the kernel's double angle is off by a
     * few ulps of that, which the F32 tolerance absorbs. */
    expect_close(got, want, hd * nh * nt, type == BP_TYPE_F32 ? 1e-5 : type_atol(type),
                 type_rtol(type), "rope_ext");
    free(xv); free(fv); free(got); free(want);
    fx_free(&f);
    return ramped;
}

static struct bp_rope_ext_params rope_params(int n_dims, int mode)
{
    return (struct bp_rope_ext_params){ .n_dims = n_dims, .mode = mode, .freq_base = 10000.0f,
                                        .freq_scale = 1.0f, .n_ctx_orig = 0, .ext_factor = 0.0f,
                                        .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f };
}

START_TEST(test_rope_ext_applies_frequency_factors_and_magnitude)
{
    const int modes[2] = { BP_ROPE_MODE_NORMAL, BP_ROPE_MODE_NEOX };
    for (int m = 0; m < 2; m++) {
        struct bp_rope_ext_params rp = rope_params(8, modes[m]);
        check_rope_ext(BP_TYPE_F32, &rp, true, 8);   /* Llama 3's factors */
        rp.n_dims = 6;                               /* partial: elements 6, 7 copied */
        check_rope_ext(BP_TYPE_F32, &rp, true, 8);
        rp.attn_factor = 0.75f;                      /* magnitude without YaRN */
        rp.freq_scale = 0.5f;                        /* linear scaling */
        check_rope_ext(BP_TYPE_F32, &rp, false, 8);
        check_rope_ext(BP_TYPE_F16, &rp, true, 8);
        check_rope_ext(BP_TYPE_BF16, &rp, true, 8);
    }
}
END_TEST

/* YaRN at a Llama head (64 dims, or the first 48 of 64): freq_scale 0.25
 * of a 4096-position original context, ext_factor 1, so pairs 10 to 23 mix
 * interpolation and extrapolation; with and without factors, magnitude. */
START_TEST(test_rope_ext_yarn_mixes_interpolation_and_extrapolation)
{
    const int modes[2] = { BP_ROPE_MODE_NORMAL, BP_ROPE_MODE_NEOX };
    for (int m = 0; m < 2; m++) {
        struct bp_rope_ext_params rp = rope_params(64, modes[m]);
        rp.freq_scale = 0.25f;
        rp.n_ctx_orig = 4096;
        rp.ext_factor = 1.0f;
        ck_assert_int_gt(check_rope_ext(BP_TYPE_F32, &rp, false, 64), 4);
        rp.attn_factor = 1.25f;
        ck_assert_int_gt(check_rope_ext(BP_TYPE_F32, &rp, true, 64), 4);
        rp.n_dims = 48;
        rp.ext_factor = 0.5f;
        ck_assert_int_gt(check_rope_ext(BP_TYPE_F32, &rp, true, 64), 4);
        check_rope_ext(BP_TYPE_F16, &rp, false, 64);
    }
}
END_TEST

/* With no factors, ext_factor 0 and attn_factor 1, ROPE_EXT is ROPE to
 * the bit, F32 and F16, at a head the kernel keeps angles for and at one
 * it does not (more than 128 pairs). */
START_TEST(test_rope_ext_with_defaults_is_rope_bit_for_bit)
{
    const int64_t heads[2] = { 64, 320 };
    const enum bp_type types[2] = { BP_TYPE_F32, BP_TYPE_F16 };
    for (int hi = 0; hi < 2; hi++)
        for (int ti = 0; ti < 2; ti++) {
            struct fx f;
            fx_init(&f);
            const int64_t hd = heads[hi], nt = 3;
            struct bp_rope_ext_params rp = rope_params((int)hd, BP_ROPE_MODE_NEOX);
            rp.freq_scale = 0.5f;
            struct bp_tensor *x = bp_tensor_new_3d(f.ctx, types[ti], hd, 2, nt);
            struct bp_tensor *pos = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt);
            struct bp_tensor *a = bp_rope(f.ctx, x, pos, rp.n_dims, rp.mode, rp.freq_base, rp.freq_scale);
            struct bp_tensor *b = bp_rope_ext(f.ctx, x, pos, NULL, &rp);
            struct bp_tensor *both = bp_add(f.ctx, a, b); /* one graph computes a and b */
            fx_alloc(&f);
            const int32_t pv[3] = { 5, 700, 40000 };
            ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof pv), BP_OK);
            double *xv = fill(x, 64, 3.0);
            ck_assert_int_eq(fx_compute(&f, both), BP_OK);
            double *ga = fetch(a), *gb = fetch(b);
            ck_assert_msg(memcmp(ga, gb, (size_t)bp_nelements(a) * sizeof *ga) == 0,
                          "ROPE_EXT with defaults differs from ROPE (head %lld, %s)", (long long)hd,
                          bp_type_name(types[ti]));
            free(xv); free(ga); free(gb);
            fx_free(&f);
        }
}
END_TEST

/* A chain of ROPE_EXT and ROPE nodes turning the same positions, as a
 * decode step runs them (a thread keeps a node's angles for the next):
 * each differs from the one before only in its factors, their presence,
 * ext_factor, attn_factor or the corrections' betas, and must turn by its
 * own angles. */
START_TEST(test_rope_ext_chain_turns_each_node_by_its_own_angles)
{
    enum { NS = 8 };
    struct bp_rope_ext_params st[NS];
    const int ff_set[NS] = { -1, 0, 1, -1, -1, -1, -1, 1 }; /* -1: no factors */
    for (int i = 0; i < NS; i++) {
        st[i] = rope_params(16, BP_ROPE_MODE_NORMAL);
        st[i].freq_scale = 0.25f;
        st[i].n_ctx_orig = 256;
    }
    st[3].ext_factor = 1.0f;
    st[4].ext_factor = 1.0f; st[4].attn_factor = 0.5f;
    st[5].ext_factor = 1.0f; st[5].attn_factor = 0.5f; st[5].beta_fast = 8.0f;
    st[6].attn_factor = 0.5f;
    const bool plain_rope[NS] = { true, false, false, false, false, false, false, false };
    const int64_t hd = 16, nh = 2, nt = 2;
    static const int32_t pv[2] = { 3, 200 };
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, hd, nh, nt), *y = x;
    struct bp_tensor *pos = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, nt);
    struct bp_tensor *ff[2] = { bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 8), bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 8) };
    for (int s = 0; s < NS; s++)
        y = plain_rope[s] ? bp_rope(f.ctx, y, pos, st[s].n_dims, st[s].mode, st[s].freq_base, st[s].freq_scale)
                          : bp_rope_ext(f.ctx, y, pos, ff_set[s] < 0 ? NULL : ff[ff_set[s]], &st[s]);
    fx_alloc(&f);
    ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof pv), BP_OK);
    double fv[2][8];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 8; i++) fv[k][i] = k == 0 ? 1.0 + i : 1.0 + 0.5 * (7 - i);
        store_values(ff[k], fv[k]);
    }
    double *want = fill(x, 65, 2.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    for (int s = 0; s < NS; s++)
        for (int64_t t = 0; t < nt; t++)
            for (int64_t h = 0; h < nh; h++) {
                double *r = want + hd * (h + nh * t);
                for (int i = 0; i < st[s].n_dims / 2; i++) {
                    double c, sn;
                    rope_yarn_ref(&st[s], ff_set[s] < 0 ? 1.0 : fv[ff_set[s]][i], i, pv[t], &c, &sn, NULL);
                    const double a = r[2 * i], b = r[2 * i + 1];
                    r[2 * i] = a * c - b * sn;
                    r[2 * i + 1] = a * sn + b * c;
                }
            }
    double *got = fetch(y);
    expect_close(got, want, hd * nh * nt, 1e-5, 1e-5, "rope_ext chain");
    free(got); free(want);
    fx_free(&f);
}
END_TEST

/* ----------------------------------------------------------- CPY, CONT */

/* src: the transpose of base [6, 5] (so [5, 6], not contiguous), copied in
 * row-major order into dst [10, 3] of another type. */
static void check_cpy(enum bp_type ts, enum bp_type td)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *base = bp_tensor_new_2d(f.ctx, ts, 6, 5);
    struct bp_tensor *src = bp_transpose(f.ctx, base);
    struct bp_tensor *dst = bp_tensor_new_2d(f.ctx, td, 10, 3);
    struct bp_tensor *y = bp_cpy(f.ctx, src, dst);
    fx_alloc(&f);
    double *bv = fill(base, 71, 8.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(dst), want[30];
    for (int64_t i1 = 0; i1 < 6; i1++)
        for (int64_t i0 = 0; i0 < 5; i0++)
            want[i0 + 5 * i1] = round_to(td, bv[i1 + 6 * i0]);
    expect_close(got, want, 30, 0.0, 0.0, "cpy");
    free(bv); free(got);
    fx_free(&f);
}

START_TEST(test_cpy_converts_between_float_types_in_row_major_order)
{
    const enum bp_type types[3] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 };
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            check_cpy(types[a], types[b]);
}
END_TEST

START_TEST(test_cpy_into_offset_view_leaves_other_rows_alone)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *src = bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 8);
    struct bp_tensor *cache = bp_tensor_new_2d(f.ctx, BP_TYPE_F16, 4, 6);
    const int64_t vne[2] = { 4, 2 };
    const size_t vnb[2] = { 0, cache->nb[1] };
    struct bp_tensor *slot = bp_view(f.ctx, cache, 2, vne, vnb, 2 * cache->nb[1]);
    struct bp_tensor *y = bp_cpy(f.ctx, src, slot);
    fx_alloc(&f);
    double *sv = fill(src, 81, 1.0), *cv = fill(cache, 82, 1.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(cache);
    for (int i = 0; i < 8; i++)
        cv[8 + i] = round_to(BP_TYPE_F16, sv[i]);
    expect_close(got, cv, 24, 0.0, 0.0, "cpy into view");
    free(sv); free(cv); free(got);
    fx_free(&f);
}
END_TEST

START_TEST(test_cont_packs_a_permuted_tensor)
{
    const enum bp_type types[3] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_I32 };
    for (int ti = 0; ti < 3; ti++) {
        struct fx f;
        fx_init(&f);
        struct bp_tensor *base = bp_tensor_new_3d(f.ctx, types[ti], 3, 4, 5);
        /* dim 0 -> 2, dim 1 -> 0, dim 2 -> 1: result [4, 5, 3]. */
        struct bp_tensor *p = bp_permute(f.ctx, base, 2, 0, 1, 3);
        struct bp_tensor *y = bp_cont(f.ctx, p);
        fx_alloc(&f);
        double *bv = fill(base, 91, 100.0);
        ck_assert_int_eq(fx_compute(&f, y), BP_OK);
        ck_assert_int_eq(y->ne[0], 4);
        ck_assert_int_eq(y->ne[1], 5);
        ck_assert_int_eq(y->ne[2], 3);
        ck_assert(bp_is_contiguous(y));
        double *got = fetch(y), want[60];
        for (int64_t j2 = 0; j2 < 3; j2++)
            for (int64_t j1 = 0; j1 < 5; j1++)
                for (int64_t j0 = 0; j0 < 4; j0++)
                    want[j0 + 4 * (j1 + 5 * j2)] = bv[j2 + 3 * (j0 + 4 * j1)];
        expect_close(got, want, 60, 0.0, 0.0, "cont");
        free(bv); free(got);
        fx_free(&f);
    }
}
END_TEST

/* ------------------------------------------------------------ GET_ROWS */

static void check_get_rows(enum bp_type type)
{
    struct fx f;
    fx_init(&f);
    const int64_t K = 5, R = 7, n = 4, d2 = 2;
    struct bp_tensor *tab = bp_tensor_new_3d(f.ctx, type, K, R, d2);
    struct bp_tensor *ids = bp_tensor_new_2d(f.ctx, BP_TYPE_I32, n, d2);
    struct bp_tensor *y = bp_get_rows(f.ctx, tab, ids);
    fx_alloc(&f);
    const int32_t iv[8] = { 6, 0, 3, 3, 1, 2, 6, 5 };
    ck_assert_int_eq(bp_tensor_set(ids, iv, 0, sizeof iv), BP_OK);
    double *tv = fill(tab, 101, 4.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(y->type, BP_TYPE_F32);
    double *got = fetch(y), want[40];
    for (int64_t i2 = 0; i2 < d2; i2++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < K; k++)
                want[k + K * (i + n * i2)] = tv[k + K * (iv[i + n * i2] + R * i2)];
    expect_close(got, want, K * n * d2, 0.0, 0.0, "get_rows");
    free(tv); free(got);
    fx_free(&f);
}

START_TEST(test_get_rows_gathers_f32_f16_bf16_rows_as_f32)
{
    check_get_rows(BP_TYPE_F32);
    check_get_rows(BP_TYPE_F16);
    check_get_rows(BP_TYPE_BF16);
}
END_TEST

START_TEST(test_get_rows_refuses_out_of_range_id)
{
    const int32_t bad[2] = { 7, -1 };
    for (int b = 0; b < 2; b++) {
        struct fx f;
        fx_init(&f);
        struct bp_tensor *tab = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 3, 7);
        struct bp_tensor *ids = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, 3);
        struct bp_tensor *y = bp_get_rows(f.ctx, tab, ids);
        fx_alloc(&f);
        double *tv = fill(tab, 111, 1.0);
        const int32_t iv[3] = { 0, bad[b], 2 };
        ck_assert_int_eq(bp_tensor_set(ids, iv, 0, sizeof iv), BP_OK);
        ck_assert_int_eq(fx_compute(&f, y), BP_ERR_INVALID_ARGUMENT);
        free(tv);
        fx_free(&f);
    }
}
END_TEST

/* ------------------------------------------------------------ SET_ROWS */

static void check_set_rows(enum bp_type type, const int32_t *iv, int64_t n)
{
    struct fx f;
    fx_init(&f);
    const int64_t K = 6, R = 8;
    struct bp_tensor *dst = bp_tensor_new_2d(f.ctx, type, K, R);
    struct bp_tensor *vals = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, n);
    struct bp_tensor *ids = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, n);
    struct bp_tensor *y = bp_set_rows(f.ctx, dst, vals, ids);
    fx_alloc(&f);
    ck_assert_int_eq(bp_tensor_set(ids, iv, 0, (size_t)n * sizeof *iv), BP_OK);
    double *dv = fill(dst, 121, 1.0), *vv = fill(vals, 122, 1.0);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    for (int64_t i = 0; i < n; i++) /* in order: a repeated id keeps the last row */
        for (int64_t k = 0; k < K; k++)
            dv[k + K * iv[i]] = round_to(type, vv[k + K * i]);
    double *got = fetch(dst);
    expect_close(got, dv, K * R, 0.0, 0.0, "set_rows");
    free(dv); free(vv); free(got);
    fx_free(&f);
}

START_TEST(test_set_rows_writes_converted_rows_and_last_duplicate_wins)
{
    const int32_t ids[3] = { 5, 0, 7 }, dup[4] = { 2, 6, 2, 4 };
    check_set_rows(BP_TYPE_F32, ids, 3);
    check_set_rows(BP_TYPE_F16, ids, 3);
    check_set_rows(BP_TYPE_BF16, ids, 3);
    check_set_rows(BP_TYPE_F16, dup, 4);
}
END_TEST

START_TEST(test_set_rows_refuses_out_of_range_id)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *dst = bp_tensor_new_2d(f.ctx, BP_TYPE_F16, 4, 3);
    struct bp_tensor *vals = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 4, 2);
    struct bp_tensor *ids = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, 2);
    struct bp_tensor *y = bp_set_rows(f.ctx, dst, vals, ids);
    fx_alloc(&f);
    double *vv = fill(vals, 131, 1.0);
    const int32_t iv[2] = { 1, 3 };
    ck_assert_int_eq(bp_tensor_set(ids, iv, 0, sizeof iv), BP_OK);
    ck_assert_int_eq(fx_compute(&f, y), BP_ERR_INVALID_ARGUMENT);
    free(vv);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------ FLASH_ATTN_EXT */

/* With permuted_kv, k and v are views of caches laid out [D, H_kv, n_kv, B]
 * (heads inner), as a KV cache often is. cap > 0: FLASH_ATTN_SOFTCAP, each
 * score cap * tanh(scale q.k / cap) before the mask. */
static void check_attn(enum bp_type tkv, bool with_mask, int64_t H, int64_t Hkv, int64_t B,
                       bool permuted_kv, float cap)
{
    struct fx f;
    fx_init(&f);
    const int64_t D = 8, Dv = 6, nq = 3, nkv = 5;
    const float scale = 1.0f / sqrtf((float)D);
    struct bp_tensor *q = bp_tensor_new_4d(f.ctx, BP_TYPE_F32, D, nq, H, B);
    struct bp_tensor *kb = permuted_kv ? bp_tensor_new_4d(f.ctx, tkv, D, Hkv, nkv, B)
                                       : bp_tensor_new_4d(f.ctx, tkv, D, nkv, Hkv, B);
    struct bp_tensor *vb = permuted_kv ? bp_tensor_new_4d(f.ctx, tkv, Dv, Hkv, nkv, B)
                                       : bp_tensor_new_4d(f.ctx, tkv, Dv, nkv, Hkv, B);
    struct bp_tensor *k = permuted_kv ? bp_permute(f.ctx, kb, 0, 2, 1, 3) : kb;
    struct bp_tensor *v = permuted_kv ? bp_permute(f.ctx, vb, 0, 2, 1, 3) : vb;
    struct bp_tensor *m = with_mask ? bp_tensor_new_2d(f.ctx, BP_TYPE_F16, nkv, nq + 1) : NULL;
    struct bp_tensor *y = cap > 0.0f ? bp_flash_attn_softcap(f.ctx, q, k, v, m, scale, cap)
                                     : bp_flash_attn_ext(f.ctx, q, k, v, m, scale);
    fx_alloc(&f);
    double *qv = fill(q, 141, cap > 0.0f ? 4.0 : 1.0), *kv = fill(kb, 142, 1.0), *vv = fill(vb, 143, 1.0);
    /* element (d, j, kv head, b) of k and v in their base layout */
#define KIDX(d, j, kh, b) (permuted_kv ? (d) + D * ((kh) + Hkv * ((j) + nkv * (b))) \
                                       : (d) + D * ((j) + nkv * ((kh) + Hkv * (b))))
#define VIDX(d, j, kh, b) (permuted_kv ? (d) + Dv * ((kh) + Hkv * ((j) + nkv * (b))) \
                                       : (d) + Dv * ((j) + nkv * ((kh) + Hkv * (b))))
    double mv[5 * 4];
    if (m) {
        /* causal over 2 earlier keys; query row 1 sees nothing at all */
        for (int64_t i = 0; i < nq + 1; i++)
            for (int64_t j = 0; j < nkv; j++)
                mv[j + nkv * i] = (j <= i + 2 && i != 1) ? 0.0 : -INFINITY;
        store_values(m, mv);
    }
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(y->ne[0], Dv);
    ck_assert_int_eq(y->ne[1], H);
    ck_assert_int_eq(y->ne[2], nq);
    ck_assert_int_eq(y->ne[3], B);
    const int64_t n = Dv * H * nq * B;
    double *got = fetch(y), *want = calloc((size_t)n, sizeof *want);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t iq = 0; iq < nq; iq++) {
                const int64_t kh = h / (H / Hkv);
                double s[5], mx = -INFINITY;
                for (int64_t j = 0; j < nkv; j++) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dot += qv[d + D * (iq + nq * (h + H * b))] * kv[KIDX(d, j, kh, b)];
                    s[j] = dot * (double)scale;
                    if (cap > 0.0f) s[j] = cap * tanh(s[j] / cap);
                    s[j] += m ? mv[j + nkv * iq] : 0.0;
                    if (s[j] > mx) mx = s[j];
                }
                double *out = want + Dv * (h + H * (iq + nq * b));
                if (mx == -INFINITY)
                    continue;
                double sum = 0.0;
                for (int64_t j = 0; j < nkv; j++) sum += exp(s[j] - mx);
                for (int64_t d = 0; d < Dv; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < nkv; j++)
                        acc += exp(s[j] - mx) / sum * vv[VIDX(d, j, kh, b)];
                    out[d] = acc;
                }
            }
#undef KIDX
#undef VIDX
    expect_close(got, want, n, 1e-6, 1e-5, cap > 0.0f ? "flash_attn_softcap" : "flash_attn_ext");
    free(qv); free(kv); free(vv); free(got); free(want);
    fx_free(&f);
}

static void check_flash_attn(enum bp_type tkv, bool with_mask, int64_t H, int64_t Hkv, int64_t B,
                             bool permuted_kv)
{
    check_attn(tkv, with_mask, H, Hkv, B, permuted_kv, 0.0f);
}

START_TEST(test_flash_attn_ext_groups_query_heads_and_masks)
{
    check_flash_attn(BP_TYPE_F32, false, 4, 2, 1, false);
    check_flash_attn(BP_TYPE_F16, true, 4, 2, 1, false);
    check_flash_attn(BP_TYPE_F16, true, 4, 4, 2, false);
    check_flash_attn(BP_TYPE_F32, true, 3, 1, 1, false);
    check_flash_attn(BP_TYPE_F16, true, 4, 2, 2, true);
}
END_TEST

/* Queries of amplitude 4 put scores past the cap of 0.6 (tanh saturates)
 * and well inside Gemma 2's 50 (nearly linear); GQA, masks with a fully
 * masked row, F16 and permuted caches. */
START_TEST(test_flash_attn_softcap_caps_scores_before_the_mask)
{
    const float caps[2] = { 0.6f, 50.0f };
    for (int c = 0; c < 2; c++) {
        check_attn(BP_TYPE_F32, false, 4, 2, 1, false, caps[c]);
        check_attn(BP_TYPE_F16, true, 4, 2, 1, false, caps[c]);
        check_attn(BP_TYPE_F32, true, 3, 1, 1, false, caps[c]);
        check_attn(BP_TYPE_F16, true, 4, 2, 2, true, caps[c]);
    }
}
END_TEST

Suite *cpu_ops_suite(void)
{
    Suite *s = suite_create("cpu_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, test_mul_mat_matches_scalar_reference_for_odd_sizes);
    tcase_add_test(tc, test_mul_mat_accepts_f16_and_bf16_weights_and_f16_input);
    tcase_add_test(tc, test_mul_mat_broadcasts_weights_over_dims_2_and_3);
    tcase_add_test(tc, test_mul_mat_reads_transposed_input);
    tcase_add_test(tc, test_mul_mat_declines_activation_only_q8_K_weights);
    tcase_add_test(tc, test_add_and_mul_broadcast_b_over_permuted_a);
    tcase_add_test(tc, test_scale_silu_sqr_tanh_match_formulas_on_offset_views);
    tcase_add_test(tc, test_gelu_equals_ggml_cpu_table_bit_for_bit);
    tcase_add_test(tc, test_rms_norm_normalises_each_row_of_transposed_input);
    tcase_add_test(tc, test_soft_max_applies_scale_and_broadcast_mask);
    tcase_add_test(tc, test_soft_max_gives_zeros_for_fully_masked_rows);
    tcase_add_test(tc, test_rope_rotates_normal_and_neox_pairs_with_partial_dims);
    tcase_add_test(tc, test_rope_chain_turns_each_node_by_its_own_angles);
    tcase_add_test(tc, test_rope_ext_applies_frequency_factors_and_magnitude);
    tcase_add_test(tc, test_rope_ext_yarn_mixes_interpolation_and_extrapolation);
    tcase_add_test(tc, test_rope_ext_with_defaults_is_rope_bit_for_bit);
    tcase_add_test(tc, test_rope_ext_chain_turns_each_node_by_its_own_angles);
    tcase_add_test(tc, test_cpy_converts_between_float_types_in_row_major_order);
    tcase_add_test(tc, test_cpy_into_offset_view_leaves_other_rows_alone);
    tcase_add_test(tc, test_cont_packs_a_permuted_tensor);
    tcase_add_test(tc, test_get_rows_gathers_f32_f16_bf16_rows_as_f32);
    tcase_add_test(tc, test_get_rows_refuses_out_of_range_id);
    tcase_add_test(tc, test_set_rows_writes_converted_rows_and_last_duplicate_wins);
    tcase_add_test(tc, test_set_rows_refuses_out_of_range_id);
    tcase_add_test(tc, test_flash_attn_ext_groups_query_heads_and_masks);
    tcase_add_test(tc, test_flash_attn_softcap_caps_scores_before_the_mask);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = run_suite(cpu_ops_suite());
    bp_unload();
    return rc;
}
