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
#include "arch.h"
#include "llama_schema.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
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
                .rope_base = 10000.0f, .rms_eps = 1e-5f, .arch = &bp_arch_llama,
                .value_length = 64 },
      false, "very small (1.4 M parameters), for tests" },
    { "tiny", { .n_vocab = 32000, .n_embd = 768, .n_ff = 2048, .n_layer = 12, .n_head = 12,
                .n_head_kv = 4, .head_dim = 64, .n_rot = 64, .n_ctx_train = 2048,
                .rope_base = 10000.0f, .rms_eps = 1e-5f, .arch = &bp_arch_llama,
                .value_length = 64 },
      true, "about 100 M parameters, for benchmarks" },
    /* TinyLlama-1.1B's shape, the 1B class that llama.cpp is compared on. */
    { "1b", { .n_vocab = 32000, .n_embd = 2048, .n_ff = 5632, .n_layer = 22, .n_head = 32,
              .n_head_kv = 4, .head_dim = 64, .n_rot = 64, .n_ctx_train = 2048,
              .rope_base = 10000.0f, .rms_eps = 1e-5f, .arch = &bp_arch_llama,
                .value_length = 64 },
      false, "1.1 G parameters in TinyLlama-1.1B's shape, untied output" },
    /* The other families at 1B class, for the benchmarks against llama.cpp
     * (their real vocabularies, 151936 and 262144 tokens, would make the
     * embedding most of the model). */
    { "qwen2-1b", { .n_vocab = 32000, .n_embd = 1536, .n_ff = 8960, .n_layer = 28, .n_head = 12,
                    .n_head_kv = 2, .head_dim = 128, .n_rot = 128, .n_ctx_train = 32768,
                    .rope_base = 1000000.0f, .rms_eps = 1e-6f, .arch = &bp_arch_qwen2,
                    .value_length = 128 },
      true, "1.3 G parameters in Qwen2.5-1.5B's shape, 32000-token vocabulary, tied output" },
    { "gemma3-1b", { .n_vocab = 32000, .n_embd = 1152, .n_ff = 6912, .n_layer = 26, .n_head = 4,
                     .n_head_kv = 1, .head_dim = 256, .n_rot = 256, .n_ctx_train = 32768,
                     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .arch = &bp_arch_gemma3,
                     .value_length = 256, .n_swa = 512, .swa_period = 6, .rope_base_swa = 10000.0f },
      true, "0.7 G parameters in Gemma-3-1B's shape, 32000-token vocabulary, tied output" },
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

const char *const *bp_run_builtin_names(void)
{
    static const char *const names[] = { "test", "tiny", "1b", "qwen2-1b", "gemma3-1b", NULL };
    return names;
}

int64_t bp_run_builtin_n_vocab(const char *name)
{
    for (size_t i = 0; i < N_CONFIGS; i++)
        if (!strcmp(configs[i].name, name)) return configs[i].hp.n_vocab;
    return 0;
}

