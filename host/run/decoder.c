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
 * own, kept for the next prefill of the same shape; with
 * bp_run_session_options.n_prefill it is made, and its memory touched, at
 * load time, so the first prompt of a process runs as fast as later ones
 * (it would otherwise pay the page faults of its plan).
 *
 * Several sequences (bp_run_session_options.n_seq, the batching engine of
 * batch.h): each owns a region of n_ctx rows of every cache, and a plan's
 * rows come in segments, one per sequence. A batched decode step is one
 * graph of M rows (one token of each of M sequences): the projections, FFN
 * and output read each weight once for all rows; positions, cache rows and
 * masks are inputs per row; each segment attends over a view of its own
 * region at its own capacity, built exactly as a one-sequence graph's
 * attention, and the segments' outputs are gathered by SET_ROWS into the
 * layer's attn_rows before the output projection. A sequence's rows thus
 * compute what they compute alone, whatever shares the step (with float
 * MUL_MAT weights a step of one sequence runs as two identical rows, so no
 * such kernel sees one row). These plans
 * (steps keyed by their sequences and capacities, prompt chunks by sequence,
 * length and capacity) are kept a few of each kind, least recently used
 * replaced.
 *
 * Plans are computed through the scheduler (bp_sched) over the device and,
 * unless it is a CPU, the cpu as fallback: the scheduler places a plan's
 * tensors (a buffer per backend) and runs what the device declines on the
 * cpu; `direct` sessions (the benchmark's reference) skip it. With one
 * backend the plan's tensors are placed before the scheduler sees them,
 * sharing memory along the graph (bp_context_alloc_graph).
 */
#include "decoder.h"
#include "run_error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "split.h"
#include "arch.h"
#include "llama_schema.h"

/* Capacities 32 << i: 32 << 25 is 2^30, the most positions a model may declare. */
#define N_DECODE_PLANS 26
#define MIN_DECODE_CAPACITY 32
/* Multi-sequence plans kept (bp_run_session_eval_seqs): decode steps keyed
 * by their sequences and capacities, prompt chunks by sequence, length
 * and capacity; the least recently used is replaced. */
#define N_STEP_PLANS 8
#define N_CHUNK_PLANS 3

/* A plan's rows come in segments, one per sequence: n consecutive tokens
 * of sequence seq attending over the first n_kv positions of its cache
 * region. A session's own graphs have one segment (sequence 0); a batched
 * decode step has one segment of one token per running sequence. */
struct plan_seg {
    int64_t seq, n, n_kv; /* no padding: plans are matched with memcmp */
};

struct plan {
    struct bp_context *ctx;
    struct bp_buffer *buf;
    struct bp_graph *g;
    struct bp_tensor *ids, *pos, *mask, *logits;
    struct bp_tensor *kv_rows;  /* cache row of each token (seq * n_ctx + pos); pos when one sequence */
    struct bp_tensor *out_rows; /* 0..n-1: where each segment's attention lands; NULL with one segment */
    struct bp_tensor *mask_swa; /* sliding-window layers' mask; NULL: none */
    struct bp_tensor *attn_temp; /* [1, 1, n] Q scale per token (Mistral 3); NULL: none */
    int64_t n, n_kv;            /* tokens evaluated, cache positions attended (segment 0's) */
    int n_seg;
    struct plan_seg *seg;       /* n_seg segments, rows in order (&one or allocated) */
    struct plan_seg one;        /* a plan made with n and n_kv alone: sequence 0 */
    bool all;                   /* logits at every row */
    uint64_t used;              /* the session's eval count when last used (least recently used goes) */
};

/* Weights sharing one buffer type: MUL_MAT weights go where the device
 * prefers them (bp_device_weight_buffer_type, e.g. the CPU's x8 layout),
 * everything else to the default. A tied output is the embedding, which
 * GET_ROWS reads in the default buffer type; when the device prefers another
 * one, the logits' MUL_MAT reads a copy there (out_copy): its bytes once
 * more in memory, for the projection that reads a quarter of a small
 * model's bytes per token (1.4x slower per byte in the CPU's plain layout).
 * Distinct buffer types come from distinct weight types or the default, so
 * BP_TYPE_COUNT + 1 groups per device (dev and the cpu fallback) always do. */
#define MAX_WEIGHT_GROUPS (2 * (BP_TYPE_COUNT + 1))
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
    /* The scheduler over be and, when dev is not a CPU, fb_be on the cpu
     * (NULL: direct). home_w and home_cache say where each weight and each
     * layer's caches live: dev, or fb for layers past --offload-layers and
     * for tensors a node dev declines reads or writes. */
    struct bp_sched *sched;
    struct bp_device *fb;
    struct bp_backend *fb_be;
    struct bp_device **home_w;
    struct bp_device **home_cache;
    struct weight_group wg[MAX_WEIGHT_GROUPS];
    size_t n_wg;
    struct bp_context *cctx[2]; /* KV caches on dev, on fb */
    struct bp_buffer *cbuf[2];
    struct bp_tensor **w;       /* device tensor per m->weights[i] */
    /* A tied output's copy in the device's weight buffer type (NULL when the
     * output is not tied or the device has no weight buffer type of its own):
     * the embedding must stay readable by GET_ROWS, while the projection runs
     * faster in the device's layout (the CPU's x8), for its bytes once more. */
    struct bp_tensor *out_copy;
    struct bp_tensor **cache_k, **cache_v;
    /* n_seq > 1: per layer [D * H, n_seq], where a batched step's
     * attention rows are gathered before the output projection. */
    struct bp_tensor **attn_rows;
    int n_seq;                  /* sequences, each with n_ctx cache positions */
    int64_t n_ctx, n_past;
    struct plan decode[N_DECODE_PLANS];
    struct plan *last_decode;
    struct plan prefill;        /* the last prefill's plan, for one of the same shape */
    struct plan step[N_STEP_PLANS], chunk[N_CHUNK_PLANS];
    uint64_t n_eval_seqs;       /* bp_run_session_eval_seqs calls (the plans' clock) */
    bool prefill_all;           /* it computes logits at every position */
    float *mask_host;           /* n_ctx * n_seq floats: a decode step's mask rows */
    int32_t *pos_host;          /* 3 * n_seq: a decode step's positions, cache rows, output rows */
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
struct bp_device *bp_run_session_device(const struct bp_run_session *s) { return s->dev; }
struct bp_backend *bp_run_session_backend(const struct bp_run_session *s) { return s->be; }

void bp_run_session_get_stats(const struct bp_run_session *s, struct bp_run_session_stats *out)
{
    *out = s->stats;
    if (!s->sched) return;
    struct bp_sched_stats st = { .size = sizeof st };
    bp_sched_get_stats(s->sched, &st);
    out->buffers_allocated += st.buffers_allocated;
    out->sched_plans = st.plans_made;
    out->copies = st.copies;
}

bp_status bp_run_session_placement(const struct bp_run_session *s, struct bp_sched_summary *out)
{
    if (!s->sched || !s->last_decode || !s->last_decode->g)
        return BP_ERR_NOT_FOUND;
    return bp_sched_graph_summary(s->sched, s->last_decode->g, out);
}

size_t bp_run_session_device_bytes(const struct bp_run_session *s, const struct bp_device *dev)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_wg; i++)
        if (s->wg[i].buf && s->wg[i].buft->device == dev) n += bp_buffer_size(s->wg[i].buf);
    for (int i = 0; i < 2; i++)
        if (s->cbuf[i] && s->cbuf[i]->buft->device == dev) n += bp_buffer_size(s->cbuf[i]);
    return n;
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

static void plan_free(struct bp_run_session *s, struct plan *p)
{
    if (s->sched && p->g) bp_sched_reset_graph(s->sched, p->g);
    if (p->seg != &p->one) free(p->seg);
    bp_graph_free(p->g);
    bp_buffer_free(p->buf);
    bp_context_free(p->ctx);
    memset(p, 0, sizeof *p);
}

void bp_run_session_free(struct bp_run_session *s)
{
    if (!s) return;
    for (int i = 0; i < N_DECODE_PLANS; i++) plan_free(s, &s->decode[i]);
    plan_free(s, &s->prefill);
    for (int i = 0; i < N_STEP_PLANS; i++) plan_free(s, &s->step[i]);
    for (int i = 0; i < N_CHUNK_PLANS; i++) plan_free(s, &s->chunk[i]);
    bp_sched_free(s->sched);
    /* The device outlives the session: it must not keep our table. */
    if (s->split_installed) bp_meta_set_split_fn(s->dev, NULL, NULL);
    if (s->be) bp_backend_free(s->be);
    if (s->fb_be) bp_backend_free(s->fb_be);
    for (size_t i = 0; i < s->n_wg; i++) {
        bp_buffer_free(s->wg[i].buf);
        bp_context_free(s->wg[i].ctx);
    }
    for (int i = 0; i < 2; i++) {
        bp_buffer_free(s->cbuf[i]);
        bp_context_free(s->cctx[i]);
    }
    free(s->home_w);
    free(s->home_cache);
    free(s->w);
    free(s->cache_k);
    free(s->cache_v);
    free(s->attn_rows);
    free(s->mask_host);
    free(s->pos_host);
    free(s);
}

/* True for a weight that only MUL_MAT reads (as src[0]): its schema row
 * says so. A tied output is the embedding table, which GET_ROWS reads too. */
static bool mul_mat_only(const struct bp_run_model *m, const struct bp_run_weight *w)
{
    return w != m->tok_embd && w->row && w->row->mul_mat_only;
}

/* The name of the input of row-parallel weight w in layer l
 * ("blk.N.<input>"), which the split table cuts like w's rows. */
