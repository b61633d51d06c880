/*
 * threadpool.c — the persistent worker pool of one CPU backend.
 *
 * Kick-off: one atomic word carries (graph number << 16 | thread count);
 * a worker that sees a new word and whose index is below the count runs
 * the job, the others go back to waiting. So the thread count can change
 * between graphs without starting or stopping anything (more workers are
 * started only when the count grows past what exists).
 *
 * Barrier: an arrival counter plus a generation number. The last thread to
 * arrive resets the counter and bumps the generation; the others wait for
 * the generation to change.
 *
 * Waiting spins for a poll budget (BACKPLANE_CPU_POLL microseconds,
 * default CPU_POOL_DEFAULT_POLL_US) and then sleeps on a condition
 * variable, so back-to-back nodes and graphs cost no system call and no
 * wake-up latency, while an idle backend costs nothing after the budget.
 * Spinning assumes a core per thread: where more threads than cores run,
 * a spinner holds off the thread it waits for, which is why meta and dist
 * devices split the CPUs between their CPU backends.
 *
 * The spin adapts to a shared machine (unless BACKPLANE_CPU_POLL_ADAPT=0):
 * when other processes want the cores, the kernel's autogroup scheduling
 * gives this process's threads one share together, so a spinner burns the
 * time of the very thread it waits for. Two signs show it: a spinner whose
 * clock jumps by more than CPU_POOL_GAP_US between two looks was itself
 * descheduled, and the driving thread counts its involuntary context
 * switches over each job. Either one makes every waiter of the pool sleep
 * at once for the next CPU_POOL_CALM_US; each new sign extends that, and
 * the first wait after it spins again, so a machine that went quiet gets
 * its spin back within that time.
 *
 * Wake-ups are only broadcast when someone is asleep (`sleepers`,
 * sequentially consistent with the word it waits on, so no wake-up is lost).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "cpu_internal.h"

/* A gap this long between two looks at the clock in a spin (64 pauses,
 * well under 10 us on any core) means the spinner was descheduled. */
#define CPU_POOL_GAP_US 200
/* How long waiters sleep at once after a sign of oversubscription: long
 * against a decode step's hand-offs, short against a change of load. */
#define CPU_POOL_CALM_US 100000

struct cpu_worker {
    struct cpu_pool *pool;
    int ith;
    uint64_t seen0;  /* the kick word when it was created: any later one is a job */
};

struct cpu_pool {
    _Atomic uint64_t kick;     /* (seq << 16) | n_threads of the job */
    _Atomic uint64_t bar_gen;
    _Atomic int bar_count;
    _Atomic int sleepers;
    _Atomic bool stop;
    int nth;                   /* threads of the next job */
    int cur_nth;               /* threads of the running job */
    int n_workers;             /* started */
    int poll_us;               /* how long a waiter spins before it sleeps */
    bool adapt;                /* skip the spin while calm_until is ahead */
    _Atomic uint64_t calm_until; /* now_us() before which waiters sleep at once */
    uint64_t seq;
    cpu_job_fn fn;
    void *arg;
    pthread_t *tids;
    struct cpu_worker **workers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void note_descheduled(struct cpu_pool *pool, uint64_t t)
{
    if (pool->adapt)
        atomic_store_explicit(&pool->calm_until, t + CPU_POOL_CALM_US, memory_order_relaxed);
}

/* Involuntary context switches of the calling thread so far (0 where the
 * system does not count them per thread). */
static long involuntary_switches(void)
{
#ifdef RUSAGE_THREAD
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0)
        return ru.ru_nivcsw;
#endif
    return 0;
}

