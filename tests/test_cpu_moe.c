/*
 * test_cpu_moe.c — the cpu plugin's mixture-of-experts ops against
 * computations written plainly here.
 *
 *  - MUL_MAT_ID of every weight type equals a double-precision product of
 *    the expert weights as bp_dequantize gives them with the F32
 *    activations, within the bound the activations' 8-bit quantization
 *    allows (the op check's 5e-4 NMSE; float weights 1e-6): one token, many
 *    tokens, per-slot activations, ids repeated and unsorted, the same ids
 *    for every token, experts no token picks; the weights in a CPU buffer
 *    and, for the types the build repacks, in the device's weight layout
 *    (x8, bp_device_weight_buffer_type); one thread and the default.
 *  - Without the weight layout, bit for bit MUL_MAT's result for each
 *    expert's slice and rows (its grid, its kernels, its thread count).
 *  - TOP_K equals a stable descending sort (ties by index); SUM_ROWS,
 *    DIV and CLAMP equal their formulas.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "cpu_test_util.h"
#include "suite_main.h"

static const enum bp_type types[] = {
    BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16, BP_TYPE_Q4_0, BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1,
    BP_TYPE_Q8_0, BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q4_K, BP_TYPE_Q5_K, BP_TYPE_Q6_K,
    BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS,
};
#define N_TYPES (int)(sizeof types / sizeof types[0])

enum ids_kind { IDS_UNIQUE, IDS_REPEATED, IDS_SAME, IDS_FEW };

struct mmid_case {
    int64_t K, N, E, x1, n_tok, n_used;
    enum ids_kind ids;
    const char *what;
};

static const struct mmid_case mmid_cases[] = {
    { 256, 40, 8, 1, 1, 2, IDS_UNIQUE, "one token" },
    { 256, 40, 8, 1, 37, 2, IDS_REPEATED, "many tokens, ids repeated and unsorted" },
    { 256, 24, 6, 3, 9, 3, IDS_UNIQUE, "per-slot activations" },
    { 256, 24, 8, 1, 21, 4, IDS_SAME, "the same ids for every token" },
    { 512, 48, 16, 1, 70, 4, IDS_FEW, "experts 5..15 picked by no token" },
};
#define N_MMID (int)(sizeof mmid_cases / sizeof mmid_cases[0])

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static void make_ids(int32_t *ids, const struct mmid_case *c, unsigned seed)
{
    for (int64_t t = 0; t < c->n_tok; t++)
        for (int64_t u = 0; u < c->n_used; u++) {
            int32_t v;
            bool again;
            do {
                const int64_t range = c->ids == IDS_FEW ? c->n_used + 1 : c->E;
                v = (int32_t)(lcg(&seed) % (unsigned)range);
                again = false;
                for (int64_t j = 0; (c->ids == IDS_UNIQUE || c->ids == IDS_FEW) && j < u; j++)
                    again |= ids[t * c->n_used + j] == v;
            } while (again);
            ids[t * c->n_used + u] = c->ids == IDS_SAME && t > 0 ? ids[u] : v;
        }
}

static double nmse(const double *got, const double *want, int64_t n)
{
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        e += (got[i] - want[i]) * (got[i] - want[i]);
        s += want[i] * want[i];
    }
    return s > 0 ? e / s : e;
}

/* Bit for bit, each used expert's result rows equal a MUL_MAT (same
 * backend, same thread count) of its weight slice w[:, :, e] with the
 * activation rows of the (slot, token)s that picked it, in token order:
 * MUL_MAT_ID computes every element as one of MUL_MAT's dots, with the grid
 * MUL_MAT gives that many rows, whoever runs which chunk. */
