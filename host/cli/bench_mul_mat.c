/* bench_mul_mat.c — `backplane bench mul_mat`: one MUL_MAT node built
 * through the public API, so any device can be measured. Weights are
 * quantized with bp_quantize when libbackplane has it, otherwise filled
 * with random valid blocks (random quants, small finite scales): the
 * timing does not depend on the values. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_quant.h>

#include "bench.h"
#include "cli.h"
#include "json.h"

#define MB (1024.0 * 1024.0)

struct mm_result {
    double sec;          /* median seconds per call */
    int reps;
    const char *variant; /* of the device's plugin */
    const char *buffer_type; /* where the weights live */
};

static unsigned long long rng(unsigned long long *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* One weight matrix as the device will store it. */
static void *make_weights(enum bp_type type, int64_t K, int64_t N, size_t bytes)
{
    unsigned long long s = 0x1234567ull;
    unsigned char *w = malloc(bytes);
    if (!w) return NULL;
    if (!bp_type_is_quantized(type)) {
        for (int64_t i = 0; i < K * N; i++) {
            float v = (float)((double)(rng(&s) % 2001) / 1000.0 - 1.0);
            if (type == BP_TYPE_F32) memcpy(w + 4 * i, &v, 4);
            else {
                uint16_t h = type == BP_TYPE_F16 ? bp_f32_to_f16(v) : bp_f32_to_bf16(v);
                memcpy(w + 2 * i, &h, 2);
            }
        }
        return w;
    }
    bp_quantize_fn quantize;
    void *p = dlsym(RTLD_DEFAULT, BP_HOST_PROC_QUANTIZE);
    memcpy(&quantize, &p, sizeof p);
    float *f = quantize ? malloc((size_t)(K * N) * sizeof *f) : NULL;
    if (f) {
        for (int64_t i = 0; i < K * N; i++) f[i] = (float)((double)(rng(&s) % 2001) / 1000.0 - 1.0);
        size_t got = quantize(type, f, w, N, K);
        free(f);
        if (got == bytes) return w;
    }
    for (size_t i = 0; i < bytes; i++) w[i] = (unsigned char)rng(&s);
    /* every f16 scale small and finite */
    const size_t bs = bp_type_size(type), nblk = bytes / bs;
    const uint16_t small = bp_f32_to_f16(0.001f);
    for (size_t b = 0; b < nblk; b++) {
        unsigned char *blk = w + b * bs;
        switch (type) {
        case BP_TYPE_Q4_0: case BP_TYPE_Q8_0: memcpy(blk, &small, 2); break;
        case BP_TYPE_Q4_K: memcpy(blk, &small, 2); memcpy(blk + 2, &small, 2); break;
        case BP_TYPE_Q6_K: memcpy(blk + 208, &small, 2); break;
        default: break;
        }
    }
    return w;
}

/* The device's weight buffer type: the cpu plugin's CPU_REPACK (its own
 * interleaved layout, plugins/cpu/bp_cpu.h) unless BACKPLANE_BENCH_REPACK=0,
 * else the default one. */
static struct bp_buffer_type *weight_buffer_type(struct bp_device *dev, const char **name)
{
    *name = "default";
    const char *e = getenv("BACKPLANE_BENCH_REPACK");
    void *p = (e && !strcmp(e, "0")) ? NULL : bp_device_proc_address(dev, "bp_cpu_repack_buffer_type");
    if (p) {
        struct bp_buffer_type *(*fn)(struct bp_device *);
        memcpy(&fn, &p, sizeof p);
        struct bp_buffer_type *bt = fn(dev);
        if (bt) {
            *name = "CPU_REPACK";
            return bt;
        }
    }
    return bp_device_buffer_type(dev);
}

static const char *variant_of(struct bp_device *dev)
{
    const struct bp_plugin_info *pi = cli_plugin_of(dev);
    return pi && pi->variant && *pi->variant ? pi->variant : "";
}

static bool measure(struct bp_device *dev, const struct bench_opts *o, int64_t nmat, int reps,
                    struct mm_result *res)
{
    bool ok = false;
    struct bp_context *ctx = NULL;
    struct bp_buffer *buf = NULL;
    struct bp_backend *be = NULL;
    struct bp_graph **g = calloc((size_t)nmat, sizeof *g);
    struct bp_tensor **w = calloc((size_t)nmat, sizeof *w), **y = calloc((size_t)nmat, sizeof *y);
    double *t = calloc((size_t)reps, sizeof *t);
    const size_t wbytes = bp_row_size(o->type, o->K) * (size_t)o->N;
    void *wdata = NULL;
    float *xdata = NULL;
    if (!g || !w || !y || !t || bp_context_new((size_t)(3 * nmat + 4), &ctx) != BP_OK) {
        cli_error("could not allocate the benchmark's tensors; lower --footprint-mb.");
        goto out;
    }
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, o->K, o->M);
    for (int64_t i = 0; i < nmat; i++) {
        w[i] = bp_tensor_new_2d(ctx, o->type, o->K, o->N);
        y[i] = bp_mul_mat(ctx, w[i], x);
    }
    if (bp_context_status(ctx) != BP_OK) {
        cli_error("could not build the mul_mat graph: %s", bp_last_error());
        goto out;
    }
    if (!bp_device_supports_op(dev, y[0])) {
        cli_error("device %s does not support MUL_MAT with %s weights.", bp_device_name(dev),
                  bp_type_name(o->type));
        goto out;
    }
    if (bp_context_alloc_tensors(ctx, weight_buffer_type(dev, &res->buffer_type), NULL, &buf) != BP_OK) {
        cli_error("could not allocate %.0f MB on %s: %s", (double)wbytes * (double)nmat / MB,
                  bp_device_name(dev), bp_last_error());
        goto out;
    }
    wdata = make_weights(o->type, o->K, o->N, wbytes);
    xdata = malloc((size_t)(o->K * o->M) * sizeof *xdata);
    if (!wdata || !xdata) {
        cli_error("could not allocate host staging memory for the weights.");
        goto out;
    }
    for (int64_t i = 0; i < o->K * o->M; i++) xdata[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    bp_tensor_set(x, xdata, 0, (size_t)(o->K * o->M) * sizeof *xdata);
    for (int64_t i = 0; i < nmat; i++) bp_tensor_set(w[i], wdata, 0, wbytes);
    if (bp_backend_init(dev, NULL, &be) != BP_OK) {
        cli_error("could not start a backend on %s: %s", bp_device_name(dev), bp_last_error());
        goto out;
    }
    if (o->threads > 0 && bp_backend_set_n_threads(be, o->threads) != BP_OK)
        fprintf(stderr, "backplane: %s does not take a thread count; using its default.\n",
                bp_device_name(dev));
    for (int64_t i = 0; i < nmat; i++)
        if (bp_graph_new(4, &g[i]) != BP_OK || bp_graph_build(g[i], y[i]) != BP_OK) {
            cli_error("could not build graph %lld: %s", (long long)i, bp_last_error());
            goto out;
        }
    for (int64_t i = 0; i < (nmat < 2 ? nmat : 2); i++) { /* warm-up */
        if (bp_backend_graph_compute(be, g[i]) != BP_OK || bp_backend_synchronize(be) != BP_OK) {
            cli_error("mul_mat failed on %s: %s", bp_device_name(dev), bp_last_error());
            goto out;
        }
    }
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        bp_status st = bp_backend_graph_compute(be, g[r % nmat]);
        if (st == BP_OK) st = bp_backend_synchronize(be);
        t[r] = bench_now() - t0;
        if (st != BP_OK) {
            cli_error("mul_mat failed on %s: %s", bp_device_name(dev), bp_last_error());
            goto out;
        }
    }
    res->sec = bench_median(t, reps);
    res->reps = reps;
    res->variant = variant_of(dev);
    ok = true;
out:
    for (int64_t i = 0; g && i < nmat; i++) bp_graph_free(g[i]);
    if (be) bp_backend_free(be);
    if (buf) bp_buffer_free(buf);
    if (ctx) bp_context_free(ctx);
    free(xdata);
    free(wdata);
    free(t);
    free(y);
    free(w);
    free(g);
    return ok;
}

