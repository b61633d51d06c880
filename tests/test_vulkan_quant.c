/*
 * test_vulkan_quant.c — the ABI 1.2 weight types (Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K, Q5_K, IQ4_NL, IQ4_XS) on the Vulkan plugin: MUL_MAT and GET_ROWS.
 * MUL_MAT runs at shapes that reach each kernel a device picks: one column
 * (one column per workgroup on a CPU device, the matrix-vector shader
 * elsewhere), 13 and 20 columns (a CPU device's eight-column lane kernel,
 * the tiles elsewhere), 7 and 70 rows (inside one 64-row workgroup and
 * past it, neither a multiple), K of one and of three 256-element blocks,
 * and a batch of 4 X slices over 2 W slices (each W slice read by two).
 * Weights are random bytes with finite per-block scales, so every bit
 * pattern of quants and packed sub-block scales occurs; the expectation is
 * bp_quant_ref.h's dequantizer, summed in double. Exits 77 (skipped) when
 * there is no Vulkan device.
 */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quant_ref.h>

#include "device_gate.h"
#include "suite_main.h"

/* Each type with the byte offsets of its f16 fields: the scale d and, for
 * types with one, the min (SIZE_MAX when there is none). */
static const struct quant_type {
    enum bp_type type;
    size_t d, m;
} types[] = {
    {BP_TYPE_Q4_1, offsetof(struct bp_block_q4_1, d), offsetof(struct bp_block_q4_1, m)},
    {BP_TYPE_Q5_0, offsetof(struct bp_block_q5_0, d), SIZE_MAX},
    {BP_TYPE_Q5_1, offsetof(struct bp_block_q5_1, d), offsetof(struct bp_block_q5_1, m)},
    {BP_TYPE_Q2_K, offsetof(struct bp_block_q2_K, d), offsetof(struct bp_block_q2_K, dmin)},
    {BP_TYPE_Q3_K, offsetof(struct bp_block_q3_K, d), SIZE_MAX},
    {BP_TYPE_Q5_K, offsetof(struct bp_block_q5_K, d), offsetof(struct bp_block_q5_K, dmin)},
    {BP_TYPE_IQ4_NL, offsetof(struct bp_block_iq4_nl, d), SIZE_MAX},
    {BP_TYPE_IQ4_XS, offsetof(struct bp_block_iq4_xs, d), SIZE_MAX},
};
enum { N_TYPES = sizeof types / sizeof types[0] };

static unsigned next(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* rows x K elements of type q: random bytes, then each block's d (and min)
 * set to a finite value that differs from block to block, so that reading
 * a neighbour's block changes the result. */
static unsigned char *random_rows(const struct quant_type *q, int64_t K, int64_t rows,
                                  unsigned seed)
{
    const size_t ts = bp_type_size(q->type);
    const int64_t nblk = K / bp_type_block_size(q->type) * rows;
    unsigned char *w = malloc((size_t)nblk * ts);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < (size_t)nblk * ts; i++) w[i] = (unsigned char)next(&seed);
    for (int64_t b = 0; b < nblk; b++) {
        unsigned char *blk = w + (size_t)b * ts;
        const uint16_t d = bp_f32_to_f16(0.01f * (1.0f + (float)(b % 5) / 4.0f));
        memcpy(blk + q->d, &d, 2);
        if (q->m != SIZE_MAX) {
            const uint16_t m = bp_f32_to_f16(0.02f * (float)(b % 7) - 0.06f);
            memcpy(blk + q->m, &m, 2);
        }
    }
    return w;
}

