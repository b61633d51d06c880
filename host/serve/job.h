/*
 * job.h — one completion request between its HTTP connection and the
 * engine. The connection builds it (parsed parameters, prompt tokens) and
 * submits it; the engine appends text and token log-probabilities as they
 * are produced and marks it done; the connection reads them under the
 * job's mutex and may cancel it. Two references (connection, engine): the
 * last serve_job_release frees it.
 */
#ifndef BP_SERVE_JOB_H
#define BP_SERVE_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "request.h"
#include "text.h"

struct serve_token_lp {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[SERVE_MAX_TOP_LOGPROBS];
    float top_lp[SERVE_MAX_TOP_LOGPROBS];
};

struct serve_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    /* Set before submission, read-only afterwards. */
    struct serve_params p;
    int32_t *prompt;
    int64_t n_prompt;
    int64_t max_tokens;         /* resolved: at most this many generated tokens */
    double t_arrive;            /* serve_now() */
    char id[48];
    long long created;          /* Unix seconds */
    struct serve_job *next;     /* the engine's queue */
    /* Written by the engine, under mu. */
    struct serve_buf text;      /* text released so far (never inside a stop string) */
    struct serve_token_lp *lp;  /* one per generated token when p.logprobs */
    size_t n_lp, lp_cap;
    int64_t n_gen;
    bool running, done, failed;
    const char *finish;         /* "stop" or "length" once done */
    char err[256];              /* when failed */
    uint64_t version;           /* bumped on every change; waiters compare */
    /* Written by the connection, under mu. */
    bool cancelled;
};

/* A job with one reference (the caller's) owning p's contents; NULL when
 * memory runs out (p is left to the caller then). */
struct serve_job *serve_job_new(struct serve_params *p);
void serve_job_retain(struct serve_job *j);
void serve_job_release(struct serve_job *j);

/* Waits (j->mu held, as for pthread_cond_wait) until j->version differs
 * from seen or ms milliseconds pass. */
void serve_job_wait(struct serve_job *j, uint64_t seen, int ms);

/* Monotonic seconds. */
double serve_now(void);

#endif /* BP_SERVE_JOB_H */
