/*
 * test_vulkan_graphs.c — graph computation on the Vulkan plugin the way an
 * application drives it: buffers freed and allocated between graphs on one
 * backend (descriptor sets must never outlive the buffers they name), views
 * into a fused projection with 16-bit weights and caches, and buffers larger
 * than one storage-buffer binding, chains of two ops fused into one dispatch
 * (against the same graph unfused, bit for bit). Every expectation is computed here in
 * scalar C. Exits 77 (skipped) when there is no Vulkan device.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_profile.h>

#include "log_capture.h"
#include "vk_test_util.h"

/* Computes out's graph on a fresh backend of dev under a bp_profile: the
 * dispatches per op land in ops (BP_OP_COUNT entries); returns how many
 * graphs the profile timed (0 where the device has no timestamps). */
static uint64_t compute_profiled(struct bp_device *dev, struct bp_tensor *out, struct bp_profile_op *ops)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    bp_set_profile_fn set_profile = (bp_set_profile_fn)bp_device_proc_address(dev, BP_PROC_SET_PROFILE);
    ck_assert_ptr_nonnull(set_profile);
    memset(ops, 0, sizeof *ops * BP_OP_COUNT);
    struct bp_profile prof = { .n_ops = BP_OP_COUNT, .ops = ops };
    ck_assert_int_eq(set_profile(be, &prof), BP_OK);
    vk_compute_on(be, out);
    ck_assert_int_eq(set_profile(be, NULL), BP_OK);
    bp_backend_free(be);
    return prof.graphs;
}

/* ------------------------------------------- buffers come and go per step */

/* One backend, many steps, each with its own buffer freed at the end: the
 * driver hands the next buffer the freed one's handle, and a descriptor set
 * cached for the old buffer would read (and write) freed memory. */
START_TEST(test_vulkan_buffers_reallocated_between_graphs_compute_fresh_data)
{
    struct bp_device *dev = vk_load();
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    enum { N = 300, STEPS = 64 };
    unsigned seed = 99;
    for (int step = 0; step < STEPS; step++) {
        struct bp_context *ctx;
        ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
        struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, N);
        struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, N);
        struct bp_tensor *y = bp_mul(ctx, bp_add(ctx, a, b), b);
        struct bp_buffer *buf;
        ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf),
                         BP_OK);
        float av[N], bv[N], got[N];
        for (int i = 0; i < N; i++) {
            av[i] = vk_frand(&seed) + (float)step;
            bv[i] = vk_frand(&seed);
        }
        ck_assert_int_eq(bp_tensor_set(a, av, 0, sizeof av), BP_OK);
        ck_assert_int_eq(bp_tensor_set(b, bv, 0, sizeof bv), BP_OK);
        vk_compute_on(be, y);
        ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);
        for (int i = 0; i < N; i++) {
            float want = (av[i] + bv[i]) * bv[i];
            ck_assert_msg(fabsf(got[i] - want) <= 1e-5f * (1.0f + fabsf(want)),
                          "step %d element %d: got %g, want %g", step, i, got[i], want);
        }
        bp_buffer_free(buf);
        bp_context_free(ctx);
    }
    bp_backend_free(be);
    bp_unload();
}
END_TEST

/* ------------------------- fused QKV views, 16-bit weights, a KV cache */

enum { D = 10, H = 4, HKV = 2, KDIM = 64, NCTX = 8 };

/* One device's side of the attention run: weights and cache persist, every
 * step's activations live in a buffer freed after the step (as the
 * decoder in host/run does). */
struct attn_dev {
    struct bp_device *dev;
    struct bp_backend *be;
    struct bp_context *wctx;
    struct bp_buffer *wbuf;
    struct bp_tensor *w, *ck, *cv;
};

static void attn_open(struct attn_dev *a, const char *name, enum bp_type wtype,
                      enum bp_type ctype, const float *w)
{
    a->dev = bp_device_by_name(name);
    ck_assert_msg(a->dev != NULL, "no device %s", name);
    ck_assert_int_eq(bp_backend_init(a->dev, NULL, &a->be), BP_OK);
    ck_assert_int_eq(bp_context_new(4, &a->wctx), BP_OK);
    const int64_t rows = (H + 2 * HKV) * D;
    a->w = bp_tensor_new_2d(a->wctx, wtype, KDIM, rows);
    a->ck = bp_tensor_new_3d(a->wctx, ctype, D, NCTX, HKV);
    a->cv = bp_tensor_new_3d(a->wctx, ctype, D, NCTX, HKV);
    ck_assert_int_eq(bp_context_alloc_tensors(a->wctx, bp_device_buffer_type(a->dev), NULL,
                                              &a->wbuf), BP_OK);
    ck_assert_int_eq(bp_buffer_clear(a->wbuf, 0), BP_OK);
    uint16_t *h = malloc(sizeof *h * (size_t)(KDIM * rows));
    for (int64_t i = 0; i < KDIM * rows; i++)
        h[i] = wtype == BP_TYPE_F16 ? bp_f32_to_f16(w[i]) : bp_f32_to_bf16(w[i]);
    ck_assert_int_eq(bp_tensor_set(a->w, h, 0, sizeof *h * (size_t)(KDIM * rows)), BP_OK);
    free(h);
}

static void attn_close(struct attn_dev *a)
{
    bp_backend_free(a->be);
    bp_buffer_free(a->wbuf);
    bp_context_free(a->wctx);
}

/* qkv = W x; q, k, v are views at byte offsets 0, H*D*4, (H+HKV)*D*4 of
 * each row; rope q and k; k, v into the cache rows pos; attention of q over
 * cache positions [0, n_past + n). out receives [D, H, n] floats. */
