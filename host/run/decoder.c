/*
 * decoder.c — the Llama forward pass as a backplane graph.
 *
 *   x = GET_ROWS(token_embd, ids)
 *   per layer:
 *     h = RMS_NORM(x) * attn_norm
 *     q, k, v = h @ Wq, Wk, Wv            (or one fused Wqkv, viewed apart)
 *     q, k = ROPE(q, pos), ROPE(k, pos)   (mode NORMAL: GGUF llama weights
 *                                          are permuted for adjacent pairs)
 *     cache_k, cache_v = SET_ROWS(k, v at rows pos)
 *     a = FLASH_ATTN_EXT(q, cache_k[:n_kv], cache_v[:n_kv], mask)
 *     x = x + a @ Wo
 *     h = RMS_NORM(x) * ffn_norm
 *     x = x + (SILU(h @ Wgate) * (h @ Wup)) @ Wdown
 *   logits = (RMS_NORM(x) * output_norm) @ Woutput
 *
 * The caches are [head_dim, n_ctx, n_head_kv] per layer (heads outermost),
 * so the attention reads a plain slice of them and a meta device splits
 * them by heads on axis 2.
 *
 * Plans: a graph with its context and intermediate buffer. Positions, the
 * SET_ROWS rows and the mask are input tensors, so a decode step's graph
 * depends only on how many cache positions it attends to. Decode plans are
 * made for a few capacities (32, 64, 128, ... positions, capped at n_ctx),
 * each on the first step that needs it, and then reused: the unwritten
 * positions of the capacity are masked with -inf (the caches start zeroed,
 * so a masked key is never garbage). A step therefore builds and allocates
 * nothing, while attention reads at most twice the positions it needs —
 * rather than all of n_ctx, which for the reference attention kernel would
 * cost more than the weights. A prefill (many tokens) gets a plan of its
 * own, freed after it.
 */
#include "decoder.h"
#include "run_error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "split.h"

/* Capacities 32 << i: 32 << 25 is 2^30, the most positions a model may declare. */
#define N_DECODE_PLANS 26
#define MIN_DECODE_CAPACITY 32

struct plan {
    struct bp_context *ctx;
    struct bp_buffer *buf;
    struct bp_graph *g;
    struct bp_tensor *ids, *pos, *mask, *logits;
    int64_t n, n_kv;            /* tokens evaluated, cache positions attended */
};

/* Weights sharing one buffer type: MUL_MAT weights go where the device
 * prefers them (bp_device_weight_buffer_type, e.g. the CPU's x8 layout),
 * everything else to the default. A tied output is the embedding, which
 * GET_ROWS reads in the default buffer type; when the device prefers another
 * one, the logits' MUL_MAT reads a copy there (out_copy): its bytes once
 * more in memory, for the projection that reads a quarter of a small
 * model's bytes per token (1.4x slower per byte in the CPU's plain layout).
 * Distinct buffer types come from distinct weight types or the default, so
 * BP_TYPE_COUNT + 1 groups always do. */
#define MAX_WEIGHT_GROUPS (BP_TYPE_COUNT + 1)
/* The name of a tied output's copy: the model has no tensor of that name. */
#define OUTPUT_COPY_NAME "output.weight"
struct weight_group {
    struct bp_buffer_type *buft;
    struct bp_context *ctx;
    struct bp_buffer *buf;
};

struct bp_run_session {
    const struct bp_run_model *m;
    struct bp_device *dev;
    struct bp_backend *be;
    struct weight_group wg[MAX_WEIGHT_GROUPS];
    size_t n_wg;
    struct bp_context *cctx;    /* KV caches */
    struct bp_buffer *cbuf;
    struct bp_tensor **w;       /* device tensor per m->weights[i] */
    /* A tied output's copy in the device's weight buffer type (NULL when the
     * output is not tied or the device has no weight buffer type of its own):
     * the embedding must stay readable by GET_ROWS, while the projection runs
     * faster in the device's layout (the CPU's x8), for its bytes once more. */
    struct bp_tensor *out_copy;
    struct bp_tensor **cache_k, **cache_v;
    int64_t n_ctx, n_past;
    struct plan decode[N_DECODE_PLANS];
    float *mask_host;           /* n_ctx floats: a decode step's mask row */
    struct bp_run_split_table split;
    bool split_installed;
    struct bp_run_session_stats stats;
};


