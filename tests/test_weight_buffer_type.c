/*
 * test_weight_buffer_type.c — bp_device_weight_buffer_type and the
 * BP_PROC_WEIGHT_BUFFER_TYPE proc behind it:
 *  - the cpu device offers a buffer type of its own (not the default) for
 *    Q4_0 and Q8_0 weights (and possibly other block types it repacks),
 *    and the default for float weights;
 *  - a device whose proc answers NULL (a meta device over CPUs, for F32;
 *    for Q4_0 it offers its own) and an out-of-range type get the default
 *    buffer type;
 *  - MUL_MAT with the weight in the offered buffer type gives the result of
 *    the same weight in the default buffer type, both within the bound of
 *    the activation's 8-bit quantization of a double-precision product of
 *    the dequantized weight; reading the weight back gives the bytes set.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>
#include <backplane/bp_quantize.h>

#include "suite_main.h"

static struct bp_device *cpu(void)
{
    struct bp_device *d = bp_device_by_name("cpu");
    ck_assert_msg(d != NULL, "no cpu device: %s", bp_last_error());
    return d;
}

static unsigned long long seed = 0x2545F4914F6CDD1Dull;
static float rndf(void)
{
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return (float)((double)(seed % 20001) / 10000.0 - 1.0);
}

START_TEST(test_cpu_offers_its_own_buffer_type_for_repackable_weights_and_default_for_floats)
{
    struct bp_buffer_type *def = bp_device_buffer_type(cpu());
    ck_assert_ptr_nonnull(def);
    const enum bp_type own[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0 };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        struct bp_buffer_type *bt = bp_device_weight_buffer_type(cpu(), own[i]);
        ck_assert_ptr_nonnull(bt);
        ck_assert_msg(bt != def, "%s weights get the default buffer type", bp_type_name(own[i]));
    }
    const enum bp_type plain[] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16, BP_TYPE_I32 };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        ck_assert_msg(bp_device_weight_buffer_type(cpu(), plain[i]) == def,
                      "%s weights should get the default buffer type", bp_type_name(plain[i]));
    ck_assert_ptr_eq(bp_device_weight_buffer_type(cpu(), BP_TYPE_COUNT), def);
    ck_assert_ptr_eq(bp_device_weight_buffer_type(cpu(), (enum bp_type)-1), def);
}
END_TEST

/* A meta device over CPUs answers the proc with a buffer type of its own
 * where its CPUs keep the type apart (Q4_0) and with NULL elsewhere (F32),
 * which the host turns into the device's default buffer type. */
START_TEST(test_device_answering_null_gets_its_default_buffer_type)
{
    struct bp_device *subs[2] = { cpu(), cpu() }, *meta = NULL;
    ck_assert_msg(bp_meta_device_new(subs, 2, NULL, NULL, NULL, &meta) == BP_OK && meta,
                  "no meta device (is the meta plugin built?): %s", bp_last_error());
    ck_assert_ptr_nonnull(bp_device_proc_address(meta, BP_PROC_WEIGHT_BUFFER_TYPE));
    struct bp_buffer_type *own = bp_device_weight_buffer_type(meta, BP_TYPE_Q4_0);
    ck_assert_ptr_nonnull(own);
    ck_assert_ptr_ne(own, bp_device_buffer_type(meta));
    ck_assert_ptr_eq(bp_device_weight_buffer_type(meta, BP_TYPE_F32), bp_device_buffer_type(meta));
    ck_assert_ptr_eq(bp_device_weight_buffer_type(meta, BP_TYPE_COUNT), bp_device_buffer_type(meta));
}
END_TEST

/* y = W x on the cpu with W (N rows of K, type t) in buffer type bt; the
 * weight's bytes are read back and compared with what was set. */
