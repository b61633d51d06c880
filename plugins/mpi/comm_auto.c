/* comm_auto.c — BACKPLANE_META_ALLREDUCE=auto for a slot communicator that
 * has the device path: the first reduction of each size class (4 KB .. 16
 * MB, bp_meta_abi.h) times the device path and the host path on the tensor
 * itself, rounds alternating the paths, with integer inputs that differ per
 * rank, so every rank checks its sum exactly; its contents are saved first
 * and restored after. One MPI_Allreduce(MAX) agrees the slowest rank's
 * times and whether any rank's sum was wrong, so every rank computes the
 * same choice: the fastest right path. All ranks reduce the same tensors in
 * the same order (SPMD), so they reach each class's first use together. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_internal.h"

#define AUTO_ROUNDS 5

static const char *const via_name[DIST_VIAS] = { "device", "host" };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* found[via]: median seconds of a call; found[DIST_VIAS + via]: 1 when a
 * call failed or this rank's sum was wrong. */
static bp_status measure(struct dist_comm *c, struct bp_tensor *t, size_t count, double *found)
{
    struct bp_buffer *b = t->buffer;
    const size_t bytes = count * sizeof(float);
    float *x = c->save + count;          /* the probe's half of the scratch */
    const size_t n = (size_t)c->g->nranks, r = (size_t)c->g->rank;
    double sec[DIST_VIAS][AUTO_ROUNDS];
    for (int round = 0; round < AUTO_ROUNDS; round++)
        for (int j = 0; j < DIST_VIAS; j++) {
            const int via = round % 2 ? DIST_VIAS - 1 - j : j;
            /* Below 2^24 up to 16 ranks: F32 sums them exactly. */
            for (size_t i = 0; i < count; i++) x[i] = (float)(i % 251 + 1 + 256 * r);
            bp_status st = b->iface->set_tensor(b, t, x, 0, bytes);
            int together = 1;
            bp_status sync = dist_allreduce_min_int(c->g, &together, "all-reduce choice");
            if (sync != BP_OK) return sync;
            /* Reduce even after a failed write (the sum is then marked
             * wrong): a rank that skipped the call would stall the others. */
            double t0 = now();
            bp_status red = via == DIST_VIA_DEVICE ? dist_comm_device_reduce(c, t) : dist_comm_host_reduce(c, t);
            sec[via][round] = now() - t0;
            if (st == BP_OK) st = red;
            if (st == BP_OK) st = b->iface->get_tensor(b, t, x, 0, bytes);
            bool right = st == BP_OK;
            for (size_t i = 0; right && i < count; i++)
                right = x[i] == (float)(n * (i % 251 + 1) + 128 * n * (n - 1));
            if (!right) found[DIST_VIAS + via] = 1;
        }
    for (int via = 0; via < DIST_VIAS; via++) {
        qsort(sec[via], AUTO_ROUNDS, sizeof(double), by_value);
        found[via] = sec[via][AUTO_ROUNDS / 2];
    }
    return BP_OK;
}

bp_status dist_comm_choose(struct dist_comm *c, struct bp_tensor *t, enum dist_via *via)
{
    const size_t count = (size_t)bp_nelements(t), bytes = count * sizeof(float);
    const int k = bp_meta_allreduce_class_of(bytes);
    if (c->class_via[k] >= 0) {
        *via = (enum dist_via)c->class_via[k];
        return BP_OK;
    }
    struct bp_buffer *b = t->buffer;
    bp_status st = dist_comm_grow(&c->save, &c->save_cap, 2 * count);
    if (st == BP_OK) st = b->iface->get_tensor(b, t, c->save, 0, bytes);
    /* Measure only when every rank could set its tensor's contents aside;
     * else keep the device path for this class, as without auto. */
    int all_saved = st == BP_OK;
    bp_status m = dist_allreduce_min_int(c->g, &all_saved, "all-reduce choice");
    if (m != BP_OK) return m;
    if (!all_saved) {
        if (st != BP_OK)
            dist_log(BP_LOG_WARN, "rank %d could not set aside a tensor to measure its all-reduce paths (%s); "
                     "%zu-byte messages keep the device path.", (int)c->g->rank, bp_status_name(st), bytes);
        c->class_via[k] = DIST_VIA_DEVICE;
        *via = DIST_VIA_DEVICE;
        return BP_OK;
    }
    double found[2 * DIST_VIAS] = {0};
    if ((m = measure(c, t, count, found)) != BP_OK) return m;
    if ((m = dist_allreduce_max_f64(c->g, found, 2 * DIST_VIAS, "all-reduce choice")) != BP_OK) return m;
    int best = -1;
    for (int v = 0; v < DIST_VIAS; v++)
        if (!found[DIST_VIAS + v] && (best < 0 || found[v] < found[best])) best = v;
    /* Every rank knows it; rank 0 says it. */
    if (found[DIST_VIAS + DIST_VIA_DEVICE] && c->g->rank == 0)
        dist_log(BP_LOG_WARN, "the device's communicator summed %zu-byte messages wrong (or failed) on some "
                 "rank; the ranks use host memory and MPI_Allreduce for them.", bytes);
    if (best < 0) best = DIST_VIA_HOST;
    c->class_via[k] = best;
    dist_log(BP_LOG_INFO, "all-reduce of %zu-byte messages across ranks: %s (device %.1f us, host %.1f us).",
             bytes, via_name[best], found[DIST_VIA_DEVICE] * 1e6, found[DIST_VIA_HOST] * 1e6);
    *via = (enum dist_via)best;
    return b->iface->set_tensor(b, t, c->save, 0, bytes);
}