static void check_mmid_is_mul_mat(struct bp_backend *be, struct bp_tensor *w, const struct mmid_case *c,
                                  const double *xv, const int32_t *iv, const struct bp_tensor *y)
{
    float *got = malloc(bp_nbytes(y));
    ck_assert_int_eq(bp_tensor_get(y, got, 0, bp_nbytes(y)), BP_OK);
    for (int32_t e = 0; e < c->E; e++) {
        int64_t rows = 0;
        for (int64_t i = 0; i < c->n_used * c->n_tok; i++) rows += iv[i] == e;
        /* F32 MUL_MATs of 64 rows or more may go to BLAS, MUL_MAT_ID never does. */
        if (rows == 0 || (w->type == BP_TYPE_F32 && rows >= 64)) continue;
        struct bp_context *ctx;
        ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
        struct bp_tensor *we = bp_view(ctx, w, 2, (int64_t[]){ c->K, c->N }, (size_t[]){ w->nb[0], w->nb[1] },
                                       (size_t)e * w->nb[2]);
        struct bp_tensor *xe = bp_tensor_new_2d(ctx, BP_TYPE_F32, c->K, rows);
        struct bp_tensor *ye = bp_mul_mat(ctx, we, xe);
        struct bp_buffer *buf;
        ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(cpu_device()), NULL, &buf), BP_OK);
        float *xr = malloc((size_t)(c->K * rows) * sizeof *xr);
        int64_t *pair = malloc((size_t)rows * sizeof *pair), r = 0;
        for (int64_t i = 0; i < c->n_used * c->n_tok; i++)
            if (iv[i] == e) {
                const int64_t u = i % c->n_used, t = i / c->n_used;
                for (int64_t k = 0; k < c->K; k++)
                    xr[r * c->K + k] = (float)xv[c->K * ((u % c->x1) + c->x1 * t) + k];
                pair[r++] = i;
            }
        ck_assert_int_eq(bp_tensor_set(xe, xr, 0, bp_nbytes(xe)), BP_OK);
        struct bp_graph *g;
        ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
        ck_assert_int_eq(bp_graph_build(g, ye), BP_OK);
        ck_assert_int_eq(bp_backend_graph_compute(be, g), BP_OK);
        float *want = malloc(bp_nbytes(ye));
        ck_assert_int_eq(bp_tensor_get(ye, want, 0, bp_nbytes(ye)), BP_OK);
        for (r = 0; r < rows; r++)
            ck_assert_msg(memcmp(got + pair[r] * c->N, want + r * c->N, (size_t)c->N * sizeof(float)) == 0,
                          "MUL_MAT_ID %s %s: expert %d's row for pair %lld is not MUL_MAT's",
                          bp_type_name((enum bp_type)w->type), c->what, (int)e, (long long)pair[r]);
        free(want); free(pair); free(xr);
        bp_graph_free(g);
        bp_buffer_free(buf);
        bp_context_free(ctx);
    }
    free(got);
}

/* One case of one type; weights in the device's weight layout when
 * repack. Returns false when that layout is the plain one (nothing new). */