int32_t bp_run_argmax(const float *v, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return (int32_t)best;
}

int64_t bp_run_session_n_past(const struct bp_run_session *s) { return s->n_past; }
int64_t bp_run_session_n_ctx(const struct bp_run_session *s) { return s->n_ctx; }
void bp_run_session_reset(struct bp_run_session *s) { s->n_past = 0; }

void bp_run_session_get_stats(const struct bp_run_session *s, struct bp_run_session_stats *out)
{
    *out = s->stats;
}

static struct bp_tensor *dev_weight(const struct bp_run_session *s, const struct bp_run_weight *w)
{
    return w ? s->w[w - s->m->weights] : NULL;
}

/* What the logits' MUL_MAT reads. */
static struct bp_tensor *output_weight(const struct bp_run_session *s)
{
    return s->out_copy ? s->out_copy : dev_weight(s, s->m->output);
}

struct bp_tensor *bp_run_session_weight(const struct bp_run_session *s, const char *name)
{
    if (s->out_copy && name && !strcmp(name, OUTPUT_COPY_NAME)) return s->out_copy;
    for (size_t i = 0; name && i < s->m->n_weights; i++)
        if (!strcmp(s->m->weights[i].name, name)) return s->w[i];
    return NULL;
}

static void plan_free(struct plan *p)
{
    bp_graph_free(p->g);
    bp_buffer_free(p->buf);
    bp_context_free(p->ctx);
    memset(p, 0, sizeof *p);
}

void bp_run_session_free(struct bp_run_session *s)
{
    if (!s) return;
    for (int i = 0; i < N_DECODE_PLANS; i++) plan_free(&s->decode[i]);
    /* The device outlives the session: it must not keep our table. */
    if (s->split_installed) bp_meta_set_split_fn(s->dev, NULL, NULL);
    if (s->be) bp_backend_free(s->be);
    for (size_t i = 0; i < s->n_wg; i++) {
        bp_buffer_free(s->wg[i].buf);
        bp_context_free(s->wg[i].ctx);
    }
    bp_buffer_free(s->cbuf);
    bp_context_free(s->cctx);
    free(s->w);
    free(s->cache_k);
    free(s->cache_v);
    free(s->mask_host);
    free(s);
}

/* True for a weight that only MUL_MAT reads (as src[0]). A tied output is
 * the embedding table, which GET_ROWS reads too. */
static bool mul_mat_only(const struct bp_run_model *m, const struct bp_run_weight *w)
{
    if (w == m->tok_embd) return false;
    if (w == m->output) return true;
    for (int64_t l = 0; l < m->hp.n_layer; l++) {
        const struct bp_run_layer *L = &m->layers[l];
        if (w == L->wq || w == L->wk || w == L->wv || w == L->wqkv || w == L->wo ||
            w == L->gate || w == L->up || w == L->down)
            return true;
    }
    return false;
}

/* The context of the group of buft, created on first use. */
static struct bp_context *group_ctx(struct bp_run_session *s, struct bp_buffer_type *buft)
{
    size_t i = 0;
    while (i < s->n_wg && s->wg[i].buft != buft) i++;
    if (i == s->n_wg) {
        if (i == MAX_WEIGHT_GROUPS || bp_context_new(s->m->n_weights + 8, &s->wg[i].ctx) != BP_OK)
            return NULL;
        s->wg[i].buft = buft;
        s->n_wg++;
    }
    return s->wg[i].ctx;
}

