/* check_invariance.c — batch invariance and 1-vs-N-thread bit identity of
 * MUL_MAT on one device (check_invariance.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_harness.h"
#include "check_invariance.h"

/* K a multiple of 256 so every block type fits; N odd so no kernel gets a
 * tidy tile count; M a batch larger than the widest row blocking. */
#define INV_K 256
#define INV_N 33
#define INV_M 9
#define INV_MIN_THREADS 4

static const enum bp_type weight_types[] = {
    BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
    BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1, BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q5_K,
    BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS,
};

/* y[m*N + n] for x rows [row0, row0 + m) of xs; 0 on success, 1 when the
 * device declines, -1 on error (why in msg). threads 0 leaves the default. */
static int run_mul_mat(struct bp_device *dev, enum bp_type wtype, const void *wbytes,
                       const float *xs, int row0, int m, int threads, float *y, char *msg,
                       size_t cap)
{
    struct bp_context *ctx = NULL;
    struct bp_graph *g = NULL;
    struct bp_buffer *buf = NULL;
    struct bp_backend *be = NULL;
    int rc = -1;
    if (bp_context_new(8, &ctx) != BP_OK || bp_graph_new(8, &g) != BP_OK) goto fail;
    struct bp_tensor *w = bp_tensor_new_2d(ctx, wtype, INV_K, INV_N);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, INV_K, m);
    struct bp_tensor *out = w && x ? bp_mul_mat(ctx, w, x) : NULL;
    if (!out || bp_graph_build(g, out) != BP_OK) goto fail;
    if (!bp_device_supports_op(dev, out)) {
        bp_graph_free(g);
        bp_context_free(ctx);
        snprintf(msg, cap, "%s declines MUL_MAT with %s weights", bp_device_name(dev),
                 bp_type_name(wtype));
        return 1;
    }
    if (bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf) != BP_OK ||
        bp_tensor_set(w, wbytes, 0, bp_nbytes(w)) != BP_OK ||
        bp_tensor_set(x, xs + (size_t)row0 * INV_K, 0, bp_nbytes(x)) != BP_OK ||
        bp_backend_init(dev, NULL, &be) != BP_OK)
        goto fail;
    if (threads > 0 && bp_backend_set_n_threads(be, threads) != BP_OK) goto fail;
    if (bp_backend_graph_compute(be, g) != BP_OK || bp_backend_synchronize(be) != BP_OK ||
        bp_tensor_get(out, y, 0, (size_t)m * INV_N * sizeof *y) != BP_OK)
        goto fail;
    rc = 0;
fail:
    if (rc) snprintf(msg, cap, "%s", bp_last_error());
    if (be) bp_backend_free(be);
    if (buf) bp_buffer_free(buf);
    if (g) bp_graph_free(g);
    if (ctx) bp_context_free(ctx);
    return rc;
}

static double nmse(const float *ref, const float *got, size_t n)
{
    double err = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        err += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? err / den : err;
}

/* Deterministic weight bytes of type t and x rows, as the harness fills inputs. */
static bool make_inputs(enum bp_type t, void **wbytes, float **xs)
{
    struct bp_context *ctx = NULL;
    *wbytes = NULL;
    *xs = NULL;
    if (bp_context_new(2, &ctx) != BP_OK) return false;
    struct check_input w = {.t = bp_tensor_new_2d(ctx, t, INV_K, INV_N), .fill = CHECK_FILL_UNIFORM};
    struct check_input x = {.t = bp_tensor_new_2d(ctx, BP_TYPE_F32, INV_K, INV_M),
                            .fill = CHECK_FILL_UNIFORM};
    bool ok = w.t && x.t;
    if (ok) {
        *wbytes = malloc(bp_nbytes(w.t));
        *xs = malloc(bp_nbytes(x.t));
        ok = *wbytes && *xs;
    }
    if (ok) {
        check_fill_input(&w, 0x5eed0001u + (uint64_t)t, *wbytes, bp_nbytes(w.t));
        check_fill_input(&x, 0x5eed1001u + (uint64_t)t, *xs, bp_nbytes(x.t));
    }
    bp_context_free(ctx);
    if (!ok) {
        free(*wbytes);
        free(*xs);
    }
    return ok;
}

static void batch_check(struct bp_device *dev, enum bp_type t, const void *wb, const float *xs,
                        struct invariance_result *r)
{
    float full[INV_M * INV_N], one[INV_N];
    r->threshold = check_threshold(BP_OP_MUL_MAT, t);
    int rc = run_mul_mat(dev, t, wb, xs, 0, INV_M, 0, full, r->message, sizeof r->message);
    for (int row = 0; rc == 0 && row < INV_M; row++) {
        rc = run_mul_mat(dev, t, wb, xs, row, 1, 0, one, r->message, sizeof r->message);
        double e = rc == 0 ? nmse(full + row * INV_N, one, INV_N) : 0;
        if (!(e <= r->max_nmse)) r->max_nmse = e; /* NaN sticks */
    }
    if (rc) {
        r->status = rc > 0 ? 2 : 1;
        return;
    }
    r->status = r->max_nmse <= r->threshold ? 0 : 1;
    if (r->status)
        snprintf(r->message, sizeof r->message, "a row computed alone differs from the same row "
                 "in a batch of %d by NMSE %.2e (limit %.0e)", INV_M, r->max_nmse, r->threshold);
}

static void thread_check(struct bp_device *dev, enum bp_type t, const void *wb, const float *xs,
                         int n, struct invariance_result *r)
{
    float a[INV_M * INV_N], b[INV_M * INV_N];
    r->threads = n;
    int rc = run_mul_mat(dev, t, wb, xs, 0, INV_M, 1, a, r->message, sizeof r->message);
    if (rc == 0) rc = run_mul_mat(dev, t, wb, xs, 0, INV_M, n, b, r->message, sizeof r->message);
    if (rc) {
        r->status = rc > 0 ? 2 : 1;
        return;
    }
    for (size_t i = 0; i < (size_t)INV_M * INV_N; i++) r->differing += memcmp(&a[i], &b[i], 4) != 0;
    r->status = r->differing ? 1 : 0;
    r->max_nmse = r->differing ? nmse(a, b, (size_t)INV_M * INV_N) : 0;
    if (r->differing)
        snprintf(r->message, sizeof r->message, "%zu of %d values differ in their bits between 1 "
                 "and %d threads", r->differing, INV_M * INV_N, n);
}

int check_invariance_run(struct bp_device *dev, struct invariance_result *out, int cap)
{
    int k = 0;
    bool threads = bp_device_proc_address(dev, BP_PROC_SET_N_THREADS) != NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n = ncpu > INV_MIN_THREADS ? (int)ncpu : INV_MIN_THREADS;
    for (size_t i = 0; i < sizeof weight_types / sizeof weight_types[0]; i++) {
        enum bp_type t = weight_types[i];
        void *wb;
        float *xs;
        if (!make_inputs(t, &wb, &xs)) continue;
        if (k < cap) {
            memset(&out[k], 0, sizeof out[k]);
            out[k].kind = INVARIANCE_BATCH;
            out[k].type = t;
            batch_check(dev, t, wb, xs, &out[k++]);
        }
        if (threads && k < cap) {
            memset(&out[k], 0, sizeof out[k]);
            out[k].kind = INVARIANCE_THREADS;
            out[k].type = t;
            thread_check(dev, t, wb, xs, n, &out[k++]);
        }
        free(wb);
        free(xs);
    }
    return k;
}