static bool check_mmid(enum bp_type type, const struct mmid_case *c, bool repack, int n_threads)
{
    struct bp_device *dev = cpu_device();
    struct bp_buffer_type *wbuft = repack ? bp_device_weight_buffer_type(dev, type) : bp_device_buffer_type(dev);
    if (repack && wbuft == bp_device_buffer_type(dev)) return false;
    struct bp_context *wctx, *ctx;
    ck_assert_int_eq(bp_context_new(4, &wctx), BP_OK);
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *w = bp_tensor_new_3d(wctx, type, c->K, c->N, c->E);
    struct bp_tensor *x = bp_tensor_new_3d(ctx, BP_TYPE_F32, c->K, c->x1, c->n_tok);
    struct bp_tensor *ids = bp_tensor_new_2d(ctx, BP_TYPE_I32, c->n_used, c->n_tok);
    struct bp_tensor *y = bp_mul_mat_id(ctx, w, x, ids);
    ck_assert_ptr_nonnull(y);
    struct bp_buffer *wbuf, *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(wctx, wbuft, NULL, &wbuf), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);

    /* Weights: seeded floats stored in the type (quantized by bp_quantize). */
    const int64_t nw = c->K * c->N * c->E;
    float *wf = malloc((size_t)nw * sizeof *wf);
    unsigned s = 7u + (unsigned)type;
    for (int64_t i = 0; i < nw; i++) wf[i] = (float)rnd(&s);
    const size_t wbytes = bp_nbytes(w);
    void *wraw = malloc(wbytes);
    if (bp_type_is_quantized(type)) {
        ck_assert_uint_eq(bp_quantize(type, wf, wraw, c->N * c->E, c->K), wbytes);
    } else {
        for (int64_t i = 0; i < nw; i++) {
            uint16_t h;
            if (type == BP_TYPE_F32) memcpy((char *)wraw + 4 * i, &wf[i], 4);
            else if (type == BP_TYPE_F16) { h = bp_f32_to_f16(wf[i]); memcpy((char *)wraw + 2 * i, &h, 2); }
            else { h = bp_f32_to_bf16(wf[i]); memcpy((char *)wraw + 2 * i, &h, 2); }
        }
    }
    ck_assert_int_eq(bp_tensor_set(w, wraw, 0, wbytes), BP_OK);
    float *wd = malloc((size_t)nw * sizeof *wd); /* what the device holds, as floats */
    ck_assert_int_eq(bp_dequantize(type, wraw, wd, nw), BP_OK);
    double *xv = fill(x, 11u + (unsigned)c->n_tok, 1.0);
    int32_t *iv = malloc((size_t)(c->n_used * c->n_tok) * sizeof *iv);
    make_ids(iv, c, 3u + (unsigned)c->n_tok);
    ck_assert_int_eq(bp_tensor_set(ids, iv, 0, bp_nbytes(ids)), BP_OK);

    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    if (n_threads) ck_assert_int_eq(bp_backend_set_n_threads(be, n_threads), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(64, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(be, g), BP_OK);
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);

    const int64_t n_out = c->N * c->n_used * c->n_tok;
    double *got = fetch(y), *want = calloc((size_t)n_out, sizeof *want);
    for (int64_t t = 0; t < c->n_tok; t++)
        for (int64_t u = 0; u < c->n_used; u++) {
            const int32_t e = iv[t * c->n_used + u];
            const double *xr = xv + c->K * ((u % c->x1) + c->x1 * t);
            for (int64_t n = 0; n < c->N; n++) {
                const float *wr = wd + c->K * (n + c->N * e);
                double acc = 0;
                for (int64_t k = 0; k < c->K; k++) acc += (double)wr[k] * xr[k];
                want[n + c->N * (u + c->n_used * t)] = acc;
            }
        }
    const double limit = bp_type_is_quantized(type) ? 5e-4 : 1e-6;
    const double err = nmse(got, want, n_out);
    ck_assert_msg(err <= limit, "MUL_MAT_ID %s %s%s, %d threads: nmse %.3g > %.0e", bp_type_name(type),
                  c->what, repack ? " (weight layout)" : "", n_threads, err, limit);
    /* A slice of an x8 stack is no MUL_MAT weight of its own. Under
     * valgrind the default thread count's run alone is compared. */
    if (!repack && !(getenv("BP_UNDER_VALGRIND") && n_threads == 1))
        check_mmid_is_mul_mat(be, w, c, xv, iv, y);
    free(got); free(want); free(xv); free(iv); free(wf); free(wd); free(wraw);
    bp_graph_free(g);
    bp_backend_free(be);
    bp_buffer_free(buf);
    bp_buffer_free(wbuf);
    bp_context_free(ctx);
    bp_context_free(wctx);
    return true;
}

/* _i: type * N_MMID + case. */
START_TEST(test_mul_mat_id_matches_dequantized_reference)
{
    const enum bp_type type = types[_i / N_MMID];
    const struct mmid_case *c = &mmid_cases[_i % N_MMID];
    check_mmid(type, c, false, 0);
    check_mmid(type, c, false, 1);
    if (check_mmid(type, c, true, 0)) check_mmid(type, c, true, 1);
}
END_TEST

