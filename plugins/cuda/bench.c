/*
 * bench.c — the reference figures scripts/gpu-check.sh sets the mul_mat
 * benchmark against, measured in the same run: device-to-device copy
 * bandwidth (the practical ceiling of a weight-streaming kernel) and the
 * cuBLAS F16 GEMM rate (the ceiling of a large-M MUL_MAT) — and the
 * floor of one timed call of `backplane bench`: a launch plus a stream
 * synchronize seen from the host, which a 9 MB matrix-vector product
 * (about 3 us of DRAM traffic on an H200) does not hide.
 */
#include <stdlib.h>
#include <time.h>

#include "cuda_internal.h"

#define BENCH_COPY_BYTES ((size_t)1 << 30)
#define BENCH_REPS 10

static bp_status time_copies(struct cuda_backend *cb, double *gbps)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    bp_status st = cuda_check(pl, cudaMalloc(&a, BENCH_COPY_BYTES), "allocating the copy source");
    if (st == BP_OK) st = cuda_check(pl, cudaMalloc(&b, BENCH_COPY_BYTES), "allocating the copy target");
    if (st == BP_OK) st = cuda_check(pl, cudaEventCreate(&e0), "creating an event");
    if (st == BP_OK) st = cuda_check(pl, cudaEventCreate(&e1), "creating an event");
    if (st == BP_OK) {
        (void)cudaMemsetAsync(a, 1, BENCH_COPY_BYTES, cb->stream);
        (void)cudaMemcpyAsync(b, a, BENCH_COPY_BYTES, cudaMemcpyDeviceToDevice, cb->stream); /* warm */
        (void)cudaEventRecord(e0, cb->stream);
        for (int i = 0; i < BENCH_REPS; i++)
            (void)cudaMemcpyAsync(b, a, BENCH_COPY_BYTES, cudaMemcpyDeviceToDevice, cb->stream);
        (void)cudaEventRecord(e1, cb->stream);
        st = cuda_check(pl, cudaEventSynchronize(e1), "timing copies");
    }
    float ms = 0;
    if (st == BP_OK && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0)
        *gbps = 2.0 * (double)BENCH_COPY_BYTES * BENCH_REPS / (ms * 1e-3) / 1e9;
    if (e0) (void)cudaEventDestroy(e0);
    if (e1) (void)cudaEventDestroy(e1);
    if (a) (void)cudaFree(a);
    if (b) (void)cudaFree(b);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define SYNC_REPS 201

/* Median host time of a 4-byte memset queued on the stream and waited for. */
static bp_status time_sync_floor(struct cuda_backend *cb, double *us)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    void *p = NULL;
    double t[SYNC_REPS];
    bp_status st = cuda_check(pl, cudaMalloc(&p, 256), "allocating the sync probe");
    for (int i = -10; i < SYNC_REPS && st == BP_OK; i++) { /* 10 warm-ups */
        const double t0 = now_s();
        (void)cudaMemsetAsync(p, 0, 4, cb->stream);
        st = cuda_check(pl, cudaStreamSynchronize(cb->stream), "timing a stream synchronize");
        if (i >= 0) t[i] = now_s() - t0;
    }
    if (st == BP_OK) {
        qsort(t, SYNC_REPS, sizeof t[0], cmp_double);
        *us = t[SYNC_REPS / 2] * 1e6;
    }
    if (p) (void)cudaFree(p);
    return st;
}

static bp_status time_hgemm(struct cuda_backend *cb, int K, int N, int M, double *gflops)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    if (!cuda_cublas_available(pl))
        return BP_ERR_UNSUPPORTED;
    void *w = NULL, *x = NULL, *c = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    bp_status st = cuda_check(pl, cudaMalloc(&w, (size_t)K * N * 2), "allocating W");
    if (st == BP_OK) st = cuda_check(pl, cudaMalloc(&x, (size_t)K * M * 2), "allocating X");
    if (st == BP_OK) st = cuda_check(pl, cudaMalloc(&c, (size_t)N * M * 4), "allocating C");
    if (st == BP_OK) st = cuda_check(pl, cudaEventCreate(&e0), "creating an event");
    if (st == BP_OK) st = cuda_check(pl, cudaEventCreate(&e1), "creating an event");
    if (st == BP_OK) {
        (void)cudaMemsetAsync(w, 0, (size_t)K * N * 2, cb->stream);
        (void)cudaMemsetAsync(x, 0, (size_t)K * M * 2, cb->stream);
        st = cuda_cublas_gemm(cb, BP_TYPE_F16, N, M, K, w, K, x, K, c, N); /* warm */
        (void)cudaEventRecord(e0, cb->stream);
        for (int i = 0; i < BENCH_REPS && st == BP_OK; i++)
            st = cuda_cublas_gemm(cb, BP_TYPE_F16, N, M, K, w, K, x, K, c, N);
        (void)cudaEventRecord(e1, cb->stream);
        if (st == BP_OK) st = cuda_check(pl, cudaEventSynchronize(e1), "timing GEMM");
    }
    float ms = 0;
    if (st == BP_OK && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0)
        *gflops = 2.0 * K * (double)N * M * BENCH_REPS / (ms * 1e-3) / 1e9;
    if (e0) (void)cudaEventDestroy(e0);
    if (e1) (void)cudaEventDestroy(e1);
    if (w) (void)cudaFree(w);
    if (x) (void)cudaFree(x);
    if (c) (void)cudaFree(c);
    return st;
}

bp_status cuda_bench_reference(struct bp_registry *reg, size_t index, int K, int N, int M,
                               double *d2d_gbps, double *hgemm_gflops, double *sync_us)
{
    if (!reg || !d2d_gbps || !hgemm_gflops || !sync_us || K <= 0 || N <= 0 || M <= 0)
        return BP_ERR_INVALID_ARGUMENT;
    *d2d_gbps = 0;
    *hgemm_gflops = 0;
    *sync_us = 0;
    struct bp_device *dev = reg->iface->get_device(reg, index);
    if (!dev)
        return BP_ERR_NOT_FOUND;
    struct bp_backend *b = NULL;
    bp_status st = cuda_backend_init(dev, NULL, &b);
    if (st != BP_OK)
        return st;
    struct cuda_backend *cb = b->context;
    st = time_copies(cb, d2d_gbps);
    if (st == BP_OK)
        st = time_sync_floor(cb, sync_us);
    if (st == BP_OK)
        st = time_hgemm(cb, K, N, M, hgemm_gflops);
    b->iface->free(b);
    return st;
}
