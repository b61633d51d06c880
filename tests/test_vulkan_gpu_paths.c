/*
 * test_vulkan_gpu_paths.c — the Vulkan kernels a GPU takes and lavapipe does
 * not by itself, each forced on vulkan0 with the CPU device kernel off
 * (BACKPLANE_VULKAN_SUBGROUPS=0):
 * - mul_mat.comp's tiles (64x32, 128x64, 128x128; in float and in
 *   float16_t) through BACKPLANE_VULKAN_MM_TILE and
 *   BACKPLANE_VULKAN_F16_TILES, at shapes no tile divides: N rows and M
 *   columns past a tile's edge, K past the 32-element step for float
 *   weights; F16, Q4_0 (blocks of 32) and Q4_K (blocks of 256) weights
 *   against bp_quant_ref.h's dequantizer summed in double;
 * - the same tiles built for MUL_MAT_ID (grouped by expert): an expert with
 *   more columns than a tile, one picked twice by a token, one by none;
 * - mul_mat_vec_q8.comp's integer dot products (BACKPLANE_VULKAN_INT_DOT=1)
 *   for every quantized type against the same
 *   sum over X quantized by bp_quantize_q8_0_ref: the integer sums are
 *   exact, so the tolerance is float rounding's.
 * The device must report the path asked for (a device whose limits or
 * features refuse it is skipped with a sentence). Exits 77 (skipped) when
 * there is no Vulkan device.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quant_ref.h>

#include "vk_test_util.h"

static const struct config {
    const char *tile, *f16;   /* the two variables */
    const char *want;         /* the start of vulkan0.mul_mat_tiles */
    int64_t N, M;             /* a shape that picks the largest tile, divided by none */
    double tol;               /* relative to the sum of |w * x| */
} configs[] = {
    { "s", "0", "64x32, in float", 67, 35, 1e-5 },
    { "m", "0", "64x32 128x64, in float", 131, 40, 1e-5 },
    { "l", "0", "64x32 128x64 128x128, in float", 131, 67, 1e-5 },
    /* X (and F16 weights) rounded to float16_t: 2^-11 relative per factor */
    { "m", "1", "64x32 128x64, in float16_t", 131, 40, 1.5e-3 },
    { "l", "1", "64x32 128x64 128x128, in float16_t", 131, 67, 1.5e-3 },
};
enum { N_CONFIGS = sizeof configs / sizeof configs[0] };

static const enum bp_type wtypes[] = { BP_TYPE_F16, BP_TYPE_Q4_0, BP_TYPE_Q4_K };

/* N rows of K weights of type t (vk_random_weights); wf gets what they
 * dequantize to. */
static unsigned char *make_weights(enum bp_type t, int64_t K, int64_t N, float *wf)
{
    unsigned char *w = vk_random_weights(t, K, N, 11u + (unsigned)t);
    vk_dequant(t, w, K, N, wf);
    return w;
}

/* The sum of w[k] x[k] over K in double; *mag gets the sum of |w[k] x[k]|
 * (the scale of the tolerance). */
static double dot_ref(const float *w, const float *x, int64_t K, double *mag)
{
    double s = 0.0;
    *mag = 0.0;
    for (int64_t k = 0; k < K; k++) {
        const double p = (double)w[k] * (double)x[k];
        s += p;
        *mag += fabs(p);
    }
    return s;
}

static void check_one(struct bp_device *dev, enum bp_type t, int64_t K, const struct config *c)
{
    const int64_t N = c->N, M = c->M;
    float *wf = malloc(sizeof(float) * (size_t)(K * N));
    float *x = malloc(sizeof(float) * (size_t)(K * M));
    float *got = malloc(sizeof(float) * (size_t)(N * M));
    ck_assert(wf && x && got);
    unsigned char *wq = make_weights(t, K, N, wf);
    unsigned seed = 5u + (unsigned)M;
    for (int64_t i = 0; i < K * M; i++) x[i] = vk_frand(&seed);
    vk_mul_mat(dev, t, wq, x, K, N, M, 1, 1, got);

    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mag;
            const double s = dot_ref(wf + n * K, x + m * K, K, &mag);
            const double e = fabs((double)got[n + N * m] - s);
            ck_assert_msg(e <= c->tol * mag, "tile %s, f16 %s, %s K=%lld N=%lld M=%lld: "
                          "y[%lld,%lld] = %.9g, want %.9g (|error| %.3g, sum |w*x| %.3g)",
                          c->tile, c->f16, bp_type_name(t), (long long)K, (long long)N,
                          (long long)M, (long long)n, (long long)m, (double)got[n + N * m], s, e,
                          mag);
        }
    free(wq);
    free(got);
    free(x);
    free(wf);
}

