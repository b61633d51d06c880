/*
 * bench.h — `backplane bench MODE`: the options every mode shares and the
 * mode table. A new mode is one file (bench_<mode>.c) plus one line in
 * bench_modes[] (cmd_bench.c).
 */
#ifndef BP_CLI_BENCH_H
#define BP_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include <backplane/backplane.h>

#define BENCH_MAX_ROUNDS 64

struct bench_opts {
    const char *device;      /* --device NAME (default "cpu") */
    enum bp_type type;       /* --type T (default q4_0) */
    int64_t K, N, M;         /* -K -N -M (defaults 4096, 4096, 1) */
    int threads;             /* --threads N (0: the backend's default) */
    int reps;                /* --reps N (median of) */
    int rounds;              /* --rounds R: measurement and references alternate R times */
    bool scaling;            /* --scaling: each round also times 1 thread */
    int64_t footprint_mb;    /* --footprint-mb F: distinct weights cycled through */
    bool vs_scalar;          /* --vs-scalar: also time the cpu scalar variant */
    bool vs_noamx;           /* --vs-noamx: each round also times the cpu without AMX */
    bool json;               /* --json */
    const char *models[8];   /* tokenize, batch: --model PATH|builtin:NAME (tokenize: repeatable) */
    int n_models;
    const char *text_file;   /* tokenize: --file F (default: built-in prose, 1 MB) */
};

struct bench_mode {
    const char *name;
    const char *summary;
    int (*run)(const struct bench_opts *o);
};

int bench_mul_mat(const struct bench_opts *o);
int bench_block(const struct bench_opts *o);
int bench_sched(const struct bench_opts *o);
int bench_allreduce(const struct bench_opts *o);
int bench_tokenize(const struct bench_opts *o);
int bench_batch(const struct bench_opts *o);
int bench_moe_split(const struct bench_opts *o);

/* The streaming-read bandwidth probe: a buffer of `bytes` allocated and
 * written once, then read by n threads, each its own contiguous slice (the
 * access pattern of a matrix-vector product over its weight rows). Made
 * once so it can be run again between measurements of the thing it is the
 * reference for: on a shared machine the bandwidth moves, and a ratio is
 * only fair between numbers taken close together. */
struct bench_probe;
struct bench_probe *bench_probe_new(size_t bytes);   /* NULL: out of memory */
void bench_probe_free(struct bench_probe *p);
size_t bench_probe_bytes(const struct bench_probe *p);
/* Bytes/s of the fastest read loop this CPU runs (bench_refs.c), the median
 * of reps passes of each, loops alternating; 0 when it could not run. */
double bench_probe_run(struct bench_probe *p, int n_threads, int reps);
/* The same, once: allocate, run, free. */
double bench_read_bandwidth(size_t bytes, int n_threads, int reps);
/* Run work(args + k * arg_size) for k < n on n threads that start at once
 * (they meet at a gate first, so thread creation is not timed); seconds
 * from the start to the last one's end, or -1 when a thread could not be
 * created (then none of them ran its work). */
double bench_run_together(int n, void (*work)(void *), void *args, size_t arg_size);
/* Seconds of a monotonic clock. */
double bench_now(void);
/* Median of n values (sorts v). */
double bench_median(double *v, int n);
/* The median of v[0..n), v left as it is (a copy is sorted); 0 when n < 1
 * or there is no memory for the copy. */
double bench_median_of(const double *v, int n);
/* GFLOP/s of OpenBLAS cblas_sgemm (loaded at run time) for C[MxN] = A[MxK] B^T,
 * 0 when OpenBLAS is not installed. */
double bench_blas_sgemm_gflops(int64_t M, int64_t N, int64_t K, int threads, int reps);

#endif