static const char *input_name(const struct bp_run_weight *w, int64_t l, char *buf, size_t cap)
{
    snprintf(buf, cap, "blk.%d.%s", (int)l, w && w->row && w->row->input ? w->row->input : "in");
    return buf;
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

/* The cache context of a device: 0 for dev, 1 for the fallback. */
static int cache_slot(const struct bp_run_session *s, int64_t l)
{
    return s->home_cache[l] == s->dev ? 0 : 1;
}

static bp_status make_tensors(struct bp_run_session *s, char *err, size_t cap)
{
    const struct bp_run_model *m = s->m;
    const struct bp_run_hparams *hp = &m->hp;
    bp_status st = BP_OK;
    for (int i = 0; i < 2 && st == BP_OK; i++)
        st = bp_context_new(3 * (size_t)hp->n_layer + 8, &s->cctx[i]);
    if (st != BP_OK) return bp_run_fail(err, cap, st, "creating the cache context failed: %s", bp_last_error());
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        struct bp_device *home = s->home_w[i];
        struct bp_buffer_type *buft = mul_mat_only(m, w) ? bp_device_weight_buffer_type(home, w->type)
                                                         : bp_device_buffer_type(home);
        struct bp_context *ctx = group_ctx(s, buft);
        if (!ctx)
            return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "creating the weight context failed: %s",
                        bp_last_error());
        s->w[i] = bp_tensor_set_name(bp_tensor_new(ctx, w->type, w->n_dims, w->ne), w->name);
        if (!s->w[i]) break;
        s->w[i]->flags |= BP_TENSOR_FLAG_PARAM;
    }
    const struct bp_run_weight *out = m->output;
    struct bp_device *out_home = out ? s->home_w[out - m->weights] : s->dev;
    struct bp_buffer_type *out_buft =
        m->tied_output && out ? bp_device_weight_buffer_type(out_home, out->type) : NULL;
    if (out_buft && out_buft != bp_device_buffer_type(out_home)) {
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
        struct bp_context *cc = s->cctx[cache_slot(s, l)];
        snprintf(nm, sizeof nm, "blk.%d.cache_k", (int)l);
        s->cache_k[l] = bp_tensor_set_name(
            bp_tensor_new_3d(cc, BP_TYPE_F32, hp->head_dim, s->n_ctx * s->n_seq, hp->n_head_kv), nm);
        snprintf(nm, sizeof nm, "blk.%d.cache_v", (int)l);
        s->cache_v[l] = bp_tensor_set_name(
            bp_tensor_new_3d(cc, BP_TYPE_F32, hp->head_dim, s->n_ctx * s->n_seq, hp->n_head_kv), nm);
        if (s->n_seq > 1) {
            snprintf(nm, sizeof nm, "blk.%d.attn_rows", (int)l);
            s->attn_rows[l] = bp_tensor_set_name(
                bp_tensor_new_2d(cc, BP_TYPE_F32, hp->head_dim * hp->n_head, s->n_seq), nm);
        }
    }
    for (int i = 0; i < 2 && st == BP_OK; i++) st = bp_context_status(s->cctx[i]);
    if (st != BP_OK) return bp_run_fail(err, cap, st, "creating the model's tensors failed: %s", bp_last_error());
    return BP_OK;
}

/* Weights in one device buffer per group, their bytes straight from the
 * model's memory (for a GGUF file, its mapping); the caches in one buffer
 * per device, zeroed. */
static bp_status upload(struct bp_run_session *s, const struct bp_run_session_options *o, char *err,
                        size_t cap)
{
    const struct bp_run_model *m = s->m;
    struct bp_device *cdev[2] = { s->dev, s->fb ? s->fb : s->dev };
    bp_status st = BP_OK;
    for (int i = 0; i < 2 && st == BP_OK; i++)
        st = bp_context_alloc_tensors(s->cctx[i], bp_device_buffer_type(cdev[i]), NULL, &s->cbuf[i]);
    for (size_t i = 0; i < s->n_wg && st == BP_OK; i++)
        st = bp_context_alloc_tensors(s->wg[i].ctx, s->wg[i].buft, NULL, &s->wg[i].buf);
    if (st != BP_OK) {
        char need[32];
        size_t bytes = 0;
        for (int i = 0; i < 2; i++) bytes += bp_context_alloc_size(s->cctx[i], bp_device_buffer_type(cdev[i]), NULL);
        for (size_t i = 0; i < s->n_wg; i++)
            bytes += bp_context_alloc_size(s->wg[i].ctx, s->wg[i].buft, NULL);
        return bp_run_fail(err, cap, st, "allocating %s for the weights and KV cache on '%s' failed: %s",
                    bp_format_bytes(bytes, need, sizeof need), bp_device_name(s->dev),
                    bp_last_error());
    }
    for (int i = 0; i < 2; i++) {
        if (!s->cbuf[i]) continue;
        s->stats.buffers_allocated++;
        if ((st = bp_buffer_clear(s->cbuf[i], 0)) != BP_OK)
            return bp_run_fail(err, cap, st, "clearing the KV cache on '%s' failed: %s",
                               bp_device_name(cdev[i]), bp_last_error());
    }
    s->stats.buffers_allocated += s->n_wg;
    /* Each weight's file bytes are read once (a tied output's copy from the
     * same read) and then let go, so the mapping's pages do not stay
     * resident beside the device's copies: the peak is the copies, not the
     * copies plus the file. */
    size_t total = bp_run_model_weight_bytes(m) + (s->out_copy ? m->output->size : 0), done = 0;
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        st = bp_tensor_set(s->w[i], w->data, 0, w->size);
        if (st != BP_OK)
            return bp_run_fail(err, cap, st, "uploading weight '%s' to '%s' failed: %s", w->name,
                        bp_device_name(s->home_w[i]), bp_last_error());
        done += w->size;
        if (s->out_copy && w == m->output) {
            st = bp_tensor_set(s->out_copy, w->data, 0, w->size);
            if (st != BP_OK)
                return bp_run_fail(err, cap, st, "uploading the output projection's copy of '%s' to '%s' "
                            "failed: %s", w->name, bp_device_name(s->dev), bp_last_error());
            done += w->size;
        }
        bp_gguf_release(m->gguf, w->data, w->size);
        if (o && o->progress) o->progress(o->progress_user, done, total);
    }
    return BP_OK;
}

static bp_status build(const struct bp_run_session *s, struct plan *p, bool all);

/* The layer a weight belongs to ("blk.N."), or -1 for the embedding,
 * output norm and output. */
static int64_t weight_layer(const struct bp_run_weight *w)
{
    int l = -1, n = 0;
    return sscanf(w->name, "blk.%d.%n", &l, &n) == 1 && n > 0 ? l : -1;
}

/* True for a stacked expert weight (ffn_{gate,up,down}_exps): what
 * --cpu-moe keeps on the cpu (not the router, which is small). */
static bool is_expert(const struct bp_run_weight *w)
{
    return w->row && w->row->moe == BP_LLAMA_MOE_ONLY && w->row->n_dims == 3;
}

/* How many leading layers' experts --n-cpu-moe n (< 0: all) puts on the cpu. */
static int64_t cpu_moe_layers_of(const struct bp_run_model *m, int64_t n)
{
    if (m->hp.n_expert <= 0 || n == 0) return 0;
    return n < 0 || n > m->hp.n_layer ? m->hp.n_layer : n;
}

/* Where each weight and cache lives. With a fallback: layers from
 * offload_layers on, and (then) the embedding, output norm and output, go
 * to it; so does a tensor that a node dev declines reads or writes — found
 * by building the decode graph once over unallocated stand-ins — because
 * the node then runs on the fallback, which may not reach dev's memory (a
 * meta device's cache written by SET_ROWS on the cpu). */
static bp_status choose_homes(struct bp_run_session *s, int64_t offload_layers, int64_t cpu_moe_layers,
                              char *err, size_t cap)
{
    const struct bp_run_model *m = s->m;
    const int64_t L = m->hp.n_layer;
    const bool partial = s->fb && offload_layers > 0 && offload_layers < L;
    const int64_t moe_on_fb = s->fb ? cpu_moe_layers_of(m, cpu_moe_layers) : 0;
    for (size_t i = 0; i < m->n_weights; i++) {
        int64_t l = weight_layer(&m->weights[i]);
        s->home_w[i] = (partial && (l < 0 || l >= offload_layers)) ||
                               (is_expert(&m->weights[i]) && l >= 0 && l < moe_on_fb)
                           ? s->fb : s->dev;
    }
    for (int64_t l = 0; l < L; l++) s->home_cache[l] = partial && l >= offload_layers ? s->fb : s->dev;
    if (!s->fb) return BP_OK;

    struct bp_context *scratch = NULL;
    /* With several sequences, a step of two: its gather is placed too. */
    const int64_t cap0 = s->n_ctx < MIN_DECODE_CAPACITY ? s->n_ctx : MIN_DECODE_CAPACITY;
    struct plan_seg segs[2] = { { 0, 1, cap0 }, { 1, 1, cap0 } };
    struct plan p = { .n = s->n_seq > 1 ? 2 : 1, .n_kv = cap0, .n_seg = s->n_seq > 1 ? 2 : 1, .seg = segs,
                      .all = true };
    bp_status st = bp_context_new(m->n_weights + 3 * (size_t)L + 8, &scratch);
    for (size_t i = 0; i < m->n_weights && st == BP_OK; i++)
        s->w[i] = bp_tensor_new(scratch, m->weights[i].type, m->weights[i].n_dims, m->weights[i].ne);
    for (int64_t l = 0; l < L && st == BP_OK; l++) {
        const int64_t rows = s->n_ctx * s->n_seq;
        s->cache_k[l] = bp_tensor_new_3d(scratch, BP_TYPE_F32, m->hp.head_dim, rows, m->hp.n_head_kv);
        s->cache_v[l] = bp_tensor_new_3d(scratch, BP_TYPE_F32, m->hp.head_dim, rows, m->hp.n_head_kv);
        if (s->n_seq > 1)
            s->attn_rows[l] = bp_tensor_new_2d(scratch, BP_TYPE_F32, m->hp.head_dim * m->hp.n_head, s->n_seq);
    }
    if (st == BP_OK) st = bp_context_status(scratch);
    if (st == BP_OK) st = build(s, &p, true);
    for (int32_t i = 0; st == BP_OK && i < p.g->n_nodes; i++) {
        const struct bp_tensor *node = p.g->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op) || bp_device_supports_op(s->dev, node)) continue;
        for (int j = 0; j <= BP_MAX_SRC; j++) {
            const struct bp_tensor *t = j < BP_MAX_SRC ? node->src[j] : node;
            while (t && t->view_src) t = t->view_src;
            if (!t) continue;
            for (size_t k = 0; k < m->n_weights; k++)
                if (s->w[k] == t) s->home_w[k] = s->fb;
            for (int64_t l = 0; l < L; l++)
                if (s->cache_k[l] == t || s->cache_v[l] == t || (s->attn_rows[l] && s->attn_rows[l] == t))
                    s->home_cache[l] = s->fb;
        }
    }
    bp_graph_free(p.g);
    bp_context_free(p.ctx);
    bp_context_free(scratch);
    memset(s->w, 0, m->n_weights * sizeof *s->w);
    memset(s->cache_k, 0, (size_t)L * sizeof *s->cache_k);
    memset(s->cache_v, 0, (size_t)L * sizeof *s->cache_v);
    memset(s->attn_rows, 0, (size_t)L * sizeof *s->attn_rows);
    if (st != BP_OK)
        return bp_run_fail(err, cap, st, "building the decoder graph to place the weights failed: %s",
                           bp_last_error());
    return BP_OK;
}