/* One row of K elements through bp_quant_ref.h. */
static void ref_row(enum bp_type t, const void *row, float *y, int64_t K)
{
    switch (t) {
    case BP_TYPE_Q4_1: bp_dequantize_q4_1_ref(row, y, K); break;
    case BP_TYPE_Q5_0: bp_dequantize_q5_0_ref(row, y, K); break;
    case BP_TYPE_Q5_1: bp_dequantize_q5_1_ref(row, y, K); break;
    case BP_TYPE_Q2_K: bp_dequantize_q2_K_ref(row, y, K); break;
    case BP_TYPE_Q3_K: bp_dequantize_q3_K_ref(row, y, K); break;
    case BP_TYPE_Q5_K: bp_dequantize_q5_K_ref(row, y, K); break;
    case BP_TYPE_IQ4_NL: bp_dequantize_iq4_nl_ref(row, y, K); break;
    case BP_TYPE_IQ4_XS: bp_dequantize_iq4_xs_ref(row, y, K); break;
    default: ck_abort_msg("no reference dequantizer for %s", bp_type_name(t));
    }
}

static struct bp_device *vk0(void)
{
    struct bp_device *dev = bp_device_by_name("vulkan0");
    ck_assert_msg(dev != NULL, "vulkan0 disappeared: %s", bp_last_error());
    return dev;
}

static void compute(struct bp_device *dev, struct bp_tensor *out)
{
    struct bp_backend *be;
    struct bp_graph *g;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, out), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(be, g), BP_OK);
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    bp_graph_free(g);
    bp_backend_free(be);
}

/* ------------------------------------------------------------- MUL_MAT */

/* W [K, N, B] of type q times X (f32 [K, M, 2B]): X slice i reads W slice
 * i / 2. Each output is held to the float rounding a K-term sum can make:
 * a relative 1e-5 of the sum of |w * x|, where one misread element moves
 * it by about 1 / K. */
static void check_mul_mat(const struct quant_type *q, int64_t K, int64_t N, int64_t M, int64_t B)
{
    const size_t row = bp_row_size(q->type, K);
    const int64_t XB = B > 1 ? 2 * B : 1;
    unsigned char *wq = random_rows(q, K, N * B, 77u + (unsigned)q->type * 31u + (unsigned)K);
    float *wf = malloc(sizeof(float) * (size_t)(K * N * B));
    float *x = malloc(sizeof(float) * (size_t)(K * M * XB));
    float *got = malloc(sizeof(float) * (size_t)(N * M * XB));
    ck_assert(wf && x && got);
    for (int64_t n = 0; n < N * B; n++) ref_row(q->type, wq + (size_t)n * row, wf + n * K, K);
    unsigned seed = 5u + (unsigned)M;
    for (int64_t i = 0; i < K * M * XB; i++)
        x[i] = (float)(next(&seed) & 0xffff) / 32768.0f - 1.0f;

    struct bp_device *dev = vk0();
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *w = bp_tensor_new_3d(ctx, q->type, K, N, B);
    struct bp_tensor *xt = bp_tensor_new_3d(ctx, BP_TYPE_F32, K, M, XB);
    struct bp_tensor *y = bp_mul_mat(ctx, w, xt);
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(bp_device_supports_op(dev, y), "vulkan0 declines MUL_MAT with %s weights",
                  bp_type_name(q->type));
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_tensor_set(w, wq, 0, row * (size_t)(N * B)), BP_OK);
    ck_assert_int_eq(bp_tensor_set(xt, x, 0, sizeof(float) * (size_t)(K * M * XB)), BP_OK);
    compute(dev, y);
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof(float) * (size_t)(N * M * XB)), BP_OK);

    for (int64_t b = 0; b < XB; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                const float *wr = wf + ((b * B / XB) * N + n) * K, *xc = x + (b * M + m) * K;
                double s = 0.0, mag = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    const double p = (double)wr[k] * (double)xc[k];
                    s += p;
                    mag += fabs(p);
                }
                ck_assert_msg(mag > 0.0, "%s: row %lld of W dequantizes to zeros",
                              bp_type_name(q->type), (long long)n);
                const float g = got[(b * M + m) * N + n];
                const double e = fabs((double)g - s);
                ck_assert_msg(e <= 1e-5 * mag, "%s K=%lld N=%lld M=%lld B=%lld: y[%lld,%lld,%lld] "
                              "= %.9g, want %.9g (|error| %.3g, sum |w*x| %.3g)",
                              bp_type_name(q->type), (long long)K, (long long)N, (long long)M,
                              (long long)B, (long long)n, (long long)m, (long long)b, (double)g,
                              s, e, mag);
            }
    bp_buffer_free(buf);
    bp_context_free(ctx);
    free(got);
    free(x);
    free(wf);
    free(wq);
}

