/*
 * batch.c — the engine of batch.h, one decoder session per slot, stepped
 * one after another. Each slot computes exactly what it would alone (its
 * own graphs, its own chunking), which is the invariance batch.h promises.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "decoder.h"

struct batch_slot {
    struct bp_run_session *s;
    int32_t *queue;         /* tokens fed, not yet evaluated */
    int64_t n_queued, queue_cap;
    float *logits;          /* n_vocab */
    bool have_logits;
};

struct bp_run_batch {
    const struct bp_run_model *m;
    int n_slots;
    int64_t n_ctx, n_vocab, chunk;
    struct batch_slot *slots;
    struct bp_run_batch_step_info last;
};

bp_status bp_run_batch_new(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_batch_options *opts, struct bp_run_batch **out,
                           char *err, size_t err_cap)
{
    *out = NULL;
    struct bp_run_batch_options o = opts ? *opts : (struct bp_run_batch_options){0};
    if (o.n_slots < 0 || o.n_slots > 256 || o.n_ctx < 0 || o.prefill_chunk < 0) {
        snprintf(err, err_cap, "batch options out of range (slots %d, n_ctx %lld, chunk %lld)",
                 o.n_slots, (long long)o.n_ctx, (long long)o.prefill_chunk);
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct bp_run_batch *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    b->m = m;
    b->n_slots = o.n_slots ? o.n_slots : 4;
    b->chunk = o.prefill_chunk ? o.prefill_chunk : 128;
    b->n_vocab = m->hp.n_vocab;
    b->slots = calloc((size_t)b->n_slots, sizeof *b->slots);
    if (!b->slots) goto oom;
    for (int i = 0; i < b->n_slots; i++) {
        struct bp_run_session_options so = {.n_ctx = o.n_ctx, .n_threads = o.n_threads};
        bp_status st = bp_run_session_new(m, dev, &so, &b->slots[i].s, err, err_cap);
        if (st != BP_OK) {
            bp_run_batch_free(b);
            return st;
        }
        b->slots[i].logits = malloc((size_t)b->n_vocab * sizeof(float));
        if (!b->slots[i].logits) goto oom;
    }
    b->n_ctx = bp_run_session_n_ctx(b->slots[0].s);
    *out = b;
    return BP_OK;
oom:
    bp_run_batch_free(b);
    snprintf(err, err_cap, "out of host memory creating a batch of slots");
    return BP_ERR_OUT_OF_MEMORY;
}

void bp_run_batch_free(struct bp_run_batch *b)
{
    if (!b) return;
    for (int i = 0; b->slots && i < b->n_slots; i++) {
        bp_run_session_free(b->slots[i].s);
        free(b->slots[i].queue);
        free(b->slots[i].logits);
    }
    free(b->slots);
    free(b);
}

int bp_run_batch_n_slots(const struct bp_run_batch *b) { return b->n_slots; }
int64_t bp_run_batch_n_ctx(const struct bp_run_batch *b) { return b->n_ctx; }
int64_t bp_run_batch_n_vocab(const struct bp_run_batch *b) { return b->n_vocab; }

static bool slot_ok(const struct bp_run_batch *b, int slot) { return slot >= 0 && slot < b->n_slots; }

bp_status bp_run_batch_feed(struct bp_run_batch *b, int slot, const int32_t *tokens, int64_t n,
                            char *err, size_t err_cap)
{
    if (!slot_ok(b, slot) || n < 1 || !tokens) {
        snprintf(err, err_cap, "feeding slot %d of %d with %lld tokens: nothing to do", slot,
                 b->n_slots, (long long)n);
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct batch_slot *s = &b->slots[slot];
    int64_t held = bp_run_session_n_past(s->s) + s->n_queued;
    if (n > b->n_ctx - held) {
        snprintf(err, err_cap, "slot %d holds %lld of %lld positions; %lld more do not fit", slot,
                 (long long)held, (long long)b->n_ctx, (long long)n);
        return BP_ERR_INVALID_ARGUMENT;
    }
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= b->n_vocab) {
            snprintf(err, err_cap, "token %d is outside the vocabulary (%lld tokens)", tokens[i],
                     (long long)b->n_vocab);
            return BP_ERR_INVALID_ARGUMENT;
        }
    }
    if (s->n_queued + n > s->queue_cap) {
        int64_t cap = s->queue_cap ? s->queue_cap : 64;
        while (cap < s->n_queued + n) cap *= 2;
        int32_t *q = realloc(s->queue, (size_t)cap * sizeof *q);
        if (!q) {
            snprintf(err, err_cap, "out of host memory queueing %lld tokens", (long long)n);
            return BP_ERR_OUT_OF_MEMORY;
        }
        s->queue = q;
        s->queue_cap = cap;
    }
    memcpy(s->queue + s->n_queued, tokens, (size_t)n * sizeof *tokens);
    s->n_queued += n;
    s->have_logits = false;
    return BP_OK;
}

void bp_run_batch_clear(struct bp_run_batch *b, int slot)
{
    if (!slot_ok(b, slot)) return;
    bp_run_session_reset(b->slots[slot].s);
    b->slots[slot].n_queued = 0;
    b->slots[slot].have_logits = false;
}

bp_status bp_run_batch_step(struct bp_run_batch *b, char *err, size_t err_cap)
{
    b->last = (struct bp_run_batch_step_info){0};
    for (int i = 0; i < b->n_slots; i++) b->slots[i].have_logits = false;
    for (int i = 0; i < b->n_slots; i++) {
        struct batch_slot *s = &b->slots[i];
        if (!s->n_queued) continue;
        int64_t n = s->n_queued < b->chunk ? s->n_queued : b->chunk;
        bp_status st = bp_run_session_eval(s->s, s->queue, n, false, s->logits, err, err_cap);
        if (st != BP_OK) return st;
        memmove(s->queue, s->queue + n, (size_t)(s->n_queued - n) * sizeof *s->queue);
        s->n_queued -= n;
        s->have_logits = s->n_queued == 0;
        if (n == 1) b->last.decode_rows++;
        else b->last.prefill_tokens += n;
    }
    return BP_OK;
}

const float *bp_run_batch_logits(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) && b->slots[slot].have_logits ? b->slots[slot].logits : NULL;
}

int64_t bp_run_batch_n_past(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) ? bp_run_session_n_past(b->slots[slot].s) : 0;
}

int64_t bp_run_batch_n_queued(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) ? b->slots[slot].n_queued : 0;
}

void bp_run_batch_last_step(const struct bp_run_batch *b, struct bp_run_batch_step_info *out)
{
    *out = b->last;
}
