/*
 * test_vulkan.c — the Vulkan plugin on whatever Vulkan device is present
 * (lavapipe in CI): device selection by BACKPLANE_VULKAN_DEVICES, set/get
 * round trips of odd sizes and offsets, the no-driver case, and the
 * quantized MUL_MAT shaders against a scalar dequantisation written here
 * from ggml's block layouts. Exits 77 (skipped) when there is no Vulkan
 * device, except for the no-driver test which needs none.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_quant.h>

#include "log_capture.h"
#include "vk_test_util.h"

static size_t vulkan_device_count(void)
{
    const struct bp_registry *reg = bp_registry_by_name("vulkan");
    ck_assert_msg(reg != NULL, "the vulkan plugin did not load: %s", bp_last_error());
    size_t n = 0;
    for (size_t i = 0; i < bp_device_count(); i++)
        if (strncmp(bp_device_name(bp_device_get(i)), "vulkan", 6) == 0) n++;
    return n;
}

static void reload(void)
{
    bp_unload();
    bp_load_plugins(NULL);
}

/* ------------------------------------------------------------ selection */

START_TEST(test_vulkan_devices_env_selects_and_orders)
{
    reload();
    size_t n = vulkan_device_count();
    ck_assert_uint_ge(n, 1);
    char first_desc[256];
    snprintf(first_desc, sizeof first_desc, "%s", bp_device_description(bp_device_by_name("vulkan0")));

    /* Index 0 only: exactly one device, the same one. */
    setenv("BACKPLANE_VULKAN_DEVICES", "0", 1);
    reload();
    ck_assert_uint_eq(vulkan_device_count(), 1);
    ck_assert_str_eq(bp_device_description(bp_device_by_name("vulkan0")), first_desc);

    /* An index past the end is ignored with a warning, not fatal. */
    setenv("BACKPLANE_VULKAN_DEVICES", "99,0", 1);
    reload();
    ck_assert_uint_eq(vulkan_device_count(), 1);
    ck_assert_ptr_null(bp_device_by_name("vulkan1"));

    /* Selecting nothing valid leaves zero devices and a working host. */
    setenv("BACKPLANE_VULKAN_DEVICES", "x", 1);
    reload();
    ck_assert_uint_eq(vulkan_device_count(), 0);
    ck_assert_ptr_nonnull(bp_device_by_name("cpu"));

    if (n >= 2) {
        /* Reversed order: vulkan0 is now what was vulkan1. */
        setenv("BACKPLANE_VULKAN_DEVICES", "1,0", 1);
        reload();
        ck_assert_str_eq(bp_device_description(bp_device_by_name("vulkan1")), first_desc);
    }
    unsetenv("BACKPLANE_VULKAN_DEVICES");
    bp_unload();
}
END_TEST

START_TEST(test_vulkan_cpu_type_device_is_never_the_default)
{
    reload();
    struct bp_device *out[4];
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 4, &n), BP_OK);
    ck_assert_uint_eq(n, 1);
    struct bp_device *v = bp_device_by_name("vulkan0");
    if (bp_device_type(v) != BP_DEVICE_TYPE_GPU && bp_device_type(v) != BP_DEVICE_TYPE_IGPU)
        ck_assert_str_eq(bp_device_name(out[0]), "cpu");
    bp_unload();
}
END_TEST

/* ------------------------------------------------------ no driver at all */

START_TEST(test_vulkan_without_driver_has_zero_devices_and_says_why)
{
    setenv("VK_DRIVER_FILES", "/nonexistent/backplane_no_icd.json", 1);
    setenv("VK_ICD_FILENAMES", "/nonexistent/backplane_no_icd.json", 1);
    setenv("BACKPLANE_LOG", "warn", 1);
    log_capture_begin();
    reload();
    const char *log = log_capture_end();

    ck_assert_uint_eq(vulkan_device_count(), 0);
    ck_assert_ptr_nonnull(bp_device_by_name("cpu"));
    ck_assert_msg(strstr(log, "no Vulkan devices") != NULL, "no sentence about Vulkan in: %s", log);
    bp_unload();
}
END_TEST

