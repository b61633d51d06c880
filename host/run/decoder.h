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

/* The most sequences one session holds (bp_run_session_options.n_seq). */
#define BP_RUN_MAX_SEQ 256

struct bp_run_session_options {
    int64_t n_ctx;              /* KV cache positions (per sequence); 0: 512 (capped by the model's) */
    int n_threads;              /* 0: the backend's default */
    /* > 1: the first prefill's token count, planned and its memory touched
     * at load time (with logits at every position when prefill_all), so
     * the first prompt runs at the speed of later ones. */
    int64_t n_prefill;
    bool prefill_all;
    /* Called after each weight upload: done and total bytes. May be NULL. */
    void (*progress)(void *user, size_t done, size_t total);
    void *progress_user;
    /* Scheduling (bp_sched over dev and, when dev is not a CPU, the cpu
     * device as fallback): the first offload_layers layers' weights and KV
     * caches go on dev, the rest and the embedding, output norm and output
     * on the cpu (llama.cpp's -ngl); 0 means all layers. strict forbids
     * fallback (BACKPLANE_SCHED_STRICT=1 too). direct skips the scheduler
     * and computes on dev alone (the benchmark's reference). */
    int64_t offload_layers;
    /* With the cpu fallback (dev not a CPU): the expert weights
     * (ffn_{gate,up,down}_exps) of the first cpu_moe_layers layers stay on
     * the cpu, and their MUL_MAT_IDs run there, while the rest of each layer
     * runs on dev (llama.cpp's --n-cpu-moe); < 0: every layer's (--cpu-moe);
     * 0: none. Ignored for a model without experts or on a CPU device. */
    int64_t cpu_moe_layers;
    bool strict;
    bool direct;
    /* Sequences, each with its own region of n_ctx cache positions, for
     * bp_run_session_eval_seqs; 0 or 1: one. bp_run_session_eval
     * evaluates sequence 0. */
    int n_seq;
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

/* One sequence's part of bp_run_session_eval_seqs: n tokens of sequence
 * seq at positions n_past.. (the caller counts each sequence's positions);
 * logits receives n_vocab floats, those of its last token. */
struct bp_run_seq_eval {
    int seq;
    int64_t n_past;
    const int32_t *tokens;
    int64_t n;
    float *logits;
};

/* Evaluate, in one graph, either one sequence's n tokens (a prompt chunk)
 * or one token of each of n_e distinct sequences (a decode step of n_e
 * rows: weights read once for all), writing their K and V into each
 * sequence's cache region. A sequence's logits are the same bits whatever
 * else the step holds, on devices whose kernels compute a row as the
 * one-row kernel does. Plans are kept per shape (a few of each kind), so a
 * repeated step allocates nothing. Does not change bp_run_session_n_past.
 * BP_ERR_INVALID_ARGUMENT with a sentence for a sequence out of range or
 * repeated, an overflow of n_ctx, or a token outside the vocabulary. */
bp_status bp_run_session_eval_seqs(struct bp_run_session *s, const struct bp_run_seq_eval *e, int n_e,
                                   char *err, size_t err_cap);

int64_t bp_run_session_n_past(const struct bp_run_session *s);
int64_t bp_run_session_n_ctx(const struct bp_run_session *s);
/* Forget the KV cache (the next eval starts at position 0). */
void bp_run_session_reset(struct bp_run_session *s);

/* What a session has built and allocated so far: a decode step reuses the
 * plan of its capacity, so after the first step of each capacity (32, 64,
 * ... positions) these stop growing; a prefill adds one of each unless the
 * one before had the same shape (tokens, past positions, logits wanted). */
struct bp_run_session_stats {
    uint64_t evals;             /* bp_run_session_eval calls that ran */
    uint64_t graphs_built;
    uint64_t buffers_allocated; /* device buffers, weights, caches and the scheduler's included */
    uint64_t sched_plans;       /* plans the scheduler made (one per graph built) */
    uint64_t copies;            /* boundary copies the scheduler made, all evals */
};
void bp_run_session_get_stats(const struct bp_run_session *s, struct bp_run_session_stats *out);

/* The device tensor of the model's weight of that name (NULL when none):
 * its buffer shows where the session placed it. */
struct bp_tensor *bp_run_session_weight(const struct bp_run_session *s, const char *name);

/* Bytes of every buffer the session holds now on dev: weights, KV cache,
 * the step buffers of the plans made so far (its own, or the scheduler's
 * and their copies), what bp_run_plan_make predicts per device. */
size_t bp_run_session_total_device_bytes(const struct bp_run_session *s, const struct bp_device *dev);
/* On a meta device: the bytes each sub-device holds now for the session
 * (bytes has BP_META_MAX_DEVICES entries), read from the meta plugin's
 * sub-buffers (bp_meta_buffer_device_bytes) and its all-reduce scratch.
 * BP_ERR_INVALID_ARGUMENT on another device. */
bp_status bp_run_session_sub_device_bytes(const struct bp_run_session *s, size_t *bytes);

/* The scheduler's placement of the latest decode graph (BP_ERR_NOT_FOUND
 * before the first decode step or without a scheduler). */
bp_status bp_run_session_placement(const struct bp_run_session *s, struct bp_sched_summary *out);

/* Bytes of the session's weight and cache buffers on dev. */
size_t bp_run_session_device_bytes(const struct bp_run_session *s, const struct bp_device *dev);

/* The session's device and execution stream (owned by the session). */
struct bp_device *bp_run_session_device(const struct bp_run_session *s);
struct bp_backend *bp_run_session_backend(const struct bp_run_session *s);

/* Index of the largest value (the first of equals). */
int32_t bp_run_argmax(const float *v, int64_t n);

#endif /* BP_RUN_DECODER_H */