/* The fallback device of a session on dev: the cpu, unless dev is a CPU
 * itself or the session is direct. */
static struct bp_device *fallback_of(struct bp_device *dev, bool direct)
{
    return direct || bp_device_type(dev) == BP_DEVICE_TYPE_CPU ? NULL : bp_device_by_name("cpu");
}

/* The backends and the scheduler: dev first, the cpu as fallback unless
 * dev is a CPU itself. */
static bp_status start_backends(struct bp_run_session *s, const struct bp_run_session_options *o, char *err,
                                size_t cap)
{
    bp_status st = bp_backend_init(s->dev, NULL, &s->be);
    if (st != BP_OK)
        return bp_run_fail(err, cap, st, "starting a backend on '%s' failed: %s", bp_device_name(s->dev),
                           bp_last_error());
    if (o && o->direct) return BP_OK;
    struct bp_device *cpu = fallback_of(s->dev, false);
    if (cpu) {
        if ((st = bp_backend_init(cpu, NULL, &s->fb_be)) != BP_OK)
            return bp_run_fail(err, cap, st, "starting the fallback backend on 'cpu' failed: %s", bp_last_error());
        s->fb = cpu;
    }
    struct bp_backend *list[2] = { s->be, s->fb_be };
    struct bp_sched_options so = { .size = sizeof so, .strict = o && o->strict };
    if ((st = bp_sched_new(list, s->fb_be ? 2 : 1, &so, &s->sched)) != BP_OK)
        return bp_run_fail(err, cap, st, "creating the scheduler failed: %s", bp_last_error());
    return BP_OK;
}

static bp_status set_threads(struct bp_run_session *s, int n, char *err, size_t cap)
{
    struct bp_backend *bs[2] = { s->be, s->fb_be };
    for (int i = 0; i < 2 && n > 0; i++) {
        if (!bs[i]) continue;
        bp_status st = bp_backend_set_n_threads(bs[i], n);
        if (st != BP_OK && st != BP_ERR_UNSUPPORTED)
            return bp_run_fail(err, cap, st, "setting %d threads on '%s' failed: %s", n,
                               bp_device_name(bs[i]->device), bp_last_error());
    }
    return BP_OK;
}

static bp_status prefill_plan(struct bp_run_session *s, int64_t n, int64_t n_past, bool all,
                              struct plan **out, char *err, size_t cap);

/* m, dev, n_ctx (0: 512, capped at the model's) and the per-weight and
 * per-layer arrays of a session or of a memory plan; false when out of memory. */
static bool session_arrays(struct bp_run_session *s, const struct bp_run_model *m, struct bp_device *dev,
                           int64_t n_ctx, int n_seq)
{
    s->m = m;
    s->dev = dev;
    s->n_ctx = n_ctx > 0 ? n_ctx : 512;
    if (s->n_ctx > m->hp.n_ctx_train) s->n_ctx = m->hp.n_ctx_train;
    s->n_seq = n_seq > 1 ? n_seq : 1;
    s->w = calloc(m->n_weights, sizeof *s->w);
    s->home_w = calloc(m->n_weights, sizeof *s->home_w);
    s->cache_k = calloc((size_t)m->hp.n_layer, sizeof *s->cache_k);
    s->cache_v = calloc((size_t)m->hp.n_layer, sizeof *s->cache_v);
    s->attn_rows = calloc((size_t)m->hp.n_layer, sizeof *s->attn_rows);
    s->home_cache = calloc((size_t)m->hp.n_layer, sizeof *s->home_cache);
    /* a step's mask rows: at most n_ctx positions per sequence */
    s->mask_host = malloc((size_t)s->n_ctx * (size_t)s->n_seq * sizeof *s->mask_host);
    s->pos_host = malloc(3 * (size_t)s->n_seq * sizeof *s->pos_host);
    return s->w && s->home_w && s->cache_k && s->cache_v && s->attn_rows && s->home_cache && s->mask_host &&
           s->pos_host;
}

bp_status bp_run_session_new(const struct bp_run_model *m, struct bp_device *dev,
                             const struct bp_run_session_options *opts,
                             struct bp_run_session **out, char *err, size_t cap)
{
    *out = NULL;
    struct bp_run_session *s = calloc(1, sizeof *s);
    if (!s) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory creating a session.");
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    if (opts && (opts->n_seq < 0 || opts->n_seq > BP_RUN_MAX_SEQ))
    {
        bp_run_session_free(s);
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "a session holds 1 to %d sequences, not %d.",
                           BP_RUN_MAX_SEQ, opts->n_seq);
    }
    if (!session_arrays(s, m, dev, opts ? opts->n_ctx : 0, opts ? opts->n_seq : 1)) {
        bp_run_fail(err, cap, st, "out of memory creating a session.");
        goto out;
    }
    if (s->n_ctx * s->n_seq > INT32_MAX) { /* cache rows are I32 ids */
        st = bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "%d sequences of %lld positions are more cache "
                         "rows than a graph addresses (2^31); ask for fewer.", s->n_seq, (long long)s->n_ctx);
        goto out;
    }
    bp_run_split_table_init(&s->split, m);
    if ((st = bp_run_split_install(dev, &s->split, err, cap)) != BP_OK) goto out;
    s->split_installed = bp_device_type(dev) == BP_DEVICE_TYPE_META;
    if ((st = start_backends(s, opts, err, cap)) != BP_OK) goto out;
    if ((st = set_threads(s, opts ? opts->n_threads : 0, err, cap)) != BP_OK) goto out;
    if ((st = choose_homes(s, opts ? opts->offload_layers : 0, opts ? opts->cpu_moe_layers : 0, err, cap)) !=
        BP_OK)
        goto out;
    if ((st = make_tensors(s, err, cap)) != BP_OK) goto out;
    if ((st = upload(s, opts, err, cap)) != BP_OK) goto out;
    if (opts && opts->n_prefill > 1 && opts->n_prefill <= s->n_ctx) {
        struct plan *p;
        if ((st = prefill_plan(s, opts->n_prefill, 0, opts->prefill_all, &p, err, cap)) == BP_OK && p->buf &&
            (st = bp_buffer_clear(p->buf, 0)) != BP_OK)
            bp_run_fail(err, cap, st, "touching the prefill's memory on '%s' failed: %s",
                        bp_device_name(dev), bp_last_error());
    }
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

/* Puts the MUL_MATs of one activation (a layer's Q, K and V; gate and up)
 * next to each other in p's graph, before any node that consumes one of
 * them. Otherwise the walk from the logits reaches K only after Q's RoPE,
 * and the graph allocator hands K's output the bytes of Q's, which keeps
 * the CPU backend from computing them in one step (plugins/cpu/plan.h:
 * at two threads a decode step then has 154 MUL_MAT steps instead of 89,
 * each ending with one thread waiting for the other). ggml's llama graphs
 * expand Q, K and V the same way. Only the order is at stake: a failure
 * here (an op constructor failed, the graph is full) recurs when the
 * logits are expanded, which reports it. */
static void expand_together(const struct plan *p, struct bp_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i]) (void)bp_graph_build(p->g, t[i]);
}

/* x + b when the model has bias b (NULL: x). */
static struct bp_tensor *bias(const struct bp_run_session *s, struct bp_context *c, struct bp_tensor *x,
                              const struct bp_run_weight *b)
{
    return b ? bp_add(c, x, dev_weight(s, b)) : x;
}

/* The RoPE factors layer l reads: Llama 3.x's rope_freqs, or longrope's
 * long factors when the session's context exceeds the model's original one
 * (llama.cpp picks by the context asked for, not by position), else the
 * short ones. NULL: none. */
static const struct bp_run_weight *rope_factors(const struct bp_run_session *s)
{
    const struct bp_run_model *m = s->m;
    if (m->rope_freqs) return m->rope_freqs;
    if (!m->rope_long) return NULL;
    const int64_t orig = m->hp.n_ctx_orig ? m->hp.n_ctx_orig : m->hp.n_ctx_train;
    return s->n_ctx > orig ? m->rope_long : m->rope_short;
}

