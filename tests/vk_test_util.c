/* vk_test_util.c — see vk_test_util.h. */
#include "vk_test_util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_plugin.h>

#include "device_gate.h"
#include "quant_test_util.h"
#include "suite_main.h"

struct bp_device *vk0(void)
{
    struct bp_device *dev = bp_device_by_name("vulkan0");
    ck_assert_msg(dev != NULL, "vulkan0 disappeared: %s", bp_last_error());
    return dev;
}

struct bp_device *vk_load(void)
{
    bp_load_plugins(NULL);
    return vk0();
}

const char *vk_feature(struct bp_device *dev, const char *key)
{
    bp_get_features_fn get = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    ck_assert_msg(get != NULL, "%s publishes no features", bp_device_name(dev));
    for (const struct bp_feature *f = get(dev->reg); f && f->name; f++)
        if (strcmp(f->name, key) == 0) return f->value;
    return NULL;
}

unsigned vk_next(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

float vk_frand(unsigned *seed)
{
    return (float)(vk_next(seed) & 0xffff) / 32768.0f - 1.0f;
}

void vk_compute_on(struct bp_backend *be, struct bp_tensor *out)
{
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(64, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, out), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(be, g), BP_OK);
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    bp_graph_free(g);
}

void vk_compute(struct bp_device *dev, struct bp_tensor *out)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    vk_compute_on(be, out);
    bp_backend_free(be);
}

struct bp_buffer *vk_alloc(struct bp_context *ctx, struct bp_device *dev, const struct bp_tensor *out)
{
    ck_assert_msg(out != NULL, "%s", bp_last_error());
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    return buf;
}

/* t's row of quant_layouts; fails the running test when t has none. */
static const struct quant_layout *layout_of(enum bp_type t)
{
    const struct quant_layout *q = quant_layout_of(t);
    ck_assert_msg(q != NULL, "no reference dequantizer for %s", bp_type_name(t));
    return q;
}

unsigned char *vk_random_weights(enum bp_type t, int64_t K, int64_t rows, unsigned seed)
{
    const struct quant_layout *q = t == BP_TYPE_F16 ? NULL : layout_of(t);
    const size_t ts = bp_type_size(t), bytes = bp_row_size(t, K) * (size_t)rows;
    unsigned char *w = malloc(bytes);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < bytes; i++) w[i] = (unsigned char)vk_next(&seed);
    for (int64_t b = 0; b < (int64_t)(bytes / ts); b++) {
        unsigned char *blk = w + (size_t)b * ts;
        if (!q) {
            const uint16_t h = bp_f32_to_f16(vk_frand(&seed));
            memcpy(blk, &h, 2);
            continue;
        }
        const uint16_t d = bp_f32_to_f16(0.01f * (1.0f + (float)(b % 5) / 4.0f));
        memcpy(blk + q->f16_at[0], &d, 2);
        if (q->n_f16 > 1) {
            const uint16_t m = bp_f32_to_f16(0.02f * (float)(b % 7) - 0.06f);
            memcpy(blk + q->f16_at[1], &m, 2);
        }
    }
    return w;
}

void vk_dequant(enum bp_type t, const void *w, int64_t K, int64_t rows, float *y)
{
    const size_t row = bp_row_size(t, K);
    if (t == BP_TYPE_F16) {
        for (int64_t i = 0; i < K * rows; i++) {
            uint16_t h;
            memcpy(&h, (const unsigned char *)w + 2 * i, 2);
            y[i] = bp_f16_to_f32(h);
        }
        return;
    }
    const struct quant_layout *q = layout_of(t);
    for (int64_t r = 0; r < rows; r++) q->ref((const unsigned char *)w + row * (size_t)r, y + r * K, K);
}

void vk_mul_mat(struct bp_device *dev, enum bp_type t, const void *w, const float *x, int64_t K,
                int64_t N, int64_t M, int64_t wb, int64_t xb, float *y)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *wt = bp_tensor_new_3d(ctx, t, K, N, wb);
    struct bp_tensor *xt = bp_tensor_new_3d(ctx, BP_TYPE_F32, K, M, xb);
    struct bp_tensor *yt = bp_mul_mat(ctx, wt, xt);
    struct bp_buffer *buf = vk_alloc(ctx, dev, yt);
    ck_assert_msg(bp_device_supports_op(dev, yt), "%s declines MUL_MAT with %s weights",
                  bp_device_name(dev), bp_type_name(t));
    ck_assert_int_eq(bp_tensor_set(wt, w, 0, bp_row_size(t, K) * (size_t)(N * wb)), BP_OK);
    ck_assert_int_eq(bp_tensor_set(xt, x, 0, sizeof(float) * (size_t)(K * M * xb)), BP_OK);
    vk_compute(dev, yt);
    ck_assert_int_eq(bp_tensor_get(yt, y, 0, sizeof(float) * (size_t)(N * M * xb)), BP_OK);
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

int vk_suite_main(const char *name, int timeout, void (*add_cases)(TCase *tc))
{
    setenv("BACKPLANE_LOG", "warn", 0);
    /* 77 without a Vulkan device (install mesa-vulkan-drivers for lavapipe). */
    const int gate = device_gate("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    add_cases(tc);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