static bp_status make_tensors(struct bp_run_session *s, char *err, size_t cap)
{
    const struct bp_run_model *m = s->m;
    const struct bp_run_hparams *hp = &m->hp;
    struct bp_buffer_type *def = bp_device_buffer_type(s->dev);
    bp_status st = bp_context_new(2 * (size_t)hp->n_layer + 8, &s->cctx);
    if (st != BP_OK) return bp_run_fail(err, cap, st, "creating the cache context failed: %s", bp_last_error());
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        struct bp_buffer_type *buft =
            mul_mat_only(m, w) ? bp_device_weight_buffer_type(s->dev, w->type) : def;
        struct bp_context *ctx = group_ctx(s, buft);
        if (!ctx)
            return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "creating the weight context failed: %s",
                        bp_last_error());
        s->w[i] = bp_tensor_set_name(bp_tensor_new(ctx, w->type, w->n_dims, w->ne), w->name);
        if (!s->w[i]) break;
        s->w[i]->flags |= BP_TENSOR_FLAG_PARAM;
    }
    const struct bp_run_weight *out = m->output;
    struct bp_buffer_type *out_buft =
        m->tied_output && out ? bp_device_weight_buffer_type(s->dev, out->type) : NULL;
    if (out_buft && out_buft != def) {
        struct bp_context *ctx = group_ctx(s, out_buft);
        if (!ctx)
            return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "creating the weight context failed: %s",
                        bp_last_error());
        s->out_copy = bp_tensor_set_name(bp_tensor_new(ctx, out->type, out->n_dims, out->ne),
                                         OUTPUT_COPY_NAME);
        if (s->out_copy) s->out_copy->flags |= BP_TENSOR_FLAG_PARAM;
    }
    for (size_t i = 0; i < s->n_wg && st == BP_OK; i++) st = bp_context_status(s->wg[i].ctx);
    for (int64_t l = 0; l < hp->n_layer; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "blk.%d.cache_k", (int)l);
        s->cache_k[l] = bp_tensor_set_name(
            bp_tensor_new_3d(s->cctx, BP_TYPE_F32, hp->head_dim, s->n_ctx, hp->n_head_kv), nm);
        snprintf(nm, sizeof nm, "blk.%d.cache_v", (int)l);
        s->cache_v[l] = bp_tensor_set_name(
            bp_tensor_new_3d(s->cctx, BP_TYPE_F32, hp->head_dim, s->n_ctx, hp->n_head_kv), nm);
    }
    if (st == BP_OK) st = bp_context_status(s->cctx);
    if (st != BP_OK) return bp_run_fail(err, cap, st, "creating the model's tensors failed: %s", bp_last_error());
    return BP_OK;
}

/* Weights in one device buffer per group, their bytes straight from the
 * model's memory (for a GGUF file, its mapping); the caches in another,
 * zeroed. */
static bp_status upload(struct bp_run_session *s, const struct bp_run_session_options *o, char *err,
                        size_t cap)
{
    const struct bp_run_model *m = s->m;
    struct bp_buffer_type *buft = bp_device_buffer_type(s->dev);
    bp_status st = bp_context_alloc_tensors(s->cctx, buft, NULL, &s->cbuf);
    for (size_t i = 0; i < s->n_wg && st == BP_OK; i++)
        st = bp_context_alloc_tensors(s->wg[i].ctx, s->wg[i].buft, NULL, &s->wg[i].buf);
    if (st != BP_OK) {
        char need[32];
        size_t bytes = bp_context_alloc_size(s->cctx, buft, NULL);
        for (size_t i = 0; i < s->n_wg; i++)
            bytes += bp_context_alloc_size(s->wg[i].ctx, s->wg[i].buft, NULL);
        return bp_run_fail(err, cap, st, "allocating %s for the weights and KV cache on '%s' failed: %s",
                    bp_format_bytes(bytes, need, sizeof need), bp_device_name(s->dev),
                    bp_last_error());
    }
    s->stats.buffers_allocated += 1 + s->n_wg;
    if ((st = bp_buffer_clear(s->cbuf, 0)) != BP_OK)
        return bp_run_fail(err, cap, st, "clearing the KV cache on '%s' failed: %s", bp_device_name(s->dev),
                    bp_last_error());
    size_t total = bp_run_model_weight_bytes(m) + (s->out_copy ? m->output->size : 0), done = 0;
    for (size_t i = 0; i < m->n_weights; i++) {
        st = bp_tensor_set(s->w[i], m->weights[i].data, 0, m->weights[i].size);
        if (st != BP_OK)
            return bp_run_fail(err, cap, st, "uploading weight '%s' to '%s' failed: %s", m->weights[i].name,
                        bp_device_name(s->dev), bp_last_error());
        done += m->weights[i].size;
        if (o && o->progress) o->progress(o->progress_user, done, total);
    }
    if (s->out_copy) {
        st = bp_tensor_set(s->out_copy, m->output->data, 0, m->output->size);
        if (st != BP_OK)
            return bp_run_fail(err, cap, st, "uploading the output projection's copy of '%s' to '%s' "
                        "failed: %s", m->output->name, bp_device_name(s->dev), bp_last_error());
        if (o && o->progress) o->progress(o->progress_user, total, total);
    }
    return BP_OK;
}

