/*
 * bp_cuda_reference.c — prints, as one JSON object, the reference figures
 * of a CUDA device measured now (bp_cuda_bench_reference): D2D copy
 * bandwidth, cuBLAS F16 GEMM GFLOP/s at K, N, M, and the host time of a
 * launch + stream synchronize. Used by scripts/gpu-check.sh.
 * usage: bp_cuda_reference [index [K N M]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

/* Same as cuda_bench_reference_fn in plugins/cuda/cuda_internal.h. */
typedef bp_status (*bench_fn)(struct bp_registry *, size_t, int, int, int, double *, double *,
                              double *);

int main(int argc, char **argv)
{
    size_t index = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 0;
    int K = argc > 4 ? atoi(argv[2]) : 4096, N = argc > 4 ? atoi(argv[3]) : 4096,
        M = argc > 4 ? atoi(argv[4]) : 512;
    if (bp_load_plugins(NULL) != BP_OK) { /* refusals of other plugins are fine */ }
    struct bp_registry *reg = bp_registry_by_name("cuda");
    if (!reg) {
        fprintf(stderr, "bp_cuda_reference: the cuda plugin is not loaded; run `backplane devices`.\n");
        return 2;
    }
    void *p = reg->iface->get_proc_address ? reg->iface->get_proc_address(reg, "bp_cuda_bench_reference") : NULL;
    if (!p || reg->iface->get_device_count(reg) <= index) {
        fprintf(stderr, "bp_cuda_reference: no CUDA device %zu.\n", index);
        return 2;
    }
    bench_fn fn;
    memcpy(&fn, &p, sizeof p);
    double gbps = 0, gflops = 0, sync_us = 0;
    bp_status st = fn(reg, index, K, N, M, &gbps, &gflops, &sync_us);
    printf("{\"device\": \"cuda%zu\", \"status\": \"%s\", \"d2d_copy_gbps\": %.1f, "
           "\"cublas_hgemm_gflops\": %.1f, \"sync_floor_us\": %.2f, \"K\": %d, \"N\": %d, "
           "\"M\": %d}\n", index, bp_status_name(st), gbps, gflops, sync_us, K, N, M);
    bp_unload();
    return st == BP_OK ? 0 : 1;
}