/* RoPE of x ([D, heads, n]) in layer l, with llama.cpp's parameters
 * (src/llama-context.cpp): freq_scale 1/factor unless the type is none;
 * YaRN mixes with ext_factor 1 over beta 32..1; a sliding-window layer may
 * have its own base and no scaling. Plain rotations use ROPE, so a device
 * without ROPE_EXT still runs the models that need no more. */
static struct bp_tensor *rope(const struct bp_run_session *s, const struct plan *p, int64_t l,
                              struct bp_tensor *x)
{
    const struct bp_run_hparams *hp = &s->m->hp;
    const struct bp_arch *a = hp->arch ? hp->arch : &bp_arch_llama;
    const bool swa = bp_arch_layer_swa(hp, l);
    const float factor = hp->rope_factor != 0.0f ? hp->rope_factor : hp->rope_scale_linear;
    struct bp_rope_ext_params rp = {
        .n_dims = (int)hp->n_rot, .mode = a->rope_mode,
        .freq_base = swa && hp->rope_base_swa > 0.0f ? hp->rope_base_swa : hp->rope_base,
        .freq_scale = factor > 0.0f && hp->rope_scaling != BP_RUN_ROPE_NONE ? 1.0f / factor : 1.0f,
        .n_ctx_orig = (int)(hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train),
        .ext_factor = hp->rope_scaling == BP_RUN_ROPE_YARN ? 1.0f : 0.0f,
        .attn_factor = hp->rope_attn_factor > 0.0f ? hp->rope_attn_factor : 1.0f,
        .beta_fast = hp->yarn_beta_fast > 0.0f ? hp->yarn_beta_fast : 32.0f,
        .beta_slow = hp->yarn_beta_slow > 0.0f ? hp->yarn_beta_slow : 1.0f,
    };
    if (rp.ext_factor != 0.0f && hp->yarn_log_mul != 0.0f && factor > 1.0f)
        /* llama.cpp's yarn_attn_factor: mscale(f, 1) / mscale(f, log_mul), the
         * first of which ROPE_EXT's own (1 + 0.1 ln f) stands for */
        rp.attn_factor /= 0.1f * hp->yarn_log_mul * logf(factor) + 1.0f;
    if (swa && (a->flags & BP_ARCH_SWA_NO_SCALING)) {
        rp.freq_scale = 1.0f;
        rp.ext_factor = 0.0f;
    }
    const struct bp_run_weight *ff = rope_factors(s);
    if (!ff && rp.ext_factor == 0.0f && rp.attn_factor == 1.0f)
        return bp_rope(p->ctx, x, p->pos, rp.n_dims, rp.mode, rp.freq_base, rp.freq_scale);
    return bp_rope_ext(p->ctx, x, p->pos, dev_weight(s, ff), &rp);
}

/* Attention of segment i's queries q ([D, H, n_i], roped) over the first
 * n_kv positions of its sequence's region of the caches kc, vc (the
 * layer's caches after this step's SET_ROWS): [D, H, n_i]. Its mask rows
 * start moff floats into the step's mask. Built the same for every
 * segment of every plan, so a sequence's attention does not depend on
 * which others share the step. */
static struct bp_tensor *attend(const struct bp_run_session *s, const struct plan *p, int64_t l, int i,
                                int64_t moff, struct bp_tensor *q, struct bp_tensor *kc, struct bp_tensor *vc)
{
    struct bp_context *c = p->ctx;
    const struct bp_run_hparams *hp = &s->m->hp;
    const int64_t D = hp->head_dim, Hkv = hp->n_head_kv;
    const struct plan_seg *sg = &p->seg[i];
    const struct bp_tensor *ck = s->cache_k[l];
    const size_t off = (size_t)sg->seq * (size_t)s->n_ctx * ck->nb[1];
    struct bp_tensor *kv_k = bp_view(c, kc, 3, (int64_t[]){D, sg->n_kv, Hkv},
                                     (size_t[]){ck->nb[0], ck->nb[1], ck->nb[2]}, off);
    struct bp_tensor *kv_v = bp_view(c, vc, 3, (int64_t[]){D, sg->n_kv, Hkv},
                                     (size_t[]){ck->nb[0], ck->nb[1], ck->nb[2]}, off);
    struct bp_tensor *mask = bp_arch_layer_swa(hp, l) ? p->mask_swa : p->mask;
    if (p->n_seg > 1 && mask)
        mask = bp_view(c, mask, 2, (int64_t[]){sg->n_kv, sg->n},
                       (size_t[]){sizeof(float), (size_t)sg->n_kv * sizeof(float)}, (size_t)moff * sizeof(float));
    const float scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)D);
    struct bp_tensor *qh = bp_permute(c, q, 0, 2, 1, 3);
    return hp->attn_softcap > 0.0f ? bp_flash_attn_softcap(c, qh, kv_k, kv_v, mask, scale, hp->attn_softcap)
                                   : bp_flash_attn_ext(c, qh, kv_k, kv_v, mask, scale);
}

/* The mixture-of-experts FFN of layer l on h [n_embd, n], as llama.cpp's
 * build_moe_ffn with softmax gating: p = softmax(W_gate_inp h) over the
 * experts; the k = expert_used_count largest (TOP_K, llama.cpp's
 * descending argsort); their probabilities renormalised, w = p_sel /
 * max(sum p_sel, 2^-14) (Mixtral, Qwen3-MoE), or w = p_sel as they are
 * (BP_ARCH_MOE_UNNORMED: Qwen2-MoE); each chosen expert's SwiGLU through
 * MUL_MAT_ID, scaled by its w, and the k summed. */
static struct bp_tensor *moe_ffn(const struct bp_run_session *s, const struct plan *p, int64_t l,
                                 struct bp_tensor *h)
{
    struct bp_context *c = p->ctx;
    const struct bp_run_hparams *hp = &s->m->hp;
    const struct bp_arch *arch = hp->arch ? hp->arch : &bp_arch_llama;
    const struct bp_run_layer *L = &s->m->layers[l];
    const int64_t n = p->n, E = hp->n_expert, k = hp->n_expert_used, D = hp->n_embd;
    char nm[BP_MAX_NAME];
    struct bp_tensor *logits = bp_mul_mat(c, dev_weight(s, L->gate_inp), h);      /* [E, n] */
    struct bp_tensor *probs = bp_soft_max(c, logits, NULL, 1.0f);
    snprintf(nm, sizeof nm, "blk.%d.ffn_moe_topk", (int)l);
    struct bp_tensor *ids = bp_tensor_set_name(bp_top_k(c, probs, (int)k), nm);    /* [k, n] */
    struct bp_tensor *w = bp_get_rows(c, bp_reshape(c, probs, 3, (int64_t[]){1, E, n}), ids); /* [1, k, n] */
    if (!(arch->flags & BP_ARCH_MOE_UNNORMED)) {
        w = bp_reshape(c, w, 2, (int64_t[]){k, n});
        struct bp_tensor *sum = bp_clamp(c, bp_sum_rows(c, w), 6.103515625e-5f, INFINITY);
        w = bp_reshape(c, bp_div(c, w, sum), 3, (int64_t[]){1, k, n});
    }
    struct bp_tensor *x3 = bp_reshape(c, h, 3, (int64_t[]){D, 1, n});
    struct bp_tensor *g = bp_mul_mat_id(c, dev_weight(s, L->gate_exps), x3, ids);  /* [ff, k, n] */
    struct bp_tensor *u = bp_mul_mat_id(c, dev_weight(s, L->up_exps), x3, ids);
    g = arch->act == BP_ARCH_ACT_GELU ? bp_gelu(c, g) : bp_silu(c, g);
    snprintf(nm, sizeof nm, "blk.%d.ffn_moe_down_in", (int)l);
    struct bp_tensor *e = bp_mul_mat_id(c, dev_weight(s, L->down_exps),
                                        bp_tensor_set_name(bp_mul(c, g, u), nm), ids); /* [D, k, n] */
    e = bp_mul(c, e, w);
    struct bp_tensor *out = NULL;
    for (int64_t j = 0; j < k && e; j++) {
        struct bp_tensor *slot = bp_view(c, e, 2, (int64_t[]){D, n}, (size_t[]){e->nb[0], e->nb[2]},
                                         (size_t)j * e->nb[1]);
        out = out ? bp_add(c, out, slot) : slot;
    }
    return k == 1 ? bp_cont(c, out) : out;
}

/* The shared expert of layer l on h [n_embd, n] (Qwen2-MoE), as llama.cpp's
 * qwen2moe graph: a SwiGLU FFN, W_down (silu(W_gate h) * W_up h), times
 * per token the gate sigmoid(g) with g = W_gate_inp_shexp . h, which
 * llama.cpp computes as silu(g) / g (so this does too). */
static struct bp_tensor *shared_expert(const struct bp_run_session *s, const struct plan *p, int64_t l,
                                       struct bp_tensor *h)
{
    struct bp_context *c = p->ctx;
    const struct bp_run_layer *L = &s->m->layers[l];
    struct bp_tensor *g = bp_mul_mat(c, dev_weight(s, L->gate_shexp), h);
    struct bp_tensor *u = bp_mul_mat(c, dev_weight(s, L->up_shexp), h);
    expand_together(p, (struct bp_tensor *[]){g, u}, 2);
    char nm[BP_MAX_NAME];
    input_name(L->down_shexp, l, nm, sizeof nm);
    struct bp_tensor *f = bp_mul_mat(c, dev_weight(s, L->down_shexp),
                                     bp_tensor_set_name(bp_mul(c, bp_silu(c, g), u), nm)); /* [D, n] */
    struct bp_tensor *gi = bp_mul_mat(c, dev_weight(s, L->gate_inp_shexp), h);             /* [1, n] */
    return bp_mul(c, f, bp_div(c, bp_silu(c, gi), gi));
}

