/*
 * builtin.c — named model configurations with deterministic pseudo-random
 * weights, so that `backplane run` works with no file and the tests have a
 * model whose every weight they can regenerate.
 *
 * Each weight is drawn from its own stream, seeded by the model seed and
 * the weight's name, so a weight's values do not depend on which others
 * exist (fused and separate QKV draw Q, K and V identically). Values are
 * generated in f32 and converted with bp_quantize to the requested type;
 * norm weights stay f32, as llama.cpp's converters keep them.
 */
#include "model.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/bp_quantize.h>

struct builtin_config {
    const char *name;
    struct bp_run_hparams hp;
    bool tied;          /* no output.weight: the embedding projects to logits */
    const char *about;
};

static const struct builtin_config configs[] = {
    { "test", { .n_vocab = 512, .n_embd = 256, .n_ff = 512, .n_layer = 2, .n_head = 4,
                .n_head_kv = 2, .head_dim = 64, .n_rot = 64, .n_ctx_train = 256,
                .rope_base = 10000.0f, .rms_eps = 1e-5f },
      false, "very small (1.4 M parameters), for tests" },
    { "tiny", { .n_vocab = 32000, .n_embd = 768, .n_ff = 2048, .n_layer = 12, .n_head = 12,
                .n_head_kv = 4, .head_dim = 64, .n_rot = 64, .n_ctx_train = 2048,
                .rope_base = 10000.0f, .rms_eps = 1e-5f },
      true, "about 100 M parameters, for benchmarks" },
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

const char *const *bp_run_builtin_names(void)
{
    static const char *const names[] = { "test", "tiny", NULL };
    return names;
}

int64_t bp_run_builtin_n_vocab(const char *name)
{
    for (size_t i = 0; i < N_CONFIGS; i++)
        if (!strcmp(configs[i].name, name)) return configs[i].hp.n_vocab;
    return 0;
}

/* splitmix64: tiny, seedable, good enough for weights. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_seed(uint64_t seed, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ seed; /* FNV-1a over the name */
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* n values uniform in [center - amp, center + amp) from the named stream,
 * starting at element `skip` of that stream. */
static void draw(float *dst, int64_t n, uint64_t seed, const char *stream, int64_t skip,
                 float center, float amp)
{
    uint64_t s = name_seed(seed, stream) + (uint64_t)skip * 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(mix(&s) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
        dst[i] = center + amp * (float)(2.0 * u - 1.0);
    }
}

struct plan_entry {
    char name[BP_GGUF_MAX_NAME + 1];
    int n_dims;
    int64_t ne[4];
    bool is_norm;
};

static int plan(const struct bp_run_hparams *hp, bool fused, bool tied, struct plan_entry *out)
{
    int n = 0;
#define ADD(nd, norm, e0, e1, ...)                                                        \
    do {                                                                                  \
        if (out) {                                                                        \
            snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__);                       \
            out[n].n_dims = nd;                                                           \
            out[n].ne[0] = e0; out[n].ne[1] = e1; out[n].ne[2] = 1; out[n].ne[3] = 1;     \
            out[n].is_norm = norm;                                                        \
        }                                                                                 \
        n++;                                                                              \
    } while (0)
    const int64_t E = hp->n_embd, Dq = hp->n_head * hp->head_dim, Dkv = hp->n_head_kv * hp->head_dim;
    ADD(2, false, E, hp->n_vocab, "token_embd.weight");
    for (int64_t l = 0; l < hp->n_layer; l++) {
        ADD(1, true, E, 1, "blk.%" PRId64 ".attn_norm.weight", l);
        if (fused) {
            ADD(2, false, E, Dq + 2 * Dkv, "blk.%" PRId64 ".attn_qkv.weight", l);
        } else {
            ADD(2, false, E, Dq, "blk.%" PRId64 ".attn_q.weight", l);
            ADD(2, false, E, Dkv, "blk.%" PRId64 ".attn_k.weight", l);
            ADD(2, false, E, Dkv, "blk.%" PRId64 ".attn_v.weight", l);
        }
        ADD(2, false, Dq, E, "blk.%" PRId64 ".attn_output.weight", l);
        ADD(1, true, E, 1, "blk.%" PRId64 ".ffn_norm.weight", l);
        ADD(2, false, E, hp->n_ff, "blk.%" PRId64 ".ffn_gate.weight", l);
        ADD(2, false, E, hp->n_ff, "blk.%" PRId64 ".ffn_up.weight", l);
        ADD(2, false, hp->n_ff, E, "blk.%" PRId64 ".ffn_down.weight", l);
    }
    ADD(1, true, E, 1, "output_norm.weight");
    if (!tied) ADD(2, false, E, hp->n_vocab, "output.weight");
#undef ADD
    return n;
}