/* Loads the plugins with c's tiles forced (the shared-memory kernels, c's
 * tile cap and tile type) and returns vulkan0, or NULL after a SKIP line
 * naming what when the device's limits (or no shaderFloat16) refuse them.
 * The caller ends with tile_config_end either way. */
static struct bp_device *tile_config_begin(const struct config *c, const char *what)
{
    setenv("BACKPLANE_VULKAN_SUBGROUPS", "0", 1);
    setenv("BACKPLANE_VULKAN_MM_TILE", c->tile, 1);
    setenv("BACKPLANE_VULKAN_F16_TILES", c->f16, 1);
    struct bp_device *dev = vk_load();
    const char *tiles = vk_feature(dev, "vulkan0.mul_mat_tiles");
    ck_assert_msg(tiles != NULL, "vulkan0 publishes no mul_mat_tiles feature");
    if (strncmp(tiles, c->want, strlen(c->want)) == 0) return dev;
    printf("SKIP %s tile %s f16 %s: vulkan0 takes '%s'\n", what, c->tile, c->f16, tiles);
    return NULL;
}

static void tile_config_end(void)
{
    bp_unload();
    unsetenv("BACKPLANE_VULKAN_SUBGROUPS");
    unsetenv("BACKPLANE_VULKAN_MM_TILE");
    unsetenv("BACKPLANE_VULKAN_F16_TILES");
}

START_TEST(test_vulkan_mul_mat_tile_matches_double_reference_past_every_edge)
{
    const struct config *c = &configs[_i];
    struct bp_device *dev = tile_config_begin(c, "MUL_MAT");
    for (size_t i = 0; dev && i < sizeof wtypes / sizeof wtypes[0]; i++)
        check_one(dev, wtypes[i], wtypes[i] == BP_TYPE_F16 ? 100 : 512, c);
    tile_config_end();
}
END_TEST

/* --------------------------------------------- MUL_MAT_ID's tile build */

enum { ID_E = 5, ID_U = 3 };

/* ids[u, t]: slot 0 always expert 0 and slots 1, 2 two others of 0..3, so
 * expert 0 gets more than a tile's columns (several chunks), some tokens
 * pick it twice, and expert 4 is picked by none. */
static int32_t id_of(int64_t u, int64_t t)
{
    return u == 0 ? 0 : (int32_t)((t * 5 + u * 3) % 4);
}

/* W [K, N, ID_E] of type t times X [K, X1, T] routed by id_of, T chosen
 * so the columns average c->M per expert (the tile the product picks). */