static struct bp_tensor *layer(const struct bp_run_session *s, const struct plan *p, int64_t l,
                               struct bp_tensor *x)
{
    struct bp_context *c = p->ctx;
    const struct bp_run_hparams *hp = &s->m->hp;
    const struct bp_arch *arch = hp->arch ? hp->arch : &bp_arch_llama;
    const struct bp_run_layer *L = &s->m->layers[l];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, n = p->n;

    struct bp_tensor *h = norm(c, x, dev_weight(s, L->attn_norm), hp->rms_eps);
    struct bp_tensor *q, *k, *v;
    if (L->wqkv) {
        struct bp_tensor *qkv = bias(s, c, bp_mul_mat(c, dev_weight(s, L->wqkv), h), L->bqkv);
        const size_t es = sizeof(float), row = qkv ? qkv->nb[1] : 0;
        q = bp_view(c, qkv, 3, (int64_t[]){D, H, n}, (size_t[]){es, D * es, row}, 0);
        k = bp_view(c, qkv, 3, (int64_t[]){D, Hkv, n}, (size_t[]){es, D * es, row}, (size_t)(H * D) * es);
        v = bp_view(c, qkv, 3, (int64_t[]){D, Hkv, n}, (size_t[]){es, D * es, row},
                    (size_t)((H + Hkv) * D) * es);
        if (L->bq || L->bk || L->bv) { /* separate biases on a fused projection */
            q = bias(s, c, bp_cont(c, q), L->bq);
            k = bias(s, c, bp_cont(c, k), L->bk);
            v = bias(s, c, bp_cont(c, v), L->bv);
        }
    } else {
        struct bp_tensor *mq = bp_mul_mat(c, dev_weight(s, L->wq), h);
        struct bp_tensor *mk = bp_mul_mat(c, dev_weight(s, L->wk), h);
        struct bp_tensor *mv = bp_mul_mat(c, dev_weight(s, L->wv), h);
        expand_together(p, (struct bp_tensor *[]){mq, mk, mv}, 3);
        q = bp_reshape(c, bias(s, c, mq, L->bq), 3, (int64_t[]){D, H, n});
        k = bp_reshape(c, bias(s, c, mk, L->bk), 3, (int64_t[]){D, Hkv, n});
        v = bp_reshape(c, bias(s, c, mv, L->bv), 3, (int64_t[]){D, Hkv, n});
    }
    if (L->q_norm) q = norm(c, q, dev_weight(s, L->q_norm), hp->rms_eps);
    if (L->k_norm) k = norm(c, k, dev_weight(s, L->k_norm), hp->rms_eps);
    q = rope(s, p, l, q);
    k = rope(s, p, l, k);
    if (p->attn_temp) q = bp_mul(c, q, p->attn_temp);

    /* [D, H, n] -> [D, n, H]: rows per head, as SET_ROWS and attention want. */
    struct bp_tensor *kc = bp_set_rows(c, s->cache_k[l], bp_permute(c, k, 0, 2, 1, 3), p->kv_rows);
    struct bp_tensor *vc = bp_set_rows(c, s->cache_v[l], bp_permute(c, v, 0, 2, 1, 3), p->kv_rows);
    struct bp_tensor *a;
    char nm[BP_MAX_NAME];
    input_name(L->wo, l, nm, sizeof nm);
    if (p->n_seg == 1) {
        a = bp_reshape(c, attend(s, p, l, 0, 0, q, kc, vc), 2, (int64_t[]){D * H, n});
    } else {
        /* Each sequence attends over its own cache region; the rows are
         * gathered in the layer's attn_rows, as the cache gathers K and V. */
        struct bp_tensor *rows = s->attn_rows[l];
        int64_t row0 = 0, moff = 0;
        for (int i = 0; i < p->n_seg; i++) {
            const int64_t ni = p->seg[i].n;
            struct bp_tensor *qi =
                q ? bp_view(c, q, 3, (int64_t[]){D, H, ni}, (size_t[]){q->nb[0], q->nb[1], q->nb[2]},
                            (size_t)row0 * q->nb[2])
                  : NULL;
            struct bp_tensor *ai = bp_reshape(c, attend(s, p, l, i, moff, qi, kc, vc), 2, (int64_t[]){D * H, ni});
            struct bp_tensor *ids = bp_view(c, p->out_rows, 1, (int64_t[]){ni}, NULL, (size_t)row0 * sizeof(int32_t));
            rows = bp_set_rows(c, rows, ai, ids);
            row0 += ni;
            moff += p->seg[i].n_kv * ni;
        }
        a = rows ? bp_view(c, rows, 2, (int64_t[]){D * H, n}, (size_t[]){rows->nb[0], rows->nb[1]}, 0) : NULL;
    }
    a = bp_tensor_set_name(a, nm);
    struct bp_tensor *o = bias(s, c, bp_mul_mat(c, dev_weight(s, L->wo), a), L->bo);
    if (L->post_attn_norm) o = norm(c, o, dev_weight(s, L->post_attn_norm), hp->rms_eps);
    x = bp_add(c, x, o);

    h = norm(c, x, dev_weight(s, L->ffn_norm), hp->rms_eps);
    if (L->gate_inp) {
        struct bp_tensor *f = moe_ffn(s, p, l, h);
        if (L->gate_inp_shexp) f = bp_add(c, f, shared_expert(s, p, l, h));
        if (L->post_ffw_norm) f = norm(c, f, dev_weight(s, L->post_ffw_norm), hp->rms_eps);
        return bp_add(c, x, f);
    }
    struct bp_tensor *g, *u;
    if (arch->flags & BP_ARCH_FUSED_UP) { /* [gate | up] in one projection */
        struct bp_tensor *gu = bias(s, c, bp_mul_mat(c, dev_weight(s, L->up), h), L->bup);
        const size_t es = sizeof(float), row = gu ? gu->nb[1] : 0;
        g = bp_cont(c, bp_view(c, gu, 2, (int64_t[]){hp->n_ff, n}, (size_t[]){es, row}, 0));
        u = bp_cont(c, bp_view(c, gu, 2, (int64_t[]){hp->n_ff, n}, (size_t[]){es, row}, (size_t)hp->n_ff * es));
    } else {
        g = bp_mul_mat(c, dev_weight(s, L->gate), h);
        u = bp_mul_mat(c, dev_weight(s, L->up), h);
        expand_together(p, (struct bp_tensor *[]){g, u}, 2);
        g = bias(s, c, g, L->bgate);
        u = bias(s, c, u, L->bup);
    }
    g = arch->act == BP_ARCH_ACT_GELU ? bp_gelu(c, g) : bp_silu(c, g);
    input_name(L->down, l, nm, sizeof nm);
    struct bp_tensor *f = bias(s, c, bp_mul_mat(c, dev_weight(s, L->down), bp_tensor_set_name(bp_mul(c, g, u), nm)),
                               L->bdown);
    if (L->post_ffw_norm) f = norm(c, f, dev_weight(s, L->post_ffw_norm), hp->rms_eps);
    return bp_add(c, x, f);
}

/* The tensors of p (n and n_kv set) in a new context and, in order, the
 * nodes that compute its logits in a new graph; allocates no tensor data. */
static bp_status build(const struct bp_run_session *s, struct plan *p, bool all)
{
    const struct bp_run_model *m = s->m;
    const struct bp_run_hparams *hp = &m->hp;
    if (p->n_seg == 0) {
        p->one = (struct plan_seg){ 0, p->n, p->n_kv };
        p->seg = &p->one;
        p->n_seg = 1;
    }
    /* a layer's nodes, and each further segment's attention and gather */
    const size_t cap = (96 + 12 * (size_t)p->n_seg) * (size_t)hp->n_layer + 64;
    bp_status r = bp_context_new(cap, &p->ctx);
    if (r == BP_OK) r = bp_graph_new(cap + 8, &p->g);
    if (r != BP_OK) return r;
    struct bp_context *c = p->ctx;
    p->ids = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "ids");
    p->pos = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "pos");
    p->kv_rows = s->n_seq > 1 ? bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "kv_rows") : p->pos;
    p->out_rows = p->n_seg > 1 ? bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, p->n), "out_rows") : NULL;
    /* one segment: [n_kv, n]; several: their [n_kv_i, n_i] blocks one after another */
    int64_t mask_len = 0;
    for (int i = 0; i < p->n_seg; i++) mask_len += p->seg[i].n_kv * p->seg[i].n;
    const bool swa = hp->n_swa > 0 && hp->swa_period > 0;
    if (p->n_seg == 1) {
        p->mask = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, p->n_kv, p->n), "mask");
        p->mask_swa = swa ? bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, p->n_kv, p->n), "mask_swa") : NULL;
    } else {
        p->mask = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_F32, mask_len), "mask");
        p->mask_swa = swa ? bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_F32, mask_len), "mask_swa") : NULL;
    }
    const struct bp_arch *arch = hp->arch ? hp->arch : &bp_arch_llama;
    p->attn_temp = (arch->flags & BP_ARCH_ATTN_TEMP) && hp->attn_temp_scale != 0.0f
                       ? bp_tensor_set_name(bp_tensor_new_3d(c, BP_TYPE_F32, 1, 1, p->n), "attn_temp")
                       : NULL;
    struct bp_tensor *in[7] = { p->ids, p->pos, p->mask, p->mask_swa, p->attn_temp, p->kv_rows, p->out_rows };
    for (int i = 0; i < 7; i++)
        if (in[i]) in[i]->flags |= BP_TENSOR_FLAG_INPUT;
    struct bp_tensor *x = bp_get_rows(c, dev_weight(s, m->tok_embd), p->ids);
    if (arch->flags & BP_ARCH_EMBED_SCALE) x = bp_scale(c, x, sqrtf((float)hp->n_embd), 0.0f);
    for (int64_t l = 0; l < hp->n_layer; l++) x = layer(s, p, l, x);
    if (!all && p->n > 1 && x)
        x = bp_view(c, x, 1, (int64_t[]){hp->n_embd}, NULL, (size_t)(p->n - 1) * x->nb[1]);
    x = norm(c, x, dev_weight(s, m->out_norm), hp->rms_eps);
    struct bp_tensor *logits = bias(s, c, bp_mul_mat(c, output_weight(s), x), m->output_b);
    if (hp->final_softcap > 0.0f) /* c tanh(x / c) */
        logits = bp_scale(c, bp_tanh(c, bp_scale(c, logits, 1.0f / hp->final_softcap, 0.0f)),
                          hp->final_softcap, 0.0f);
    p->logits = bp_tensor_set_name(logits, "logits");
    if (p->logits) p->logits->flags |= BP_TENSOR_FLAG_OUTPUT;
    r = bp_context_status(c);
    return r != BP_OK ? r : bp_graph_build(p->g, p->logits);
}

