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
#include "cpu/bp_cpu.h"
#include "cli.h"
#include "json.h"

#define MB (1024.0 * 1024.0)

/* Everything one measurement needs, set up once: the rounds re-time the
 * same graphs. */
struct mm_bench {
    struct bp_context *ctx;
    struct bp_buffer *buf;
    struct bp_backend *be;
    struct bp_graph **g;
    int64_t nmat;
    char variant[32];        /* of the device's plugin (a copy: --vs-scalar reloads) */
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
        case BP_TYPE_Q4_0: case BP_TYPE_Q8_0: case BP_TYPE_Q5_0: case BP_TYPE_IQ4_NL:
        case BP_TYPE_IQ4_XS: memcpy(blk, &small, 2); break;
        case BP_TYPE_Q4_K: case BP_TYPE_Q5_K: case BP_TYPE_Q4_1: case BP_TYPE_Q5_1:
            memcpy(blk, &small, 2); memcpy(blk + 2, &small, 2); break;
        case BP_TYPE_Q6_K: memcpy(blk + 208, &small, 2); break;
        case BP_TYPE_Q2_K: memcpy(blk + 80, &small, 2); memcpy(blk + 82, &small, 2); break;
        case BP_TYPE_Q3_K: memcpy(blk + 108, &small, 2); break;
        default: break;
        }
    }
    return w;
}

/* The device's weight buffer type for the weight type (bp_device_weight_buffer_type:
 * CPU_REPACK on the cpu device) unless BACKPLANE_BENCH_REPACK=0, else the
 * default one; *name is the buffer type's own name or "default". */
static struct bp_buffer_type *weight_buffer_type(struct bp_device *dev, enum bp_type type,
                                                 const char **name)
{
    *name = "default";
    struct bp_buffer_type *def = bp_device_buffer_type(dev);
    const char *e = getenv("BACKPLANE_BENCH_REPACK");
    struct bp_buffer_type *bt = (e && !strcmp(e, "0")) ? def : bp_device_weight_buffer_type(dev, type);
    const char *(*get_name)(struct bp_buffer_type *) = bt ? BP_IFACE_GET(bt->iface, get_name) : NULL;
    if (bt && bt != def && get_name) *name = get_name(bt);
    return bt;
}

static const char *variant_of(struct bp_device *dev)
{
    const struct bp_plugin_info *pi = cli_plugin_of(dev);
    return pi && pi->variant && *pi->variant ? pi->variant : "";
}

static void mm_bench_free(struct mm_bench *b)
{
    for (int64_t i = 0; b->g && i < b->nmat; i++) bp_graph_free(b->g[i]);
    free(b->g);
    if (b->be) bp_backend_free(b->be);
    if (b->buf) bp_buffer_free(b->buf);
    if (b->ctx) bp_context_free(b->ctx);
    b->g = NULL;
    b->be = NULL;
    b->buf = NULL;
    b->ctx = NULL;  /* the names stay for the report */
}