/* ------------------------------------------------------------ transfers */

START_TEST(test_vulkan_set_get_round_trips_odd_sizes_and_offsets)
{
    reload();
    struct bp_device *dev = vk0();
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_I32, 1001);
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F16, 333);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    unsigned char ref[4004], got[4004];
    for (size_t i = 0; i < sizeof ref; i++) ref[i] = (unsigned char)(i * 37u + 11u);
    ck_assert_int_eq(bp_tensor_set(a, ref, 0, 4004), BP_OK);
    ck_assert_int_eq(bp_tensor_set(b, ref, 0, 666), BP_OK);
    const size_t offs[] = { 0, 1, 3, 7, 13, 1000 }, sizes[] = { 1, 2, 5, 17, 333, 999 };
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 6; j++) {
            size_t o = offs[i], s = sizes[j];
            if (o + s > 666) continue;
            unsigned char patch[1024];
            for (size_t k = 0; k < s; k++) patch[k] = (unsigned char)(k ^ (o * 7u) ^ s);
            ck_assert_int_eq(bp_tensor_set(b, patch, o, s), BP_OK);
            memcpy(ref + o, patch, s);
            memset(got, 0, sizeof got);
            ck_assert_int_eq(bp_tensor_get(b, got, 0, 666), BP_OK);
            ck_assert_mem_eq(got, ref, 666);
            memset(got, 0, sizeof got);
            ck_assert_int_eq(bp_tensor_get(b, got, o, s), BP_OK);
            ck_assert_mem_eq(got, ref + o, s);
        }
    /* The neighbour tensor was never touched. */
    for (size_t i = 0; i < 4004; i++) ref[i] = (unsigned char)(i * 37u + 11u);
    ck_assert_int_eq(bp_tensor_get(a, got, 0, 4004), BP_OK);
    ck_assert_mem_eq(got, ref, 4004);
    /* Past the end is refused, not written. */
    ck_assert_int_ne(bp_tensor_set(b, ref, 600, 100), BP_OK);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    bp_unload();
}
END_TEST

START_TEST(test_vulkan_buffer_over_max_allocation_is_refused)
{
    reload();
    struct bp_buffer_type *bt = bp_device_buffer_type(bp_device_by_name("vulkan0"));
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_buffer_alloc(bt, (size_t)1 << 40, &buf), BP_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(buf);
    ck_assert_msg(strlen(bp_last_error()) > 0, "no sentence for a refused buffer");
    bp_unload();
}
END_TEST

/* ------------------------------------------------- quantized MUL_MAT */

static float h2f(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return bp_f16_to_f32(h);
}

/* Element j of one block, written from ggml's dequantize_row_* loops. */
static float ref_dequant(enum bp_type t, const unsigned char *blk, int j)
{
    switch (t) {
    case BP_TYPE_Q4_0: {
        int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
        return h2f(blk) * (float)(q - 8);
    }
    case BP_TYPE_Q8_0:
        return h2f(blk) * (float)(int8_t)blk[2 + j];
    case BP_TYPE_Q4_K: {
        const unsigned char *s = blk + 4, *qs = blk + 16;
        int sub = j / 32, sc, m;
        if (sub < 4) { sc = s[sub] & 63; m = s[sub + 4] & 63; }
        else { sc = (s[sub + 4] & 0xF) | ((s[sub - 4] >> 6) << 4); m = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4); }
        int byte = qs[(sub / 2) * 32 + j % 32];
        int q = sub % 2 == 0 ? (byte & 15) : (byte >> 4);
        return h2f(blk) * (float)sc * (float)q - h2f(blk + 2) * (float)m;
    }
    default: { /* Q6_K, following ggml's loop over two halves of 128 */
        const unsigned char *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        float d = h2f(blk + 208);
        int n = j / 128, l = j % 128 % 32, part = j % 128 / 32;
        ql += 64 * n; qh += 32 * n; sc += 8 * n;
        int is = l / 16, q;
        switch (part) {
        case 0: q = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4); return d * sc[is + 0] * (q - 32);
        case 1: q = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4); return d * sc[is + 2] * (q - 32);
        case 2: q = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4); return d * sc[is + 4] * (q - 32);
        default: q = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4); return d * sc[is + 6] * (q - 32);
        }
    }
    }
}