/* Build the graph of p (n and n_kv set), allocating nothing. */
static bp_status plan_graph(const struct bp_run_session *s, struct plan *p, bool all, char *err, size_t cap)
{
    bp_status r = build(s, p, all);
    if (r != BP_OK)
        return bp_run_fail(err, cap, r, "building the decoder graph failed: %s", bp_last_error());
    return BP_OK;
}

/* Build, allocate and order the graph of p (n and n_kv set): the
 * scheduler places its tensors, or (direct) one buffer on the device.
 * bp_run_plan_make measures the same two placements (plan_bytes). */
static bp_status plan_make(struct bp_run_session *s, struct plan *p, bool all, char *err, size_t cap)
{
    bp_status r = plan_graph(s, p, all, err, cap);
    if (r != BP_OK) return r;
    s->stats.graphs_built++;
    /* Intermediates share memory along the graph: a 512-token prefill of a
     * 1B model would otherwise touch 2 GB of fresh pages. With a
     * fallback the scheduler places them per backend, reusing memory
     * the same way. */
    if (!s->fb) {
        if ((r = bp_context_alloc_graph(p->ctx, p->g, bp_device_buffer_type(s->dev), &p->buf)) != BP_OK)
            return bp_run_fail(err, cap, r, "allocating the step's tensors on '%s' failed: %s",
                               bp_device_name(s->dev), bp_last_error());
        s->stats.buffers_allocated++;
    }
    if (s->sched && (r = bp_sched_alloc_graph(s->sched, p->g)) != BP_OK)
        return bp_run_fail(err, cap, r, "scheduling the decoder graph on '%s' failed: %s",
                           bp_device_name(s->dev), bp_last_error());
    return BP_OK;
}

/* p made afresh for segments seg[0..n_seg) (copied); on failure p is left
 * empty, so the next call tries again. */
static bp_status plan_remake_segs(struct bp_run_session *s, struct plan *p, const struct plan_seg *seg,
                                  int n_seg, bool all, char *err, size_t cap)
{
    plan_free(s, p);
    p->seg = malloc((size_t)n_seg * sizeof *p->seg);
    if (!p->seg) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning a step.");
    memcpy(p->seg, seg, (size_t)n_seg * sizeof *seg);
    p->n_seg = n_seg;
    for (int i = 0; i < n_seg; i++) p->n += seg[i].n;
    p->n_kv = seg[0].n_kv;
    p->all = all;
    bp_status r = plan_make(s, p, all, err, cap);
    if (r != BP_OK) plan_free(s, p);
    return r;
}

/* p made afresh for n tokens of sequence 0 over n_kv positions. */
static bp_status plan_remake(struct bp_run_session *s, struct plan *p, int64_t n, int64_t n_kv,
                             bool all, char *err, size_t cap)
{
    const struct plan_seg one = { 0, n, n_kv };
    return plan_remake_segs(s, p, &one, 1, all, err, cap);
}

/* The decode capacity that covers n_kv positions: 32, 64, ... capped at
 * n_ctx; *index is its place in the decode plans. */
static int64_t capacity_of(const struct bp_run_session *s, int64_t n_kv, int *index)
{
    int i = 0;
    int64_t capacity = MIN_DECODE_CAPACITY;
    while (capacity < n_kv && capacity < s->n_ctx && i + 1 < N_DECODE_PLANS) {
        capacity *= 2;
        i++;
    }
    if (index) *index = i;
    return capacity > s->n_ctx ? s->n_ctx : capacity;
}

/* The decode plan whose capacity covers n_kv positions, made on first use. */
static bp_status decode_plan(struct bp_run_session *s, int64_t n_kv, struct plan **out, char *err,
                             size_t cap)
{
    int i;
    const int64_t capacity = capacity_of(s, n_kv, &i);
    struct plan *p = &s->decode[i];
    bp_status r = p->g ? BP_OK : plan_remake(s, p, 1, capacity, true, err, cap);
    if (r == BP_OK) *out = p;
    return r;
}

/* ids, positions n_past[i].. per segment, the cache rows they go to, and a
 * causal mask per segment over its n_kv positions (the ones not yet
 * written, beyond n_past + j, are -inf). pos is 3 * p->n ints and mask as
 * many floats as the mask input holds, of host scratch. */
static bp_status set_inputs(const struct bp_run_session *s, const struct plan *p, const int32_t *tokens,
                            const int64_t *n_past, int32_t *pos, float *mask)
{
    int32_t *kvr = pos + p->n, *orow = pos + 2 * p->n;
    int64_t row = 0, moff = 0;
    for (int i = 0; i < p->n_seg; i++) {
        const struct plan_seg *sg = &p->seg[i];
        for (int64_t j = 0; j < sg->n; j++, row++) {
            pos[row] = (int32_t)(n_past[i] + j);
            kvr[row] = (int32_t)(sg->seq * s->n_ctx + pos[row]);
            orow[row] = (int32_t)row;
            float *mr = mask + moff + j * sg->n_kv;
            for (int64_t k = 0; k < sg->n_kv; k++) mr[k] = k <= n_past[i] + j ? 0.0f : -INFINITY;
        }
        moff += sg->n_kv * sg->n;
    }
    bp_status r = bp_tensor_set(p->ids, tokens, 0, (size_t)p->n * sizeof *tokens);
    if (r == BP_OK) r = bp_tensor_set(p->pos, pos, 0, (size_t)p->n * sizeof *pos);
    if (r == BP_OK && p->kv_rows != p->pos) r = bp_tensor_set(p->kv_rows, kvr, 0, (size_t)p->n * sizeof *kvr);
    if (r == BP_OK && p->out_rows) r = bp_tensor_set(p->out_rows, orow, 0, (size_t)p->n * sizeof *orow);
    if (r == BP_OK) r = bp_tensor_set(p->mask, mask, 0, (size_t)moff * sizeof *mask);
    /* The window: key k is hidden from query j when j's position - k >=
     * n_swa (llama.cpp's is_masked_swa), so it holds the query itself. */
    if (r == BP_OK && p->mask_swa) {
        const int64_t w = s->m->hp.n_swa;
        moff = 0;
        for (int i = 0; i < p->n_seg; i++) {
            const struct plan_seg *sg = &p->seg[i];
            for (int64_t j = 0; j < sg->n; j++)
                for (int64_t k = 0; k < sg->n_kv && k <= n_past[i] + j - w; k++)
                    mask[moff + j * sg->n_kv + k] = -INFINITY;
            moff += sg->n_kv * sg->n;
        }
        r = bp_tensor_set(p->mask_swa, mask, 0, (size_t)moff * sizeof *mask);
    }
    /* Q's temperature per token (llama.cpp's llm_graph_input_attn_temp),
     * in the mask's scratch, which is no longer needed. */
    if (r == BP_OK && p->attn_temp) {
        const struct bp_run_hparams *hp = &s->m->hp;
        const double orig = (double)(hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train);
        for (int64_t i = 0; i < p->n; i++)
            mask[i] = (float)(log(floor((double)pos[i] / orig) + 1.0) * hp->attn_temp_scale + 1.0);
        r = bp_tensor_set(p->attn_temp, mask, 0, (size_t)p->n * sizeof *mask);
    }
    return r;
}

/* Compute p over tokens; logits[i] receives segment i's logits (every row
 * of it when p->all, else its last). */
static bp_status run_plan(struct bp_run_session *s, struct plan *p, const int32_t *tokens,
                          const int64_t *n_past, int32_t *pos, float *mask, float *const *logits,
                          char *err, size_t cap)
{
    bp_status r = set_inputs(s, p, tokens, n_past, pos, mask);
    if (r != BP_OK)
        return bp_run_fail(err, cap, r, "setting the step's inputs failed: %s", bp_last_error());
    if (s->sched)
        r = bp_sched_graph_compute(s->sched, p->g);
    else
        r = bp_backend_graph_compute(s->be, p->g);
    if (r == BP_OK) r = s->sched ? bp_sched_synchronize(s->sched) : bp_backend_synchronize(s->be);
    if (r != BP_OK)
        return bp_run_fail(err, cap, r, "computing the decoder graph on '%s' failed: %s",
                    bp_device_name(s->dev), bp_last_error());
    const size_t row = (size_t)p->logits->nb[1];
    size_t off = 0;
    for (int i = 0; i < p->n_seg && r == BP_OK; i++) {
        const size_t bytes = p->all ? (size_t)p->seg[i].n * row : row;
        r = bp_tensor_get(p->logits, logits[i], off, bytes);
        off += bytes;
    }
    if (r != BP_OK) return bp_run_fail(err, cap, r, "reading the logits failed: %s", bp_last_error());
    return BP_OK;
}

/* The prefill plan of n tokens after n_past, the kept one when its shape
 * matches. */