static void attn_step(struct attn_dev *a, const float *x, int64_t n_past, int64_t n, float *out)
{
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(64, &c), BP_OK);
    const int64_t n_kv = n_past + n;
    struct bp_tensor *xt = bp_tensor_new_2d(c, BP_TYPE_F32, KDIM, n);
    struct bp_tensor *pos = bp_tensor_new_1d(c, BP_TYPE_I32, n);
    struct bp_tensor *mask = bp_tensor_new_2d(c, BP_TYPE_F32, n_kv, n);
    struct bp_tensor *qkv = bp_mul_mat(c, a->w, xt);
    const size_t es = sizeof(float), row = qkv->nb[1];
    struct bp_tensor *q = bp_view(c, qkv, 3, (int64_t[]){ D, H, n }, (size_t[]){ es, D * es, row }, 0);
    struct bp_tensor *k = bp_view(c, qkv, 3, (int64_t[]){ D, HKV, n },
                                  (size_t[]){ es, D * es, row }, (size_t)(H * D) * es);
    struct bp_tensor *v = bp_view(c, qkv, 3, (int64_t[]){ D, HKV, n },
                                  (size_t[]){ es, D * es, row }, (size_t)((H + HKV) * D) * es);
    q = bp_rope(c, q, pos, D, BP_ROPE_MODE_NORMAL, 10000.0f, 1.0f);
    k = bp_rope(c, k, pos, D, BP_ROPE_MODE_NORMAL, 10000.0f, 1.0f);
    struct bp_tensor *kc = bp_set_rows(c, a->ck, bp_permute(c, k, 0, 2, 1, 3), pos);
    struct bp_tensor *vc = bp_set_rows(c, a->cv, bp_permute(c, v, 0, 2, 1, 3), pos);
    const size_t *nb = a->ck->nb;
    struct bp_tensor *kv_k = bp_view(c, kc, 3, (int64_t[]){ D, n_kv, HKV },
                                     (size_t[]){ nb[0], nb[1], nb[2] }, 0);
    struct bp_tensor *kv_v = bp_view(c, vc, 3, (int64_t[]){ D, n_kv, HKV },
                                     (size_t[]){ nb[0], nb[1], nb[2] }, 0);
    struct bp_tensor *att = bp_flash_attn_ext(c, bp_permute(c, q, 0, 2, 1, 3), kv_k, kv_v, mask,
                                              1.0f / sqrtf((float)D));
    ck_assert_int_eq(bp_context_status(c), BP_OK);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(a->dev), NULL, &buf), BP_OK);
    int32_t p[NCTX];
    float m[NCTX * NCTX];
    for (int64_t i = 0; i < n; i++) {
        p[i] = (int32_t)(n_past + i);
        for (int64_t j = 0; j < n_kv; j++) m[i * n_kv + j] = j <= n_past + i ? 0.0f : -INFINITY;
    }
    ck_assert_int_eq(bp_tensor_set(xt, x, 0, sizeof(float) * (size_t)(KDIM * n)), BP_OK);
    ck_assert_int_eq(bp_tensor_set(pos, p, 0, sizeof(int32_t) * (size_t)n), BP_OK);
    ck_assert_int_eq(bp_tensor_set(mask, m, 0, sizeof(float) * (size_t)(n * n_kv)), BP_OK);
    vk_compute_on(a->be, att);
    ck_assert_int_eq(bp_tensor_get(att, out, 0, sizeof(float) * (size_t)(D * H * n)), BP_OK);
    bp_buffer_free(buf);
    bp_context_free(c);
}

/* The decoder's fused-QKV attention with 16-bit weights, a prompt of 3 then
 * single tokens, on vulkan0 and on the CPU reference: equal at every step. */
static void check_fused_qkv(enum bp_type wtype, enum bp_type ctype)
{
    bp_load_plugins(NULL);
    const int64_t rows = (H + 2 * HKV) * D;
    unsigned seed = 7u + (unsigned)wtype;
    float *w = malloc(sizeof *w * (size_t)(KDIM * rows));
    for (int64_t i = 0; i < KDIM * rows; i++) w[i] = 0.25f * vk_frand(&seed);
    struct attn_dev cpu, vk;
    attn_open(&cpu, "cpu", wtype, ctype, w);
    attn_open(&vk, "vulkan0", wtype, ctype, w);
    float x[KDIM * 3], want[D * H * 3], got[D * H * 3];
    for (int64_t n_past = 0, n = 3; n_past + n <= NCTX; n_past += n, n = 1) {
        for (int64_t i = 0; i < KDIM * n; i++) x[i] = vk_frand(&seed);
        attn_step(&cpu, x, n_past, n, want);
        attn_step(&vk, x, n_past, n, got);
        for (int64_t i = 0; i < D * H * n; i++)
            ck_assert_msg(fabsf(got[i] - want[i]) <= 2e-3f * (1.0f + fabsf(want[i])),
                          "%s weights, %s cache, position %lld, element %lld: vulkan0 %g, cpu %g",
                          bp_type_name(wtype), bp_type_name(ctype), (long long)n_past,
                          (long long)i, got[i], want[i]);
    }
    attn_close(&vk);
    attn_close(&cpu);
    free(w);
    bp_unload();
}

START_TEST(test_vulkan_fused_qkv_views_with_f16_weights_match_cpu_every_step)
{
    check_fused_qkv(BP_TYPE_F16, BP_TYPE_F32);
    check_fused_qkv(BP_TYPE_F16, BP_TYPE_F16);
}
END_TEST

/* The same with the shaders' packed-word 16-bit path (two atomics per
 * store), which devices without storageBuffer16BitAccess run. */
START_TEST(test_vulkan_fused_qkv_on_packed_16bit_words_match_cpu_every_step)
{
    setenv("BACKPLANE_VULKAN_F16_STORAGE", "0", 1);
    check_fused_qkv(BP_TYPE_F16, BP_TYPE_F16);
    check_fused_qkv(BP_TYPE_BF16, BP_TYPE_F16);
    unsetenv("BACKPLANE_VULKAN_F16_STORAGE");
}
END_TEST

START_TEST(test_vulkan_fused_qkv_views_with_bf16_weights_match_cpu_every_step)
{
    check_fused_qkv(BP_TYPE_BF16, BP_TYPE_F32);
    check_fused_qkv(BP_TYPE_BF16, BP_TYPE_F16);
}
END_TEST

/* ------------------------------------ buffers beyond one storage binding */

/* vulkan0's published feature key as a byte count; 0 when not published. */
static size_t vk0_feature(const char *key)
{
    const char *v = vk_feature(vk0(), key);
    return v ? (size_t)strtoull(v, NULL, 10) : 0;
}

/* A buffer larger than maxStorageBufferRange holds a tensor at its start
 * and one past the range (read through a view 4 bytes in, off the binding
 * alignment): each is bound through its own window. A tensor itself larger
 * than the range is declined, and computing it fails with a sentence. */
