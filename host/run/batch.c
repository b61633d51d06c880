/*
 * batch.c — the engine of batch.h over one decoder session of n_slots
 * sequences (decoder.h, bp_run_session_eval_seqs): the weights are uploaded
 * once, each slot owns a region of n_ctx positions of every layer's KV
 * cache, and a step is
 *
 *   1. one graph for every slot with exactly one queued token (a decode row
 *      each: the projections, FFN and output are M-row MUL_MATs; RoPE, the
 *      cache writes and the mask are per row; each row attends over its own
 *      slot's region, as the one-row graph does), then
 *   2. prompt chunks: slots with more queued tokens, taken in turn from the
 *      one after the last served, each evaluating min(queued, prefill_chunk)
 *      tokens in a graph of its own, until prefill_chunk tokens have been
 *      evaluated this step (at least one chunk per step), so a long prompt
 *      delays the decode rows by about one chunk per step.
 *
 * Invariance: a slot's chunk boundaries follow its own queue (every chunk
 * is min(queued, prefill_chunk) tokens), its chunk graph and its attention
 * are the same whoever else is busy, and the rows of the decode graph are
 * computed independently of each other; so what a slot computes does not
 * depend on the others, only when.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "decoder.h"

struct batch_slot {
    int32_t *queue;         /* tokens fed, not yet evaluated */
    int64_t n_queued, queue_cap;
    int64_t n_past;         /* positions of the slot's cache region in use */
    float *logits;          /* n_vocab */
    bool have_logits;
};

struct bp_run_batch {
    const struct bp_run_model *m;
    struct bp_run_session *s;
    int n_slots;
    int64_t n_ctx, n_vocab, chunk;
    int next_prefill;       /* the slot whose prompt goes first next step */
    struct batch_slot *slots;
    struct bp_run_seq_eval *rows; /* n_slots: a step's decode rows */
    struct bp_run_batch_step_info last;
};

bp_status bp_run_batch_new(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_batch_options *opts, struct bp_run_batch **out,
                           char *err, size_t err_cap)
{
    *out = NULL;
    struct bp_run_batch_options o = opts ? *opts : (struct bp_run_batch_options){0};
    if (o.n_slots < 0 || o.n_slots > BP_RUN_MAX_SEQ || o.n_ctx < 0 || o.prefill_chunk < 0) {
        snprintf(err, err_cap, "batch options out of range (slots %d of at most %d, n_ctx %lld, chunk %lld)",
                 o.n_slots, BP_RUN_MAX_SEQ, (long long)o.n_ctx, (long long)o.prefill_chunk);
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct bp_run_batch *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    b->m = m;
    b->n_slots = o.n_slots ? o.n_slots : 4;
    b->chunk = o.prefill_chunk ? o.prefill_chunk : 128;
    b->n_vocab = m->hp.n_vocab;
    b->slots = calloc((size_t)b->n_slots, sizeof *b->slots);
    b->rows = calloc((size_t)b->n_slots, sizeof *b->rows);
    if (!b->slots || !b->rows) goto oom;
    for (int i = 0; i < b->n_slots; i++) {
        b->slots[i].logits = malloc((size_t)b->n_vocab * sizeof(float));
        if (!b->slots[i].logits) goto oom;
    }
    struct bp_run_session_options so = { .n_ctx = o.n_ctx, .n_threads = o.n_threads, .n_seq = b->n_slots };
    bp_status st = bp_run_session_new(m, dev, &so, &b->s, err, err_cap);
    if (st != BP_OK) {
        bp_run_batch_free(b);
        return st;
    }
    b->n_ctx = bp_run_session_n_ctx(b->s);
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
    bp_run_session_free(b->s);
    for (int i = 0; b->slots && i < b->n_slots; i++) {
        free(b->slots[i].queue);
        free(b->slots[i].logits);
    }
    free(b->slots);
    free(b->rows);
    free(b);
}

int bp_run_batch_n_slots(const struct bp_run_batch *b) { return b->n_slots; }
int64_t bp_run_batch_n_ctx(const struct bp_run_batch *b) { return b->n_ctx; }
int64_t bp_run_batch_n_vocab(const struct bp_run_batch *b) { return b->n_vocab; }

struct bp_run_session *bp_run_batch_session(const struct bp_run_batch *b) { return b->s; }

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
    int64_t held = s->n_past + s->n_queued;
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
    /* The region's old rows stay: positions past n_past are masked. */
    b->slots[slot].n_past = 0;
    b->slots[slot].n_queued = 0;
    b->slots[slot].have_logits = false;
}

/* Drop the n tokens slot s evaluated from its queue. */
static void consumed(struct batch_slot *s, int64_t n)
{
    memmove(s->queue, s->queue + n, (size_t)(s->n_queued - n) * sizeof *s->queue);
    s->n_queued -= n;
    s->n_past += n;
    s->have_logits = s->n_queued == 0;
}

bp_status bp_run_batch_step(struct bp_run_batch *b, char *err, size_t err_cap)
{
    b->last = (struct bp_run_batch_step_info){0};
    for (int i = 0; i < b->n_slots; i++) b->slots[i].have_logits = false;
    /* 1. the decode rows, one graph */
    int m = 0;
    for (int i = 0; i < b->n_slots; i++) {
        struct batch_slot *s = &b->slots[i];
        if (s->n_queued != 1) continue;
        b->rows[m++] = (struct bp_run_seq_eval){ .seq = i, .n_past = s->n_past, .tokens = s->queue, .n = 1,
                                                 .logits = s->logits };
    }
    if (m > 0) {
        bp_status st = bp_run_session_eval_seqs(b->s, b->rows, m, err, err_cap);
        if (st != BP_OK) return st;
        for (int r = 0; r < m; r++) consumed(&b->slots[b->rows[r].seq], 1);
        b->last.decode_rows = m;
    }
    /* 2. prompt chunks, in turn, up to one chunk's worth of tokens */
    int64_t budget = b->chunk;
    for (int k = 0; k < b->n_slots && budget > 0; k++) {
        const int i = (b->next_prefill + k) % b->n_slots;
        struct batch_slot *s = &b->slots[i];
        if (s->n_queued < 2) continue;
        const int64_t n = s->n_queued < b->chunk ? s->n_queued : b->chunk;
        if (n > budget && b->last.prefill_tokens > 0) break;
        const struct bp_run_seq_eval e = { .seq = i, .n_past = s->n_past, .tokens = s->queue, .n = n,
                                           .logits = s->logits };
        bp_status st = bp_run_session_eval_seqs(b->s, &e, 1, err, err_cap);
        if (st != BP_OK) return st;
        consumed(s, n);
        b->last.prefill_tokens += n;
        budget -= n;
        b->next_prefill = (i + 1) % b->n_slots;
    }
    return BP_OK;
}

const float *bp_run_batch_logits(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) && b->slots[slot].have_logits ? b->slots[slot].logits : NULL;
}

int64_t bp_run_batch_n_past(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) ? b->slots[slot].n_past : 0;
}

int64_t bp_run_batch_n_queued(const struct bp_run_batch *b, int slot)
{
    return slot_ok(b, slot) ? b->slots[slot].n_queued : 0;
}

void bp_run_batch_last_step(const struct bp_run_batch *b, struct bp_run_batch_step_info *out)
{
    *out = b->last;
}
