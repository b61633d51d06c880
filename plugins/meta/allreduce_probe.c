/* allreduce_probe.c — measuring a meta backend's all-reduce paths: each
 * device gets integer-valued F32 data (so every summation order gives the
 * same exact sum), one all-reduce per path per round with the paths'
 * order rotated round by round (a noisy machine slows all of them alike),
 * every result read back and compared with the host's sum, and the median
 * time kept. `backplane check --comm` prints these; auto chooses by them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta_internal.h"

#define MAX_ROUNDS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Device d's input at element k: small integers, different per device.
 * |sum| <= 8 * 16 devices = 128 is exact even in BF16 (8-bit significand),
 * so a collective that travels in BF16 (CUDA's NCCL path) is judged fairly. */
static float input(size_t d, size_t k) { return (float)((int)((k * 5 + d * 3) % 17) - 8); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct probe {
    struct meta_backend *be;
    size_t count;                        /* floats per device */
    struct bp_buffer *buf[META_MAX_DEV];
    struct bp_tensor t[META_MAX_DEV];
    struct bp_tensor *loc[META_MAX_DEV];
    float *host, *sum;
};

static bp_status probe_open(struct probe *pr, struct meta_backend *be, size_t bytes)
{
    memset(pr, 0, sizeof *pr);
    pr->be = be;
    pr->count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
    size_t nb = pr->count * sizeof(float);
    pr->host = malloc(nb);
    pr->sum = malloc(nb);
    if (!pr->host || !pr->sum) {
        meta_log(BP_LOG_ERROR, "out of host memory for a %zu-byte all-reduce probe.", nb);
        return BP_ERR_OUT_OF_MEMORY;
    }
    for (size_t k = 0; k < pr->count; k++) {
        float s = 0;
        for (size_t d = 0; d < be->n; d++) s += input(d, k);
        pr->sum[k] = s;
    }
    for (size_t d = 0; d < be->n; d++) {
        bp_status st = meta_sub_alloc(be->md->sub[d], nb, &pr->buf[d]);
        if (st != BP_OK) {
            meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not allocate %zu bytes to measure all-reduce.", d,
                     meta_sub_name(be->md->sub[d]), nb);
            return st;
        }
        struct bp_tensor *t = &pr->t[d];
        t->type = BP_TYPE_F32;
        t->op = BP_OP_NONE;
        t->ne[0] = (int64_t)pr->count;
        t->ne[1] = t->ne[2] = t->ne[3] = 1;
        t->nb[0] = sizeof(float);
        t->nb[1] = t->nb[2] = t->nb[3] = nb;
        t->buffer = pr->buf[d];
        t->data = pr->buf[d]->iface->get_base(pr->buf[d]);
        snprintf(t->name, sizeof t->name, "allreduce_probe_%zu", d);
        pr->loc[d] = t;
    }
    return BP_OK;
}

static void probe_close(struct probe *pr)
{
    for (size_t d = 0; d < META_MAX_DEV; d++) meta_sub_free_buffer(pr->buf[d]);
    free(pr->host);
    free(pr->sum);
}

static bp_status fill(struct probe *pr)
{
    size_t nb = pr->count * sizeof(float);
    for (size_t d = 0; d < pr->be->n; d++) {
        for (size_t k = 0; k < pr->count; k++) pr->host[k] = input(d, k);
        struct bp_buffer *b = pr->buf[d];
        bp_status st = b->iface->set_tensor(b, &pr->t[d], pr->host, 0, nb);
        if (st != BP_OK) return st;
    }
    return BP_OK;
}

/* *worst: the largest |device value - host sum| over every device. */
static bp_status check(struct probe *pr, double *worst)
{
    size_t nb = pr->count * sizeof(float);
    *worst = 0;
    for (size_t d = 0; d < pr->be->n; d++) {
        struct bp_buffer *b = pr->buf[d];
        bp_status st = b->iface->get_tensor(b, &pr->t[d], pr->host, 0, nb);
        if (st != BP_OK) return st;
        for (size_t k = 0; k < pr->count; k++) {
            double e = fabs((double)pr->host[k] - (double)pr->sum[k]);
            if (!(e <= *worst)) *worst = isnan(e) ? INFINITY : e;
        }
    }
    return BP_OK;
}

bp_status meta_ar_probe_be(struct meta_backend *be, size_t bytes, int32_t rounds,
                           struct bp_meta_allreduce_probe *out, size_t cap, size_t *n_out)
{
    *n_out = be->n > 1 ? be->n_paths : 0;
    if (be->n <= 1) return BP_OK;
    if (rounds < 1) rounds = 1;
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    struct bp_meta_allreduce_probe res[META_AR_MAX_PATHS];
    double times[META_AR_MAX_PATHS][MAX_ROUNDS];
    int n_times[META_AR_MAX_PATHS] = {0};
    memset(res, 0, sizeof res);
    for (size_t p = 0; p < be->n_paths; p++) memcpy(res[p].path, be->paths[p].name, sizeof res[p].path);
    struct probe pr;
    bp_status st = probe_open(&pr, be, bytes);
    for (int r = 0; r < rounds && st == BP_OK; r++) {
        for (size_t i = 0; i < be->n_paths && st == BP_OK; i++) {
            size_t p = (i + (size_t)r) % be->n_paths;
            if (res[p].status != BP_OK) continue; /* declined or failed: not asked again */
            if ((st = fill(&pr)) != BP_OK) break;
            double t0 = now();
            bp_status ps = meta_allreduce_by(be, p, pr.loc);
            double t1 = now();
            if (ps != BP_OK) {
                res[p].status = ps;
                continue;
            }
            times[p][n_times[p]++] = t1 - t0;
            double err;
            if ((st = check(&pr, &err)) != BP_OK) break;
            if (err > res[p].max_abs_err) res[p].max_abs_err = err;
            if (err != 0) res[p].wrong = 1;
        }
    }
    probe_close(&pr);
    if (st != BP_OK) {
        meta_log(BP_LOG_ERROR, "%s: measuring all-reduce at %zu bytes failed (%s).", be->md->name, bytes,
                 bp_status_name(st));
        return st;
    }
    for (size_t p = 0; p < be->n_paths; p++) {
        if (n_times[p] == 0) continue;
        qsort(times[p], (size_t)n_times[p], sizeof times[p][0], cmp_double);
        res[p].seconds = times[p][n_times[p] / 2];
    }
    for (size_t p = 0; p < be->n_paths && p < cap; p++) out[p] = res[p];
    return BP_OK;
}

bp_status meta_ar_probe(struct bp_backend *b, size_t bytes, int32_t rounds, struct bp_meta_allreduce_probe *out,
                        size_t cap, size_t *n)
{
    if (!meta_is_meta_backend(b) || !n || (cap && !out)) {
        meta_log(BP_LOG_ERROR, "bp_meta_allreduce_probe needs a meta backend and somewhere to write.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    return meta_ar_probe_be((struct meta_backend *)b, bytes, rounds, out, cap, n);
}
