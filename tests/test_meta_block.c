/* test_meta_block.c — tensor parallelism end to end: a Llama-style decoder
 * block (GQA attention with RoPE, KV-cache writes, flash attention, SwiGLU,
 * RMS norms, residuals) computed on the CPU device and on meta devices over
 * 1..6 CPU sub-devices must give the same output. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>
#include <backplane/bp_quantize.h>

#include "device_gate.h"
#include "suite_main.h"

enum { D = 64, NH = 4, NKV = 2, HD = 16, F = 96, NCTX = 8, T = 2, P0 = 3 };
#define G (NH / NKV)

/* The Megatron rules as data. */
static const struct bp_meta_rule rules[] = {
    {"blk.*.attn_q.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD * G}},
    {"blk.*.attn_k.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD}},
    {"blk.*.attn_v.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD}},
    {"blk.*.attn_qkv.weight", {.state = BP_META_SPLIT_AXIS_1, .n_segments = 2,
                               .seg = {{NH * HD, 1, HD * G}, {NKV * HD, 2, HD}}}},
    {"blk.*.attn_output.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = HD * G}},
    {"blk.*.cache_k", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.cache_v", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.ffn_gate.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 8}},
    {"blk.*.ffn_up.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 8}},
    {"blk.*.ffn_down.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = 8}},
};
static const struct bp_meta_rule_table table = {rules, sizeof rules / sizeof rules[0]};

/* The fused weight with K and V as segments of their own (three segments,
 * each split on its own), as a model whose K and V heads differ would need. */
static const struct bp_meta_rule rules3[] = {
    {"blk.*.attn_qkv.weight", {.state = BP_META_SPLIT_AXIS_1, .n_segments = 3,
                               .seg = {{NH * HD, 1, HD * G}, {NKV * HD, 1, HD}, {NKV * HD, 1, HD}}}},
    {"blk.*.attn_output.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = HD * G}},
    {"blk.*.cache_k", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.cache_v", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.ffn_gate.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 8}},
    {"blk.*.ffn_up.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 8}},
    {"blk.*.ffn_down.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = 8}},
};
static const struct bp_meta_rule_table table3 = {rules3, sizeof rules3 / sizeof rules3[0]};
static const struct bp_meta_rule_table *fused_table = &table;

/* How Q, K and V are made: three weights; one fused weight viewed apart as
 * 2-D row ranges then made contiguous; or (as the decoder runner does) one
 * fused weight viewed apart directly as [HD, heads, T] with no copy. */
enum { QKV_SEPARATE = 0, QKV_FUSED_CONT = 1, QKV_FUSED_VIEW3D = 2 };

/* The same rules for quantized weights: the FFN's intermediate dimension is
 * cut in whole quantization blocks (32), because ffn_down's slices along K
 * (row-parallel) are block-aligned and the activation must match them. */
static const struct bp_meta_rule qrules[] = {
    {"blk.*.attn_q.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD * G}},
    {"blk.*.attn_k.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD}},
    {"blk.*.attn_v.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = HD}},
    {"blk.*.attn_output.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = HD * G}},
    {"blk.*.cache_k", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.cache_v", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.ffn_gate.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 32}},
    {"blk.*.ffn_up.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 32}},
    {"blk.*.ffn_down.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = 8}},
};
static const struct bp_meta_rule_table qtable = {qrules, sizeof qrules / sizeof qrules[0]};

/* Element type of the projection weights (norms, caches stay f32). */
static enum bp_type wtype = BP_TYPE_F32;

struct block {
    struct bp_context *ctx;
    struct bp_tensor *out;
    struct bp_graph *g;
};

static struct bp_tensor *leaf(struct bp_context *ctx, const char *name, int64_t a, int64_t b, int64_t c,
                              enum bp_type ty)
{
    return bp_tensor_set_name(bp_tensor_new_3d(ctx, ty, a, b, c), name);
}

static void build_block(struct block *bk, int layer, int fused)
{
    char n[64];
    ck_assert_int_eq(bp_context_new(256, &bk->ctx), BP_OK);
    struct bp_context *c = bk->ctx;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", layer, s), n)
    struct bp_tensor *x = leaf(c, "x", D, T, 1, BP_TYPE_F32);
    struct bp_tensor *pos = leaf(c, "pos", T, 1, 1, BP_TYPE_I32);
    struct bp_tensor *mask = leaf(c, "mask", NCTX, T, 1, BP_TYPE_F32);
    struct bp_tensor *wn = leaf(c, NAME("attn_norm.weight"), D, 1, 1, BP_TYPE_F32);
    struct bp_tensor *fn = leaf(c, NAME("ffn_norm.weight"), D, 1, 1, BP_TYPE_F32);
    struct bp_tensor *ck = leaf(c, NAME("cache_k"), HD, NCTX, NKV, BP_TYPE_F32);
    struct bp_tensor *cv = leaf(c, NAME("cache_v"), HD, NCTX, NKV, BP_TYPE_F32);
    struct bp_tensor *wo = leaf(c, NAME("attn_output.weight"), NH * HD, D, 1, wtype);
    struct bp_tensor *wg = leaf(c, NAME("ffn_gate.weight"), D, F, 1, wtype);
    struct bp_tensor *wu = leaf(c, NAME("ffn_up.weight"), D, F, 1, wtype);
    struct bp_tensor *wd = leaf(c, NAME("ffn_down.weight"), F, D, 1, wtype);
    struct bp_tensor *h = bp_mul(c, bp_rms_norm(c, x, 1e-5f), wn);
    struct bp_tensor *q, *k, *v;
    if (fused == QKV_FUSED_VIEW3D) {
        struct bp_tensor *wqkv = leaf(c, NAME("attn_qkv.weight"), D, (NH + 2 * NKV) * HD, 1, wtype);
        struct bp_tensor *qkv = bp_mul_mat(c, wqkv, h);
        size_t nb[3] = {4, HD * 4, qkv ? qkv->nb[1] : 0};
        q = bp_view(c, qkv, 3, (int64_t[]){HD, NH, T}, nb, 0);
        k = bp_view(c, qkv, 3, (int64_t[]){HD, NKV, T}, nb, NH * HD * 4);
        v = bp_view(c, qkv, 3, (int64_t[]){HD, NKV, T}, nb, (NH + NKV) * HD * 4);
    } else if (fused) {
        struct bp_tensor *wqkv = leaf(c, NAME("attn_qkv.weight"), D, (NH + 2 * NKV) * HD, 1, wtype);
        struct bp_tensor *qkv = bp_mul_mat(c, wqkv, h);
        size_t nb[2] = {4, qkv ? qkv->nb[1] : 0};
        q = bp_cont(c, bp_view(c, qkv, 2, (int64_t[]){NH * HD, T}, nb, 0));
        k = bp_cont(c, bp_view(c, qkv, 2, (int64_t[]){NKV * HD, T}, nb, NH * HD * 4));
        v = bp_cont(c, bp_view(c, qkv, 2, (int64_t[]){NKV * HD, T}, nb, (NH + NKV) * HD * 4));
    } else {
        q = bp_mul_mat(c, leaf(c, NAME("attn_q.weight"), D, NH * HD, 1, wtype), h);
        k = bp_mul_mat(c, leaf(c, NAME("attn_k.weight"), D, NKV * HD, 1, wtype), h);
        v = bp_mul_mat(c, leaf(c, NAME("attn_v.weight"), D, NKV * HD, 1, wtype), h);
    }
    if (fused != QKV_FUSED_VIEW3D) {
        q = bp_reshape(c, q, 3, (int64_t[]){HD, NH, T});
        k = bp_reshape(c, k, 3, (int64_t[]){HD, NKV, T});
        v = bp_reshape(c, v, 3, (int64_t[]){HD, NKV, T});
    }
    q = bp_rope(c, q, pos, HD, BP_ROPE_MODE_NEOX, 10000.f, 1.f);
    k = bp_rope(c, k, pos, HD, BP_ROPE_MODE_NEOX, 10000.f, 1.f);
    struct bp_tensor *kc = bp_set_rows(c, ck, bp_permute(c, k, 0, 2, 1, 3), pos);
    struct bp_tensor *vc = bp_set_rows(c, cv, bp_permute(c, v, 0, 2, 1, 3), pos);
    struct bp_tensor *att = bp_flash_attn_ext(c, bp_permute(c, q, 0, 2, 1, 3), kc, vc, mask,
                                              1.0f / sqrtf((float)HD));
    struct bp_tensor *o = bp_mul_mat(c, wo, bp_reshape(c, att, 2, (int64_t[]){NH * HD, T}));
    struct bp_tensor *x1 = bp_add(c, x, o);
    struct bp_tensor *h2 = bp_mul(c, bp_rms_norm(c, x1, 1e-5f), fn);
    struct bp_tensor *a = bp_mul(c, bp_silu(c, bp_mul_mat(c, wg, h2)), bp_mul_mat(c, wu, h2));
    bk->out = bp_tensor_set_name(bp_add(c, x1, bp_mul_mat(c, wd, a)), "out");
#undef NAME
    ck_assert_msg(bk->out != NULL, "building the block failed: %s", bp_last_error());
    ck_assert_int_eq(bp_graph_new(256, &bk->g), BP_OK);
    ck_assert_int_eq(bp_graph_build(bk->g, bk->out), BP_OK);
}

static float rndf(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* Every leaf gets values from a seed derived from its name, so two builds of
 * the block get the same inputs. */
static void fill_leaves(struct bp_context *c)
{
    for (size_t i = 0; i < bp_context_tensor_count(c); i++) {
        struct bp_tensor *t = bp_context_tensor(c, i);
        if (t->op != BP_OP_NONE) continue;
        size_t n = (size_t)bp_nelements(t);
        unsigned seed = 7;
        for (const char *p = t->name; *p; p++) seed = seed * 31 + (unsigned char)*p;
        if (t->type == BP_TYPE_I32) {
            int32_t v[T];
            for (int j = 0; j < T; j++) v[j] = P0 + j;
            ck_assert_int_eq(bp_tensor_set(t, v, 0, sizeof v), BP_OK);
            continue;
        }
        float *v = malloc(n * sizeof *v);
        for (size_t j = 0; j < n; j++) v[j] = rndf(&seed) * 0.5f;
        if (t->type != BP_TYPE_F32) {
            size_t qn = bp_nbytes(t);
            void *q = malloc(qn);
            ck_assert_uint_eq(bp_quantize((enum bp_type)t->type, v, q, t->ne[1] * t->ne[2] * t->ne[3], t->ne[0]), qn);
            ck_assert_msg(bp_tensor_set(t, q, 0, qn) == BP_OK, "set %s: %s", t->name, bp_last_error());
            free(q);
            free(v);
            continue;
        }
        if (!strcmp(t->name, "mask"))
            for (int q = 0; q < T; q++)
                for (int kk = 0; kk < NCTX; kk++) v[q * NCTX + kk] = kk <= P0 + q ? 0.0f : -INFINITY;
        ck_assert_msg(bp_tensor_set(t, v, 0, n * sizeof *v) == BP_OK, "set %s: %s", t->name, bp_last_error());
        free(v);
    }
}

/* Output of the block computed on dev (twice: the second run reuses the
 * plan; both must agree). */
static float *run_block(struct bp_device *dev, int layer, int fused, struct bp_meta_stats *stats)
{
    struct block bk;
    build_block(&bk, layer, fused);
    struct bp_buffer *buf = NULL;
    ck_assert_msg(bp_context_alloc_tensors(bk.ctx, bp_device_buffer_type(dev), NULL, &buf) == BP_OK, "%s",
                  bp_last_error());
    struct bp_backend *be = NULL;
    ck_assert_msg(bp_backend_init(dev, "n_threads=1", &be) == BP_OK, "%s", bp_last_error());
    float *out = malloc(D * T * sizeof *out), *again = malloc(D * T * sizeof *out);
    for (int run = 0; run < 2; run++) {
        fill_leaves(bk.ctx);
        ck_assert_msg(bp_backend_graph_compute(be, bk.g) == BP_OK, "compute on %s: %s", bp_device_name(dev),
                      bp_last_error());
        ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
        ck_assert_msg(bp_tensor_get(bk.out, run ? again : out, 0, D * T * 4) == BP_OK, "%s", bp_last_error());
    }
    ck_assert_msg(memcmp(out, again, D * T * 4) == 0, "a second compute on %s gave a different result",
                  bp_device_name(dev));
    if (stats) ck_assert_int_eq(bp_meta_backend_stats(be, stats), BP_OK);
    free(again);
    bp_backend_free(be);
    bp_buffer_free(buf);
    bp_graph_free(bk.g);
    bp_context_free(bk.ctx);
    return out;
}

static double nmse(const float *a, const float *ref, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

static struct bp_device *cpu(void)
{
    struct bp_device *d = bp_device_by_name("cpu");
    ck_assert_msg(d != NULL, "no cpu device: %s", bp_last_error());
    return d;
}

static void check_meta(size_t n, const float *ratios, int fused, int layer)
{
    const struct bp_meta_rule_table *tab = wtype != BP_TYPE_F32 ? &qtable : fused ? fused_table : &table;
    /* quantized weights: the CPU quantizes activations per 32-block along
     * K, the same blocks on every split, so only summation order differs */
    double tol = wtype == BP_TYPE_F32 ? 1e-10 : 1e-8;
    float *ref = run_block(cpu(), layer, fused, NULL);
    struct bp_device *subs[8];
    for (size_t i = 0; i < n; i++) subs[i] = cpu();
    struct bp_device *meta = NULL;
    ck_assert_msg(bp_meta_device_new(subs, n, ratios, bp_meta_rules_split_fn, (void *)tab, &meta) == BP_OK,
                  "%s", bp_last_error());
    ck_assert_int_eq(bp_device_type(meta), BP_DEVICE_TYPE_META);
    struct bp_meta_stats st = {.size = sizeof st};
    float *got = run_block(meta, layer, fused, &st);
    double e = nmse(got, ref, D * T);
    ck_assert_msg(e < tol, "meta over %zu cpu devices%s%s, %s weights: NMSE %g against the cpu device", n,
                  ratios ? " (uneven)" : "", fused ? " (fused QKV)" : "", bp_type_name(wtype), e);
    if (n > 1) {
        /* attention output and FFN output: two reductions per block per run */
        ck_assert_msg(st.reductions == 4, "expected 2 reductions per block, got %llu over 2 runs",
                      (unsigned long long)st.reductions);
        ck_assert_uint_eq(st.bytes_reduced, 4 * D * T * 4);
    }
    free(ref);
    free(got);
}

START_TEST(test_meta_block_matches_cpu_on_1_to_6_devices)
{
    static const size_t counts[] = {1, 2, 3, 4, 6};
    check_meta(counts[_i], NULL, false, 0);
}
END_TEST

START_TEST(test_meta_block_matches_cpu_with_uneven_ratios)
{
    check_meta(2, (const float[]){3, 1}, false, 0);
    check_meta(3, (const float[]){1, 2, 1}, false, 1);
}
END_TEST

START_TEST(test_meta_block_matches_cpu_with_fused_qkv)
{
    check_meta(2, NULL, true, 0);
    check_meta(3, NULL, true, 2);
}
END_TEST

/* The runner's fused QKV: the Q, K and V views of the column-split output
 * select whole segments and become views of each device's slices, over 2,
 * 3 and 4 devices (4: two devices hold no K/V head), uneven ratios, and
 * with K and V as separate segments. */
START_TEST(test_meta_block_matches_cpu_with_fused_qkv_viewed_per_head)
{
    static const size_t counts[] = {2, 3, 4};
    check_meta(counts[_i], NULL, QKV_FUSED_VIEW3D, (int)_i);
    if (_i == 0) check_meta(2, (const float[]){3, 1}, QKV_FUSED_VIEW3D, 1);
    fused_table = &table3;
    check_meta(counts[_i], NULL, QKV_FUSED_VIEW3D, (int)_i);
    check_meta(counts[_i], NULL, QKV_FUSED_CONT, 1);
    fused_table = &table;
}
END_TEST

START_TEST(test_meta_block_rotates_remainder_per_layer)
{
    /* 2 kv heads over 3 devices: two devices get one head, one gets none,
     * and which one gets none moves with the layer */
    struct bp_device *subs[3] = {cpu(), cpu(), cpu()};
    struct bp_device *meta = NULL;
    ck_assert_int_eq(bp_meta_device_new(subs, 3, NULL, bp_meta_rules_split_fn, (void *)&table, &meta), BP_OK);
    int empty_dev[2];
    for (int layer = 0; layer < 2; layer++) {
        struct bp_context *c;
        ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
        char n[32];
        snprintf(n, sizeof n, "blk.%d.cache_k", layer);
        struct bp_tensor *t = leaf(c, n, HD, NCTX, NKV, BP_TYPE_F32);
        struct bp_buffer *buf;
        ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(meta), NULL, &buf), BP_OK);
        int32_t state;
        int64_t ne[BP_META_MAX_DEVICES];
        ck_assert_int_eq(bp_meta_tensor_split(t, &state, ne), BP_OK);
        ck_assert_int_eq(state, BP_META_SPLIT_AXIS_2);
        ck_assert_int_eq(ne[0] + ne[1] + ne[2], NKV);
        empty_dev[layer] = -1;
        for (int d = 0; d < 3; d++) if (ne[d] == 0) empty_dev[layer] = d;
        ck_assert_int_ge(empty_dev[layer], 0);
        bp_buffer_free(buf);
        bp_context_free(c);
    }
    ck_assert_int_ne(empty_dev[0], empty_dev[1]);
}
END_TEST

/* Whether the CPU device multiplies weights of type ty (the quantized
 * comparison needs it as the reference). */
static bool quant_supported(enum bp_type ty)
{
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_new_2d(c, ty, D, F), *x = bp_tensor_new_2d(c, BP_TYPE_F32, D, T);
    struct bp_tensor *y = bp_mul_mat(c, w, x);
    bool ok = y && bp_device_supports_op(cpu(), y);
    bp_context_free(c);
    return ok;
}

START_TEST(test_meta_block_matches_cpu_with_quantized_weights)
{
    static const enum bp_type types[] = {BP_TYPE_Q4_0, BP_TYPE_Q8_0};
    wtype = types[_i];
    ck_assert_msg(quant_supported(wtype), "the cpu device does not multiply %s weights",
                  bp_type_name(wtype));
    check_meta(2, NULL, false, 0);
    check_meta(3, (const float[]){1, 2, 1}, false, 1);
    check_meta(4, NULL, false, 2);
    wtype = BP_TYPE_F32;
}
END_TEST

START_TEST(test_meta_row_parallel_quantized_slices_align_to_blocks)
{
    /* ffn_down (Q4_0, K = 96) over 2 devices with a granularity of 8: the
     * K slices are whole 32-element blocks (64 + 32), never 48 + 48 */
    struct bp_device *subs[2] = {cpu(), cpu()};
    struct bp_device *meta = NULL;
    ck_assert_int_eq(bp_meta_device_new(subs, 2, NULL, bp_meta_rules_split_fn, (void *)&qtable, &meta), BP_OK);
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *t = leaf(c, "blk.0.ffn_down.weight", F, D, 1, BP_TYPE_Q4_0);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(meta), NULL, &buf), BP_OK);
    int32_t state;
    int64_t ne[BP_META_MAX_DEVICES];
    ck_assert_int_eq(bp_meta_tensor_split(t, &state, ne), BP_OK);
    ck_assert_int_eq(state, BP_META_SPLIT_AXIS_0);
    ck_assert_int_eq(ne[0] + ne[1], F);
    ck_assert_int_eq(ne[0] % 32, 0);
    ck_assert_int_eq(ne[1] % 32, 0);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_block_mixed_cpu_vulkan_matches_cpu)
{
    struct bp_device *vk = bp_device_by_name("vulkan0");
    ck_assert_msg(vk != NULL, "no vulkan0 device (mixed CPU+Vulkan meta needs the Vulkan plugin "
                  "and a Vulkan driver such as lavapipe; CTest runs this case only where it exists)");
    float *ref = run_block(cpu(), 0, false, NULL);
    struct bp_device *subs[2] = {cpu(), vk};
    struct bp_device *meta = NULL;
    ck_assert_msg(bp_meta_device_new(subs, 2, NULL, bp_meta_rules_split_fn, (void *)&table, &meta) == BP_OK,
                  "%s", bp_last_error());
    struct bp_meta_stats st = {.size = sizeof st};
    float *got = run_block(meta, 0, false, &st);
    double e = nmse(got, ref, D * T);
    /* two devices with their own kernels: float rounding differs, a wrong
     * slice or a missed reduction does not come near this */
    ck_assert_msg(e < 1e-7, "meta over cpu,vulkan0: NMSE %g against the cpu device", e);
    ck_assert_uint_eq(st.reductions, 4);
    ck_assert_uint_eq(st.comm_calls, 0); /* two registries: the butterfly */
    free(ref);
    free(got);
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("meta_block");
    TCase *tc = tcase_create("block");
    tcase_add_loop_test(tc, test_meta_block_matches_cpu_on_1_to_6_devices, 0, 5);
    tcase_add_test(tc, test_meta_block_matches_cpu_with_uneven_ratios);
    tcase_add_test(tc, test_meta_block_matches_cpu_with_fused_qkv);
    tcase_add_loop_test(tc, test_meta_block_matches_cpu_with_fused_qkv_viewed_per_head, 0, 3);
    tcase_add_test(tc, test_meta_block_rotates_remainder_per_layer);
    tcase_add_loop_test(tc, test_meta_block_matches_cpu_with_quantized_weights, 0, 2);
    tcase_add_test(tc, test_meta_row_parallel_quantized_slices_align_to_blocks);
    suite_add_tcase(s, tc);
    TCase *vk = tcase_create("vulkan0");
    tcase_set_tags(vk, "vulkan0");
    tcase_add_test(vk, test_meta_block_mixed_cpu_vulkan_matches_cpu);
    suite_add_tcase(s, vk);
    return run_suite(s);
}