static bp_status prefill_plan(struct bp_run_session *s, int64_t n, int64_t n_past, bool all,
                              struct plan **out, char *err, size_t cap)
{
    struct plan *p = &s->prefill;
    bp_status r = BP_OK;
    if (!p->g || p->n != n || p->n_kv != n_past + n || s->prefill_all != all) {
        s->prefill_all = all;
        r = plan_remake(s, p, n, n_past + n, all, err, cap);
    }
    if (r == BP_OK) *out = p;
    return r;
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
    float *const out[1] = { logits };
    bp_status r;
    if (n == 1) {
        struct plan *p;
        int32_t pos[3];
        r = decode_plan(s, s->n_past + 1, &p, err, cap);
        if (r == BP_OK) s->last_decode = p;
        if (r == BP_OK) r = run_plan(s, p, tokens, &s->n_past, pos, s->mask_host, out, err, cap);
    } else {
        struct plan *p = NULL;
        int32_t *pos = malloc(3 * (size_t)n * sizeof *pos);
        float *mask = malloc((size_t)(n * (s->n_past + n)) * sizeof *mask);
        r = !pos || !mask ? bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the "
                                        "inputs of %lld tokens.", (long long)n)
                          : prefill_plan(s, n, s->n_past, all_positions, &p, err, cap);
        if (r == BP_OK) r = run_plan(s, p, tokens, &s->n_past, pos, mask, out, err, cap);
        free(pos);
        free(mask);
    }
    if (r == BP_OK) s->n_past += n;
    return r;
}

/* True when some weight that a MUL_MAT reads is F32, F16 or BF16. */
static bool float_mul_mat(const struct bp_run_model *m)
{
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        const bool mm = mul_mat_only(m, w) || w == m->output;
        if (mm && (w->type == BP_TYPE_F32 || w->type == BP_TYPE_F16 || w->type == BP_TYPE_BF16)) return true;
    }
    return false;
}

/* The kept plan of these segments in plans[0..n) (made in the least
 * recently used one when none matches). */
static bp_status kept_plan(struct bp_run_session *s, struct plan *plans, int n, const struct plan_seg *seg,
                           int n_seg, bool all, struct plan **out, char *err, size_t cap)
{
    struct plan *lru = &plans[0];
    for (int i = 0; i < n; i++) {
        struct plan *p = &plans[i];
        if (p->g && p->n_seg == n_seg && p->all == all && !memcmp(p->seg, seg, (size_t)n_seg * sizeof *seg)) {
            *out = p;
            return BP_OK;
        }
        if (!p->g || (lru->g && p->used < lru->used)) lru = p;
    }
    bp_status r = plan_remake_segs(s, lru, seg, n_seg, all, err, cap);
    if (r == BP_OK) *out = lru;
    return r;
}

bp_status bp_run_session_eval_seqs(struct bp_run_session *s, const struct bp_run_seq_eval *e, int n_e,
                                   char *err, size_t cap)
{
    const struct bp_run_hparams *hp = &s->m->hp;
    if (n_e < 1 || n_e > s->n_seq || !e)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "a step evaluates 1 to %d sequences, not %d.",
                           s->n_seq, n_e);
    uint8_t seen[BP_RUN_MAX_SEQ] = {0};
    for (int i = 0; i < n_e; i++) {
        if (e[i].seq < 0 || e[i].seq >= s->n_seq || seen[e[i].seq]++)
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "sequence %d is not one of the session's %d "
                               "or appears twice in a step.", e[i].seq, s->n_seq);
        if (e[i].n < 1 || !e[i].tokens || !e[i].logits || (n_e > 1 && e[i].n != 1))
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "a step evaluates one sequence's tokens or "
                               "one token of each of several sequences.");
        if (e[i].n_past < 0 || e[i].n_past + e[i].n > s->n_ctx)
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "sequence %d holds %lld of %lld positions; "
                               "%lld more do not fit.", e[i].seq, (long long)e[i].n_past,
                               (long long)s->n_ctx, (long long)e[i].n);
        for (int64_t j = 0; j < e[i].n; j++)
            if (e[i].tokens[j] < 0 || e[i].tokens[j] >= hp->n_vocab)
                return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "token %d is outside the vocabulary "
                                   "[0, %lld) of the model.", e[i].tokens[j], (long long)hp->n_vocab);
    }
    struct plan_seg seg[BP_RUN_MAX_SEQ + 1];
    int32_t tok_one[BP_RUN_MAX_SEQ + 1];
    int64_t n_past[BP_RUN_MAX_SEQ + 1];
    float *logits[BP_RUN_MAX_SEQ + 1];
    int64_t rows = 0, mask_len = 0;
    for (int i = 0; i < n_e; i++) {
        seg[i] = (struct plan_seg){ e[i].seq, e[i].n, capacity_of(s, e[i].n_past + e[i].n, NULL) };
        n_past[i] = e[i].n_past;
        logits[i] = e[i].logits;
        tok_one[i] = e[i].tokens[0];
        rows += e[i].n;
        mask_len += seg[i].n * seg[i].n_kv;
    }
    /* A decode step of one sequence in a session of several runs as two
     * identical rows (the same token, position and cache row, written
     * twice with the same bits) when the model multiplies float weights:
     * their kernels may pick a path by the row count (the cpu's: vec_dot
     * for one row, the tiled kernel for more, in another summation order),
     * and a sequence must give the bits alone that it gives beside others.
     * Quantized kernels compute a row the same from one row up
     * (tests/test_run_batch.c holds the cpu's to it), so those models keep
     * one row: the second costs 10-15 % of a one-row step on a busy CPU. */
    if (n_e == 1 && e[0].n == 1 && s->n_seq > 1 && float_mul_mat(s->m)) {
        seg[1] = seg[0];
        n_past[1] = n_past[0];
        logits[1] = logits[0];
        tok_one[1] = tok_one[0];
        n_e = 2;
        rows = 2;
        mask_len *= 2;
    }
    s->stats.evals++;
    s->n_eval_seqs++;
    struct plan *p = NULL;
    /* a decode step's scratch is the session's (it allocates nothing); a chunk's is its own */
    const bool chunk = rows > n_e;
    int32_t *pos = chunk ? malloc(3 * (size_t)rows * sizeof *pos) : s->pos_host;
    float *mask = chunk ? malloc((size_t)mask_len * sizeof *mask) : s->mask_host;
    bp_status r = !pos || !mask ? bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the "
                                              "inputs of %lld tokens.", (long long)rows)
                  : chunk ? kept_plan(s, s->chunk, N_CHUNK_PLANS, seg, 1, false, &p, err, cap)
                          : kept_plan(s, s->step, N_STEP_PLANS, seg, n_e, true, &p, err, cap);
    if (r == BP_OK) {
        p->used = s->n_eval_seqs;
        if (!chunk) s->last_decode = p;
        r = run_plan(s, p, chunk ? e[0].tokens : tok_one, n_past, pos, mask, logits, err, cap);
    }
    if (chunk) {
        free(pos);
        free(mask);
    }
    return r;
}

/* ------------------------------------------------------------ memory plan */

/* The slot of a device in a plan: 0 for the session's device, 1 for the
 * fallback. */
static int plan_slot(const struct bp_run_session *s, const struct bp_device *d)
{
    return s->fb && d == s->fb ? 1 : 0;
}

/* What plan_make would allocate for p, added to bytes[slot]: with one
 * backend, bp_context_alloc_graph on the device; with a fallback, the
 * scheduler's buffers, measured over the unallocated weights and caches. */
static bp_status plan_bytes(const struct bp_run_session *s, const struct plan *p, size_t bytes[2], char *err,
                            size_t cap)
{
    if (!s->fb) {
        bytes[0] += bp_context_alloc_graph_size(p->ctx, p->g, bp_device_buffer_type(s->dev));
        return BP_OK;
    }
    struct bp_context *ctx[MAX_WEIGHT_GROUPS + 2];
    struct bp_buffer_type *buft[MAX_WEIGHT_GROUPS + 2];
    size_t n = 0, got[BP_SCHED_MAX_BACKENDS] = {0};
    for (size_t i = 0; i < s->n_wg; i++, n++) {
        ctx[n] = s->wg[i].ctx;
        buft[n] = s->wg[i].buft;
    }
    for (int i = 0; i < 2; i++, n++) {
        ctx[n] = s->cctx[i];
        buft[n] = bp_device_buffer_type(i ? s->fb : s->dev);
    }
    bp_status st = bp_sched_measure_graph(s->sched, p->g, ctx, buft, n, got);
    if (st != BP_OK)
        return bp_run_fail(err, cap, st, "planning the scheduler's buffers on '%s' failed: %s",
                           bp_device_name(s->dev), bp_last_error());
    bytes[0] += got[0];
    bytes[1] += got[1];
    return BP_OK;
}

/* A meta session's rows per sub-device: the plugin places the tensors of
 * ctx (or, with p, the graph's own tensors over the unallocated weights and
 * caches) as it would for real and adds each sub-device's bytes. */
static bp_status meta_rows(const struct bp_run_session *s, struct bp_context *ctx, const struct plan *p,
                           size_t *bytes, size_t *scratch, char *err, size_t cap)
{
    const struct bp_run_model *m = s->m;
    size_t n = ctx ? bp_context_tensor_count(ctx) : m->n_weights + 2 * (size_t)m->hp.n_layer + 1;
    struct bp_tensor **ts = malloc((n ? n : 1) * sizeof *ts);
    size_t got[BP_META_MAX_DEVICES] = {0}, scr[BP_META_MAX_DEVICES] = {0}, k = 0;
    if (!ts) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning.");
    for (size_t i = 0; ctx && i < n; i++) ts[k++] = bp_context_tensor(ctx, i);
    for (size_t i = 0; !ctx && i < m->n_weights; i++) ts[k++] = s->w[i];
    for (int64_t l = 0; !ctx && l < m->hp.n_layer; l++) {
        ts[k++] = s->cache_k[l];
        ts[k++] = s->cache_v[l];
    }
    if (!ctx && s->out_copy) ts[k++] = s->out_copy;
    bp_status st = ctx ? bp_meta_measure_tensors(s->dev, ts, k, got)
                       : bp_meta_measure_graph(s->dev, p->g, ts, k, got, scr);
    free(ts);
    if (st != BP_OK)
        return bp_run_fail(err, cap, st, "planning the sub-devices of '%s' failed: %s", bp_device_name(s->dev),
                           bp_last_error());
    for (size_t d = 0; d < BP_META_MAX_DEVICES; d++) {
        bytes[d] += got[d];
        if (scratch && scr[d] > scratch[d]) scratch[d] = scr[d];
    }
    return BP_OK;
}