START_TEST(test_vulkan_buffer_beyond_storage_range_binds_each_tensor)
{
    struct bp_device *dev = vk_load();
    const size_t range = vk0_feature("vulkan0.maxStorageBufferRange");
    const size_t max_buf = vk0_feature("vulkan0.max_buffer_bytes");
    ck_assert_uint_gt(range, 0);
    if (range > ((size_t)512 << 20) || max_buf < 2 * range + ((size_t)16 << 20)) {
        /* Real GPUs bind 2-4 GiB; allocating past that is not worth a test. */
        bp_unload();
        return;
    }
    enum { N = 1000 };
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, N);
    struct bp_tensor *big = bp_tensor_new_1d(ctx, BP_TYPE_F32, (int64_t)(range / 4 + 1024));
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, N + 1);
    struct bp_tensor *bv = bp_view(ctx, b, 1, (int64_t[]){ N }, NULL, sizeof(float));
    struct bp_tensor *y = bp_add(ctx, a, bv);
    struct bp_tensor *z = bp_scale(ctx, big, 2.0f, 0.0f);
    bp_tensor_set_name(big, "big");
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    ck_assert_uint_gt(bp_buffer_size(buf), range);

    float av[N], bvals[N + 1], got[N];
    unsigned seed = 5;
    for (int i = 0; i < N; i++) av[i] = vk_frand(&seed);
    for (int i = 0; i < N + 1; i++) bvals[i] = vk_frand(&seed) * 100.0f;
    ck_assert_int_eq(bp_tensor_set(a, av, 0, sizeof av), BP_OK);
    ck_assert_int_eq(bp_tensor_set(b, bvals, 0, sizeof bvals), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    vk_compute_on(be, y);
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == av[i] + bvals[i + 1], "element %d: got %g, want %g", i, got[i],
                      av[i] + bvals[i + 1]);

    /* Declining is all supports_op can say; the log says why. */
    log_capture_begin();
    bool accepted = bp_device_supports_op(dev, z);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, z), BP_OK);
    bp_status st = bp_backend_graph_compute(be, g);
    const char *log = log_capture_end();
    ck_assert_msg(!accepted, "vulkan0 accepts a %zu-byte tensor, more than one binding (%zu bytes)",
                  bp_nbytes(big), range);
    ck_assert_int_eq(st, BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(log, "maxStorageBufferRange") && strstr(log, "'big'"),
                  "no sentence naming the tensor and the limit in: %s", log);
    bp_graph_free(g);
    bp_backend_free(be);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    bp_unload();
}
END_TEST

/* ------------------------------------ Gemma 2 / YaRN style attention */

/* ggml's rope_yarn for pair i at position pos (bp_ops.h): cos and sin of the
 * pair's angle times the magnitude. */
static void yarn_angle(const struct bp_rope_ext_params *rp, double ff, int i, double pos, double *c,
                       double *s)
{
    const double theta_ext = pos * pow(rp->freq_base, -2.0 * i / rp->n_dims) / ff;
    double theta = rp->freq_scale * theta_ext, m = rp->attn_factor;
    if (rp->ext_factor != 0.0f) {
        const double lb = 2.0 * log(rp->freq_base), two_pi = 2.0 * M_PI;
        const double lo = fmax(0.0, floor(rp->n_dims * log(rp->n_ctx_orig / (two_pi * rp->beta_fast)) / lb));
        const double hi = fmin(rp->n_dims - 1, ceil(rp->n_dims * log(rp->n_ctx_orig / (two_pi * rp->beta_slow)) / lb));
        const double ramp = (1.0 - fmin(1.0, fmax(0.0, (i - lo) / fmax(0.001, hi - lo)))) * rp->ext_factor;
        theta = theta * (1.0 - ramp) + theta_ext * ramp;
        m *= 1.0 + 0.1 * log(1.0 / rp->freq_scale);
    }
    *c = cos(theta) * m;
    *s = sin(theta) * m;
}

/* NEOX rotation of head vector v (length D) in place. */
static void yarn_rotate(double *v, int D, const struct bp_rope_ext_params *rp, const double *ff, double pos)
{
    for (int i = 0; i < D / 2; i++) {
        double c, s;
        yarn_angle(rp, ff[i], i, pos, &c, &s);
        const double a = v[i], b = v[i + D / 2];
        v[i] = a * c - b * s;
        v[i + D / 2] = a * s + b * c;
    }
}

/* One graph with ABI 1.2's three ops as a Gemma 2 / YaRN model strings
 * them: q and k turned by ROPE_EXT (frequency factors, YaRN past the
 * original context), causal FLASH_ATTN_SOFTCAP over GQA heads, and the
 * output capped by SCALE, TANH, SCALE, against the same steps in double. */
START_TEST(test_vulkan_rope_ext_softcap_attention_and_tanh_match_scalar_reference)
{
    struct bp_device *dev = vk_load();
    enum { D = 32, H = 4, HKV = 2, T = 6 };
    const float attn_cap = 2.0f, out_cap = 0.5f, scale = 0.17677669529663687f; /* 1 / sqrt(D) */
    const struct bp_rope_ext_params rp = { .n_dims = D, .mode = BP_ROPE_MODE_NEOX, .freq_base = 10000.0f,
                                           .freq_scale = 0.25f, .n_ctx_orig = 64, .ext_factor = 1.0f,
                                           .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f };
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(32, &ctx), BP_OK);
    struct bp_tensor *qx = bp_tensor_new_3d(ctx, BP_TYPE_F32, D, H, T);
    struct bp_tensor *kx = bp_tensor_new_3d(ctx, BP_TYPE_F32, D, HKV, T);
    struct bp_tensor *v = bp_tensor_new_3d(ctx, BP_TYPE_F16, D, T, HKV);
    struct bp_tensor *pos = bp_tensor_new_1d(ctx, BP_TYPE_I32, T);
    struct bp_tensor *ffac = bp_tensor_new_1d(ctx, BP_TYPE_F32, D / 2);
    struct bp_tensor *mask = bp_tensor_new_2d(ctx, BP_TYPE_F32, T, T);
    struct bp_tensor *q = bp_permute(ctx, bp_rope_ext(ctx, qx, pos, ffac, &rp), 0, 2, 1, 3);
    struct bp_tensor *k = bp_permute(ctx, bp_rope_ext(ctx, kx, pos, ffac, &rp), 0, 2, 1, 3);
    struct bp_tensor *o = bp_flash_attn_softcap(ctx, q, k, v, mask, scale, attn_cap);
    struct bp_tensor *y = bp_scale(ctx, bp_tanh(ctx, bp_scale(ctx, o, 1.0f / out_cap, 0.0f)), out_cap, 0.0f);
    struct bp_buffer *buf = vk_alloc(ctx, dev, y);

    unsigned seed = 17;
    float qv[T * H * D], kv[T * HKV * D], ffv[D / 2], mv[T * T];
    uint16_t vh[HKV * T * D];
    double vd[HKV * T * D];
    for (int i = 0; i < T * H * D; i++) qv[i] = 2.0f * vk_frand(&seed);
    for (int i = 0; i < T * HKV * D; i++) kv[i] = 2.0f * vk_frand(&seed);
    for (int i = 0; i < HKV * T * D; i++) {
        vh[i] = bp_f32_to_f16(vk_frand(&seed));
        vd[i] = bp_f16_to_f32(vh[i]);
    }
    for (int i = 0; i < D / 2; i++) ffv[i] = 1.0f + 0.5f * (float)i;
    const int32_t pv[T] = { 90, 91, 92, 93, 94, 95 }; /* past the original 64 */
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) mv[j + T * i] = j <= i ? 0.0f : -INFINITY;
    ck_assert_int_eq(bp_tensor_set(qx, qv, 0, sizeof qv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(kx, kv, 0, sizeof kv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(v, vh, 0, sizeof vh), BP_OK);
    ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof pv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(ffac, ffv, 0, sizeof ffv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(mask, mv, 0, sizeof mv), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    vk_compute_on(be, y);
    float got[D * H * T];
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);

    double qr[T][H][D], kr[T][HKV][D], ff[D / 2];
    for (int i = 0; i < D / 2; i++) ff[i] = ffv[i];
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) {
            for (int d = 0; d < D; d++) qr[t][h][d] = qv[d + D * (h + H * t)];
            yarn_rotate(qr[t][h], D, &rp, ff, pv[t]);
        }
        for (int h = 0; h < HKV; h++) {
            for (int d = 0; d < D; d++) kr[t][h][d] = kv[d + D * (h + HKV * t)];
            yarn_rotate(kr[t][h], D, &rp, ff, pv[t]);
        }
    }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int kh = h / (H / HKV);
            double sc[T], mx = -INFINITY, sum = 0.0;
            for (int j = 0; j <= t; j++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++) dot += qr[t][h][d] * kr[j][kh][d];
                sc[j] = attn_cap * tanh(dot * scale / attn_cap);
                if (sc[j] > mx) mx = sc[j];
            }
            for (int j = 0; j <= t; j++) sum += exp(sc[j] - mx);
            for (int d = 0; d < D; d++) {
                double acc = 0.0;
                for (int j = 0; j <= t; j++) acc += exp(sc[j] - mx) / sum * vd[d + D * (j + T * kh)];
                const double want = out_cap * tanh(acc / out_cap);
                const float g = got[d + D * (h + H * t)];
                ck_assert_msg(fabs(g - want) <= 2e-5, "token %d head %d d %d: got %.7g, want %.7g", t, h, d,
                              (double)g, want);
            }
        }
    bp_backend_free(be);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    bp_unload();
}
END_TEST

