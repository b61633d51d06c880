/* bench_block.c — `backplane bench block`: decode one token through a stack
 * of Llama-style decoder blocks (GQA attention with RoPE, KV-cache writes,
 * flash attention, SwiGLU FFN, RMS norms) and compare, in one run, the
 * plain device (two threads) with a meta device over two occurrences of it
 * (one thread each, Megatron split rules): time ratio, reductions and bytes
 * reduced per token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_meta.h>
#include <backplane/bp_quantize.h>

#include "bench.h"
#include "cli.h"

enum { BD = 1024, BNH = 16, BNKV = 8, BHD = 64, BF = 2816, BCTX = 256, BPOS = 100 };

static const struct bp_meta_rule block_rules[] = {
    {"blk.*.attn_q.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = BHD * (BNH / BNKV)}},
    {"blk.*.attn_k.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = BHD}},
    {"blk.*.attn_v.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = BHD}},
    {"blk.*.attn_output.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = BHD * (BNH / BNKV)}},
    {"blk.*.cache_k", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.cache_v", {.state = BP_META_SPLIT_AXIS_2, .granularity = 1}},
    {"blk.*.ffn_gate.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 256}},
    {"blk.*.ffn_up.weight", {.state = BP_META_SPLIT_AXIS_1, .granularity = 256}},
    {"blk.*.ffn_down.weight", {.state = BP_META_SPLIT_AXIS_0, .granularity = 256}},
};
static const struct bp_meta_rule_table block_table = {block_rules, sizeof block_rules / sizeof block_rules[0]};

struct stack {
    struct bp_context *ctx;
    struct bp_graph *g;
    struct bp_buffer *buf;
    struct bp_tensor *out;
};

static struct bp_tensor *w2(struct bp_context *c, enum bp_type ty, int layer, const char *what, int64_t a,
                            int64_t b)
{
    char n[64];
    snprintf(n, sizeof n, "blk.%d.%s", layer, what);
    return bp_tensor_set_name(bp_tensor_new_2d(c, ty, a, b), n);
}

static bool build_stack(struct stack *s, int layers, enum bp_type ty)
{
    if (bp_context_new((size_t)layers * 64 + 16, &s->ctx) != BP_OK) return false;
    struct bp_context *c = s->ctx;
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, BD, 1), "x");
    struct bp_tensor *pos = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, 1), "pos");
    struct bp_tensor *mask = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, BCTX, 1), "mask");
    for (int l = 0; l < layers && x; l++) {
        char n[64];
        struct bp_tensor *wn = w2(c, BP_TYPE_F32, l, "attn_norm.weight", BD, 1);
        struct bp_tensor *fn = w2(c, BP_TYPE_F32, l, "ffn_norm.weight", BD, 1);
        snprintf(n, sizeof n, "blk.%d.cache_k", l);
        struct bp_tensor *ck = bp_tensor_set_name(bp_tensor_new_3d(c, BP_TYPE_F32, BHD, BCTX, BNKV), n);
        snprintf(n, sizeof n, "blk.%d.cache_v", l);
        struct bp_tensor *cv = bp_tensor_set_name(bp_tensor_new_3d(c, BP_TYPE_F32, BHD, BCTX, BNKV), n);
        struct bp_tensor *h = bp_mul(c, bp_rms_norm(c, x, 1e-5f), wn);
        struct bp_tensor *q = bp_mul_mat(c, w2(c, ty, l, "attn_q.weight", BD, BNH * BHD), h);
        struct bp_tensor *k = bp_mul_mat(c, w2(c, ty, l, "attn_k.weight", BD, BNKV * BHD), h);
        struct bp_tensor *v = bp_mul_mat(c, w2(c, ty, l, "attn_v.weight", BD, BNKV * BHD), h);
        q = bp_rope(c, bp_reshape(c, q, 3, (int64_t[]){BHD, BNH, 1}), pos, BHD, BP_ROPE_MODE_NEOX, 10000.f, 1.f);
        k = bp_rope(c, bp_reshape(c, k, 3, (int64_t[]){BHD, BNKV, 1}), pos, BHD, BP_ROPE_MODE_NEOX, 10000.f, 1.f);
        v = bp_reshape(c, v, 3, (int64_t[]){BHD, BNKV, 1});
        struct bp_tensor *kc = bp_set_rows(c, ck, bp_permute(c, k, 0, 2, 1, 3), pos);
        struct bp_tensor *vc = bp_set_rows(c, cv, bp_permute(c, v, 0, 2, 1, 3), pos);
        struct bp_tensor *att = bp_flash_attn_ext(c, bp_permute(c, q, 0, 2, 1, 3), kc, vc, mask,
                                                  1.0f / sqrtf((float)BHD));
        struct bp_tensor *o = bp_mul_mat(c, w2(c, ty, l, "attn_output.weight", BNH * BHD, BD),
                                         bp_reshape(c, att, 2, (int64_t[]){BNH * BHD, 1}));
        struct bp_tensor *x1 = bp_add(c, x, o);
        struct bp_tensor *h2 = bp_mul(c, bp_rms_norm(c, x1, 1e-5f), fn);
        struct bp_tensor *a = bp_mul(c, bp_silu(c, bp_mul_mat(c, w2(c, ty, l, "ffn_gate.weight", BD, BF), h2)),
                                     bp_mul_mat(c, w2(c, ty, l, "ffn_up.weight", BD, BF), h2));
        x = bp_add(c, x1, bp_mul_mat(c, w2(c, ty, l, "ffn_down.weight", BF, BD), a));
    }
    s->out = x;
    if (!x || bp_graph_new((int32_t)layers * 64 + 16, &s->g) != BP_OK) return false;
    return bp_graph_build(s->g, x) == BP_OK;
}

static bool fill(struct stack *s)
{
    unsigned seed = 12345;
    for (size_t i = 0; i < bp_context_tensor_count(s->ctx); i++) {
        struct bp_tensor *t = bp_context_tensor(s->ctx, i);
        if (t->op != BP_OP_NONE || t->view_src) continue;
        size_t n = (size_t)bp_nelements(t);
        if (t->type == BP_TYPE_I32) {
            int32_t p = BPOS;
            if (bp_tensor_set(t, &p, 0, sizeof p) != BP_OK) return false;
            continue;
        }
        float *v = malloc(n * sizeof *v);
        void *q = malloc(bp_nbytes(t));
        if (!v || !q) { free(v); free(q); return false; }
        for (size_t j = 0; j < n; j++) {
            seed = seed * 1103515245u + 12345u;
            v[j] = ((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f) * 0.05f;
        }
        if (!strcmp(t->name, "mask"))
            for (size_t j = 0; j < n; j++) v[j] = (int)j <= BPOS ? 0.0f : -INFINITY;
        bool ok;
        if (t->type == BP_TYPE_F32) ok = bp_tensor_set(t, v, 0, n * sizeof *v) == BP_OK;
        else ok = bp_quantize((enum bp_type)t->type, v, q, (int64_t)(n / (size_t)t->ne[0]), t->ne[0]) == bp_nbytes(t) &&
                  bp_tensor_set(t, q, 0, bp_nbytes(t)) == BP_OK;
        free(v);
        free(q);
        if (!ok) return false;
    }
    return true;
}

/* Median seconds per token of the stack on dev; out gets the last output. */
static double time_on(struct bp_device *dev, const char *params, int layers, enum bp_type ty, int reps,
                      float *out, struct bp_meta_stats *stats)
{
    struct stack s = {0};
    double med = -1;
    struct bp_backend *be = NULL;
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t || !build_stack(&s, layers, ty) ||
        bp_context_alloc_tensors(s.ctx, bp_device_buffer_type(dev), NULL, &s.buf) != BP_OK || !fill(&s) ||
        bp_backend_init(dev, params, &be) != BP_OK)
        goto out;
    if (bp_backend_graph_compute(be, s.g) != BP_OK) goto out; /* warm-up: plans, pages */
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (bp_backend_graph_compute(be, s.g) != BP_OK || bp_backend_synchronize(be) != BP_OK) goto out;
        t[r] = bench_now() - t0;
    }
    if (bp_tensor_get(s.out, out, 0, BD * sizeof *out) != BP_OK) goto out;
    if (stats && bp_meta_backend_stats(be, stats) != BP_OK) goto out;
    med = bench_median(t, reps);