static void check_id_one(struct bp_device *dev, enum bp_type t, int64_t K, int64_t X1,
                         const struct config *c)
{
    const int64_t N = c->N, T = (ID_E * c->M + ID_U - 1) / ID_U;
    float *wf = malloc(sizeof(float) * (size_t)(K * N * ID_E));
    float *x = malloc(sizeof(float) * (size_t)(K * X1 * T));
    float *got = malloc(sizeof(float) * (size_t)(N * ID_U * T));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(ID_U * T));
    ck_assert(wf && x && got && ids);
    unsigned char *wq = make_weights(t, K, N * ID_E, wf);
    unsigned seed = 17u + (unsigned)T;
    for (int64_t i = 0; i < K * X1 * T; i++) x[i] = vk_frand(&seed);
    for (int64_t i = 0; i < ID_U * T; i++) ids[i] = id_of(i % ID_U, i / ID_U);

    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *wt = bp_tensor_new_3d(ctx, t, K, N, ID_E);
    struct bp_tensor *xt = bp_tensor_new_3d(ctx, BP_TYPE_F32, K, X1, T);
    struct bp_tensor *it = bp_tensor_new_2d(ctx, BP_TYPE_I32, ID_U, T);
    struct bp_tensor *yt = bp_mul_mat_id(ctx, wt, xt, it);
    struct bp_buffer *buf = vk_alloc(ctx, dev, yt);
    ck_assert_msg(bp_device_supports_op(dev, yt), "vulkan0 declines MUL_MAT_ID with %s weights",
                  bp_type_name(t));
    ck_assert_int_eq(bp_tensor_set(wt, wq, 0, bp_row_size(t, K) * (size_t)(N * ID_E)), BP_OK);
    ck_assert_int_eq(bp_tensor_set(xt, x, 0, sizeof(float) * (size_t)(K * X1 * T)), BP_OK);
    ck_assert_int_eq(bp_tensor_set(it, ids, 0, sizeof(int32_t) * (size_t)(ID_U * T)), BP_OK);
    vk_compute(dev, yt);
    ck_assert_int_eq(bp_tensor_get(yt, got, 0, sizeof(float) * (size_t)(N * ID_U * T)), BP_OK);
    bp_buffer_free(buf);
    bp_context_free(ctx);

    for (int64_t col = 0; col < ID_U * T; col++) {
        const int64_t u = col % ID_U, tok = col / ID_U;
        const float *w = wf + (size_t)(id_of(u, tok) * N * K), *xc = x + (size_t)(((u % X1) + X1 * tok) * K);
        for (int64_t n = 0; n < N; n++) {
            double mag;
            const double s = dot_ref(w + n * K, xc, K, &mag);
            const double e = fabs((double)got[n + N * col] - s);
            ck_assert_msg(e <= c->tol * mag, "MUL_MAT_ID tile %s, f16 %s, %s K=%lld N=%lld T=%lld "
                          "X1=%lld: y[%lld, slot %lld, token %lld] = %.9g, want %.9g (|error| %.3g)",
                          c->tile, c->f16, bp_type_name(t), (long long)K, (long long)N,
                          (long long)T, (long long)X1, (long long)n, (long long)u, (long long)tok,
                          (double)got[n + N * col], s, e);
        }
    }
    free(wq);
    free(ids);
    free(got);
    free(x);
    free(wf);
}

START_TEST(test_vulkan_mul_mat_id_tile_matches_double_reference)
{
    const struct config *c = &configs[_i];
    struct bp_device *dev = tile_config_begin(c, "MUL_MAT_ID");
    if (dev) { /* X shared by a token's slots, and one X column per slot */
        check_id_one(dev, BP_TYPE_Q4_K, 512, 1, c);
        check_id_one(dev, BP_TYPE_F16, 100, ID_U, c);
    }
    tile_config_end();
}
END_TEST

/* ------------------------------------------------- integer dot products */

/* W [K, N, B / 2] of type t times X [K, 1, B] (each W slice meets two X
 * slices, as grouped-query attention's products do). */