/* ------------------------------------------ fused chains (fusion.c) */

/* RMS_NORM -> MUL and SILU -> MUL, each one dispatch when fused: odd rows,
 * weights repeated over rows and planes, the chain's output as MUL's second
 * operand, and the first node's output read again by a later ADD. */
struct chain_case {
    bool silu;                       /* SILU -> MUL, else RMS_NORM -> MUL */
    int64_t n, rows, planes;         /* the first node's shape */
    int64_t wn, wrows, wplanes;      /* the other operand's, repeated over it */
    bool swap;                       /* MUL(w, first): needs w of the full shape */
    bool shared;                     /* ADD(MUL, first) reads the first output too */
};

static const struct chain_case chain_cases[] = {
    { false, 77, 3, 2, 77, 1, 1, false, false },
    { false, 77, 3, 2, 77, 1, 1, false, true },
    { false, 1, 5, 1, 1, 1, 1, false, false },
    { false, 131, 4, 2, 131, 1, 2, false, true },
    { false, 33, 3, 1, 33, 3, 1, true, true },
    { true, 77, 3, 2, 77, 3, 2, false, false },
    { true, 77, 3, 2, 77, 1, 1, false, true },
    { true, 1001, 1, 1, 1001, 1, 1, true, true },
    { true, 5, 7, 3, 5, 1, 3, false, false },
};
enum { N_CHAIN_CASES = sizeof chain_cases / sizeof chain_cases[0] };

struct chain_out {
    float *first, *mul, *add;        /* the three nodes' values (add: shared only) */
    uint64_t first_count, mul_count; /* dispatches the profile charged; graphs timed */
    uint64_t graphs;
};

static void chain_run(struct bp_device *dev, const struct chain_case *cc, const float *xv,
                      const float *wv, struct chain_out *o)
{
    const int64_t ne = cc->n * cc->rows * cc->planes, wne = cc->wn * cc->wrows * cc->wplanes;
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *x = bp_tensor_new_3d(ctx, BP_TYPE_F32, cc->n, cc->rows, cc->planes);
    struct bp_tensor *w = bp_tensor_new_3d(ctx, BP_TYPE_F32, cc->wn, cc->wrows, cc->wplanes);
    struct bp_tensor *h = cc->silu ? bp_silu(ctx, x) : bp_rms_norm(ctx, x, 1e-5f);
    struct bp_tensor *y = cc->swap ? bp_mul(ctx, w, h) : bp_mul(ctx, h, w);
    struct bp_tensor *z = cc->shared ? bp_add(ctx, y, h) : y;
    struct bp_buffer *buf = vk_alloc(ctx, dev, z);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof *xv * (size_t)ne), BP_OK);
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof *wv * (size_t)wne), BP_OK);
    struct bp_profile_op ops[BP_OP_COUNT];
    const uint64_t timed = compute_profiled(dev, z, ops);
    o->first = malloc(sizeof(float) * (size_t)ne);
    o->mul = malloc(sizeof(float) * (size_t)ne);
    o->add = malloc(sizeof(float) * (size_t)ne);
    ck_assert_int_eq(bp_tensor_get(h, o->first, 0, sizeof(float) * (size_t)ne), BP_OK);
    ck_assert_int_eq(bp_tensor_get(y, o->mul, 0, sizeof(float) * (size_t)ne), BP_OK);
    if (cc->shared) ck_assert_int_eq(bp_tensor_get(z, o->add, 0, sizeof(float) * (size_t)ne), BP_OK);
    o->first_count = ops[h->op].count;
    o->mul_count = ops[BP_OP_MUL].count;
    o->graphs = timed;
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

/* Fails the running test unless node's value got is within tol * (1 +
 * |want|) of want; the message names case c and element k. */
static void expect_node(int c, int64_t k, const char *node, double got, double want, double tol)
{
    ck_assert_msg(fabs(got - want) <= tol * (1.0 + fabs(want)), "case %d element %" PRId64 ": %s %.7g, want %.7g",
                  c, k, node, got, want);
}

static void chain_free(struct chain_out *o)
{
    free(o->first);
    free(o->mul);
    free(o->add);
}

