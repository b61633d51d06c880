/*
 * test_cpu_q8_0_parity.c — MUL_MAT of Q8_0 weights at a 1B model's shapes
 * (K = 2048 and 5632, M = 8 and 128 activation rows) against ggml's
 * arithmetic written out here as plain loops: the activation quantized as
 * ggml-cpu's x86 quantize_row_q8_0 does it (scale amax / 127 stored as
 * f16, multiplier 127 / amax, halves rounded to even), the integer dot of
 * each block, times the f32 product of the two f16 scales, summed.
 *
 * Half of the activation blocks are ties (half-integers under a maximum of
 * 127, so the multiplier is 1 and every element sits on a rounding
 * boundary): with halves rounded away from zero, as ggml's reference
 * quantizer rounds them, a quarter of their quants move by one and the
 * results by about 1e-3 of their magnitude; the bound below, 4e-6 of the sum of |block
 * terms|, leaves room for float summation order alone. Weights in the
 * plain CPU buffer (vec_dot) and in CPU_REPACK (the x8 gemm), on every
 * variant the suite is registered for.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"
#include "suite_main.h"

#define N 16

static struct bp_buffer_type *repack_buft(void)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_REPACK_BUFFER_TYPE);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_REPACK_BUFFER_TYPE);
    bp_cpu_repack_buffer_type_fn fn;
    memcpy(&fn, &p, sizeof p);
    return fn(cpu_device());
}

/* One activation row quantized the ggml-cpu x86 way: d[b], q[b * 32 + j]. */
static void ggml_x86_q8_0(const float *x, int64_t K, float *d, int8_t *q)
{
    for (int64_t b = 0; b < K / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        d[b] = bp_f16_to_f32(bp_f32_to_f16(amax / 127.0f));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)rintf(x[b * 32 + j] * id);
    }
}

START_TEST(test_cpu_q8_0_mul_mat_follows_ggml_arithmetic_at_1b_shapes)
{
    static const int64_t Ks[2] = { 2048, 5632 }, Ms[2] = { 8, 128 };
    const int64_t K = Ks[_i / 4], M = Ms[(_i / 2) % 2];
    const bool repack = _i % 2;
    unsigned seed = (unsigned)(17 + _i);

    float *w = malloc((size_t)(K * N) * sizeof *w), *x = malloc((size_t)(K * M) * sizeof *x);
    for (int64_t i = 0; i < K * N; i++) w[i] = (float)rnd(&seed);
    for (int64_t b = 0; b < K * M / 32; b++) {
        float *xb = x + b * 32;
        if (b % 2) {
            for (int j = 0; j < 32; j++) xb[j] = (float)(int)(rnd(&seed) * 126.0) + 0.5f;
            xb[(b / 2) % 32] = b % 4 == 1 ? 127.0f : -127.0f;
        } else {
            for (int j = 0; j < 32; j++) xb[j] = (float)(rnd(&seed) * (1.0 + (double)(b % 5)));
        }
    }
    const size_t wbytes = bp_row_size(BP_TYPE_Q8_0, K) * N;
    struct bp_block_q8_0 *wq = malloc(wbytes);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, w, wq, N, K), wbytes);

    struct fx f;
    fx_init(&f);
    struct bp_context *wctx;
    ck_assert_int_eq(bp_context_new(1, &wctx), BP_OK);
    struct bp_tensor *W = bp_tensor_new_2d(wctx, BP_TYPE_Q8_0, K, N);
    struct bp_buffer *wbuf;
    ck_assert_int_eq(bp_context_alloc_tensors(wctx, repack ? repack_buft()
                                                           : bp_device_buffer_type(cpu_device()),
                                              NULL, &wbuf), BP_OK);
    ck_assert_int_eq(bp_tensor_set(W, wq, 0, wbytes), BP_OK);
    struct bp_tensor *X = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *Y = bp_mul_mat(f.ctx, W, X);
    fx_alloc(&f);
    ck_assert_int_eq(bp_tensor_set(X, x, 0, (size_t)(K * M) * sizeof *x), BP_OK);
    ck_assert_msg(fx_compute(&f, Y) == BP_OK, "%s", bp_last_error());
    float *y = malloc((size_t)(N * M) * sizeof *y);
    ck_assert_int_eq(bp_tensor_get(Y, y, 0, (size_t)(N * M) * sizeof *y), BP_OK);

    float *dx = malloc((size_t)(K / 32) * sizeof *dx);
    int8_t *qx = malloc((size_t)K);
    for (int64_t m = 0; m < M; m++) {
        ggml_x86_q8_0(x + m * K, K, dx, qx);
        for (int64_t n = 0; n < N; n++) {
            const struct bp_block_q8_0 *row = wq + n * (K / 32);
            double want = 0.0, mag = 0.0;
            for (int64_t b = 0; b < K / 32; b++) {
                int32_t isum = 0;
                for (int j = 0; j < 32; j++) isum += (int32_t)row[b].qs[j] * qx[b * 32 + j];
                const float scale = bp_f16_to_f32(row[b].d) * dx[b];
                want += (double)scale * isum;
                mag += fabs((double)scale * isum);
            }
            const double got = y[m * N + n];
            ck_assert_msg(fabs(got - want) <= 4e-6 * mag,
                          "K=%lld M=%lld %s: row %lld col %lld is %.9g, ggml's arithmetic %.9g "
                          "(off by %.3g of the terms' magnitude)", (long long)K, (long long)M,
                          repack ? "repacked" : "plain", (long long)m, (long long)n, got, want,
                          fabs(got - want) / mag);
        }
    }
    free(dx); free(qx); free(y); free(w); free(x); free(wq);
    bp_buffer_free(wbuf);
    bp_context_free(wctx);
    fx_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_q8_0_parity");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_cpu_q8_0_mul_mat_follows_ggml_arithmetic_at_1b_shapes, 0, 8);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