/* The f32 values of one planned weight. A fused QKV weight is the rows of
 * the separate attn_q, attn_k and attn_v streams stacked, so both layouts
 * describe the same model. */
static void generate(const struct bp_run_hparams *hp, uint64_t seed, const struct plan_entry *p,
                     float *dst)
{
    const int64_t n = p->ne[0] * p->ne[1];
    if (p->is_norm) {
        draw(dst, n, seed, p->name, 0, 1.0f, 0.1f);
        return;
    }
    if (!strcmp(p->name, "token_embd.weight")) {
        draw(dst, n, seed, p->name, 0, 0.0f, 0.5f);
        return;
    }
    const float amp = 1.0f / sqrtf((float)p->ne[0]) * 1.7f; /* unit-variance outputs */
    const char *fused = strstr(p->name, ".attn_qkv.");
    if (!fused) {
        draw(dst, n, seed, p->name, 0, 0.0f, amp);
        return;
    }
    const int64_t E = hp->n_embd, Dq = hp->n_head * hp->head_dim, Dkv = hp->n_head_kv * hp->head_dim;
    char base[BP_GGUF_MAX_NAME + 1], nm[2 * BP_GGUF_MAX_NAME];
    snprintf(base, sizeof base, "%.*s", (int)(fused - p->name), p->name);
    snprintf(nm, sizeof nm, "%s.attn_q.weight", base);
    draw(dst, E * Dq, seed, nm, 0, 0.0f, amp);
    snprintf(nm, sizeof nm, "%s.attn_k.weight", base);
    draw(dst + E * Dq, E * Dkv, seed, nm, 0, 0.0f, amp);
    snprintf(nm, sizeof nm, "%s.attn_v.weight", base);
    draw(dst + E * (Dq + Dkv), E * Dkv, seed, nm, 0, 0.0f, amp);
}

/* bp_quantize over row ranges on all CPUs: the K-quant search costs far
 * more than drawing the values, and rows are independent. */
struct qjob {
    enum bp_type t;
    const float *src;
    uint8_t *dst;
    int64_t r0, r1, n_per_row;
    size_t written;
};

static void *qrun(void *arg)
{
    struct qjob *j = arg;
    j->written = j->r1 > j->r0 ? bp_quantize(j->t, j->src + j->r0 * j->n_per_row,
                                             j->dst + (size_t)j->r0 * bp_row_size(j->t, j->n_per_row),
                                             j->r1 - j->r0, j->n_per_row) : 0;
    return NULL;
}

static size_t quantize_rows(enum bp_type t, const float *src, void *dst, int64_t nrows,
                            int64_t n_per_row)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n = bp_type_is_quantized(t) && nrows >= 64 ? (int)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu) : 1;
    struct qjob jobs[16];
    pthread_t th[16];
    bool started[16] = {false};
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct qjob){ .t = t, .src = src, .dst = dst, .n_per_row = n_per_row,
                                 .r0 = nrows * i / n, .r1 = nrows * (i + 1) / n };
        if (i > 0) started[i] = pthread_create(&th[i], NULL, qrun, &jobs[i]) == 0;
    }
    qrun(&jobs[0]);
    size_t total = jobs[0].written;
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else qrun(&jobs[i]); /* no thread to be had: do it here */
        total += jobs[i].written;
    }
    return total;
}