START_TEST(test_vulkan_fused_chains_match_scalar_reference_and_unfused_bits)
{
    const struct chain_case *cc = &chain_cases[_i];
    struct bp_device *dev = vk_load();
    const int64_t ne = cc->n * cc->rows * cc->planes, wne = cc->wn * cc->wrows * cc->wplanes;
    float *xv = malloc(sizeof *xv * (size_t)ne), *wv = malloc(sizeof *wv * (size_t)wne);
    unsigned seed = 1234u + (unsigned)_i;
    for (int64_t i = 0; i < ne; i++) xv[i] = 4.0f * vk_frand(&seed);
    for (int64_t i = 0; i < wne; i++) wv[i] = 1.0f + vk_frand(&seed);

    struct chain_out fused, plain;
    unsetenv("BACKPLANE_VULKAN_FUSION");
    chain_run(dev, cc, xv, wv, &fused);
    setenv("BACKPLANE_VULKAN_FUSION", "0", 1);
    chain_run(dev, cc, xv, wv, &plain);
    unsetenv("BACKPLANE_VULKAN_FUSION");

    /* One dispatch for the chain (charged to its first op), two apart. */
    if (fused.graphs > 0) {
        ck_assert_uint_eq(fused.first_count, 1);
        ck_assert_uint_eq(fused.mul_count, 0);
        ck_assert_uint_eq(plain.first_count, 1);
        ck_assert_uint_eq(plain.mul_count, 1);
    }
    const size_t bytes = sizeof(float) * (size_t)ne;
    ck_assert_msg(memcmp(fused.first, plain.first, bytes) == 0, "the first node's output differs fused");
    ck_assert_msg(memcmp(fused.mul, plain.mul, bytes) == 0, "MUL's output differs fused");
    if (cc->shared) ck_assert_msg(memcmp(fused.add, plain.add, bytes) == 0, "ADD's output differs fused");

    for (int64_t p = 0; p < cc->planes; p++)
        for (int64_t r = 0; r < cc->rows; r++) {
            const float *xr = xv + cc->n * (r + cc->rows * p);
            const float *wr = wv + cc->wn * (r % cc->wrows + cc->wrows * (p % cc->wplanes));
            double ss = 0.0;
            for (int64_t i = 0; i < cc->n; i++) ss += (double)xr[i] * xr[i];
            const double inv = 1.0 / sqrt(ss / (double)cc->n + 1e-5);
            for (int64_t i = 0; i < cc->n; i++) {
                const int64_t k = i + cc->n * (r + cc->rows * p);
                const double hv = cc->silu ? xr[i] / (1.0 + exp(-(double)xr[i])) : xr[i] * inv;
                const double yv = hv * wr[i % cc->wn];
                expect_node(_i, k, "first node", fused.first[k], hv, 1e-5);
                expect_node(_i, k, "MUL", fused.mul[k], yv, 2e-5);
                if (cc->shared) expect_node(_i, k, "ADD", fused.add[k], yv + hv, 3e-5);
            }
        }
    chain_free(&fused);
    chain_free(&plain);
    free(xv);
    free(wv);
    bp_unload();
}
END_TEST

/* ADD -> RMS_NORM -> MUL (a residual sum, the next norm and its weight) as
 * one dispatch, the sum read again by a later ADD: fused only when nothing
 * but the MUL reads the norm's output (kind 0); a norm output flagged
 * BP_TENSOR_FLAG_OUTPUT (kind 1) or read by another node (kind 2) keeps the
 * ADD apart and fuses RMS_NORM -> MUL alone. */
struct add_norm_case {
    int kind;
    int64_t n, rows, planes;
};
static const struct add_norm_case add_norm_cases[] = {
    { 0, 77, 3, 2 }, { 0, 1, 5, 1 }, { 0, 300, 2, 1 }, { 1, 77, 3, 2 }, { 2, 77, 3, 2 },
};

struct add_norm_out {
    float *sum, *norm, *mul, *out;
    uint64_t adds, norms, muls, graphs;
};

static void add_norm_run(struct bp_device *dev, const struct add_norm_case *ac, const float *av,
                         const float *bv, const float *wv, struct add_norm_out *o)
{
    const int64_t ne = ac->n * ac->rows * ac->planes;
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *a = bp_tensor_new_3d(ctx, BP_TYPE_F32, ac->n, ac->rows, ac->planes);
    struct bp_tensor *b = bp_tensor_new_3d(ctx, BP_TYPE_F32, ac->n, ac->rows, ac->planes);
    struct bp_tensor *w = bp_tensor_new_1d(ctx, BP_TYPE_F32, ac->n);
    struct bp_tensor *sum = bp_add(ctx, a, b);
    struct bp_tensor *h = bp_rms_norm(ctx, sum, 1e-5f);
    struct bp_tensor *y = bp_mul(ctx, h, w);
    if (ac->kind == 1) h->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_tensor *z = bp_add(ctx, ac->kind == 2 ? bp_add(ctx, y, h) : y, sum);
    struct bp_buffer *buf = vk_alloc(ctx, dev, z);
    ck_assert_int_eq(bp_tensor_set(a, av, 0, sizeof(float) * (size_t)ne), BP_OK);
    ck_assert_int_eq(bp_tensor_set(b, bv, 0, sizeof(float) * (size_t)ne), BP_OK);
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof(float) * (size_t)ac->n), BP_OK);
    struct bp_profile_op ops[BP_OP_COUNT];
    const uint64_t timed = compute_profiled(dev, z, ops);
    float **dst[4] = { &o->sum, &o->norm, &o->mul, &o->out };
    struct bp_tensor *src[4] = { sum, h, y, z };
    for (int i = 0; i < 4; i++) {
        *dst[i] = malloc(sizeof(float) * (size_t)ne);
        ck_assert_int_eq(bp_tensor_get(src[i], *dst[i], 0, sizeof(float) * (size_t)ne), BP_OK);
    }
    o->adds = ops[BP_OP_ADD].count;
    o->norms = ops[BP_OP_RMS_NORM].count;
    o->muls = ops[BP_OP_MUL].count;
    o->graphs = timed;
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