const struct bp_run_hparams *bp_run_builtin_hparams(const char *name, bool *tied)
{
    for (size_t i = 0; i < N_CONFIGS; i++)
        if (!strcmp(configs[i].name, name)) {
            if (tied) *tied = configs[i].tied;
            return &configs[i].hp;
        }
    return NULL;
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

/* One weight to generate: its schema row, layer (-1: global) and shape. */
struct plan_entry {
    char name[BP_GGUF_MAX_NAME + 1];
    const struct bp_llama_tensor *row;
    int64_t layer;
    int n_dims;
    int64_t ne[4];
    enum bp_type type;
};

struct plan_walk {
    const struct bp_run_hparams *hp;
    const struct bp_llama_mix *mix;
    bool tied;
    struct plan_entry *out; /* NULL: count only */
    int n;
};

static int plan_add(void *user, const struct bp_llama_tensor *r, int64_t l)
{
    struct plan_walk *pw = user;
    if (pw->out) {
        struct plan_entry *e = &pw->out[pw->n];
        bp_llama_tensor_name(r, l, e->name, sizeof e->name);
        e->row = r;
        e->layer = l;
        e->n_dims = r->n_dims;
        bp_llama_tensor_shape(r, pw->hp, e->ne);
        e->type = bp_llama_mix_type(pw->mix, r, l, pw->hp->n_layer, pw->tied);
    }
    pw->n++;
    return 0;
}

/* The model's weights in the schema's layout order; their count. */
static int plan(const struct bp_run_hparams *hp, const struct bp_llama_mix *mix, bool fused, bool tied,
                struct plan_entry *out)
{
    struct plan_walk pw = { .hp = hp, .mix = mix, .tied = tied, .out = out };
    bp_llama_schema_walk(hp, fused, tied, plan_add, &pw);
    return pw.n;
}

/* Rows [r0, r1) of one planned weight in f32, drawn straight from their
 * place in the weight's stream, so that any split of the rows among
 * threads gives the same values. A fused weight (attn_qkv) is the rows of
 * its parts' streams (attn_q, attn_k, attn_v) stacked, so both layouts
 * describe the same model. */
static void generate_rows(const struct bp_run_hparams *hp, uint64_t seed, const struct plan_entry *p,
                          int64_t r0, int64_t r1, float *dst)
{
    const int64_t ne0 = p->ne[0], n = (r1 - r0) * ne0;
    const float amp = 1.0f / sqrtf((float)ne0) * 1.7f; /* LINEAR: unit-variance outputs */
    switch (p->row->init) {
    case BP_LLAMA_INIT_NORM: draw(dst, n, seed, p->name, r0 * ne0, 1.0f, 0.1f); return;
    case BP_LLAMA_INIT_EMBED: draw(dst, n, seed, p->name, r0 * ne0, 0.0f, 0.5f); return;
    case BP_LLAMA_INIT_LINEAR: draw(dst, n, seed, p->name, r0 * ne0, 0.0f, amp); return;
    case BP_LLAMA_INIT_PARTS: break;
    }
    char nm[BP_GGUF_MAX_NAME + 1];
    int64_t first = 0;
    for (int i = 0; i < p->row->n_parts; i++) {
        const struct bp_llama_tensor *part = &bp_llama_schema[p->row->parts[i]];
        const int64_t rows = bp_llama_dim_value(hp, part->ne[1]);
        const int64_t a = r0 > first ? r0 : first;
        const int64_t b = r1 < first + rows ? r1 : first + rows;
        if (a < b)
            draw(dst + (a - r0) * ne0, (b - a) * ne0, seed, bp_llama_tensor_name(part, p->layer, nm, sizeof nm),
                 (a - first) * ne0, 0.0f, amp);
        first += rows;
    }
}

/* Generation as jobs of a few rows of one weight, taken in order by every
 * thread: drawing a billion values and the K-quant search are both far too
 * slow on one core, and rows are independent (bp_quantize converts each
 * row alone), so the bytes do not depend on the thread count. */
#define GEN_JOB_ELEMENTS ((int64_t)1 << 18)
#define GEN_MAX_THREADS 64

struct gen_job {
    int32_t w;
    int64_t r0, r1;
};

struct gen {
    const struct bp_run_hparams *hp;
    uint64_t seed;
    const struct plan_entry *pl;
    struct bp_run_weight *weights;  /* data points at the output bytes */
    const struct gen_job *jobs;
    int64_t n_jobs;
    _Atomic int64_t next;
    _Atomic size_t done;            /* bytes written */
    _Atomic int failed;             /* 1 + the index of a weight that failed to convert */
};

/* Takes jobs until none is left. The caller's thread passes opts to report
 * progress after each of its jobs (the callback need not be thread-safe). */
static void gen_work(struct gen *g, const struct bp_run_builtin_options *opts, size_t total)
{
    float *tmp = malloc((size_t)GEN_JOB_ELEMENTS * sizeof *tmp);
    if (!tmp) return;   /* the other threads take the jobs */
    int64_t j;
    while ((j = atomic_fetch_add(&g->next, 1)) < g->n_jobs) {
        const struct gen_job *jb = &g->jobs[j];
        const struct bp_run_weight *w = &g->weights[jb->w];
        const size_t row = bp_row_size(w->type, w->ne[0]), bytes = (size_t)(jb->r1 - jb->r0) * row;
        generate_rows(g->hp, g->seed, &g->pl[jb->w], jb->r0, jb->r1, tmp);
        if (bp_quantize(w->type, tmp, (uint8_t *)w->data + (size_t)jb->r0 * row, jb->r1 - jb->r0,
                        w->ne[0]) != bytes)
            atomic_store(&g->failed, jb->w + 1);
        const size_t done = atomic_fetch_add(&g->done, bytes) + bytes;
        if (opts && opts->progress) opts->progress(opts->progress_user, done, total);
    }
    free(tmp);
}

static void *gen_thread(void *arg)
{
    gen_work(arg, NULL, 0);
    return NULL;
}

/* Runs every job on n_threads threads, this one included. False when some
 * job found no thread to run it (no memory for any thread's scratch). */
static bool gen_run(struct gen *g, int n_threads, const struct bp_run_builtin_options *opts,
                    size_t total)
{
    pthread_t th[GEN_MAX_THREADS];
    bool started[GEN_MAX_THREADS] = {false};
    for (int i = 1; i < n_threads; i++) started[i] = pthread_create(&th[i], NULL, gen_thread, g) == 0;
    gen_work(g, opts, total);
    for (int i = 1; i < n_threads; i++)
        if (started[i]) pthread_join(th[i], NULL);
    /* A job taken is a job done: its thread has been joined. */
    return atomic_load(&g->next) >= g->n_jobs;
}

bp_status bp_run_model_builtin(const char *name, const struct bp_run_builtin_options *opts,
                               struct bp_run_model **out, char *err, size_t cap)
{
    *out = NULL;
    const struct builtin_config *cfg = NULL;
    for (size_t i = 0; i < N_CONFIGS; i++)
        if (!strcmp(configs[i].name, name)) cfg = &configs[i];
    if (!cfg) {
        int at = snprintf(err, cap, "there is no built-in model '%s'; the built-in models are", name);
        for (size_t i = 0; i < N_CONFIGS && at > 0 && (size_t)at < cap; i++)
            at += snprintf(err + at, cap - (size_t)at, "%s builtin:%s", i ? "," : "", configs[i].name);
        if (at > 0 && (size_t)at < cap) snprintf(err + at, cap - (size_t)at, ".");
        return BP_ERR_NOT_FOUND;
    }
    const struct bp_run_builtin_options dflt = { .weight_type = BP_TYPE_F32, .seed = 1 };
    if (!opts) opts = &dflt;
    const enum bp_type wt = opts->weight_type;
    /* A pure type is the mix with no rules. */
    const struct bp_llama_mix pure = { .name = bp_type_name(wt), .base = wt };
    const struct bp_llama_mix *mix = opts->mix ? opts->mix : &pure;
    if (!opts->mix && (wt == BP_TYPE_I32 || wt == BP_TYPE_Q8_K || bp_type_size(wt) == 0)) {
        snprintf(err, cap, "weight type '%s' is not one a model can be stored in; use f32, f16, "
                 "bf16, a quantized weight type (q4_0 ... iq4_xs) or q4_K_M.", bp_type_name(wt));
        return BP_ERR_UNSUPPORTED;
    }
    const struct bp_run_hparams *hp = &cfg->hp;
    const int n = plan(hp, mix, opts->fused_qkv, cfg->tied, NULL);
    struct plan_entry *pl = calloc((size_t)n, sizeof *pl);
    struct bp_run_model *m = calloc(1, sizeof *m);
    bp_status s = BP_ERR_OUT_OF_MEMORY;
    struct gen_job *jobs = NULL;
    if (!pl || !m) goto out;
    plan(hp, mix, opts->fused_qkv, cfg->tied, pl);
    for (int i = 0; i < n; i++)
        if (pl[i].ne[0] % bp_type_block_size(pl[i].type) != 0) {
            snprintf(err, cap, "builtin:%s cannot be stored as %s: the rows of %s are not whole "
                     "blocks of %" PRId64 ".", name, mix->name, pl[i].name, bp_type_block_size(pl[i].type));
            s = BP_ERR_UNSUPPORTED;
            goto out;
        }
    m->hp = *hp;
    m->mix = opts->mix;
    snprintf(m->name, sizeof m->name, "builtin:%s", name);
    m->weights = calloc((size_t)n, sizeof *m->weights);
    if (!m->weights) goto out;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const enum bp_type t = pl[i].type;
        total += (bp_row_size(t, pl[i].ne[0]) * (size_t)pl[i].ne[1] + 63) & ~(size_t)63;
    }
    m->owned = malloc(total);
    if (!m->owned) goto out;
    int64_t n_jobs = 0;
    for (int i = 0; i < n; i++) {
        const int64_t per = GEN_JOB_ELEMENTS / pl[i].ne[0] > 0 ? GEN_JOB_ELEMENTS / pl[i].ne[0] : 1;
        n_jobs += (pl[i].ne[1] + per - 1) / per;
    }
    jobs = malloc((size_t)n_jobs * sizeof *jobs);
    if (!jobs) goto out;
    size_t off = 0;
    n_jobs = 0;
    for (int i = 0; i < n; i++) {
        struct bp_run_weight *w = &m->weights[i];
        const enum bp_type t = pl[i].type;
        snprintf(w->name, sizeof w->name, "%s", pl[i].name);
        w->type = t;
        w->n_dims = pl[i].n_dims;
        memcpy(w->ne, pl[i].ne, sizeof w->ne);
        w->size = bp_row_size(t, pl[i].ne[0]) * (size_t)pl[i].ne[1];
        w->data = (uint8_t *)m->owned + off;
        off += (w->size + 63) & ~(size_t)63;
        const int64_t per = GEN_JOB_ELEMENTS / pl[i].ne[0] > 0 ? GEN_JOB_ELEMENTS / pl[i].ne[0] : 1;
        for (int64_t r = 0; r < pl[i].ne[1]; r += per)
            jobs[n_jobs++] = (struct gen_job){ .w = i, .r0 = r,
                                               .r1 = r + per < pl[i].ne[1] ? r + per : pl[i].ne[1] };
    }
    struct gen g = { .hp = hp, .seed = opts->seed, .pl = pl, .weights = m->weights, .jobs = jobs,
                     .n_jobs = n_jobs };
    atomic_init(&g.next, 0);
    atomic_init(&g.done, 0);
    atomic_init(&g.failed, 0);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = opts->n_threads > 0 ? opts->n_threads : ncpu > 0 ? (int)ncpu : 1;
    if (nth > GEN_MAX_THREADS) nth = GEN_MAX_THREADS;
    if (!gen_run(&g, nth, opts, total)) goto out;
    if (atomic_load(&g.failed)) {
        const int i = atomic_load(&g.failed) - 1;
        snprintf(err, cap, "converting builtin weight '%s' to %s failed: %s", pl[i].name,
                 bp_type_name(m->weights[i].type), bp_last_error());
        s = BP_ERR_INTERNAL;
        goto out;
    }
    m->n_weights = (size_t)n;
    s = bp_run_model_bind(m, err, cap);
out:
    if (s == BP_ERR_OUT_OF_MEMORY && err && cap && !err[0])
        snprintf(err, cap, "out of memory generating builtin:%s.", name);
    free(jobs);
    free(pl);
    if (s != BP_OK) {
        bp_run_model_free(m);
        return s;
    }
    *out = m;
    return BP_OK;
}
