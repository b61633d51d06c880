/* job.c — a request shared by its connection and the engine (job.h). */
#include "job.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

double serve_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct serve_job *serve_job_new(struct serve_params *p)
{
    struct serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&j->mu, NULL) || pthread_cond_init(&j->cv, &ca)) {
        pthread_condattr_destroy(&ca);
        free(j);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    j->refs = 1;
    j->p = *p;
    *p = (struct serve_params){0};
    j->t_arrive = serve_now();
    j->created = (long long)time(NULL);
    return j;
}

void serve_job_retain(struct serve_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void serve_job_release(struct serve_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    serve_params_free(&j->p);
    free(j->prompt);
    free(j->text.data);
    free(j->lp);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void serve_job_wait(struct serve_job *j, uint64_t seen, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (j->version == seen)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
}