/* The plan is a session that stops before allocating: the same backends,
 * choose_homes, make_tensors and graphs, sized with bp_context_alloc_size,
 * bp_context_alloc_graph_size and bp_sched_measure_graph instead of
 * allocated, so each placement is stated once. */
bp_status bp_run_plan_make(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_plan_options *o, struct bp_run_plan *out,
                           char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    struct bp_run_session *s = calloc(1, sizeof *s);
    if (!s) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning.");
    bp_status st = session_arrays(s, m, dev, o ? o->n_ctx : 0, 1)
                       ? BP_OK
                       : bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning.");
    int64_t n_prompt = o && o->n_prompt > 0 ? o->n_prompt : 1;
    if (n_prompt > s->n_ctx) n_prompt = s->n_ctx;
    const struct bp_run_session_options so = { .strict = o && o->strict };
    if (st == BP_OK) {
        bp_run_split_table_init(&s->split, m);
        st = bp_run_split_install(dev, &s->split, err, cap);
        s->split_installed = st == BP_OK && bp_device_type(dev) == BP_DEVICE_TYPE_META;
    }
    if (st == BP_OK) st = start_backends(s, &so, err, cap);
    if (st == BP_OK) st = choose_homes(s, o ? o->offload_layers : 0, o ? o->cpu_moe_layers : 0, err, cap);
    if (st == BP_OK) st = make_tensors(s, err, cap);
    struct bp_run_plan_device *d = out->d;
    if (st == BP_OK) {
        for (size_t i = 0; i < s->n_wg; i++)
            d[plan_slot(s, s->wg[i].buft->device)].weights +=
                bp_context_alloc_size(s->wg[i].ctx, s->wg[i].buft, NULL);
        if (s->out_copy)
            d[plan_slot(s, s->home_w[m->output - m->weights])].output_copy = bp_nbytes(s->out_copy);
        for (size_t i = 0; i < m->n_weights; i++)
            if (is_expert(&m->weights[i])) d[plan_slot(s, s->home_w[i])].experts += bp_nbytes(s->w[i]);
        for (int i = 0; i < 1 + (s->fb != NULL); i++)
            d[i].kv_cache = bp_context_alloc_size(s->cctx[i], bp_device_buffer_type(i ? s->fb : dev), NULL);
    }
    const bool meta = bp_device_type(dev) == BP_DEVICE_TYPE_META;
    struct bp_device *subs[BP_META_MAX_DEVICES];
    size_t sw[BP_META_MAX_DEVICES] = {0}, skv[BP_META_MAX_DEVICES] = {0}, sdec[BP_META_MAX_DEVICES] = {0},
           spre[BP_META_MAX_DEVICES] = {0}, sscr[BP_META_MAX_DEVICES] = {0};
    if (st == BP_OK && meta &&
        (st = bp_meta_device_sub_devices(dev, subs, BP_META_MAX_DEVICES, &out->n_subs)) != BP_OK)
        bp_run_fail(err, cap, st, "listing the sub-devices of '%s' failed: %s", bp_device_name(dev), bp_last_error());
    for (size_t i = 0; st == BP_OK && meta && i < s->n_wg; i++)
        if (s->wg[i].buft->device == dev) st = meta_rows(s, s->wg[i].ctx, NULL, sw, NULL, err, cap);
    if (st == BP_OK && meta) st = meta_rows(s, s->cctx[0], NULL, skv, NULL, err, cap);
    /* The step buffers decode_plan and prefill_plan keep: one per decode
     * capacity up to n_ctx, and the prefill's. */
    size_t decode[2] = {0, 0}, prefill[2] = {0, 0};
    for (int64_t c = MIN_DECODE_CAPACITY, done = 0; st == BP_OK && !done; c *= 2) {
        struct plan p = { .n = 1, .n_kv = c < s->n_ctx ? c : s->n_ctx };
        done = c >= s->n_ctx;
        if ((st = plan_graph(s, &p, true, err, cap)) == BP_OK) st = plan_bytes(s, &p, decode, err, cap);
        if (st == BP_OK && meta) st = meta_rows(s, NULL, &p, sdec, sscr, err, cap);
        plan_free(s, &p);
    }
    if (st == BP_OK && n_prompt > 1) {
        struct plan p = { .n = n_prompt, .n_kv = n_prompt };
        if ((st = plan_graph(s, &p, o && o->prefill_all, err, cap)) == BP_OK)
            st = plan_bytes(s, &p, prefill, err, cap);
        if (st == BP_OK && meta) st = meta_rows(s, NULL, &p, spre, sscr, err, cap);
        plan_free(s, &p);
    }
    out->n_devices = s->fb ? 2 : 1;
    for (size_t i = 0; i < out->n_devices; i++) {
        d[i].dev = i ? s->fb : dev;
        d[i].decode = decode[i];
        d[i].prefill = prefill[i];
        d[i].peak = d[i].weights + d[i].kv_cache + d[i].decode + d[i].prefill;
        bp_device_memory(d[i].dev, &d[i].mem_free, &d[i].mem_total);
    }
    if (st != BP_OK) out->n_subs = 0;
    if (out->n_subs) { /* the meta row is the sum of what its sub-devices hold */
        d[0].weights = d[0].kv_cache = d[0].decode = d[0].prefill = d[0].peak = 0;
    }
    for (size_t k = 0; k < out->n_subs; k++) {
        struct bp_run_plan_device *r = &out->sub[k];
        *r = (struct bp_run_plan_device){ .dev = subs[k], .weights = sw[k], .kv_cache = skv[k],
                                          .decode = sdec[k], .prefill = spre[k], .allreduce = sscr[k] };
        r->peak = r->weights + r->kv_cache + r->decode + r->prefill + r->allreduce;
        bp_device_memory(r->dev, &r->mem_free, &r->mem_total);
        d[0].weights += r->weights;
        d[0].kv_cache += r->kv_cache;
        d[0].decode += r->decode;
        d[0].prefill += r->prefill;
        d[0].allreduce += r->allreduce;
        d[0].peak += r->peak;
    }
    out->n_ctx = s->n_ctx;
    out->n_prompt = n_prompt;
    out->n_layer = m->hp.n_layer;
    out->offload_layers = s->fb && o && o->offload_layers > 0 && o->offload_layers < m->hp.n_layer
                              ? o->offload_layers : m->hp.n_layer;
    out->cpu_moe_layers = s->fb && o ? cpu_moe_layers_of(m, o->cpu_moe_layers) : 0;
    bp_run_session_free(s);
    return st;
}

bp_status bp_run_session_sub_device_bytes(const struct bp_run_session *s, size_t *bytes)
{
    memset(bytes, 0, BP_META_MAX_DEVICES * sizeof *bytes);
    if (bp_device_type(s->dev) != BP_DEVICE_TYPE_META) return BP_ERR_INVALID_ARGUMENT;
    struct bp_buffer *bufs[MAX_WEIGHT_GROUPS + 1 + 2 * 2 * (N_DECODE_PLANS + 1 + N_STEP_PLANS + N_CHUNK_PLANS)];
    size_t n = 0;
    for (size_t i = 0; i < s->n_wg; i++)
        if (s->wg[i].buf && s->wg[i].buft->device == s->dev) bufs[n++] = s->wg[i].buf;
    if (s->cbuf[0]) bufs[n++] = s->cbuf[0];
    n += bp_sched_buffers(s->sched, s->dev, bufs + n, sizeof bufs / sizeof *bufs - n);
    bp_status st = BP_OK;
    for (size_t i = 0; i < n && i < sizeof bufs / sizeof *bufs && st == BP_OK; i++) {
        size_t got[BP_META_MAX_DEVICES];
        if ((st = bp_meta_buffer_device_bytes(bufs[i], got)) == BP_OK)
            for (size_t d = 0; d < BP_META_MAX_DEVICES; d++) bytes[d] += got[d];
    }
    /* the butterfly's scratch, one buffer of this size on every sub-device */
    struct bp_meta_stats ms = { .size = sizeof ms };
    size_t n_sub = 0;
    if (st == BP_OK && (st = bp_meta_backend_stats(s->be, &ms)) == BP_OK &&
        (st = bp_meta_device_sub_devices(s->dev, NULL, 0, &n_sub)) == BP_OK)
        for (size_t d = 0; d < n_sub && d < BP_META_MAX_DEVICES; d++) bytes[d] += (size_t)ms.scratch_bytes;
    return st;
}

size_t bp_run_session_total_device_bytes(const struct bp_run_session *s, const struct bp_device *dev)
{
    size_t n = bp_run_session_device_bytes(s, dev) + bp_sched_buffer_bytes(s->sched, dev);
    if (dev != s->dev) return n;
    for (int i = 0; i < N_DECODE_PLANS; i++) n += s->decode[i].buf ? bp_buffer_size(s->decode[i].buf) : 0;
    for (int i = 0; i < N_STEP_PLANS; i++) n += s->step[i].buf ? bp_buffer_size(s->step[i].buf) : 0;
    for (int i = 0; i < N_CHUNK_PLANS; i++) n += s->chunk[i].buf ? bp_buffer_size(s->chunk[i].buf) : 0;
    return n + (s->prefill.buf ? bp_buffer_size(s->prefill.buf) : 0);
}