START_TEST(test_vulkan_mul_mat_of_abi_1_2_weight_type_matches_double_reference)
{
    const struct quant_type *q = &types[_i];
    bp_load_plugins(NULL);
    const int64_t Ks[] = {256, 768};
    for (int i = 0; i < 2; i++) {
        check_mul_mat(q, Ks[i], 7, 1, 1);
        check_mul_mat(q, Ks[i], 7, 13, 1);
        check_mul_mat(q, Ks[i], 70, 20, 1);
    }
    check_mul_mat(q, 256, 70, 9, 2);
    bp_unload();
}
END_TEST

/* ------------------------------------------------------------ GET_ROWS */

/* Rows of a [K, 9] table of type q, in an order with a repeat: each element
 * must be the reference dequantizer's float, bit for bit. */
static void check_get_rows(const struct quant_type *q, int64_t K)
{
    enum { ROWS = 9, IDS = 6 };
    const int32_t ids[IDS] = {8, 0, 3, 3, 7, 1};
    const size_t row = bp_row_size(q->type, K);
    unsigned char *wq = random_rows(q, K, ROWS, 901u + (unsigned)q->type * 17u + (unsigned)K);
    float *want = malloc(sizeof(float) * (size_t)(K * ROWS));
    float *got = malloc(sizeof(float) * (size_t)(K * IDS));
    ck_assert(want && got);
    for (int64_t r = 0; r < ROWS; r++) ref_row(q->type, wq + (size_t)r * row, want + r * K, K);

    struct bp_device *dev = vk0();
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *table = bp_tensor_new_2d(ctx, q->type, K, ROWS);
    struct bp_tensor *idt = bp_tensor_new_1d(ctx, BP_TYPE_I32, IDS);
    struct bp_tensor *y = bp_get_rows(ctx, table, idt);
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(bp_device_supports_op(dev, y), "vulkan0 declines GET_ROWS of a %s table",
                  bp_type_name(q->type));
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_tensor_set(table, wq, 0, row * ROWS), BP_OK);
    ck_assert_int_eq(bp_tensor_set(idt, ids, 0, sizeof ids), BP_OK);
    compute(dev, y);
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof(float) * (size_t)(K * IDS)), BP_OK);

    for (int i = 0; i < IDS; i++)
        for (int64_t k = 0; k < K; k++) {
            const float g = got[i * K + k], w = want[ids[i] * K + k];
            ck_assert_msg(memcmp(&g, &w, sizeof g) == 0,
                          "%s K=%lld: row %d element %lld is %.9g (0x%08x), the reference "
                          "dequantizer gives %.9g (0x%08x)", bp_type_name(q->type), (long long)K,
                          (int)ids[i], (long long)k, (double)g, bp_f32_bits(g), (double)w,
                          bp_f32_bits(w));
        }
    bp_buffer_free(buf);
    bp_context_free(ctx);
    free(got);
    free(want);
    free(wq);
}

START_TEST(test_vulkan_get_rows_of_abi_1_2_weight_type_gives_reference_dequant_bits)
{
    const struct quant_type *q = &types[_i];
    bp_load_plugins(NULL);
    check_get_rows(q, 256);
    check_get_rows(q, 512);
    bp_unload();
}
END_TEST

/* ----------------------------------------------------------------- main */

int main(void)
{
    setenv("BACKPLANE_LOG", "warn", 0);
    /* 77 without a Vulkan device (install mesa-vulkan-drivers for lavapipe). */
    const int gate = device_gate("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("vulkan_quant");
    TCase *tc = tcase_create("vulkan_quant");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_vulkan_mul_mat_of_abi_1_2_weight_type_matches_double_reference,
                        0, N_TYPES);
    tcase_add_loop_test(tc, test_vulkan_get_rows_of_abi_1_2_weight_type_gives_reference_dequant_bits,
                        0, N_TYPES);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