int bench_mul_mat(const struct bench_opts *o)
{
    struct bp_device *dev = cli_find_device(o->device);
    if (!dev)
        return CLI_EXIT_FAIL;
    const size_t row = bp_row_size(o->type, o->K);
    if (row == 0 || o->type == BP_TYPE_I32 || o->type == BP_TYPE_Q8_K)
        return cli_usage_error("bench", "-K %lld is not a whole number of %s blocks (or %s is "
                               "not a weight type)", (long long)o->K, bp_type_name(o->type),
                               bp_type_name(o->type));
    const size_t wbytes = row * (size_t)o->N;
    const int64_t fp_mb = o->footprint_mb >= 0 ? o->footprint_mb : (o->M == 1 ? 512 : 0);
    int64_t nmat = (int64_t)((double)fp_mb * MB / (double)wbytes + 0.999);
    if (nmat < 1) nmat = 1;
    if (nmat > 4096) nmat = 4096;
    int reps = o->reps ? o->reps : (o->M == 1 ? (int)(2 * nmat < 20 ? 20 : 2 * nmat) : 3);
    const int threads = o->threads;

    struct mm_result main_r, scalar_r = { 0 };
    if (!measure(dev, o, nmat, reps, &main_r))
        return CLI_EXIT_FAIL;
    const double flops = 2.0 * (double)o->K * (double)o->N * (double)o->M;
    const size_t footprint = wbytes * (size_t)nmat;

    /* References, same run. */
    const size_t probe = footprint < (size_t)(64 * MB) ? (size_t)(64 * MB) : footprint;
    const int nth = threads > 0 ? threads : 1;
    const double bw1 = bench_read_bandwidth(probe, 1, 3);
    const double bwn = nth > 1 ? bench_read_bandwidth(probe, nth, 3) : bw1;
    const double blas = o->type == BP_TYPE_F32 ? bench_blas_sgemm_gflops(o->M, o->N, o->K, nth, 3)
                                               : 0.0;
    bool have_scalar = false;
    if (o->vs_scalar && !strcmp(bp_device_name(dev), "cpu")) {
        bp_unload();
        setenv("BACKPLANE_CPU_VARIANT", "scalar", 1);
        if (cli_load() && (dev = cli_find_device("cpu")) != NULL)
            have_scalar = measure(dev, o, 1, 1, &scalar_r);
        unsetenv("BACKPLANE_CPU_VARIANT");
    }

    const double gflops = flops / main_r.sec * 1e-9, wgbs = (double)wbytes / main_r.sec * 1e-9;
    if (o->json) {
        struct json_writer jw;
        json_init(&jw, stdout);
        json_object_begin(&jw, NULL);
        json_string(&jw, "mode", "mul_mat");
        json_string(&jw, "device", o->device);
        json_string(&jw, "variant", main_r.variant);
        json_string(&jw, "buffer_type", main_r.buffer_type ? main_r.buffer_type : "");
        json_string(&jw, "type", bp_type_name(o->type));
        json_int(&jw, "K", o->K);
        json_int(&jw, "N", o->N);
        json_int(&jw, "M", o->M);
        json_int(&jw, "threads", threads);
        json_int(&jw, "matrices", nmat);
        json_int(&jw, "reps", main_r.reps);
        json_double(&jw, "seconds", main_r.sec);
        json_double(&jw, "gflops", gflops);
        json_double(&jw, "weight_gb_per_s", wgbs);
        json_double(&jw, "read_gb_per_s_1_thread", bw1 * 1e-9);
        json_double(&jw, "read_gb_per_s_n_threads", bwn * 1e-9);
        json_double(&jw, "weights_over_read_bandwidth", bwn > 0 ? wgbs / (bwn * 1e-9) : 0);
        if (blas > 0) {
            json_double(&jw, "openblas_gflops", blas);
            json_double(&jw, "over_openblas", gflops / blas);
        }
        if (have_scalar) {
            json_double(&jw, "scalar_seconds", scalar_r.sec);
            json_double(&jw, "speedup_over_scalar", scalar_r.sec / main_r.sec);
        }
        json_object_end(&jw);
        json_finish(&jw);
        return CLI_EXIT_OK;
    }
    printf("mul_mat on %s%s%s: %s K=%lld N=%lld M=%lld, %d thread%s, %lld matri%s (%.0f MB)\n",
           o->device, *main_r.variant ? " variant " : "", main_r.variant, bp_type_name(o->type),
           (long long)o->K, (long long)o->N, (long long)o->M, nth, nth == 1 ? "" : "s",
           (long long)nmat, nmat == 1 ? "x" : "ces", (double)footprint / MB);
    printf("  weights in  %s buffer\n", main_r.buffer_type ? main_r.buffer_type : "?");
    printf("  time        %.4f ms (median of %d)\n", main_r.sec * 1e3, main_r.reps);
    printf("  compute     %.1f GFLOP/s\n", gflops);
    printf("  weights     %.2f GB/s\n", wgbs);
    printf("  read bandwidth over %.0f MB: %.2f GB/s on 1 thread, %.2f GB/s on %d\n",
           (double)probe / MB, bw1 * 1e-9, bwn * 1e-9, nth);
    if (bwn > 0)
        printf("  weights / read bandwidth (%d thread%s): %.2f\n", nth, nth == 1 ? "" : "s",
               wgbs / (bwn * 1e-9));
    if (blas > 0)
        printf("  OpenBLAS cblas_sgemm: %.1f GFLOP/s; mul_mat / sgemm: %.2f\n", blas, gflops / blas);
    else if (o->type == BP_TYPE_F32)
        printf("  OpenBLAS not installed: no sgemm reference.\n");
    if (have_scalar)
        printf("  scalar variant: %.4f ms; speed-up over scalar: %.1fx\n", scalar_r.sec * 1e3,
               scalar_r.sec / main_r.sec);
    return CLI_EXIT_OK;
}