/* W (random blocks with sane scales) times X: once with M = 1 (the
 * matrix-vector shader) and once with M = 19 (the tiled shader). */
static void check_quant_mul_mat(enum bp_type t, int64_t M)
{
    const int64_t K = 512, N = 5;
    const size_t bs = (size_t)bp_type_block_size(t), ts = bp_type_size(t);
    const size_t row = (size_t)K / bs * ts;
    unsigned char *wq = malloc(row * (size_t)N);
    unsigned seed = 1234u + (unsigned)t;
    for (size_t i = 0; i < row * (size_t)N; i++) wq[i] = (unsigned char)(vk_next(&seed) >> 8);
    /* Scales small and finite: f16 0.01 (0x211f) / 0.005 (0x1d1f). */
    for (int64_t n = 0; n < N; n++)
        for (size_t b = 0; b < (size_t)K / bs; b++) {
            unsigned char *blk = wq + (size_t)n * row + b * ts;
            const unsigned char d[2] = { 0x1f, 0x21 }, dm[2] = { 0x1f, 0x1d };
            if (t == BP_TYPE_Q6_K) memcpy(blk + 208, d, 2);
            else memcpy(blk, d, 2);
            if (t == BP_TYPE_Q4_K) memcpy(blk + 2, dm, 2);
        }
    float *x = malloc(sizeof(float) * (size_t)(K * M));
    for (int64_t i = 0; i < K * M; i++) x[i] = vk_frand(&seed);
    float *got = malloc(sizeof(float) * (size_t)(N * M));
    vk_mul_mat(vk0(), t, wq, x, K, N, M, 1, 1, got);

    double err = 0.0, ref = 0.0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const unsigned char *blk = wq + (size_t)n * row + (size_t)(k / (int64_t)bs) * ts;
                s += (double)ref_dequant(t, blk, (int)(k % (int64_t)bs)) * x[k + K * m];
            }
            double e = got[n + N * m] - s;
            err += e * e;
            ref += s * s;
        }
    ck_assert_msg(ref > 0.0, "the reference is all zeros");
    ck_assert_msg(err / ref < 1e-8, "%s M=%lld: nmse %g", bp_type_name(t), (long long)M, err / ref);
    free(got); free(x); free(wq);
}

START_TEST(test_vulkan_quantized_mul_mat_matches_scalar_dequant)
{
    reload();
    const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K };
    for (int i = 0; i < 4; i++) {
        check_quant_mul_mat(types[i], 1);
        check_quant_mul_mat(types[i], 19);
    }
    bp_unload();
}
END_TEST

/* --------------------------------------------------------------- main */

int main(void)
{
    bp_load_plugins(NULL);
    const struct bp_registry *reg = bp_registry_by_name("vulkan");
    bool have = reg && bp_device_by_name("vulkan0");
    bp_unload();

    Suite *s = suite_create("vulkan");
    TCase *tc = tcase_create("vulkan");
    tcase_set_timeout(tc, 120);
    if (reg) tcase_add_test(tc, test_vulkan_without_driver_has_zero_devices_and_says_why);
    if (have) {
        tcase_add_test(tc, test_vulkan_devices_env_selects_and_orders);
        tcase_add_test(tc, test_vulkan_cpu_type_device_is_never_the_default);
        tcase_add_test(tc, test_vulkan_set_get_round_trips_odd_sizes_and_offsets);
        tcase_add_test(tc, test_vulkan_buffer_over_max_allocation_is_refused);
        tcase_add_test(tc, test_vulkan_quantized_mul_mat_matches_scalar_dequant);
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (!have) {
        fprintf(stderr, "no Vulkan device (install mesa-vulkan-drivers for lavapipe); the device "
                "tests are skipped.\n");
        return failed ? 1 : 77;
    }
    return failed ? 1 : 0;
}