static bool mm_bench_setup(struct bp_device *dev, const struct bench_opts *o, int64_t nmat,
                           struct mm_bench *b)
{
    bool ok = false;
    *b = (struct mm_bench){ .nmat = nmat };
    snprintf(b->variant, sizeof b->variant, "%s", variant_of(dev));
    struct bp_tensor **w = calloc((size_t)nmat, sizeof *w), **y = calloc((size_t)nmat, sizeof *y);
    const size_t wbytes = bp_row_size(o->type, o->K) * (size_t)o->N;
    void *wdata = NULL;
    float *xdata = NULL;
    b->g = calloc((size_t)nmat, sizeof *b->g);
    if (!b->g || !w || !y || bp_context_new((size_t)(3 * nmat + 4), &b->ctx) != BP_OK) {
        cli_error("could not allocate the benchmark's tensors; lower --footprint-mb.");
        goto out;
    }
    struct bp_tensor *x = bp_tensor_new_2d(b->ctx, BP_TYPE_F32, o->K, o->M);
    for (int64_t i = 0; i < nmat; i++) {
        w[i] = bp_tensor_new_2d(b->ctx, o->type, o->K, o->N);
        y[i] = bp_mul_mat(b->ctx, w[i], x);
    }
    if (bp_context_status(b->ctx) != BP_OK) {
        cli_error("could not build the mul_mat graph: %s", bp_last_error());
        goto out;
    }
    if (!bp_device_supports_op(dev, y[0])) {
        cli_error("device %s does not support MUL_MAT with %s weights.", bp_device_name(dev),
                  bp_type_name(o->type));
        goto out;
    }
    if (bp_context_alloc_tensors(b->ctx, weight_buffer_type(dev, o->type, &b->buffer_type), NULL, &b->buf)
        != BP_OK) {
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
    if (bp_backend_init(dev, NULL, &b->be) != BP_OK) {
        cli_error("could not start a backend on %s: %s", bp_device_name(dev), bp_last_error());
        goto out;
    }
    for (int64_t i = 0; i < nmat; i++)
        if (bp_graph_new(4, &b->g[i]) != BP_OK || bp_graph_build(b->g[i], y[i]) != BP_OK) {
            cli_error("could not build graph %lld: %s", (long long)i, bp_last_error());
            goto out;
        }
    ok = true;
out:
    if (!ok) mm_bench_free(b);
    free(xdata);
    free(wdata);
    free(y);
    free(w);
    return ok;
}

/* Median seconds of one call over `reps` calls (cycling through the
 * matrices) with `threads` threads (0: the backend's default), after a
 * warm-up; 0 on failure (reported). */
static double mm_bench_time(struct mm_bench *b, struct bp_device *dev, int threads, int reps)
{
    if (threads > 0 && bp_backend_set_n_threads(b->be, threads) != BP_OK) {
        cli_error("%s does not take a thread count of %d: %s", bp_device_name(dev), threads,
                  bp_last_error());
        return 0;
    }
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) {
        cli_error("out of memory for the timings.");
        return 0;
    }
    double sec = 0;
    for (int r = -(b->nmat < 2 ? (int)b->nmat : 2); r < reps; r++) { /* r < 0: warm-up */
        double t0 = bench_now();
        bp_status st = bp_backend_graph_compute(b->be, b->g[(r + 2) % b->nmat]);
        if (st == BP_OK) st = bp_backend_synchronize(b->be);
        if (st != BP_OK) {
            cli_error("mul_mat failed on %s: %s", bp_device_name(dev), bp_last_error());
            goto out;
        }
        if (r >= 0) t[r] = bench_now() - t0;
    }
    sec = bench_median(t, reps);
out:
    free(t);
    return sec;
}

/* The scalar variant, timed once for --vs-scalar: the plugins are
 * reloaded with the variant forced, so this comes last. */