static void check_int_dot(struct bp_device *dev, enum bp_type t, int64_t K, int64_t N, int64_t B)
{
    const int64_t BW = B > 1 ? B / 2 : 1;
    N *= BW; /* the slices of W, stacked */
    float *wf = malloc(sizeof(float) * (size_t)(K * N));
    float *x = malloc(sizeof(float) * (size_t)(K * B));
    float *got = malloc(sizeof(float) * (size_t)(N / BW * B));
    struct bp_block_q8_0 *xq = malloc(sizeof *xq * (size_t)(K / 32 * B));
    ck_assert(wf && x && got && xq);
    unsigned char *wq = make_weights(t, K, N, wf);
    unsigned seed = 29u;
    /* a few large values, so blocks' scales differ widely */
    for (int64_t i = 0; i < K * B; i++) x[i] = vk_frand(&seed) * (i % 37 == 0 ? 9.0f : 1.0f);
    bp_quantize_q8_0_ref(x, xq, K * B);
    const int64_t NS = N / BW; /* rows per slice */
    vk_mul_mat(dev, t, wq, x, K, NS, 1, BW, B, got);

    for (int64_t o = 0; o < NS * B; o++) {
        const int64_t z = o / NS, n = o % NS + z / (B / BW) * NS; /* X slice z meets W slice z / 2 */
        const struct bp_block_q8_0 *xz = xq + z * (K / 32);
        /* every weight and quantized X value is exact in double, so only
         * the kernel's float scaling and sums can differ */
        double s = 0.0, mag = 0.0;
        for (int64_t k = 0; k < K; k++) {
            const double p = (double)wf[n * K + k] * (double)bp_f16_to_f32(xz[k / 32].d) *
                             (double)xz[k / 32].qs[k % 32];
            s += p;
            mag += fabs(p);
        }
        const double e = fabs((double)got[o] - s);
        ck_assert_msg(e <= 1e-5 * mag + 1e-30, "integer dots, %s K=%lld N=%lld B=%lld: y[%lld] = "
                      "%.9g, want %.9g (|error| %.3g)", bp_type_name(t), (long long)K,
                      (long long)NS, (long long)B, (long long)o, (double)got[o], s, e);
    }
    free(wq);
    free(xq);
    free(got);
    free(x);
    free(wf);
}

START_TEST(test_vulkan_int_dot_matches_q8_0_reference)
{
    setenv("BACKPLANE_VULKAN_SUBGROUPS", "0", 1);
    setenv("BACKPLANE_VULKAN_INT_DOT", "1", 1);
    struct bp_device *dev = vk_load();
    const char *idp = vk_feature(dev, "vulkan0.integer_dot_product");
    ck_assert_msg(idp != NULL, "vulkan0 publishes no integer_dot_product feature");
    if (strncmp(idp, "1 (used", 7) != 0) {
        printf("SKIP integer dots: vulkan0 says '%s'\n", idp);
    } else {
        /* rows past the 16 of a workgroup, one block, blocks past the 8
         * invocations of a row, and a batch whose W slices each meet two
         * X slices */
        static const int64_t shapes[][3] = { { 32, 17, 1 }, { 256, 33, 1 }, { 1024, 50, 1 },
                                             { 128, 19, 4 } };
        static const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q4_1, BP_TYPE_Q5_0,
                                              BP_TYPE_Q5_1, BP_TYPE_Q8_0, BP_TYPE_IQ4_NL };
        for (int i = 0; i < 4; i++)
            for (size_t j = 0; j < sizeof types / sizeof types[0]; j++)
                check_int_dot(dev, types[j], shapes[i][0], shapes[i][1], shapes[i][2]);
        /* the types of 256-element blocks: one block, several, and a batch */
        static const enum bp_type ktypes[] = { BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q4_K,
                                               BP_TYPE_Q5_K, BP_TYPE_Q6_K, BP_TYPE_IQ4_XS };
        static const int64_t kshapes[][3] = { { 256, 17, 1 }, { 1024, 50, 1 }, { 512, 19, 4 } };
        for (int i = 0; i < 3; i++)
            for (size_t j = 0; j < sizeof ktypes / sizeof ktypes[0]; j++)
                check_int_dot(dev, ktypes[j], kshapes[i][0], kshapes[i][1], kshapes[i][2]);
    }
    bp_unload();
    unsetenv("BACKPLANE_VULKAN_SUBGROUPS");
    unsetenv("BACKPLANE_VULKAN_INT_DOT");
}
END_TEST

static void add_cases(TCase *tc)
{
    tcase_add_loop_test(tc, test_vulkan_mul_mat_tile_matches_double_reference_past_every_edge, 0,
                        N_CONFIGS);
    tcase_add_loop_test(tc, test_vulkan_mul_mat_id_tile_matches_double_reference, 0, N_CONFIGS);
    tcase_add_test(tc, test_vulkan_int_dot_matches_q8_0_reference);
}

int main(void)
{
    return vk_suite_main("vulkan_gpu_paths", 300, add_cases);
}