bp_status bp_run_session_new(const struct bp_run_model *m, struct bp_device *dev,
                             const struct bp_run_session_options *opts,
                             struct bp_run_session **out, char *err, size_t cap)
{
    *out = NULL;
    struct bp_run_session *s = calloc(1, sizeof *s);
    if (!s) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory creating a session.");
    s->m = m;
    s->dev = dev;
    s->n_ctx = opts && opts->n_ctx > 0 ? opts->n_ctx : 512;
    if (s->n_ctx > m->hp.n_ctx_train) s->n_ctx = m->hp.n_ctx_train;
    s->w = calloc(m->n_weights, sizeof *s->w);
    s->cache_k = calloc((size_t)m->hp.n_layer, sizeof *s->cache_k);
    s->cache_v = calloc((size_t)m->hp.n_layer, sizeof *s->cache_v);
    s->mask_host = malloc((size_t)s->n_ctx * sizeof *s->mask_host);
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    if (!s->w || !s->cache_k || !s->cache_v || !s->mask_host) {
        bp_run_fail(err, cap, st, "out of memory creating a session.");
        goto out;
    }
    bp_run_split_table_init(&s->split, m);
    if ((st = bp_run_split_install(dev, &s->split, err, cap)) != BP_OK) goto out;
    s->split_installed = bp_device_type(dev) == BP_DEVICE_TYPE_META;
    if ((st = bp_backend_init(dev, NULL, &s->be)) != BP_OK) {
        bp_run_fail(err, cap, st, "starting a backend on '%s' failed: %s", bp_device_name(dev),
             bp_last_error());
        goto out;
    }
    if (opts && opts->n_threads > 0) {
        st = bp_backend_set_n_threads(s->be, opts->n_threads);
        if (st != BP_OK && st != BP_ERR_UNSUPPORTED) {
            bp_run_fail(err, cap, st, "setting %d threads on '%s' failed: %s", opts->n_threads,
                 bp_device_name(dev), bp_last_error());
            goto out;
        }
    }
    if ((st = make_tensors(s, err, cap)) != BP_OK) goto out;
    st = upload(s, opts, err, cap);
out:
    if (st != BP_OK) {
        bp_run_session_free(s);
        return st;
    }
    *out = s;
    return BP_OK;
}

/* ------------------------------------------------------------ the graph */

static struct bp_tensor *norm(struct bp_context *c, struct bp_tensor *x, struct bp_tensor *w, float eps)
{
    return bp_mul(c, bp_rms_norm(c, x, eps), w);
}

static struct bp_tensor *layer(const struct bp_run_session *s, const struct plan *p, int64_t l,
                               struct bp_tensor *x)
{
    struct bp_context *c = p->ctx;
    const struct bp_run_hparams *hp = &s->m->hp;
    const struct bp_run_layer *L = &s->m->layers[l];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, n = p->n;

    struct bp_tensor *h = norm(c, x, dev_weight(s, L->attn_norm), hp->rms_eps);
    struct bp_tensor *q, *k, *v;
    if (L->wqkv) {
        struct bp_tensor *qkv = bp_mul_mat(c, dev_weight(s, L->wqkv), h);
        const size_t es = sizeof(float), row = qkv ? qkv->nb[1] : 0;
        q = bp_view(c, qkv, 3, (int64_t[]){D, H, n}, (size_t[]){es, D * es, row}, 0);
        k = bp_view(c, qkv, 3, (int64_t[]){D, Hkv, n}, (size_t[]){es, D * es, row}, (size_t)(H * D) * es);
        v = bp_view(c, qkv, 3, (int64_t[]){D, Hkv, n}, (size_t[]){es, D * es, row},
                    (size_t)((H + Hkv) * D) * es);
    } else {
        q = bp_reshape(c, bp_mul_mat(c, dev_weight(s, L->wq), h), 3, (int64_t[]){D, H, n});
        k = bp_reshape(c, bp_mul_mat(c, dev_weight(s, L->wk), h), 3, (int64_t[]){D, Hkv, n});
        v = bp_reshape(c, bp_mul_mat(c, dev_weight(s, L->wv), h), 3, (int64_t[]){D, Hkv, n});
    }
    q = bp_rope(c, q, p->pos, (int)hp->n_rot, BP_ROPE_MODE_NORMAL, hp->rope_base, 1.0f);
    k = bp_rope(c, k, p->pos, (int)hp->n_rot, BP_ROPE_MODE_NORMAL, hp->rope_base, 1.0f);

