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
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "vk_test_util.h"

static const enum bp_type types[] = {
    BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1, BP_TYPE_Q2_K,
    BP_TYPE_Q3_K, BP_TYPE_Q5_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS,
};
enum { N_TYPES = sizeof types / sizeof types[0] };

/* ------------------------------------------------------------- MUL_MAT */

/* W [K, N, B] of type t times X (f32 [K, M, 2B]): X slice i reads W slice
 * i / 2. Each output is held to the float rounding a K-term sum can make:
 * a relative 1e-5 of the sum of |w * x|, where one misread element moves
 * it by about 1 / K. */
static void check_mul_mat(enum bp_type t, int64_t K, int64_t N, int64_t M, int64_t B)
{
    const int64_t XB = B > 1 ? 2 * B : 1;
    unsigned char *wq = vk_random_weights(t, K, N * B, 77u + (unsigned)t * 31u + (unsigned)K);
    float *wf = malloc(sizeof(float) * (size_t)(K * N * B));
    float *x = malloc(sizeof(float) * (size_t)(K * M * XB));
    float *got = malloc(sizeof(float) * (size_t)(N * M * XB));
    ck_assert(wf && x && got);
    vk_dequant(t, wq, K, N * B, wf);
    unsigned seed = 5u + (unsigned)M;
    for (int64_t i = 0; i < K * M * XB; i++) x[i] = vk_frand(&seed);
    vk_mul_mat(vk0(), t, wq, x, K, N, M, B, XB, got);

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
                              bp_type_name(t), (long long)n);
                const float g = got[(b * M + m) * N + n];
                const double e = fabs((double)g - s);
                ck_assert_msg(e <= 1e-5 * mag, "%s K=%lld N=%lld M=%lld B=%lld: y[%lld,%lld,%lld] "
                              "= %.9g, want %.9g (|error| %.3g, sum |w*x| %.3g)",
                              bp_type_name(t), (long long)K, (long long)N, (long long)M,
                              (long long)B, (long long)n, (long long)m, (long long)b, (double)g,
                              s, e, mag);
            }
    free(got);
    free(x);
    free(wf);
    free(wq);
}

START_TEST(test_vulkan_mul_mat_of_abi_1_2_weight_type_matches_double_reference)
{
    const enum bp_type t = types[_i];
    bp_load_plugins(NULL);
    const int64_t Ks[] = {256, 768};
    for (int i = 0; i < 2; i++) {
        check_mul_mat(t, Ks[i], 7, 1, 1);
        check_mul_mat(t, Ks[i], 7, 13, 1);
        check_mul_mat(t, Ks[i], 70, 20, 1);
    }
    check_mul_mat(t, 256, 70, 9, 2);
    bp_unload();
}
END_TEST

/* ------------------------------------------------------------ GET_ROWS */

/* Rows of a [K, 9] table of type t, in an order with a repeat: each element
 * must be the reference dequantizer's float, bit for bit. */
static void check_get_rows(enum bp_type t, int64_t K)
{
    enum { ROWS = 9, IDS = 6 };
    const int32_t ids[IDS] = {8, 0, 3, 3, 7, 1};
    unsigned char *wq = vk_random_weights(t, K, ROWS, 901u + (unsigned)t * 17u + (unsigned)K);
    float *want = malloc(sizeof(float) * (size_t)(K * ROWS));
    float *got = malloc(sizeof(float) * (size_t)(K * IDS));
    ck_assert(want && got);
    vk_dequant(t, wq, K, ROWS, want);

    struct bp_device *dev = vk0();
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *table = bp_tensor_new_2d(ctx, t, K, ROWS);
    struct bp_tensor *idt = bp_tensor_new_1d(ctx, BP_TYPE_I32, IDS);
    struct bp_tensor *y = bp_get_rows(ctx, table, idt);
    struct bp_buffer *buf = vk_alloc(ctx, dev, y);
    ck_assert_msg(bp_device_supports_op(dev, y), "vulkan0 declines GET_ROWS of a %s table",
                  bp_type_name(t));
    ck_assert_int_eq(bp_tensor_set(table, wq, 0, bp_row_size(t, K) * ROWS), BP_OK);
    ck_assert_int_eq(bp_tensor_set(idt, ids, 0, sizeof ids), BP_OK);
    vk_compute(dev, y);
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof(float) * (size_t)(K * IDS)), BP_OK);

    for (int i = 0; i < IDS; i++)
        for (int64_t k = 0; k < K; k++) {
            const float g = got[i * K + k], w = want[ids[i] * K + k];
            ck_assert_msg(memcmp(&g, &w, sizeof g) == 0,
                          "%s K=%lld: row %d element %lld is %.9g (0x%08x), the reference "
                          "dequantizer gives %.9g (0x%08x)", bp_type_name(t), (long long)K,
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
    const enum bp_type t = types[_i];
    bp_load_plugins(NULL);
    check_get_rows(t, 256);
    check_get_rows(t, 512);
    bp_unload();
}
END_TEST

/* ----------------------------------------------------------------- main */

static void add_cases(TCase *tc)
{
    tcase_add_loop_test(tc, test_vulkan_mul_mat_of_abi_1_2_weight_type_matches_double_reference,
                        0, N_TYPES);
    tcase_add_loop_test(tc, test_vulkan_get_rows_of_abi_1_2_weight_type_gives_reference_dequant_bits,
                        0, N_TYPES);
}

int main(void)
{
    return vk_suite_main("vulkan_quant", 120, add_cases);
}
