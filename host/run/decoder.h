/*
 * decoder.h — a Llama decoder session on one device: weights uploaded from
 * the model's host memory (the GGUF mapping itself), a KV cache, and graphs
 * built on the public API for a prefill of many tokens or one decode step.
 */
#ifndef BP_RUN_DECODER_H
#define BP_RUN_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

#include "model.h"
#include "plan.h"

struct bp_run_session;

struct bp_run_session_options {
    int64_t n_ctx;              /* KV cache positions; 0: 512 (capped by the model's) */
    int n_threads;              /* 0: the backend's default */
    /* Called after each weight upload: done and total bytes. May be NULL. */
    void (*progress)(void *user, size_t done, size_t total);
    void *progress_user;
};

/* Create a session of m on dev (m must outlive it). On a meta device the
 * runner's split table (split.c) decides where each weight and cache goes;
 * the device keeps that table until another session on it installs its own,
 * so use one session at a time per meta device. */
bp_status bp_run_session_new(const struct bp_run_model *m, struct bp_device *dev,
                             const struct bp_run_session_options *opts,
                             struct bp_run_session **out, char *err, size_t err_cap);
void bp_run_session_free(struct bp_run_session *s);

/* Evaluate n tokens at the next positions (a prefill when n > 1, a decode
 * step when n == 1), appending them to the KV cache. logits receives
 * n_vocab floats per position when all_positions, else for the last one. */
bp_status bp_run_session_eval(struct bp_run_session *s, const int32_t *tokens, int64_t n,
                              bool all_positions, float *logits, char *err, size_t err_cap);

int64_t bp_run_session_n_past(const struct bp_run_session *s);
int64_t bp_run_session_n_ctx(const struct bp_run_session *s);
/* Forget the KV cache (the next eval starts at position 0). */
void bp_run_session_reset(struct bp_run_session *s);

/* What a session has built and allocated so far: a decode step reuses the
 * plan of its capacity, so after the first step of each capacity (32, 64,
 * ... positions) these stop growing; a prefill adds one of each. */
struct bp_run_session_stats {
    uint64_t evals;             /* bp_run_session_eval calls that ran */
    uint64_t graphs_built;
    uint64_t buffers_allocated; /* device buffers, weights and caches included */
};
void bp_run_session_get_stats(const struct bp_run_session *s, struct bp_run_session_stats *out);

/* The device tensor of the model's weight of that name (NULL when none):
 * its buffer shows where the session placed it. */
struct bp_tensor *bp_run_session_weight(const struct bp_run_session *s, const char *name);

/* Bytes of the device buffers the session holds now: weights, KV cache and
 * the decode-step buffers made so far (what bp_run_plan_make predicts). */
size_t bp_run_session_device_bytes(const struct bp_run_session *s);

/* Index of the largest value (the first of equals). */
int32_t bp_run_argmax(const float *v, int64_t n);

#endif /* BP_RUN_DECODER_H */
