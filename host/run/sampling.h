/*
 * sampling.h — choosing the next token from logits on the host, the same
 * way on every device and thread count: repetition penalty, top-k, top-p,
 * min-p, temperature, then a draw from a seeded xoshiro256** generator
 * (ours, so a seed means the same tokens everywhere). Temperature 0 is
 * greedy (argmax after the penalty).
 */
#ifndef BP_RUN_SAMPLING_H
#define BP_RUN_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_status.h>

struct bp_sampling_params {
    float temp;            /* <= 0: greedy */
    int32_t top_k;         /* 0: all tokens */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off; > 1 discourages the last repeat_last_n tokens */
    int32_t repeat_last_n;
    uint64_t seed;
};

/* Greedy by default; llama.cpp's defaults for the rest once temp > 0. */
#define BP_SAMPLING_DEFAULTS \
    { .temp = 0.0f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f, \
      .repeat_last_n = 64, .seed = 0 }

struct bp_sampler;

/* A sampler over n_vocab logits; NULL when memory runs out. One thread. */
struct bp_sampler *bp_sampler_new(const struct bp_sampling_params *p, int32_t n_vocab);
void bp_sampler_free(struct bp_sampler *s);
/* The next token for logits[0..n_vocab) (not modified). The caller then
 * reports what it used with bp_sampler_accept (the prompt's tokens too),
 * which the repetition penalty looks back over. */
int32_t bp_sampler_sample(struct bp_sampler *s, const float *logits);
void bp_sampler_accept(struct bp_sampler *s, int32_t token);

#endif /* BP_RUN_SAMPLING_H */