    /* [D, H, n] -> [D, n, H]: rows per head, as SET_ROWS and attention want. */
    struct bp_tensor *kc = bp_set_rows(c, s->cache_k[l], bp_permute(c, k, 0, 2, 1, 3), p->pos);
    struct bp_tensor *vc = bp_set_rows(c, s->cache_v[l], bp_permute(c, v, 0, 2, 1, 3), p->pos);
    const struct bp_tensor *ck = s->cache_k[l];
    struct bp_tensor *kv_k = bp_view(c, kc, 3, (int64_t[]){D, p->n_kv, Hkv},
                                     (size_t[]){ck->nb[0], ck->nb[1], ck->nb[2]}, 0);
    struct bp_tensor *kv_v = bp_view(c, vc, 3, (int64_t[]){D, p->n_kv, Hkv},
                                     (size_t[]){ck->nb[0], ck->nb[1], ck->nb[2]}, 0);
    struct bp_tensor *a = bp_flash_attn_ext(c, bp_permute(c, q, 0, 2, 1, 3), kv_k, kv_v, p->mask,
                                            1.0f / sqrtf((float)D));
    a = bp_reshape(c, a, 2, (int64_t[]){D * H, n});
    x = bp_add(c, x, bp_mul_mat(c, dev_weight(s, L->wo), a));

    h = norm(c, x, dev_weight(s, L->ffn_norm), hp->rms_eps);
    struct bp_tensor *g = bp_silu(c, bp_mul_mat(c, dev_weight(s, L->gate), h));
    struct bp_tensor *u = bp_mul_mat(c, dev_weight(s, L->up), h);
    return bp_add(c, x, bp_mul_mat(c, dev_weight(s, L->down), bp_mul(c, g, u)));
}

static bp_status build(const struct bp_run_session *s, struct plan *p, bool all)
{
    const struct bp_run_model *m = s->m;
    const struct bp_run_hparams *hp = &m->hp;
    bp_status r = bp_context_new(64 * (size_t)hp->n_layer + 64, &p->ctx);
    if (r != BP_OK) return r;
    struct bp_context *c = p->ctx;
    p->ids = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "ids");
    p->pos = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "pos");
    p->mask = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, p->n_kv, p->n), "mask");
    struct bp_tensor *in[3] = { p->ids, p->pos, p->mask };
    for (int i = 0; i < 3; i++)
        if (in[i]) in[i]->flags |= BP_TENSOR_FLAG_INPUT;
    struct bp_tensor *x = bp_get_rows(c, dev_weight(s, m->tok_embd), p->ids);
    for (int64_t l = 0; l < hp->n_layer; l++) x = layer(s, p, l, x);
    if (!all && p->n > 1 && x)
        x = bp_view(c, x, 1, (int64_t[]){hp->n_embd}, NULL, (size_t)(p->n - 1) * x->nb[1]);
    x = norm(c, x, dev_weight(s, m->out_norm), hp->rms_eps);
    p->logits = bp_tensor_set_name(bp_mul_mat(c, output_weight(s), x), "logits");
    if (p->logits) p->logits->flags |= BP_TENSOR_FLAG_OUTPUT;
    return bp_context_status(c);
}

/* Build, allocate and order the graph of p (n and n_kv set). */
static bp_status plan_make(struct bp_run_session *s, struct plan *p, bool all, char *err, size_t cap)
{
    bp_status r = build(s, p, all);
    if (r != BP_OK)
        return bp_run_fail(err, cap, r, "building the decoder graph failed: %s", bp_last_error());
    if ((r = bp_context_alloc_tensors(p->ctx, bp_device_buffer_type(s->dev), NULL, &p->buf)) != BP_OK)
        return bp_run_fail(err, cap, r, "allocating the step's tensors on '%s' failed: %s",
                    bp_device_name(s->dev), bp_last_error());
    s->stats.buffers_allocated++;
    if ((r = bp_graph_new(bp_context_tensor_count(p->ctx) + 8, &p->g)) != BP_OK ||
        (r = bp_graph_build(p->g, p->logits)) != BP_OK)
        return bp_run_fail(err, cap, r, "building the decoder graph failed: %s", bp_last_error());
    s->stats.graphs_built++;
    return BP_OK;
}