START_TEST(test_vulkan_fused_add_rms_norm_mul_matches_reference_and_unfused_bits)
{
    const struct add_norm_case *ac = &add_norm_cases[_i];
    struct bp_device *dev = vk_load();
    const int64_t ne = ac->n * ac->rows * ac->planes;
    float *av = malloc(sizeof(float) * (size_t)ne), *bv = malloc(sizeof(float) * (size_t)ne);
    float *wv = malloc(sizeof(float) * (size_t)ac->n);
    unsigned seed = 4321u + (unsigned)_i;
    for (int64_t i = 0; i < ne; i++) av[i] = 4.0f * vk_frand(&seed);
    for (int64_t i = 0; i < ne; i++) bv[i] = 2.0f * vk_frand(&seed);
    for (int64_t i = 0; i < ac->n; i++) wv[i] = 1.0f + vk_frand(&seed);

    struct add_norm_out fused, plain;
    unsetenv("BACKPLANE_VULKAN_FUSION");
    add_norm_run(dev, ac, av, bv, wv, &fused);
    setenv("BACKPLANE_VULKAN_FUSION", "0", 1);
    add_norm_run(dev, ac, av, bv, wv, &plain);
    unsetenv("BACKPLANE_VULKAN_FUSION");

    /* The chain is charged to the norm, whose shader runs it. */
    if (fused.graphs > 0) {
        ck_assert_uint_eq(fused.adds, ac->kind == 0 ? 1 : ac->kind == 1 ? 2 : 3);
        ck_assert_uint_eq(fused.norms, 1);
        ck_assert_uint_eq(fused.muls, 0);
        ck_assert_uint_eq(plain.adds, ac->kind == 2 ? 3 : 2);
        ck_assert_uint_eq(plain.muls, 1);
    }
    const size_t bytes = sizeof(float) * (size_t)ne;
    ck_assert_msg(memcmp(fused.sum, plain.sum, bytes) == 0, "the sum differs fused");
    ck_assert_msg(memcmp(fused.mul, plain.mul, bytes) == 0, "MUL's output differs fused");
    ck_assert_msg(memcmp(fused.out, plain.out, bytes) == 0, "the last ADD differs fused");
    if (ac->kind != 0) ck_assert_msg(memcmp(fused.norm, plain.norm, bytes) == 0, "the norm differs");

    for (int64_t r = 0; r < ac->rows * ac->planes; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < ac->n; i++) {
            const float sv = av[i + ac->n * r] + bv[i + ac->n * r];
            ss += (double)sv * sv;
        }
        const double inv = 1.0 / sqrt(ss / (double)ac->n + 1e-5);
        for (int64_t i = 0; i < ac->n; i++) {
            const int64_t k = i + ac->n * r;
            const float sv = av[k] + bv[k];
            const double hv = sv * inv, yv = hv * wv[i];
            const double zv = yv + (ac->kind == 2 ? hv : 0.0) + sv;
            ck_assert_msg(fused.sum[k] == sv, "case %d element %" PRId64 ": sum %.9g, want %.9g", _i, k,
                          (double)fused.sum[k], (double)sv);
            expect_node(_i, k, "MUL", fused.mul[k], yv, 2e-5);
            expect_node(_i, k, "last ADD", fused.out[k], zv, 3e-5);
        }
    }
    for (int i = 0; i < 2; i++) {
        struct add_norm_out *o = i ? &plain : &fused;
        free(o->sum);
        free(o->norm);
        free(o->mul);
        free(o->out);
    }
    free(av);
    free(bv);
    free(wv);
    bp_unload();
}
END_TEST

/* A chain of ADDs over the slots of one tensor's dimension 1 (a mixture of
 * experts' weighted outputs: e[:, 0] + e[:, 1] + ... for k experts a
 * token) as one dispatch: k = 3, 4 and 8, odd rows, one token and several.
 * Kept apart where a partial sum is read by another node (kind 1) or
 * flagged BP_TENSOR_FLAG_OUTPUT (kind 2). */
struct add_slots_case {
    int kind;
    int64_t d, k, n;
};
static const struct add_slots_case add_slots_cases[] = {
    { 0, 77, 3, 1 }, { 0, 64, 4, 5 }, { 0, 33, 8, 3 }, { 1, 33, 4, 3 }, { 2, 33, 4, 3 },
};

static void add_slots_run(struct bp_device *dev, const struct add_slots_case *ac, const float *ev,
                          float *out, float *part, uint64_t *adds, uint64_t *graphs)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(32, &ctx), BP_OK);
    struct bp_tensor *e = bp_tensor_new_3d(ctx, BP_TYPE_F32, ac->d, ac->k, ac->n);
    struct bp_tensor *sum = NULL, *first = NULL;
    for (int64_t j = 0; j < ac->k; j++) {
        struct bp_tensor *v = bp_view(ctx, e, 2, (int64_t[]){ ac->d, ac->n },
                                      (size_t[]){ e->nb[0], e->nb[2] }, (size_t)j * e->nb[1]);
        sum = sum ? bp_add(ctx, sum, v) : v;
        if (j == 1) first = sum;
    }
    if (ac->kind == 2) first->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_tensor *z = ac->kind == 1 ? bp_mul(ctx, sum, first) : sum;
    struct bp_buffer *buf = vk_alloc(ctx, dev, z);
    const size_t ne = (size_t)(ac->d * ac->k * ac->n), no = (size_t)(ac->d * ac->n);
    ck_assert_int_eq(bp_tensor_set(e, ev, 0, sizeof(float) * ne), BP_OK);
    struct bp_profile_op ops[BP_OP_COUNT];
    const uint64_t timed = compute_profiled(dev, z, ops);
    ck_assert_int_eq(bp_tensor_get(sum, out, 0, sizeof(float) * no), BP_OK);
    ck_assert_int_eq(bp_tensor_get(first, part, 0, sizeof(float) * no), BP_OK);
    *adds = ops[BP_OP_ADD].count;
    *graphs = timed;
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

START_TEST(test_vulkan_fused_add_chain_over_slots_matches_sequential_sum)
{
    const struct add_slots_case *ac = &add_slots_cases[_i];
    struct bp_device *dev = vk_load();
    const int64_t ne = ac->d * ac->k * ac->n, no = ac->d * ac->n;
    float *ev = malloc(sizeof(float) * (size_t)ne);
    float *out[2], *part[2];
    uint64_t adds[2], graphs[2];
    unsigned seed = 99u + (unsigned)_i;
    for (int64_t i = 0; i < ne; i++) ev[i] = 8.0f * vk_frand(&seed);
    for (int f = 0; f < 2; f++) {
        out[f] = malloc(sizeof(float) * (size_t)no);
        part[f] = malloc(sizeof(float) * (size_t)no);
        if (f == 1) setenv("BACKPLANE_VULKAN_FUSION", "0", 1);
        add_slots_run(dev, ac, ev, out[f], part[f], &adds[f], &graphs[f]);
        unsetenv("BACKPLANE_VULKAN_FUSION");
    }
    if (graphs[0] > 0) {
        ck_assert_uint_eq(adds[0], ac->kind == 0 ? 1 : (uint64_t)(ac->k - 1));
        ck_assert_uint_eq(adds[1], (uint64_t)(ac->k - 1));
    }
    ck_assert_msg(memcmp(out[0], out[1], sizeof(float) * (size_t)no) == 0, "the sum differs fused");
    if (ac->kind != 0)
        ck_assert_msg(memcmp(part[0], part[1], sizeof(float) * (size_t)no) == 0, "e0 + e1 differs");
    /* The chain's order, in float: every partial sum rounded. */
    for (int64_t t = 0; t < ac->n; t++)
        for (int64_t i = 0; i < ac->d; i++) {
            float want = ev[i + ac->d * ac->k * t];
            for (int64_t j = 1; j < ac->k; j++) want = want + ev[i + ac->d * (j + ac->k * t)];
            const float got = out[0][i + ac->d * t];
            ck_assert_msg(got == want, "case %d token %" PRId64 " element %" PRId64 ": %.9g, want %.9g",
                          _i, t, i, (double)got, (double)want);
        }
    for (int f = 0; f < 2; f++) {
        free(out[f]);
        free(part[f]);
    }
    free(ev);
    bp_unload();
}
END_TEST

