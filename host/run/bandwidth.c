/*
 * bandwidth.c — the read-bandwidth probe. Each thread sums 64-bit words of
 * its own contiguous slice (the same access pattern as a matrix-vector
 * product streaming its weight rows); the sum is kept so that the compiler
 * cannot drop the loads.
 */
#include "bandwidth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *sum_slice(void *arg)
{
    struct slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= s->n; i += 4) {
        a0 += s->p[i]; a1 += s->p[i + 1]; a2 += s->p[i + 2]; a3 += s->p[i + 3];
    }
    for (; i < s->n; i++) a0 += s->p[i];
    s->sum = a0 + a1 + a2 + a3;
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bp_run_read_bandwidth(int n_threads, size_t bytes, int reps)
{
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    size_t words = bytes / 8;
    uint64_t *buf = malloc(words * 8);
    struct slice *sl = calloc((size_t)n_threads, sizeof *sl);
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    double best = 0.0;
    if (!buf || !sl || !th || words == 0) goto out;
    memset(buf, 1, words * 8); /* touch every page before timing */
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        size_t per = words / (size_t)n_threads;
        double t0 = now();
        int started = 0;
        for (int t = 0; t < n_threads; t++) {
            sl[t].p = buf + (size_t)t * per;
            sl[t].n = t == n_threads - 1 ? words - (size_t)t * per : per;
            if (t == 0) continue; /* the caller's thread takes slice 0 */
            if (pthread_create(&th[t], NULL, sum_slice, &sl[t]) != 0) break;
            started = t;
        }
        sum_slice(&sl[0]);
        for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
        double dt = now() - t0;
        if (started != n_threads - 1) { best = 0.0; goto out; }
        for (int t = 0; t < n_threads; t++) sink += sl[t].sum;
        double bw = (double)(words * 8) / dt;
        if (bw > best) best = bw;
    }
    (void)sink;
out:
    free(buf);
    free(sl);
    free(th);
    return best;
}
