/* watchdog.c — a dead or silent rank must not leave the others waiting in
 * a collective forever. A thread watches the one collective in flight; past
 * BACKPLANE_DIST_TIMEOUT seconds it says which rank, collective and step,
 * and ends this process, upon which the launcher ends the job. */
#include <errno.h>
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
    bool running, quit, armed;
    struct timespec deadline;
    const char *what;
    int32_t rank;
    int64_t step;
    double timeout_s;
} w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&w.mu);
    while (!w.quit) {
        if (!w.armed) { pthread_cond_wait(&w.cv, &w.mu); continue; }
        struct timespec dl = w.deadline;
        if (pthread_cond_timedwait(&w.cv, &w.mu, &dl) != ETIMEDOUT || !w.armed) continue;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec < w.deadline.tv_sec ||
            (now.tv_sec == w.deadline.tv_sec && now.tv_nsec < w.deadline.tv_nsec))
            continue;   /* re-armed meanwhile */
        /* One sentence, then out: this rank is stuck in MPI, so neither
         * MPI_Abort nor a clean unwind is safe from here. */
        fprintf(stderr, "backplane: rank %d: the %s of step %lld did not complete within %g s "
                "(BACKPLANE_DIST_TIMEOUT); another rank died or hangs, ending the job.\n",
                (int)w.rank, w.what, (long long)w.step, w.timeout_s);
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
    if (pthread_create(&w.thread, NULL, watch, NULL) != 0) {
        dist_log(BP_LOG_ERROR, "could not start the collective watchdog thread.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    w.running = true;
    return BP_OK;
}

void dist_watch_arm(const struct bp_dist_group *g, const char *what)
{
    pthread_mutex_lock(&w.mu);
    clock_gettime(CLOCK_REALTIME, &w.deadline);
    double s = w.timeout_s;
    w.deadline.tv_sec += (time_t)s;
    w.deadline.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (w.deadline.tv_nsec >= 1000000000L) { w.deadline.tv_sec++; w.deadline.tv_nsec -= 1000000000L; }
    w.what = what;
    w.step = g->step;
    w.armed = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
}

void dist_watch_disarm(void)
{
    pthread_mutex_lock(&w.mu);
    w.armed = false;
    pthread_mutex_unlock(&w.mu);
}

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