/* ROPE -> SET_ROWS of one token (decode's K into an F16 cache) as one
 * dispatch: rows per head (the ROPE's output permuted) and one packed row
 * (reshaped), ROPE and ROPE_EXT with frequency factors and YaRN. The cache
 * rows other than the one written keep their values. Kept apart for two
 * tokens (kind 1: SET_ROWS keeps the last of repeated ids) and where the
 * ROPE's output is flagged BP_TENSOR_FLAG_OUTPUT (kind 2). */
struct rope_store_case {
    int kind;
    bool heads, ext;
};
static const struct rope_store_case rope_store_cases[] = {
    { 0, true, false }, { 0, true, true }, { 0, false, true }, { 1, true, true }, { 2, true, false },
};
enum { RS_D = 32, RS_H = 3, RS_CTX = 9 };

static void rope_store_run(struct bp_device *dev, const struct rope_store_case *rc, const float *xv,
                           const float *ffv, uint16_t *cache_out, uint64_t *ropes, uint64_t *stores,
                           uint64_t *graphs)
{
    const int T = rc->kind == 1 ? 2 : 1;
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(32, &ctx), BP_OK);
    struct bp_tensor *x = bp_tensor_new_3d(ctx, BP_TYPE_F32, RS_D, RS_H, T);
    struct bp_tensor *pos = bp_tensor_new_1d(ctx, BP_TYPE_I32, T);
    struct bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, T);
    struct bp_tensor *ff = bp_tensor_new_1d(ctx, BP_TYPE_F32, RS_D / 2);
    struct bp_tensor *cache = rc->heads ? bp_tensor_new_3d(ctx, BP_TYPE_F16, RS_D, RS_CTX, RS_H)
                                        : bp_tensor_new_2d(ctx, BP_TYPE_F16, RS_D * RS_H, RS_CTX);
    const struct bp_rope_ext_params rp = { .n_dims = RS_D, .mode = BP_ROPE_MODE_NEOX, .freq_base = 10000.0f,
                                           .freq_scale = 0.25f, .n_ctx_orig = 64, .ext_factor = 1.0f,
                                           .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f };
    struct bp_tensor *k = rc->ext ? bp_rope_ext(ctx, x, pos, ff, &rp)
                                  : bp_rope(ctx, x, pos, RS_D, BP_ROPE_MODE_NORMAL, 10000.0f, 1.0f);
    struct bp_tensor *rows = rc->heads ? bp_permute(ctx, k, 0, 2, 1, 3)
                                       : bp_reshape(ctx, k, 2, (int64_t[]){ RS_D * RS_H, T });
    struct bp_tensor *z = bp_set_rows(ctx, cache, rows, ids);
    if (rc->kind == 2) k->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_buffer *buf = vk_alloc(ctx, dev, z);
    uint16_t init[RS_D * RS_H * RS_CTX];
    for (int i = 0; i < RS_D * RS_H * RS_CTX; i++) init[i] = bp_f32_to_f16(0.001f * (float)i);
    const int32_t pv[2] = { 37, 38 }, iv[2] = { 5, 2 };
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof(float) * RS_D * RS_H * (size_t)T), BP_OK);
    ck_assert_int_eq(bp_tensor_set(pos, pv, 0, sizeof(int32_t) * (size_t)T), BP_OK);
    ck_assert_int_eq(bp_tensor_set(ids, iv, 0, sizeof(int32_t) * (size_t)T), BP_OK);
    ck_assert_int_eq(bp_tensor_set(ff, ffv, 0, sizeof(float) * RS_D / 2), BP_OK);
    ck_assert_int_eq(bp_tensor_set(cache, init, 0, sizeof init), BP_OK);
    struct bp_profile_op ops[BP_OP_COUNT];
    const uint64_t timed = compute_profiled(dev, z, ops);
    ck_assert_int_eq(bp_tensor_get(cache, cache_out, 0, sizeof init), BP_OK);
    *ropes = ops[k->op].count;
    *stores = ops[BP_OP_SET_ROWS].count;
    *graphs = timed;
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

START_TEST(test_vulkan_fused_rope_into_kv_rows_matches_unfused_bits)
{
    const struct rope_store_case *rc = &rope_store_cases[_i];
    struct bp_device *dev = vk_load();
    float xv[RS_D * RS_H * 2], ffv[RS_D / 2];
    unsigned seed = 555u + (unsigned)_i;
    for (int i = 0; i < RS_D * RS_H * 2; i++) xv[i] = 2.0f * vk_frand(&seed);
    for (int i = 0; i < RS_D / 2; i++) ffv[i] = 1.0f + 0.25f * (float)i;
    uint16_t got[2][RS_D * RS_H * RS_CTX];
    uint64_t ropes[2], stores[2], graphs[2];
    for (int f = 0; f < 2; f++) {
        if (f == 1) setenv("BACKPLANE_VULKAN_FUSION", "0", 1);
        rope_store_run(dev, rc, xv, ffv, got[f], &ropes[f], &stores[f], &graphs[f]);
        unsetenv("BACKPLANE_VULKAN_FUSION");
    }
    if (graphs[0] > 0) {
        ck_assert_uint_eq(ropes[0], 1);
        ck_assert_uint_eq(stores[0], rc->kind == 0 ? 0 : 1);
        ck_assert_uint_eq(stores[1], 1);
    }
    ck_assert_msg(memcmp(got[0], got[1], sizeof got[0]) == 0, "the cache differs fused");
    /* Row 5 written (every head's), every other row as it was. */
    int changed = 0;
    for (int i = 0; i < RS_D * RS_H * RS_CTX; i++) {
        const int row = rc->heads ? (i / RS_D) % RS_CTX : i / (RS_D * RS_H);
        const bool written = row == 5 || (rc->kind == 1 && row == 2);
        if (!written)
            ck_assert_msg(got[0][i] == bp_f32_to_f16(0.001f * (float)i), "element %d of row %d changed", i, row);
        else
            changed += got[0][i] != bp_f32_to_f16(0.001f * (float)i);
    }
    ck_assert_int_gt(changed, RS_D * RS_H / 2);
    if (rc->kind == 0 && !rc->ext) {
        /* ROPE NORMAL at position 37, pairs (2i, 2i + 1), base 10000 */
        for (int h = 0; h < RS_H; h++)
            for (int d = 0; d < RS_D; d++) {
                const int pr = d / 2;
                const double th = 37.0 * pow(10000.0, -2.0 * pr / RS_D);
                const double a = xv[2 * pr + RS_D * h], b = xv[2 * pr + 1 + RS_D * h];
                const double want = d % 2 ? a * sin(th) + b * cos(th) : a * cos(th) - b * sin(th);
                const float g = bp_f16_to_f32(got[0][d + RS_D * (5 + RS_CTX * h)]);
                ck_assert_msg(fabs(g - want) <= 2e-3 * (1.0 + fabs(want)), "head %d d %d: %.6g, want %.6g",
                              h, d, (double)g, want);
            }
    }
    bp_unload();
}
END_TEST

