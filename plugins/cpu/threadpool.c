/*
 * threadpool.c — the persistent worker pool of one CPU backend.
 *
 * Workers sleep on a condition variable between jobs, so an idle backend
 * costs nothing; the thread that calls cpu_pool_run is thread 0 of the job.
 * The barrier blocks rather than spins: this is the reference plugin, and a
 * spinning barrier starves the other backend when two run side by side on a
 * machine with few cores.
 */
#include <stdlib.h>

#include "cpu_internal.h"

struct cpu_worker {
    struct cpu_pool *pool;
    int ith;
};

struct cpu_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_job;   /* workers: a new job or stop */
    pthread_cond_t cv_done;  /* caller: every worker left the job */
    pthread_cond_t cv_bar;   /* barrier release */
    int nth;
    int n_started;           /* workers actually running */
    pthread_t *tids;
    struct cpu_worker *workers;

    unsigned long job_seq;
    int n_running;
    bool stop;
    cpu_job_fn fn;
    void *arg;

    int bar_waiting;
    unsigned long bar_seq;
};

static void *cpu_worker_main(void *p)
{
    struct cpu_worker *w = p;
    struct cpu_pool *pool = w->pool;
    unsigned long seen = 0;

    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->job_seq == seen)
            pthread_cond_wait(&pool->cv_job, &pool->mu);
        if (pool->stop)
            break;
        seen = pool->job_seq;
        cpu_job_fn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);

        fn(arg, w->ith, pool->nth);

        pthread_mutex_lock(&pool->mu);
        if (--pool->n_running == 0)
            pthread_cond_signal(&pool->cv_done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

void cpu_pool_free(struct cpu_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->stop = true;
    pthread_cond_broadcast(&pool->cv_job);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_started; i++)
        pthread_join(pool->tids[i], NULL);
    pthread_cond_destroy(&pool->cv_bar);
    pthread_cond_destroy(&pool->cv_done);
    pthread_cond_destroy(&pool->cv_job);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool->tids);
    free(pool);
}

bp_status cpu_pool_new(int n_threads, struct cpu_pool **out)
{
    *out = NULL;
    if (n_threads < 1)
        return BP_ERR_INVALID_ARGUMENT;
    struct cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return BP_ERR_OUT_OF_MEMORY;
    pool->nth = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_job, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    pthread_cond_init(&pool->cv_bar, NULL);

    int n_workers = n_threads - 1;
    if (n_workers > 0) {
        pool->tids = calloc((size_t)n_workers, sizeof *pool->tids);
        pool->workers = calloc((size_t)n_workers, sizeof *pool->workers);
        if (!pool->tids || !pool->workers) {
            cpu_pool_free(pool);
            return BP_ERR_OUT_OF_MEMORY;
        }
    }
    for (int i = 0; i < n_workers; i++) {
        pool->workers[i] = (struct cpu_worker){ .pool = pool, .ith = i + 1 };
        if (pthread_create(&pool->tids[i], NULL, cpu_worker_main, &pool->workers[i]) != 0) {
            cpu_pool_free(pool);
            return BP_ERR_OUT_OF_MEMORY;
        }
        pool->n_started++;
    }
    *out = pool;
    return BP_OK;
}

int cpu_pool_n_threads(const struct cpu_pool *pool)
{
    return pool->nth;
}

void cpu_pool_run(struct cpu_pool *pool, cpu_job_fn fn, void *arg)
{
    if (pool->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->arg = arg;
    pool->n_running = pool->nth - 1;
    pool->job_seq++;
    pthread_cond_broadcast(&pool->cv_job);
    pthread_mutex_unlock(&pool->mu);

    fn(arg, 0, pool->nth);

    pthread_mutex_lock(&pool->mu);
    while (pool->n_running > 0)
        pthread_cond_wait(&pool->cv_done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

void cpu_pool_barrier(struct cpu_pool *pool)
{
    if (pool->nth == 1)
        return;
    pthread_mutex_lock(&pool->mu);
    unsigned long seq = pool->bar_seq;
    if (++pool->bar_waiting == pool->nth) {
        pool->bar_waiting = 0;
        pool->bar_seq++;
        pthread_cond_broadcast(&pool->cv_bar);
    } else {
        while (seq == pool->bar_seq)
            pthread_cond_wait(&pool->cv_bar, &pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
}