static uint64_t wait_change(struct cpu_pool *pool, _Atomic uint64_t *word, uint64_t old)
{
    uint64_t v;
    uint64_t t = pool->poll_us > 0 ? now_us() : 0;
    if (pool->poll_us > 0 &&
        !(pool->adapt && t < atomic_load_explicit(&pool->calm_until, memory_order_relaxed))) {
        /* the clock is read once per 64 pauses: a pause takes 10-50 ns
         * depending on the core, so the budget is kept in time */
        const uint64_t end = t + (uint64_t)pool->poll_us;
        do {
            for (int i = 0; i < 64; i++) {
                v = atomic_load_explicit(word, memory_order_acquire);
                if (v != old)
                    return v;
                cpu_relax();
            }
            const uint64_t t1 = now_us();
            if (pool->adapt && t1 - t > CPU_POOL_GAP_US) {
                note_descheduled(pool, t1);
                break;
            }
            t = t1;
        } while (t < end);
    }
    atomic_fetch_add(&pool->sleepers, 1);
    pthread_mutex_lock(&pool->mu);
    while ((v = atomic_load(word)) == old)
        pthread_cond_wait(&pool->cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    atomic_fetch_sub(&pool->sleepers, 1);
    return v;
}

static void wake_all(struct cpu_pool *pool)
{
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void *cpu_worker_main(void *p)
{
    struct cpu_worker *w = p;
    struct cpu_pool *pool = w->pool;
    uint64_t seen = w->seen0;
    for (;;) {
        seen = wait_change(pool, &pool->kick, seen);
        if (atomic_load(&pool->stop))
            break;
        const int nth = (int)(seen & 0xffff);
        if (w->ith < nth) {
            pool->fn(pool->arg, w->ith, nth);
            cpu_pool_barrier(pool);
        }
    }
    return NULL;
}

static bp_status start_workers(struct cpu_pool *pool, int n_threads)
{
    const int want = n_threads - 1;
    if (want <= pool->n_workers)
        return BP_OK;
    pthread_t *tids = realloc(pool->tids, (size_t)want * sizeof *tids);
    if (!tids)
        return BP_ERR_OUT_OF_MEMORY;
    pool->tids = tids;
    /* One allocation per worker: running workers keep their address when
     * the pool grows. */
    struct cpu_worker **ws = realloc(pool->workers, (size_t)want * sizeof *ws);
    if (!ws)
        return BP_ERR_OUT_OF_MEMORY;
    pool->workers = ws;
    while (pool->n_workers < want) {
        const int i = pool->n_workers;
        ws[i] = malloc(sizeof *ws[i]);
        if (!ws[i])
            return BP_ERR_OUT_OF_MEMORY;
        *ws[i] = (struct cpu_worker){ .pool = pool, .ith = i + 1,
                                      .seen0 = atomic_load(&pool->kick) };
        if (pthread_create(&pool->tids[i], NULL, cpu_worker_main, ws[i]) != 0) {
            free(ws[i]);
            return BP_ERR_OUT_OF_MEMORY;
        }
        pool->n_workers++;
    }
    return BP_OK;
}

void cpu_pool_free(struct cpu_pool *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stop, true);
    pool->seq++;
    atomic_store(&pool->kick, pool->seq << 16);
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_workers; i++)
        pthread_join(pool->tids[i], NULL);
    for (int i = 0; i < pool->n_workers; i++)
        free(pool->workers[i]);
    pthread_cond_destroy(&pool->cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool->tids);
    free(pool);
}

bp_status cpu_pool_new(int n_threads, int poll_us, bool adapt, struct cpu_pool **out)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 4096)
        return BP_ERR_INVALID_ARGUMENT;
    struct cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return BP_ERR_OUT_OF_MEMORY;
    pool->nth = n_threads;
    pool->poll_us = poll_us < 0 ? 0 : poll_us;
    pool->adapt = adapt;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    bp_status st = start_workers(pool, n_threads);
    if (st != BP_OK) {
        cpu_pool_free(pool);
        return st;
    }
    *out = pool;
    return BP_OK;
}

bp_status cpu_pool_set_n_threads(struct cpu_pool *pool, int n_threads)
{
    if (n_threads < 1 || n_threads > 4096)
        return BP_ERR_INVALID_ARGUMENT;
    bp_status st = start_workers(pool, n_threads);
    if (st != BP_OK)
        return st;
    pool->nth = n_threads;
    return BP_OK;
}

int cpu_pool_n_threads(const struct cpu_pool *pool)
{
    return pool->nth;
}

void cpu_pool_run(struct cpu_pool *pool, cpu_job_fn fn, void *arg)
{
    pool->cur_nth = pool->nth;
    if (pool->nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    /* one system call each side of a job: against a job of many nodes on
     * several threads it is noise, and it sees a preemption that no spin
     * of this job happened to catch */
    const bool watch = pool->adapt && pool->poll_us > 0;
    const long sw0 = watch ? involuntary_switches() : 0;
    pool->fn = fn;
    pool->arg = arg;
    pool->seq++;
    atomic_store(&pool->kick, (pool->seq << 16) | (uint64_t)pool->nth);
    wake_all(pool);
    fn(arg, 0, pool->nth);
    /* Every worker has left fn when this returns. */
    cpu_pool_barrier(pool);
    if (watch && involuntary_switches() != sw0)
        note_descheduled(pool, now_us());
}

void cpu_pool_barrier(struct cpu_pool *pool)
{
    const int n = pool->cur_nth;
    if (n <= 1)
        return;
    const uint64_t gen = atomic_load_explicit(&pool->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&pool->bar_count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&pool->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add(&pool->bar_gen, 1);
        wake_all(pool);
    } else {
        wait_change(pool, &pool->bar_gen, gen);
    }
}

uint64_t cpu_pool_wait_word(struct cpu_pool *pool, _Atomic uint64_t *word, uint64_t old)
{
    return wait_change(pool, word, old);
}

void cpu_pool_wake(struct cpu_pool *pool)
{
    wake_all(pool);
}