out:
    if (med < 0) fprintf(stderr, "bench block: %s failed: %s\n", bp_device_name(dev), bp_last_error());
    free(t);
    if (be) bp_backend_free(be);
    if (s.buf) bp_buffer_free(s.buf);
    if (s.g) bp_graph_free(s.g);
    if (s.ctx) bp_context_free(s.ctx);
    return med;
}

int bench_block(const struct bench_opts *o)
{
    int layers = o->N != 4096 ? (int)o->N : 4; /* -N: blocks in the stack */
    int reps = o->reps ? o->reps : 10;
    int threads = o->threads ? o->threads : 2;
    enum bp_type ty = o->type;
    struct bp_device *dev = bp_device_by_name(o->device);
    if (!dev) {
        fprintf(stderr, "bench block: no device '%s'; see `backplane devices`.\n", o->device);
        return CLI_EXIT_FAIL;
    }
    if (layers < 1 || layers > 64 || (BD % bp_type_block_size(ty)) || (BF % bp_type_block_size(ty))) {
        fprintf(stderr, "bench block: -N (blocks) must be 1..64 and --type must divide %d and %d into blocks.\n",
                BD, BF);
        return CLI_EXIT_FAIL;
    }
    struct bp_device *subs[2] = {dev, dev}, *meta = NULL;
    if (bp_meta_device_new(subs, 2, NULL, bp_meta_rules_split_fn, (void *)&block_table, &meta) != BP_OK) {
        fprintf(stderr, "bench block: could not compose meta:%s*2: %s\n", o->device, bp_last_error());
        return CLI_EXIT_FAIL;
    }
    char p_ref[32], p_meta[32];
    snprintf(p_ref, sizeof p_ref, "n_threads=%d", threads);
    snprintf(p_meta, sizeof p_meta, "n_threads=%d", threads / 2 > 0 ? threads / 2 : 1);
    float *ref = malloc(BD * sizeof *ref), *got = malloc(BD * sizeof *got);
    struct bp_meta_stats st = {.size = sizeof st};
    memset(&st, 0, sizeof st);
    double t_ref = ref ? time_on(dev, p_ref, layers, ty, reps, ref, NULL) : -1;
    double t_meta = got ? time_on(meta, p_meta, layers, ty, reps, got, &st) : -1;
    int rc = CLI_EXIT_FAIL;
    if (t_ref > 0 && t_meta > 0) {
        double e = 0, n = 0;
        for (int i = 0; i < BD; i++) {
            e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
            n += (double)ref[i] * ref[i];
        }
        double tokens = (double)st.graphs;
        double red = tokens > 0 ? (double)st.reductions / tokens : 0;
        double bytes = tokens > 0 ? (double)st.bytes_reduced / tokens : 0;
        double ratio = t_meta / t_ref;
        if (o->json) {
            printf("{\"mode\":\"block\",\"device\":\"%s\",\"type\":\"%s\",\"blocks\":%d,\"threads\":%d,"
                   "\"ref_ms\":%.4f,\"meta_ms\":%.4f,\"meta_over_ref\":%.4f,\"reductions_per_token\":%.2f,"
                   "\"bytes_reduced_per_token\":%.0f,\"nmse\":%.3g}\n",
                   o->device, bp_type_name(ty), layers, threads, t_ref * 1e3, t_meta * 1e3, ratio, red, bytes,
                   n > 0 ? e / n : e);
        } else {
            printf("decode 1 token, %d blocks (d=%d, %d/%d heads, ffn %d, ctx %d), %s weights\n", layers, BD, BNH,
                   BNKV, BF, BCTX, bp_type_name(ty));
            printf("  %-28s %9.3f ms\n", p_ref, t_ref * 1e3);
            printf("  meta:%s*2, %-17s %9.3f ms\n", o->device, p_meta, t_meta * 1e3);
            printf("  meta / %s:                 %9.3f  (target <= 1.15)\n", o->device, ratio);
            printf("  reductions per token:       %9.2f\n", red);
            printf("  bytes reduced per token:    %9.0f\n", bytes);
            printf("  output NMSE meta vs %s:    %9.3g\n", o->device, n > 0 ? e / n : e);
        }
        rc = CLI_EXIT_OK;
    }
    free(ref);
    free(got);
    return rc;
}
