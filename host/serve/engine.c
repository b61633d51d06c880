/*
 * engine.c — the engine loop (engine.h). One thread; the batch and the
 * per-slot state (sampler, detokenizer stream, stop matcher) are its alone.
 * The queue, the flags and the gauges are under e->mu; a job's outputs
 * under the job's own mutex.
 */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "sampling.h"

struct slot {
    struct serve_job *job;      /* NULL: free */
    struct bp_sampler *sampler;
    struct bp_token_stream *stream;
    struct serve_stop stop;
    int64_t n_gen;
    double t_last;
};

struct serve_engine {
    struct bp_run_batch *b;
    const struct bp_tokenizer *tok;
    int n_slots, max_queue;
    int64_t n_vocab, n_ctx;
    struct slot *slots;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct serve_job *head, *tail;  /* waiting for a slot */
    int n_queued, n_busy;
    bool draining, stopping;
};

/* ------------------------------------------------------------- helpers */

static void publish(struct serve_job *j, const char *text, size_t len, const struct serve_token_lp *lp,
                    const char *finish, const char *err)
{
    pthread_mutex_lock(&j->mu);
    bool ok = serve_buf_add(&j->text, text, len);
    if (lp && j->p.logprobs && ok) {
        if (j->n_lp == j->lp_cap) {
            size_t cap = j->lp_cap ? 2 * j->lp_cap : 16;
            struct serve_token_lp *n = realloc(j->lp, cap * sizeof *n);
            if (n) {
                j->lp = n;
                j->lp_cap = cap;
            }
        }
        if (j->n_lp < j->lp_cap) j->lp[j->n_lp++] = *lp;
        else ok = false;
    }
    if (lp) j->n_gen++;
    j->running = true;
    if (!ok && !err) err = "the server ran out of memory for the generated text";
    if (err) {
        j->failed = true;
        snprintf(j->err, sizeof j->err, "%s", err);
    }
    if (finish || err) {
        j->done = true;
        j->finish = finish ? finish : "stop";
    }
    j->version++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void free_slot(struct serve_engine *e, int i)
{
    struct slot *s = &e->slots[i];
    bp_run_batch_clear(e->b, i);
    bp_sampler_free(s->sampler);
    bp_token_stream_free(s->stream);
    serve_stop_free(&s->stop);
    serve_job_release(s->job);
    *s = (struct slot){0};
    pthread_mutex_lock(&e->mu);
    e->n_busy--;
    pthread_mutex_unlock(&e->mu);
}

/* Ends slot i's job: with err a failure, else finish ("stop", "length"). */
static void finish_slot(struct serve_engine *e, int i, const char *finish, const char *err)
{
    struct serve_job *j = e->slots[i].job;
    publish(j, "", 0, NULL, finish, err);
    free_slot(e, i);
}

static bool is_cancelled(struct serve_job *j)
{
    pthread_mutex_lock(&j->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* Log-probabilities of token and of the k most likely tokens. */
static void logprobs(const float *logits, int64_t n, int32_t token, int k, struct serve_token_lp *out)
{
    float mx = logits[0];
    for (int64_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)(logits[i] - mx));
    const double lse = (double)mx + log(sum);
    out->id = token;
    out->logprob = (float)((double)logits[token] - lse);
    out->n_top = 0;
    for (int64_t i = 0; i < n && k > 0; i++) {
        int at = out->n_top;
        if (at == k && logits[i] <= logits[out->top_id[k - 1]]) continue;
        if (at == k) at--;
        while (at > 0 && logits[out->top_id[at - 1]] < logits[i]) {
            out->top_id[at] = out->top_id[at - 1];
            at--;
        }
        out->top_id[at] = (int32_t)i;
        if (out->n_top < k) out->n_top++;
    }
    for (int i = 0; i < out->n_top; i++) out->top_lp[i] = (float)((double)logits[out->top_id[i]] - lse);
}

/* ---------------------------------------------------------------- loop */

/* Moves queued jobs to free slots and feeds their prompts (e->mu held). */
static void admit(struct serve_engine *e)
{
    for (int i = 0; i < e->n_slots && e->head; i++) {
        if (e->slots[i].job) continue;
        struct serve_job *j = e->head;
        e->head = j->next;
        if (!e->head) e->tail = NULL;
        e->n_queued--;
        if (is_cancelled(j)) {
            publish(j, "", 0, NULL, "stop", NULL);
            serve_job_release(j);
            i--;
            continue;
        }
        struct slot *s = &e->slots[i];
        *s = (struct slot){ .job = j, .t_last = serve_now() };
        e->n_busy++;
        char err[256] = "";
        s->sampler = bp_sampler_new(&j->p.sp, (int32_t)e->n_vocab);
        s->stream = bp_token_stream_new(e->tok);
        serve_stop_init(&s->stop, j->p.stop, j->p.n_stop);
        if (!s->sampler || !s->stream) snprintf(err, sizeof err, "the server ran out of memory for a sampler");
        else if (bp_run_batch_feed(e->b, i, j->prompt, j->n_prompt, err, sizeof err) == BP_OK) {
            for (int64_t t = 0; t < j->n_prompt; t++) bp_sampler_accept(s->sampler, j->prompt[t]);
            serve_metrics_tokens(j->n_prompt, 0);
            publish(j, "", 0, NULL, NULL, NULL);   /* running: the connection stops pinging */
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        finish_slot(e, i, NULL, err);
        pthread_mutex_lock(&e->mu);
    }
}

/* Slot i's logits are ready: sample, detokenize, check the stops, feed. */
static void advance(struct serve_engine *e, int i, const float *logits)
{
    struct slot *s = &e->slots[i];
    struct serve_job *j = s->job;
    const int32_t t = bp_sampler_sample(s->sampler, logits);
    bp_sampler_accept(s->sampler, t);
    struct serve_token_lp lp = {0};
    if (j->p.logprobs) logprobs(logits, e->n_vocab, t, j->p.top_logprobs, &lp);
    else lp.id = t;
    s->n_gen++;
    const double now = serve_now();
    serve_metrics_observe(s->n_gen == 1 ? SERVE_HIST_TTFT : SERVE_HIST_ITL,
                          s->n_gen == 1 ? now - j->t_arrive : now - s->t_last);
    s->t_last = now;
    serve_metrics_tokens(0, 1);
    const char *finish = NULL;
    bool ok = true;
    if (bp_tokenizer_is_eog(e->tok, t)) finish = "stop";
    else {
        size_t n;
        const char *piece = bp_token_stream_push(s->stream, t, &n);
        ok = serve_stop_push(&s->stop, piece, n);
        if (s->stop.stopped) finish = "stop";
    }
    if (!finish && (s->n_gen >= j->max_tokens || bp_run_batch_n_past(e->b, i) + 1 > e->n_ctx)) finish = "length";
    if (finish && !s->stop.stopped) {
        size_t n;
        const char *rest = bp_token_stream_flush(s->stream, &n);
        ok = ok && serve_stop_push(&s->stop, rest, n);
        if (s->stop.stopped) finish = "stop";
    }
    const char *text;
    size_t len;
    serve_stop_take(&s->stop, finish != NULL, &text, &len);
    char err[256] = "";
    if (!ok) snprintf(err, sizeof err, "the server ran out of memory for the generated text");
    publish(j, text, len, &lp, finish, err[0] ? err : NULL);
    if (finish || err[0]) {
        free_slot(e, i);
        return;
    }
    if (bp_run_batch_feed(e->b, i, &t, 1, err, sizeof err) != BP_OK) finish_slot(e, i, NULL, err);
}

static void *loop(void *arg)
{
    struct serve_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        admit(e);
        serve_metrics_gauges(e->n_queued, e->n_busy);
        if (!e->n_busy) {
            if (e->stopping && !e->head) break;
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        /* A client that went away frees its slot before this step. */
        for (int i = 0; i < e->n_slots; i++)
            if (e->slots[i].job && is_cancelled(e->slots[i].job)) finish_slot(e, i, "stop", NULL);
        char err[512] = "";
        if (bp_run_batch_step(e->b, err, sizeof err) != BP_OK) {
            char msg[600];
            snprintf(msg, sizeof msg, "evaluating the model failed: %s", err);
            for (int i = 0; i < e->n_slots; i++)
                if (e->slots[i].job) finish_slot(e, i, NULL, msg);
        }
        for (int i = 0; i < e->n_slots; i++) {
            if (!e->slots[i].job) continue;
            const float *logits = bp_run_batch_logits(e->b, i);
            if (logits) advance(e, i, logits);
        }
        pthread_mutex_lock(&e->mu);
    }
    serve_metrics_gauges(0, 0);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ------------------------------------------------------------- control */

struct serve_engine *serve_engine_start(struct bp_run_batch *b, const struct bp_tokenizer *tok, int max_queue,
                                        char *err, size_t err_cap)
{
    struct serve_engine *e = calloc(1, sizeof *e);
    if (e) e->slots = calloc((size_t)bp_run_batch_n_slots(b), sizeof *e->slots);
    if (!e || !e->slots) {
        if (e) free(e);
        snprintf(err, err_cap, "out of host memory starting the engine");
        return NULL;
    }
    e->b = b;
    e->tok = tok;
    e->n_slots = bp_run_batch_n_slots(b);
    e->n_vocab = bp_run_batch_n_vocab(b);
    e->n_ctx = bp_run_batch_n_ctx(b);
    e->max_queue = max_queue;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->thread, NULL, loop, e)) {
        snprintf(err, err_cap, "cannot start the engine thread");
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e->slots);
        free(e);
        return NULL;
    }
    return e;
}

bool serve_engine_submit(struct serve_engine *e, struct serve_job *j)
{
    pthread_mutex_lock(&e->mu);
    /* Room for every slot plus max_queue waiting. */
    const bool room = !e->draining && e->n_queued + e->n_busy < e->n_slots + e->max_queue;
    if (room) {
        serve_job_retain(j);
        j->next = NULL;
        if (e->tail) e->tail->next = j;
        else e->head = j;
        e->tail = j;
        e->n_queued++;
        serve_metrics_gauges(e->n_queued, e->n_busy);
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return room;
}

void serve_engine_drain(struct serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    pthread_mutex_unlock(&e->mu);
}

bool serve_engine_idle(struct serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    bool idle = !e->head && !e->n_busy;
    pthread_mutex_unlock(&e->mu);
    return idle;
}

void serve_engine_stop(struct serve_engine *e)
{
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->draining = e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    bp_run_batch_free(e->b);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->slots);
    free(e);
}