/* The decode plan whose capacity covers n_kv positions, made on first use. */
static bp_status decode_plan(struct bp_run_session *s, int64_t n_kv, struct plan **out, char *err,
                             size_t cap)
{
    int i = 0;
    int64_t capacity = MIN_DECODE_CAPACITY;
    while (capacity < n_kv && capacity < s->n_ctx && i + 1 < N_DECODE_PLANS) {
        capacity *= 2;
        i++;
    }
    if (capacity > s->n_ctx) capacity = s->n_ctx;
    struct plan *p = &s->decode[i];
    if (!p->g) {
        plan_free(p);
        p->n = 1;
        p->n_kv = capacity;
        bp_status r = plan_make(s, p, true, err, cap);
        if (r != BP_OK) {
            plan_free(p);
            return r;
        }
    }
    *out = p;
    return BP_OK;
}

/* ids, positions n_past.., and a causal mask over p->n_kv positions (the
 * ones not yet written, beyond n_past + i, are -inf). mask is p->n * p->n_kv
 * floats of host scratch. */
static bp_status set_inputs(const struct bp_run_session *s, const struct plan *p,
                            const int32_t *tokens, int32_t *pos, float *mask)
{
    for (int64_t i = 0; i < p->n; i++) {
        pos[i] = (int32_t)(s->n_past + i);
        for (int64_t j = 0; j < p->n_kv; j++)
            mask[i * p->n_kv + j] = j <= s->n_past + i ? 0.0f : -INFINITY;
    }
    bp_status r = bp_tensor_set(p->ids, tokens, 0, (size_t)p->n * sizeof *tokens);
    if (r == BP_OK) r = bp_tensor_set(p->pos, pos, 0, (size_t)p->n * sizeof *pos);
    if (r == BP_OK) r = bp_tensor_set(p->mask, mask, 0, (size_t)(p->n * p->n_kv) * sizeof *mask);
    return r;
}

static bp_status run_plan(struct bp_run_session *s, struct plan *p, const int32_t *tokens,
                          int32_t *pos, float *mask, float *logits, char *err, size_t cap)
{
    bp_status r = set_inputs(s, p, tokens, pos, mask);
    if (r != BP_OK)
        return bp_run_fail(err, cap, r, "setting the step's inputs failed: %s", bp_last_error());
    if ((r = bp_backend_graph_compute(s->be, p->g)) != BP_OK ||
        (r = bp_backend_synchronize(s->be)) != BP_OK)
        return bp_run_fail(err, cap, r, "computing the decoder graph on '%s' failed: %s",
                    bp_device_name(s->dev), bp_last_error());
    if ((r = bp_tensor_get(p->logits, logits, 0, bp_nbytes(p->logits))) != BP_OK)
        return bp_run_fail(err, cap, r, "reading the logits failed: %s", bp_last_error());
    s->n_past += p->n;
    return BP_OK;
}

bp_status bp_run_session_eval(struct bp_run_session *s, const int32_t *tokens, int64_t n,
                              bool all_positions, float *logits, char *err, size_t cap)
{
    const struct bp_run_hparams *hp = &s->m->hp;
    if (n <= 0 || !tokens || !logits)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "eval needs at least one token.");
    if (s->n_past + n > s->n_ctx)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                    "the context holds %lld positions and %lld are used; %lld more do not fit "
                    "(ask for fewer tokens).", (long long)s->n_ctx, (long long)s->n_past,
                    (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                        "token %d is outside the vocabulary [0, %lld) of the model.", tokens[i],
                        (long long)hp->n_vocab);
    s->stats.evals++;
    if (n == 1) {
        struct plan *p;
        int32_t pos;
        bp_status r = decode_plan(s, s->n_past + 1, &p, err, cap);
        return r != BP_OK ? r : run_plan(s, p, tokens, &pos, s->mask_host, logits, err, cap);
    }
    struct plan p = { .n = n, .n_kv = s->n_past + n };
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    float *mask = malloc((size_t)(n * p.n_kv) * sizeof *mask);
    bp_status r = !pos || !mask ? bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the "
                                       "inputs of %lld tokens.", (long long)n)
                                : plan_make(s, &p, all_positions, err, cap);
    if (r == BP_OK) r = run_plan(s, &p, tokens, pos, mask, logits, err, cap);
    free(pos);
    free(mask);
    plan_free(&p);
    return r;
}

