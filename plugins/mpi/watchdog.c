/* watchdog.c — a dead or silent rank must not leave the others waiting in
 * a collective forever. A thread looks, a few times per timeout, at the one
 * collective in flight; past BACKPLANE_DIST_TIMEOUT seconds it says which
 * rank, collective and step, and ends this process, upon which the launcher
 * ends the job. Arming and disarming are two atomic stores, so a 1 KB
 * all-reduce (a few microseconds) pays no lock and no wake-up for it. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mpi_internal.h"

#define DEFAULT_TIMEOUT_S 60.0
/* Exit status of a rank the watchdog ends (as timeout(1) does). */
#define WATCHDOG_EXIT 124

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, quit;
    _Atomic int64_t armed_ns;      /* when the collective in flight started; 0: none */
    const char *_Atomic what;
    _Atomic int64_t step;
    int32_t rank;
    double timeout_s;
} w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *watch(void *arg)
{
    (void)arg;
    /* Look four times per timeout (at most every 250 ms): a stuck rank is
     * ended within 1.25 timeouts. */
    double period = w.timeout_s / 4 < 0.25 ? w.timeout_s / 4 : 0.25;
    pthread_mutex_lock(&w.mu);
    while (!w.quit) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        int64_t ns = dl.tv_nsec + (int64_t)(period * 1e9);
        dl.tv_sec += (time_t)(ns / 1000000000);
        dl.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&w.cv, &w.mu, &dl);
        int64_t since = atomic_load(&w.armed_ns);
        if (w.quit || !since || (double)(now_ns() - since) < w.timeout_s * 1e9) continue;
        /* One sentence, then out: this rank is stuck in MPI, so neither
         * MPI_Abort nor a clean unwind is safe from here. */
        fprintf(stderr, "backplane: rank %d: the %s of step %lld did not complete within %g s "
                "(BACKPLANE_DIST_TIMEOUT); another rank died or hangs, ending the job.\n",
                (int)w.rank, atomic_load(&w.what), (long long)atomic_load(&w.step), w.timeout_s);
        fflush(stderr);
        _exit(WATCHDOG_EXIT);
    }
    pthread_mutex_unlock(&w.mu);
    return NULL;
}

bp_status dist_watch_start(const struct bp_dist_group *g)
{
    w.timeout_s = DEFAULT_TIMEOUT_S;
    const char *v = dist_host->get_env("BACKPLANE_DIST_TIMEOUT");
    if (v && *v) {
        char *end;
        double t = strtod(v, &end);
        if (*end || !(t > 0) || t > 1e6)
            dist_log(BP_LOG_WARN, "BACKPLANE_DIST_TIMEOUT='%s' is not a number of seconds above 0; "
                     "using %g.", v, DEFAULT_TIMEOUT_S);
        else
            w.timeout_s = t;
    }
    w.rank = g->rank;
    w.quit = false;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&w.cv);
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&w.thread, NULL, watch, NULL) != 0) {
        dist_log(BP_LOG_ERROR, "could not start the collective watchdog thread.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    w.running = true;
    return BP_OK;
}

void dist_watch_arm(const struct bp_dist_group *g, const char *what)
{
    atomic_store(&w.what, what);
    atomic_store(&w.step, g->step);
    atomic_store(&w.armed_ns, now_ns());
}

void dist_watch_disarm(void) { atomic_store(&w.armed_ns, 0); }

void dist_watch_stop(void)
{
    if (!w.running) return;
    pthread_mutex_lock(&w.mu);
    w.quit = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(w.thread, NULL);
    w.running = false;
}
