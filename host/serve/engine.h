/*
 * engine.h — the one thread that owns the batch (host/run/batch.h): it
 * admits queued jobs to free slots, steps the batch, samples each slot
 * whose logits are ready, applies stop strings, end of generation and
 * max_tokens, and hands text to the jobs. A cancelled job's slot is
 * cleared before the next step.
 */
#ifndef BP_SERVE_ENGINE_H
#define BP_SERVE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <backplane/bp_tokenizer.h>

#include "batch.h"
#include "job.h"

struct serve_engine;

/* Starts the engine thread on b (owned by the engine from then on, freed
 * by serve_engine_stop) and tok (borrowed). At most max_queue jobs wait
 * for a slot. NULL after one sentence in err. */
struct serve_engine *serve_engine_start(struct bp_run_batch *b, const struct bp_tokenizer *tok, int max_queue,
                                        char *err, size_t err_cap);

/* Queues j (the engine takes its own reference). false when the queue is
 * full or the engine is draining: the caller answers 503. */
bool serve_engine_submit(struct serve_engine *e, struct serve_job *j);

/* Stops admitting new jobs; the queued and running ones still finish. */
void serve_engine_drain(struct serve_engine *e);
/* True when no job is queued or running. */
bool serve_engine_idle(struct serve_engine *e);
/* Finishes the jobs it holds, joins the thread and frees the batch. */
void serve_engine_stop(struct serve_engine *e);

#endif /* BP_SERVE_ENGINE_H */