bp_status bp_run_model_builtin(const char *name, const struct bp_run_builtin_options *opts,
                               struct bp_run_model **out, char *err, size_t cap)
{
    *out = NULL;
    const struct builtin_config *cfg = NULL;
    for (size_t i = 0; i < N_CONFIGS; i++)
        if (!strcmp(configs[i].name, name)) cfg = &configs[i];
    if (!cfg) {
        snprintf(err, cap, "there is no built-in model '%s'; the built-in models are "
                 "builtin:test and builtin:tiny.", name);
        return BP_ERR_NOT_FOUND;
    }
    const struct bp_run_builtin_options dflt = { .weight_type = BP_TYPE_F32, .seed = 1 };
    if (!opts) opts = &dflt;
    const enum bp_type wt = opts->weight_type;
    if (wt == BP_TYPE_I32 || wt == BP_TYPE_Q8_K || bp_type_size(wt) == 0) {
        snprintf(err, cap, "weight type '%s' is not one a model can be stored in; use f32, f16, "
                 "bf16, q4_0, q8_0, q4_K or q6_K.", bp_type_name(wt));
        return BP_ERR_UNSUPPORTED;
    }
    const struct bp_run_hparams *hp = &cfg->hp;
    if (hp->n_embd % bp_type_block_size(wt) != 0 || hp->n_ff % bp_type_block_size(wt) != 0) {
        snprintf(err, cap, "builtin:%s cannot be stored as %s: its rows are not whole blocks of "
                 "%" PRId64 ".", name, bp_type_name(wt), bp_type_block_size(wt));
        return BP_ERR_UNSUPPORTED;
    }
    const int n = plan(hp, opts->fused_qkv, cfg->tied, NULL);
    struct plan_entry *pl = calloc((size_t)n, sizeof *pl);
    struct bp_run_model *m = calloc(1, sizeof *m);
    bp_status s = BP_ERR_OUT_OF_MEMORY;
    float *tmp = NULL;
    if (!pl || !m) goto out;
    plan(hp, opts->fused_qkv, cfg->tied, pl);
    m->hp = *hp;
    snprintf(m->name, sizeof m->name, "builtin:%s", name);
    m->weights = calloc((size_t)n, sizeof *m->weights);
    if (!m->weights) goto out;
    size_t total = 0, biggest = 0;
    for (int i = 0; i < n; i++) {
        const enum bp_type t = pl[i].is_norm ? BP_TYPE_F32 : wt;
        size_t sz = bp_row_size(t, pl[i].ne[0]) * (size_t)pl[i].ne[1];
        total += (sz + 63) & ~(size_t)63;
        size_t el = (size_t)(pl[i].ne[0] * pl[i].ne[1]);
        if (el > biggest) biggest = el;
    }
    m->owned = malloc(total);
    tmp = malloc(biggest * sizeof *tmp);
    if (!m->owned || !tmp) goto out;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        struct bp_run_weight *w = &m->weights[i];
        const enum bp_type t = pl[i].is_norm ? BP_TYPE_F32 : wt;
        snprintf(w->name, sizeof w->name, "%s", pl[i].name);
        w->type = t;
        w->n_dims = pl[i].n_dims;
        memcpy(w->ne, pl[i].ne, sizeof w->ne);
        w->size = bp_row_size(t, pl[i].ne[0]) * (size_t)pl[i].ne[1];
        uint8_t *dst = (uint8_t *)m->owned + off;
        generate(hp, opts->seed, &pl[i], tmp);
        if (quantize_rows(t, tmp, dst, pl[i].ne[1], pl[i].ne[0]) != w->size) {
            snprintf(err, cap, "converting builtin weights to %s failed: %s", bp_type_name(t),
                     bp_last_error());
            s = BP_ERR_INTERNAL;
            goto out;
        }
        w->data = dst;
        off += (w->size + 63) & ~(size_t)63;
        if (opts->progress) opts->progress(opts->progress_user, off, total);
    }
    m->n_weights = (size_t)n;
    s = bp_run_model_bind(m, err, cap);
out:
    if (s == BP_ERR_OUT_OF_MEMORY && err && cap && !err[0])
        snprintf(err, cap, "out of memory generating builtin:%s.", name);
    free(tmp);
    free(pl);
    if (s != BP_OK) {
        bp_run_model_free(m);
        return s;
    }
    *out = m;
    return BP_OK;
}