/* An expert id outside [0, n_expert) fails the compute with a status. */
START_TEST(test_mul_mat_id_refuses_an_id_outside_the_experts)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *w = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, 8, 4, 3);
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, 8, 1, 2);
    struct bp_tensor *ids = bp_tensor_new_2d(f.ctx, BP_TYPE_I32, 2, 2);
    struct bp_tensor *y = bp_mul_mat_id(f.ctx, w, x, ids);
    fx_alloc(&f);
    free(fill(w, 1, 1.0));
    free(fill(x, 2, 1.0));
    const int32_t bad[4] = { 0, 2, 1, 3 };
    ck_assert_int_eq(bp_tensor_set(ids, bad, 0, sizeof bad), BP_OK);
    ck_assert_int_eq(fx_compute(&f, y), BP_ERR_INVALID_ARGUMENT);
    fx_free(&f);
}
END_TEST

/* TOP_K: each row's k indices, by value descending and index ascending. */
static void check_top_k(int64_t n, int64_t rows, int k, bool ties)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, n, rows);
    struct bp_tensor *y = bp_top_k(f.ctx, x, k);
    fx_alloc(&f);
    double *xv = fill(x, 5u + (unsigned)n, 1.0);
    if (ties) {
        for (int64_t i = 0; i < n * rows; i++) xv[i] = floor(xv[i] * 2.0) / 2.0;
        store_values(x, xv);
    }
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    double *got = fetch(y);
    for (int64_t r = 0; r < rows; r++) {
        const double *v = xv + r * n;
        bool *taken = calloc((size_t)n, sizeof *taken);
        for (int j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++)
                if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
            taken[best] = true;
            ck_assert_msg(got[r * k + j] == (double)best, "TOP_K n=%lld k=%d row %lld: slot %d is %g, not %lld",
                          (long long)n, k, (long long)r, j, got[r * k + j], (long long)best);
        }
        free(taken);
    }
    free(xv);
    free(got);
    fx_free(&f);
}

START_TEST(test_top_k_is_a_stable_descending_argsort_cut_at_k)
{
    check_top_k(8, 5, 2, false);
    check_top_k(64, 9, 8, false);
    check_top_k(128, 3, 128, false);  /* the whole argsort, sorted */
    check_top_k(33, 7, 5, true);      /* ties by ascending index */
    check_top_k(60, 4, 60, true);
    check_top_k(1, 3, 1, false);
}
END_TEST

START_TEST(test_sum_rows_div_clamp_follow_their_formulas)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *a = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 7, 5);
    struct bp_tensor *b = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 1, 5);
    struct bp_tensor *s = bp_sum_rows(f.ctx, a);
    struct bp_tensor *q = bp_div(f.ctx, a, bp_clamp(f.ctx, b, 0.25f, INFINITY));
    struct bp_tensor *out = bp_add(f.ctx, q, bp_scale(f.ctx, s, 0.0f, 0.0f)); /* keeps s in the graph */
    fx_alloc(&f);
    double *av = fill(a, 3, 1.0), *bv = fill(b, 4, 1.0);
    ck_assert_int_eq(fx_compute(&f, out), BP_OK);
    double *sg = fetch(s), *qg = fetch(q);
    for (int64_t r = 0; r < 5; r++) {
        double sum = 0;
        for (int64_t i = 0; i < 7; i++) sum += av[r * 7 + i];
        ck_assert_msg(fabs(sg[r] - sum) <= 1e-6, "SUM_ROWS row %lld: %g, not %g", (long long)r, sg[r], sum);
        const double d = bv[r] < 0.25 ? 0.25 : bv[r];
        for (int64_t i = 0; i < 7; i++)
            ck_assert_msg(qg[r * 7 + i] == (double)(float)(av[r * 7 + i] / d), "DIV/CLAMP row %lld", (long long)r);
    }
    free(av); free(bv); free(sg); free(qg);
    fx_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_moe");
    TCase *tc = tcase_create("moe");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test_thinned(tc, test_mul_mat_id_matches_dequantized_reference, 0, N_TYPES * N_MMID);
    tcase_add_test(tc, test_mul_mat_id_refuses_an_id_outside_the_experts);
    tcase_add_test(tc, test_top_k_is_a_stable_descending_argsort_cut_at_k);
    tcase_add_test(tc, test_sum_rows_div_clamp_follow_their_formulas);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