static float *mul_mat_in(struct bp_buffer_type *bt, enum bp_type t, const void *wq, int64_t K,
                         int64_t N, const float *x, int64_t M)
{
    struct bp_context *wc, *c;
    struct bp_buffer *wb, *b;
    struct bp_backend *be;
    struct bp_graph *g;
    ck_assert_int_eq(bp_context_new(4, &wc), BP_OK);
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_new_2d(wc, t, K, N);
    struct bp_tensor *xt = bp_tensor_new_2d(c, BP_TYPE_F32, K, M);
    struct bp_tensor *y = bp_mul_mat(c, w, xt);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(bp_context_alloc_tensors(wc, bt, NULL, &wb), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(cpu()), NULL, &b), BP_OK);
    const size_t wbytes = bp_row_size(t, K) * (size_t)N;
    ck_assert_int_eq(bp_tensor_set(w, wq, 0, wbytes), BP_OK);
    ck_assert_int_eq(bp_tensor_set(xt, x, 0, (size_t)(K * M) * sizeof(float)), BP_OK);
    unsigned char *back = malloc(wbytes);
    ck_assert_int_eq(bp_tensor_get(w, back, 0, wbytes), BP_OK);
    ck_assert_msg(memcmp(back, wq, wbytes) == 0, "the weight reads back other bytes than were set");
    free(back);
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    ck_assert_int_eq(bp_backend_init(cpu(), NULL, &be), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(be, g), BP_OK);
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    float *out = malloc((size_t)(N * M) * sizeof *out);
    ck_assert_int_eq(bp_tensor_get(y, out, 0, (size_t)(N * M) * sizeof *out), BP_OK);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(b);
    bp_buffer_free(wb);
    bp_context_free(c);
    bp_context_free(wc);
    return out;
}

/* Q4_K and Q6_K are checked when the cpu device offers them a buffer type
 * of its own (when it has an x8 layout for them). */
static const enum bp_type mm_types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K };

START_TEST(test_mul_mat_in_weight_buffer_type_matches_default_buffer_type)
{
    const enum bp_type t = mm_types[_i];
    struct bp_buffer_type *own = bp_device_weight_buffer_type(cpu(), t);
    if (own == bp_device_buffer_type(cpu())) {
        ck_assert_msg(t != BP_TYPE_Q4_0 && t != BP_TYPE_Q8_0, "%s gets the default buffer type",
                      bp_type_name(t));
        fprintf(stderr, "%s: the cpu device keeps it in the default buffer type\n", bp_type_name(t));
        return;
    }
    /* 37 rows: four 8-row groups and a tail of 5; M = 1 (decode) and 5. */
    const int64_t K = 512, N = 37, Ms[] = { 1, 5 };
    float *wf = malloc((size_t)(K * N) * sizeof *wf), *wd = malloc((size_t)(K * N) * sizeof *wd);
    for (int64_t i = 0; i < K * N; i++) wf[i] = rndf();
    void *wq = malloc(bp_row_size(t, K) * (size_t)N);
    ck_assert_uint_gt(bp_quantize(t, wf, wq, N, K), 0);
    ck_assert_int_eq(bp_dequantize(t, wq, wd, K * N), BP_OK);
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        const int64_t M = Ms[mi];
        float *x = malloc((size_t)(K * M) * sizeof *x);
        for (int64_t i = 0; i < K * M; i++) x[i] = rndf();
        float *a = mul_mat_in(bp_device_buffer_type(cpu()), t, wq, K, N, x, M);
        float *b = mul_mat_in(own, t, wq, K, N, x, M);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    ref += (double)wd[n * K + k] * x[m * K + k];
                    mag += fabs((double)wd[n * K + k]);
                }
                /* The activation is quantized to 8 bits per block (Q8_0 or
                 * Q8_K): |dx| <= max|x| / 254 = 1 / 254 per element. */
                const double bound = mag / 254.0 + 1e-5;
                const float ya = a[m * N + n], yb = b[m * N + n];
                ck_assert_msg(fabs(ya - ref) <= bound, "%s default [%lld,%lld] = %g, reference %g",
                              bp_type_name(t), (long long)m, (long long)n, ya, ref);
                ck_assert_msg(fabs(yb - ya) <= 1e-5 * (mag + 1.0),
                              "%s [%lld,%lld]: weight buffer type gives %g, default %g",
                              bp_type_name(t), (long long)m, (long long)n, yb, ya);
            }
        free(a); free(b); free(x);
    }
    free(wq); free(wf); free(wd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("weight_buffer_type");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cpu_offers_its_own_buffer_type_for_repackable_weights_and_default_for_floats);
    tcase_add_test(tc, test_device_answering_null_gets_its_default_buffer_type);
    tcase_add_loop_test(tc, test_mul_mat_in_weight_buffer_type_matches_default_buffer_type, 0,
                        (int)(sizeof mm_types / sizeof mm_types[0]));
    suite_add_tcase(s, tc);
    return run_suite(s);
}