/* ------------------------------------------------------------ memory plan */

/* The plan uses the session's own make_tensors and build, so the placement
 * is stated once; only the allocation is replaced by bp_context_alloc_size. */
bp_status bp_run_plan_make(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_plan_options *o, struct bp_run_plan *out,
                           char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (bp_device_type(dev) == BP_DEVICE_TYPE_META)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the memory plan does not split a meta "
                           "device's share per sub-device yet; plan each sub-device on its own.");
    if (o && o->n_offload_layers)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the runner does not offload layers yet.");
    struct bp_run_session *s = calloc(1, sizeof *s);
    if (!s) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning.");
    s->m = m;
    s->dev = dev;
    s->n_ctx = o && o->n_ctx > 0 ? o->n_ctx : 512;
    if (s->n_ctx > m->hp.n_ctx_train) s->n_ctx = m->hp.n_ctx_train;
    int64_t n_prompt = o && o->n_prompt > 0 ? o->n_prompt : 1;
    if (n_prompt > s->n_ctx) n_prompt = s->n_ctx;
    s->w = calloc(m->n_weights, sizeof *s->w);
    s->cache_k = calloc((size_t)m->hp.n_layer, sizeof *s->cache_k);
    s->cache_v = calloc((size_t)m->hp.n_layer, sizeof *s->cache_v);
    bp_status st = !s->w || !s->cache_k || !s->cache_v
                       ? bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning.")
                       : make_tensors(s, err, cap);
    struct bp_run_plan_device *d = &out->d[0];
    struct bp_buffer_type *def = bp_device_buffer_type(dev);
    if (st == BP_OK) {
        for (size_t i = 0; i < s->n_wg; i++)
            d->weights += bp_context_alloc_size(s->wg[i].ctx, s->wg[i].buft, NULL);
        d->output_copy = s->out_copy ? bp_nbytes(s->out_copy) : 0;
        d->kv_cache = bp_context_alloc_size(s->cctx, def, NULL);
    }
    /* The step buffers decode_plan and eval would allocate: one per decode
     * capacity up to n_ctx, kept; one for the prefill, freed after it. */
    for (int64_t c = MIN_DECODE_CAPACITY, done = 0; st == BP_OK && !done; c *= 2) {
        struct plan p = { .n = 1, .n_kv = c < s->n_ctx ? c : s->n_ctx };
        done = c >= s->n_ctx;
        if ((st = build(s, &p, true)) == BP_OK) d->decode += bp_context_alloc_size(p.ctx, def, NULL);
        else bp_run_fail(err, cap, st, "planning the decode graph failed: %s", bp_last_error());
        plan_free(&p);
    }
    if (st == BP_OK && n_prompt > 1) {
        struct plan p = { .n = n_prompt, .n_kv = n_prompt };
        if ((st = build(s, &p, false)) == BP_OK) d->prefill = bp_context_alloc_size(p.ctx, def, NULL);
        else bp_run_fail(err, cap, st, "planning the prefill graph failed: %s", bp_last_error());
        plan_free(&p);
    }
    d->dev = dev;
    d->peak = d->weights + d->kv_cache + (d->decode > d->prefill ? d->decode : d->prefill);
    bp_device_memory(dev, &d->mem_free, &d->mem_total);
    out->n_devices = 1;
    out->n_ctx = s->n_ctx;
    out->n_prompt = n_prompt;
    bp_run_session_free(s);
    return st;
}

size_t bp_run_session_device_bytes(const struct bp_run_session *s)
{
    size_t n = s->cbuf ? bp_buffer_size(s->cbuf) : 0;
    for (size_t i = 0; i < s->n_wg; i++) n += s->wg[i].buf ? bp_buffer_size(s->wg[i].buf) : 0;
    for (int i = 0; i < N_DECODE_PLANS; i++) n += s->decode[i].buf ? bp_buffer_size(s->decode[i].buf) : 0;
    return n;
}