/* The graph allocator may give a MUL's output the bytes of the SILU's
 * source, which the SILU was the last to read, at a shift (SwiGLU: the MUL's
 * output over the gate). Placed here by hand, below and above the source:
 * the fused dispatch runs as chains whose every write lands on a source
 * element already read. A shift of 100 would make chains of 34 elements,
 * more than the plugin takes (16): two dispatches. */
enum { SH_N0 = 1111, SH_N1 = 3, SH_AT = 2000 };
static const int64_t shifts[] = { 1536, -1536, 100 }; /* elements; > 0: output below */

static void shifted_run(struct bp_device *dev, int64_t shift, const float *xv, const float *uv,
                        float *aout, float *bout, uint64_t *mul_count, uint64_t *graphs)
{
    const int64_t n = SH_N0 * SH_N1;
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *arena = bp_tensor_new_1d(ctx, BP_TYPE_F32, 2 * SH_AT + n);
    struct bp_tensor *x = bp_view(ctx, arena, 2, (int64_t[]){ SH_N0, SH_N1 },
                                  (size_t[]){ 4, 4 * SH_N0 }, 4 * SH_AT);
    struct bp_tensor *u = bp_tensor_new_1d(ctx, BP_TYPE_F32, SH_N0);
    struct bp_tensor *a = bp_silu(ctx, x);
    struct bp_tensor *b = bp_mul(ctx, a, u);
    struct bp_buffer *buf = vk_alloc(ctx, dev, b);
    b->data = (char *)arena->data + 4 * (SH_AT - shift);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof *xv * (size_t)n), BP_OK);
    ck_assert_int_eq(bp_tensor_set(u, uv, 0, sizeof *uv * SH_N0), BP_OK);
    struct bp_profile_op ops[BP_OP_COUNT];
    const uint64_t timed = compute_profiled(dev, b, ops);
    ck_assert_int_eq(bp_tensor_get(a, aout, 0, sizeof *aout * (size_t)n), BP_OK);
    ck_assert_int_eq(bp_tensor_get(b, bout, 0, sizeof *bout * (size_t)n), BP_OK);
    *mul_count = ops[BP_OP_MUL].count;
    *graphs = timed;
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

START_TEST(test_vulkan_fused_silu_mul_over_its_shifted_source_matches_reference)
{
    const int64_t n = SH_N0 * SH_N1, shift = shifts[_i];
    struct bp_device *dev = vk_load();
    float *xv = malloc(sizeof *xv * (size_t)n), uv[SH_N0];
    float *a[2], *b[2];
    uint64_t muls[2], graphs[2];
    unsigned seed = 77u + (unsigned)_i;
    for (int64_t i = 0; i < n; i++) xv[i] = 4.0f * vk_frand(&seed);
    for (int i = 0; i < SH_N0; i++) uv[i] = 1.0f + vk_frand(&seed);
    for (int f = 0; f < 2; f++) {
        a[f] = malloc(sizeof(float) * (size_t)n);
        b[f] = malloc(sizeof(float) * (size_t)n);
        if (f == 1) setenv("BACKPLANE_VULKAN_FUSION", "0", 1);
        shifted_run(dev, shift, xv, uv, a[f], b[f], &muls[f], &graphs[f]);
        unsetenv("BACKPLANE_VULKAN_FUSION");
    }
    if (graphs[0] > 0) {
        ck_assert_uint_eq(muls[0], shift == 100 ? 1 : 0);
        ck_assert_uint_eq(muls[1], 1);
    }
    ck_assert_msg(memcmp(a[0], a[1], sizeof(float) * (size_t)n) == 0, "SILU's output differs fused");
    ck_assert_msg(memcmp(b[0], b[1], sizeof(float) * (size_t)n) == 0, "MUL's output differs fused");
    for (int64_t i = 0; i < n; i++) {
        const double s = xv[i] / (1.0 + exp(-(double)xv[i])), want = s * uv[i % SH_N0];
        ck_assert_msg(fabs(b[0][i] - want) <= 2e-5 * (1.0 + fabs(want)),
                      "shift %" PRId64 " element %" PRId64 ": got %.7g, want %.7g", shift, i,
                      (double)b[0][i], want);
    }
    for (int f = 0; f < 2; f++) {
        free(a[f]);
        free(b[f]);
    }
    free(xv);
    bp_unload();
}
END_TEST

/* --------------------------------------------------------------- main */

static void add_cases(TCase *tc)
{
    tcase_add_test(tc, test_vulkan_buffers_reallocated_between_graphs_compute_fresh_data);
    tcase_add_test(tc, test_vulkan_fused_qkv_views_with_f16_weights_match_cpu_every_step);
    tcase_add_test(tc, test_vulkan_fused_qkv_views_with_bf16_weights_match_cpu_every_step);
    tcase_add_test(tc, test_vulkan_fused_qkv_on_packed_16bit_words_match_cpu_every_step);
    tcase_add_test(tc, test_vulkan_buffer_beyond_storage_range_binds_each_tensor);
    tcase_add_test(tc, test_vulkan_rope_ext_softcap_attention_and_tanh_match_scalar_reference);
    tcase_add_loop_test(tc, test_vulkan_fused_chains_match_scalar_reference_and_unfused_bits, 0,
                        N_CHAIN_CASES);
    tcase_add_loop_test(tc, test_vulkan_fused_add_rms_norm_mul_matches_reference_and_unfused_bits, 0,
                        (int)(sizeof add_norm_cases / sizeof add_norm_cases[0]));
    tcase_add_loop_test(tc, test_vulkan_fused_add_chain_over_slots_matches_sequential_sum, 0,
                        (int)(sizeof add_slots_cases / sizeof add_slots_cases[0]));
    tcase_add_loop_test(tc, test_vulkan_fused_rope_into_kv_rows_matches_unfused_bits, 0,
                        (int)(sizeof rope_store_cases / sizeof rope_store_cases[0]));
    tcase_add_loop_test(tc, test_vulkan_fused_silu_mul_over_its_shifted_source_matches_reference, 0,
                        (int)(sizeof shifts / sizeof shifts[0]));
}

int main(void)
{
    return vk_suite_main("vulkan_graphs", 120, add_cases);
}
