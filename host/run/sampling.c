/*
 * sampling.c — the sampler chain of sampling.h, in llama.cpp's order
 * (penalty, top-k, top-p, min-p, temperature, draw). Probabilities are
 * computed in double from the largest logit down, and candidates are
 * ordered by logit then id, so the result depends on nothing but the logits
 * and the seed.
 */
#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    float logit;
    int32_t id;
    double p;
};

struct bp_sampler {
    struct bp_sampling_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    struct cand *c;
    int32_t *recent;       /* ring of the last repeat_last_n tokens */
    int32_t n_recent, next_recent;
    float *penalized;      /* logits after the repetition penalty */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: a uniform double in [0, 1). */
static double uniform(struct bp_sampler *s)
{
    uint64_t *r = s->rng;
    const uint64_t out = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return (double)(out >> 11) * 0x1.0p-53;
}

struct bp_sampler *bp_sampler_new(const struct bp_sampling_params *p, int32_t n_vocab)
{
    struct bp_sampler *s = calloc(1, sizeof *s);
    if (!s || n_vocab <= 0) { free(s); return NULL; }
    s->p = *p;
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->penalized = malloc((size_t)n_vocab * sizeof *s->penalized);
    s->recent = malloc((size_t)(s->p.repeat_last_n ? s->p.repeat_last_n : 1) * sizeof *s->recent);
    if (!s->c || !s->penalized || !s->recent) { bp_sampler_free(s); return NULL; }
    return s;
}

void bp_sampler_free(struct bp_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s->penalized);
    free(s->recent);
    free(s);
}

void bp_sampler_accept(struct bp_sampler *s, int32_t token)
{
    if (s->p.repeat_last_n == 0) return;
    s->recent[s->next_recent] = token;
    s->next_recent = (s->next_recent + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* Higher logit first; equal logits by id, so the order is total. */
static int by_logit(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Probabilities of c[0..n) at temperature t (c sorted, c[0] the largest). */
static void softmax(struct cand *c, int32_t n, double t)
{
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += c[i].p = exp(((double)c[i].logit - c[0].logit) / t);
    for (int32_t i = 0; i < n; i++) c[i].p /= sum;
}

/* The k best of c[0..n) moved to the front, sorted: a min-heap of k. */
static void top_k(struct cand *c, int32_t n, int32_t k)
{
    for (int32_t i = 0; i < n; i++) {
        struct cand x = c[i];
        int32_t j;
        if (i < k) j = i;
        else if (by_logit(&x, &c[0]) < 0) j = 0;   /* better than the worst kept */
        else continue;
        if (i < k) {            /* sift up: the heap's root is the worst */
            while (j > 0 && by_logit(&x, &c[(j - 1) / 2]) > 0) { c[j] = c[(j - 1) / 2]; j = (j - 1) / 2; }
        } else {                /* replace the root, sift down */
            for (;;) {
                int32_t ch = 2 * j + 1;
                if (ch >= k) break;
                if (ch + 1 < k && by_logit(&c[ch + 1], &c[ch]) > 0) ch++;
                if (by_logit(&c[ch], &x) <= 0) break;
                c[j] = c[ch];
                j = ch;
            }
        }
        c[j] = x;
    }
    qsort(c, (size_t)k, sizeof *c, by_logit);
}

int32_t bp_sampler_sample(struct bp_sampler *s, const float *logits)
{
    const int32_t V = s->n_vocab;
    const float *lg = logits;
    if (s->p.repeat_penalty != 1.0f && s->n_recent > 0) {
        memcpy(s->penalized, logits, (size_t)V * sizeof *lg);
        for (int32_t i = 0; i < s->n_recent; i++) {
            const int32_t id = s->recent[i];
            if (id < 0 || id >= V) continue;
            /* Once per token, however often it occurred (llama.cpp's rule). */
            bool seen = false;
            for (int32_t j = 0; j < i; j++) seen = seen || s->recent[j] == id;
            if (seen) continue;
            float *l = &s->penalized[id];
            *l = *l > 0 ? *l / s->p.repeat_penalty : *l * s->p.repeat_penalty;
        }
        lg = s->penalized;
    }
    if (s->p.temp <= 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++) if (lg[i] > lg[best]) best = i;
        return best;
    }
    struct cand *c = s->c;
    for (int32_t i = 0; i < V; i++) c[i] = (struct cand){ .logit = lg[i], .id = i };
    int32_t n = V;
    if (s->p.top_k > 0 && s->p.top_k < V) {
        top_k(c, V, s->p.top_k);
        n = s->p.top_k;
    } else
        qsort(c, (size_t)V, sizeof *c, by_logit);
    softmax(c, n, 1.0);
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        for (int32_t i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= s->p.top_p) { n = i + 1; break; }
        }
    }
    if (s->p.min_p > 0.0f) {
        const double floor_p = s->p.min_p * c[0].p;
        int32_t keep = 1;
        while (keep < n && c[keep].p >= floor_p) keep++;
        n = keep;
    }
    softmax(c, n, s->p.temp);
    double u = uniform(s), cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id;   /* u within rounding of 1 */
}
