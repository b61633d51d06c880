/*
 * batch.h — several sequences ("slots") of one model on one device,
 * advanced together: the engine under `backplane serve`.
 *
 * A slot is fed tokens (a prompt, then each sampled token); each
 * bp_run_batch_step evaluates what the slots have queued: a slot with one
 * queued token is a decode row, a slot with more is prefilled in chunks
 * of at most `prefill_chunk` tokens. Once a slot's queue is empty after a
 * step, its logits for the last token it was fed are ready.
 *
 * Batch invariance: a slot's logits depend only on the tokens it was fed,
 * never on which other slots are busy, how many there are, or when their
 * tokens arrived. Prompt chunk boundaries are a function of the slot's own
 * queue; on devices whose kernels compute each row as the one-row kernel
 * does (the cpu plugin), results are bit-identical to the slot running
 * alone.
 *
 * One thread drives a batch (no call is safe concurrently with another on
 * the same batch).
 */
#ifndef BP_RUN_BATCH_H
#define BP_RUN_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

#include "model.h"

struct bp_run_batch;
struct bp_run_session;

struct bp_run_batch_options {
    int n_slots;            /* sequences served at once; 0: 4 */
    int64_t n_ctx;          /* KV positions per slot; 0: 512 (capped by the model's) */
    int n_threads;          /* 0: the backend's default */
    int64_t prefill_chunk;  /* most prompt tokens a slot evaluates in one step; 0: 128 */
};

/* A batch of m on dev (m must outlive it). On error returns a status and a
 * sentence in err; *out is left NULL. */
bp_status bp_run_batch_new(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_batch_options *opts, struct bp_run_batch **out,
                           char *err, size_t err_cap);
/* Free b, its session and its buffers (NULL: nothing). */
void bp_run_batch_free(struct bp_run_batch *b);

/* Slots, KV positions per slot (after the model's cap) and the logits'
 * length, as fixed at bp_run_batch_new. */
int bp_run_batch_n_slots(const struct bp_run_batch *b);
int64_t bp_run_batch_n_ctx(const struct bp_run_batch *b);
int64_t bp_run_batch_n_vocab(const struct bp_run_batch *b);

/* Queue n tokens (copied) after what slot holds. BP_ERR_INVALID_ARGUMENT
 * (with a sentence) when slot is out of range, n < 1, or the slot's cache
 * would pass n_ctx positions; nothing is queued then. */
bp_status bp_run_batch_feed(struct bp_run_batch *b, int slot, const int32_t *tokens, int64_t n,
                            char *err, size_t err_cap);

/* Forget what slot holds: its cache positions and queued tokens. */
void bp_run_batch_clear(struct bp_run_batch *b, int slot);

/* Evaluate one step for every slot with queued tokens (see above). A step
 * with nothing queued returns BP_OK at once. On error the step's slots keep
 * their previous state where possible; err says what happened. */
bp_status bp_run_batch_step(struct bp_run_batch *b, char *err, size_t err_cap);

/* After a step: the n_vocab logits of slot's last fed token, when that step
 * consumed the slot's last queued token; NULL otherwise. Valid until the
 * next step, feed or clear of that slot; owned by the batch. */
const float *bp_run_batch_logits(const struct bp_run_batch *b, int slot);

/* Positions slot's cache holds (tokens evaluated) and tokens still queued. */
int64_t bp_run_batch_n_past(const struct bp_run_batch *b, int slot);
int64_t bp_run_batch_n_queued(const struct bp_run_batch *b, int slot);

/* What the last step did: decode rows and prompt tokens evaluated. */
struct bp_run_batch_step_info {
    int decode_rows;
    int64_t prefill_tokens;
};
void bp_run_batch_last_step(const struct bp_run_batch *b, struct bp_run_batch_step_info *out);

/* The decoder session under the batch (one per batch, n_slots sequences;
 * owned by the batch): for its statistics, placement and profile. */
struct bp_run_session *bp_run_batch_session(const struct bp_run_batch *b);

#endif /* BP_RUN_BATCH_H */