static double time_scalar(const struct bench_opts *o)
{
    bp_unload();
    setenv("BACKPLANE_CPU_VARIANT", "scalar", 1);
    double sec = 0;
    struct bp_device *dev;
    struct mm_bench b;
    if (cli_load() && (dev = cli_find_device("cpu")) != NULL && mm_bench_setup(dev, o, 1, &b)) {
        sec = mm_bench_time(&b, dev, o->threads, 1);
        mm_bench_free(&b);
    }
    unsetenv("BACKPLANE_CPU_VARIANT");
    return sec;
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

static double max_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Per-round series; medians are taken on copies (bench_median sorts). */
struct mm_series {
    double sec[BENCH_MAX_ROUNDS], sec1[BENCH_MAX_ROUNDS];
    double bw1[BENCH_MAX_ROUNDS], bwn[BENCH_MAX_ROUNDS];
    double ratio[BENCH_MAX_ROUNDS], speedup[BENCH_MAX_ROUNDS];
    /* --scaling: N one-thread copies run at once (their mean time), and N
     * threads' speed over the copies' summed speed */
    double sec_copy[BENCH_MAX_ROUNDS], over_copies[BENCH_MAX_ROUNDS];
    /* --vs-noamx: the same calls with the cpu's AMX kernels off, and off / on */
    double sec_noamx[BENCH_MAX_ROUNDS], amx_speedup[BENCH_MAX_ROUNDS];
};

/* --scaling's second reference: N copies of the problem, each with its own
 * weights and a one-thread backend, timed at the same moment on N threads
 * (they meet at a gate first). N threads of one problem can at best do the
 * work of N copies that share nothing; on a shared VM that is not N times
 * one thread alone: the vCPUs' speeds drift apart, and at times the host
 * ran both of this machine's vCPUs on one core (two copies at once took
 * 141 ms each, one alone 73 ms). */
struct mm_copies {
    struct mm_bench *b;
    int n;
};

struct mm_copy_job {
    struct mm_bench *b;
    struct bp_device *dev;
    int reps;
    double sec;
};

static void mm_copy_work(void *arg)
{
    struct mm_copy_job *j = arg;
    j->sec = mm_bench_time(j->b, j->dev, 1, j->reps);
}

static bool mm_copies_setup(struct bp_device *dev, const struct bench_opts *o, int64_t nmat, int n,
                            struct mm_copies *c)
{
    c->n = 0;
    c->b = calloc((size_t)n, sizeof *c->b);
    if (!c->b)
        return false;
    const int64_t each = nmat / n > 0 ? nmat / n : 1;
    for (; c->n < n; c->n++)
        if (!mm_bench_setup(dev, o, each, &c->b[c->n]))
            return false;
    return true;
}

static void mm_copies_free(struct mm_copies *c)
{
    for (int k = 0; k < c->n; k++) mm_bench_free(&c->b[k]);
    free(c->b);
    c->b = NULL;
    c->n = 0;
}

/* Summed speed (1/s) of the copies run at once, their mean time in *mean;
 * 0 when a thread could not start or a copy failed (reported). */
static double mm_copies_time(struct mm_copies *c, struct bp_device *dev, int reps, double *mean)
{
    struct mm_copy_job *jobs = calloc((size_t)c->n, sizeof *jobs);
    double speed = 0.0;
    *mean = 0.0;
    if (!jobs) {
        cli_error("out of memory for the one-thread copies.");
        return 0.0;
    }
    for (int k = 0; k < c->n; k++)
        jobs[k] = (struct mm_copy_job){ .b = &c->b[k], .dev = dev, .reps = reps };
    if (bench_run_together(c->n, mm_copy_work, jobs, sizeof *jobs) < 0) {
        cli_error("could not start %d threads for the one-thread copies.", c->n);
        goto out;
    }
    for (int k = 0; k < c->n; k++) {
        if (jobs[k].sec <= 0) {
            speed = 0.0;
            goto out;
        }
        speed += 1.0 / jobs[k].sec;
        *mean += jobs[k].sec / c->n;
    }
out:
    free(jobs);
    return speed;
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
    const int reps = o->reps ? o->reps : (o->M == 1 ? (int)(2 * nmat < 20 ? 20 : 2 * nmat) : 3);
    const int rounds = o->rounds ? o->rounds : (o->M == 1 ? 5 : 3);
    const int threads = o->threads;
    const int nth = threads > 0 ? threads : 1;
    const bool scaling = o->scaling && nth > 1;
    const size_t footprint = wbytes * (size_t)nmat;
    const size_t probe_bytes = footprint < (size_t)(64 * MB) ? (size_t)(64 * MB) : footprint;

    struct mm_bench b;
    if (!mm_bench_setup(dev, o, nmat, &b))
        return CLI_EXIT_FAIL;
    struct mm_copies copies = { 0 };
    if (scaling && !mm_copies_setup(dev, o, nmat, nth, &copies)) {
        cli_error("could not set up %d one-thread copies for --scaling.", nth);
        mm_copies_free(&copies);
        mm_bench_free(&b);
        return CLI_EXIT_FAIL;
    }
    struct bench_probe *probe = bench_probe_new(probe_bytes);
    if (!probe)
        fprintf(stderr, "backplane: no memory for the %.0f MB read-bandwidth probe; "
                "reporting no bandwidth ratio.\n", (double)probe_bytes / MB);
    /* Measurement and references alternate, round by round, so that each
     * ratio compares numbers taken a moment apart: on a shared machine the
     * bandwidth itself moves by 2x within minutes. */
    struct mm_series ser = { 0 };
    int rc = CLI_EXIT_FAIL;
    bp_cpu_set_amx_fn set_amx = NULL;
    if (o->vs_noamx) {
        void *p = bp_device_proc_address(dev, BP_CPU_PROC_SET_AMX);
        memcpy(&set_amx, &p, sizeof p);
        if (!set_amx || set_amx(dev, true) != BP_OK) {
            fprintf(stderr, "backplane: %s runs no AMX kernels here; --vs-noamx times nothing.\n",
                    o->device);
            set_amx = NULL;
        }
    }
    for (int r = 0; r < rounds; r++) {
        if ((ser.sec[r] = mm_bench_time(&b, dev, threads, reps)) <= 0) goto out;
        if (scaling) {
            if ((ser.sec1[r] = mm_bench_time(&b, dev, 1, reps)) <= 0) goto out;
            ser.speedup[r] = ser.sec1[r] / ser.sec[r];
            const double speed = mm_copies_time(&copies, dev, reps, &ser.sec_copy[r]);
            if (speed <= 0) goto out;
            ser.over_copies[r] = 1.0 / ser.sec[r] / speed;
        }
        if (set_amx) {
            set_amx(dev, false);
            ser.sec_noamx[r] = mm_bench_time(&b, dev, threads, reps);
            set_amx(dev, true);
            if (ser.sec_noamx[r] <= 0) goto out;
            ser.amx_speedup[r] = ser.sec_noamx[r] / ser.sec[r];
        }
        ser.bw1[r] = bench_probe_run(probe, 1, 3);
        ser.bwn[r] = nth > 1 ? bench_probe_run(probe, nth, 3) : ser.bw1[r];
        ser.ratio[r] = ser.bwn[r] > 0 ? (double)wbytes / ser.sec[r] / ser.bwn[r] : 0;
    }
    const double blas = o->type == BP_TYPE_F32 ? bench_blas_sgemm_gflops(o->M, o->N, o->K, nth, 3)
                                               : 0.0;
    const double sec_scalar = o->vs_scalar && !strcmp(bp_device_name(dev), "cpu")
                              ? (mm_bench_free(&b), mm_copies_free(&copies), time_scalar(o)) : 0.0;

    const double flops = 2.0 * (double)o->K * (double)o->N * (double)o->M;
    const double sec = bench_median_of(ser.sec, rounds), best = min_of(ser.sec, rounds);
    const double gflops = flops / sec * 1e-9, wgbs = (double)wbytes / sec * 1e-9;
    const double bw1 = bench_median_of(ser.bw1, rounds), bwn = bench_median_of(ser.bwn, rounds);
    const double ratio = bench_median_of(ser.ratio, rounds);
    const double speedup = scaling ? bench_median_of(ser.speedup, rounds) : 0.0;
    if (o->json) {
        struct json_writer jw;
        json_init(&jw, stdout);
        json_object_begin(&jw, NULL);
        json_string(&jw, "mode", "mul_mat");
        json_string(&jw, "device", o->device);
        json_string(&jw, "variant", b.variant);
        json_string(&jw, "buffer_type", b.buffer_type ? b.buffer_type : "");
        json_string(&jw, "type", bp_type_name(o->type));
        json_int(&jw, "K", o->K);
        json_int(&jw, "N", o->N);
        json_int(&jw, "M", o->M);
        json_int(&jw, "threads", threads);
        json_int(&jw, "matrices", nmat);
        json_int(&jw, "reps", reps);
        json_int(&jw, "rounds", rounds);
        json_double(&jw, "seconds", sec);
        json_double(&jw, "seconds_best_round", best);
        json_double(&jw, "gflops", gflops);
        json_double(&jw, "gflops_best_round", flops / best * 1e-9);
        json_double(&jw, "weight_gb_per_s", wgbs);
        json_double(&jw, "read_gb_per_s_1_thread", bw1 * 1e-9);
        json_double(&jw, "read_gb_per_s_n_threads", bwn * 1e-9);
        json_double(&jw, "weights_over_read_bandwidth", ratio);
        json_double(&jw, "weights_over_read_bandwidth_min", min_of(ser.ratio, rounds));
        json_double(&jw, "weights_over_read_bandwidth_max", max_of(ser.ratio, rounds));
        if (scaling) {
            json_double(&jw, "seconds_1_thread", bench_median_of(ser.sec1, rounds));
            json_double(&jw, "speedup_over_1_thread", speedup);
            json_double(&jw, "speedup_over_1_thread_min", min_of(ser.speedup, rounds));
            json_double(&jw, "speedup_over_1_thread_max", max_of(ser.speedup, rounds));
            json_double(&jw, "seconds_1_thread_copy_at_once", bench_median_of(ser.sec_copy, rounds));
            json_double(&jw, "over_1_thread_copies_at_once", bench_median_of(ser.over_copies, rounds));
        }
        if (blas > 0) {
            json_double(&jw, "openblas_gflops", blas);
            json_double(&jw, "over_openblas", gflops / blas);
        }
        if (set_amx) {
            json_double(&jw, "noamx_seconds", bench_median_of(ser.sec_noamx, rounds));
            json_double(&jw, "amx_speedup", bench_median_of(ser.amx_speedup, rounds));
            json_double(&jw, "amx_speedup_min", min_of(ser.amx_speedup, rounds));
            json_double(&jw, "amx_speedup_max", max_of(ser.amx_speedup, rounds));
        }
        if (sec_scalar > 0) {
            json_double(&jw, "scalar_seconds", sec_scalar);
            json_double(&jw, "speedup_over_scalar", sec_scalar / sec);
        }
        json_object_end(&jw);
        json_finish(&jw);
        rc = CLI_EXIT_OK;
        goto out;
    }
    printf("mul_mat on %s%s%s: %s K=%lld N=%lld M=%lld, %d thread%s, %lld matri%s (%.0f MB)\n",
           o->device, *b.variant ? " variant " : "", b.variant,
           bp_type_name(o->type), (long long)o->K, (long long)o->N, (long long)o->M, nth,
           nth == 1 ? "" : "s", (long long)nmat, nmat == 1 ? "x" : "ces", (double)footprint / MB);
    printf("  weights in  %s buffer\n", b.buffer_type ? b.buffer_type : "?");
    printf("  rounds      %d, each: median of %d calls, then the read-bandwidth probe (median of 3)\n", rounds,
           reps);
    printf("  time        %.4f ms (median round; best %.4f ms)\n", sec * 1e3, best * 1e3);
    printf("  compute     %.1f GFLOP/s (best round %.1f)\n", gflops, flops / best * 1e-9);
    printf("  weights     %.2f GB/s\n", wgbs);
    if (probe) {
        printf("  read bandwidth over %.0f MB: %.2f GB/s on 1 thread, %.2f GB/s on %d\n",
               (double)bench_probe_bytes(probe) / MB, bw1 * 1e-9, bwn * 1e-9, nth);
        printf("  weights / read bandwidth (%d thread%s): %.2f (rounds %.2f to %.2f)\n", nth,
               nth == 1 ? "" : "s", ratio, min_of(ser.ratio, rounds), max_of(ser.ratio, rounds));
    }
    if (set_amx)
        printf("  AMX off     %.4f ms (%.1f GFLOP/s); AMX on / off: %.2fx (rounds %.2f to %.2f)\n",
               bench_median_of(ser.sec_noamx, rounds) * 1e3,
               flops / bench_median_of(ser.sec_noamx, rounds) * 1e-9, bench_median_of(ser.amx_speedup, rounds),
               min_of(ser.amx_speedup, rounds), max_of(ser.amx_speedup, rounds));
    if (scaling) {
        printf("  1 thread    %.4f ms; %d threads / 1 thread: %.2fx (rounds %.2f to %.2f)\n",
               bench_median_of(ser.sec1, rounds) * 1e3, nth, speedup, min_of(ser.speedup, rounds),
               max_of(ser.speedup, rounds));
        printf("  %d copies    of 1 thread at once: %.4f ms each; %d threads / their summed "
               "speed: %.2f (rounds %.2f to %.2f)\n", nth, bench_median_of(ser.sec_copy, rounds) * 1e3,
               nth, bench_median_of(ser.over_copies, rounds), min_of(ser.over_copies, rounds),
               max_of(ser.over_copies, rounds));
    }
    if (blas > 0)
        printf("  OpenBLAS cblas_sgemm: %.1f GFLOP/s; mul_mat / sgemm: %.2f\n", blas, gflops / blas);
    else if (o->type == BP_TYPE_F32)
        printf("  OpenBLAS not installed: no sgemm reference.\n");
    if (sec_scalar > 0)
        printf("  scalar variant: %.4f ms; speed-up over scalar: %.1fx\n", sec_scalar * 1e3,
               sec_scalar / sec);
    rc = CLI_EXIT_OK;
out:
    bench_probe_free(probe);
    mm_copies_free(&copies);
    mm_bench_free(&b);
    return rc;
}
