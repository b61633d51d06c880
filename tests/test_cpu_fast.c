/*
 * test_cpu_fast.c — the fast CPU paths through the public API, run once per
 * variant (BACKPLANE_CPU_VARIANT set by tests/cpu.cmake; a variant this
 * machine cannot run exits 77, "skipped"; one whose .so is missing fails):
 *  - the forced variant is the one loaded, and every variant's score entry
 *    agrees with the compiler's own CPUID/XCR0 probe;
 *  - quantized MUL_MAT equals a double-precision product of the weights as
 *    GET_ROWS dequantizes them with the F32 activation, within the bound
 *    the activation's 8-bit quantization allows, in every chunking regime
 *    and with more threads than chunks, for every weight type; results are
 *    bit-identical for every thread count; batched and broadcast weights;
 *    GET_ROWS of every quantized type is bp_dequantize of the row;
 *  - the pool: many small graphs in a row, cancellation mid-graph, thread
 *    count changed between graphs (1..8 threads on however many cores);
 *  - the CPU_REPACK buffer type: set/get of whole tensors and of any byte
 *    range (partial 8-row groups, tail rows, slices, views) give back the
 *    bytes set; MUL_MAT with repacked weights (odd row counts, M = 1 .. 33,
 *    broadcast) matches the dequantized reference and does not depend on
 *    the thread count; other ops refuse repacked tensors;
 *  - F32 / F16 / BF16 weights with several activation rows (the tiled
 *    float kernel in the SIMD variants): odd M and N around every tile
 *    edge, K no multiple of the vector width, broadcast slices, against
 *    the double reference, and bit-identical for every thread count.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_quant.h>
#include <backplane/bp_quantize.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"
#include "cpu_variant_util.h"
#include "suite_main.h"

static unsigned long long seed = 0x9E3779B97F4A7C15ull;
static unsigned long long rnd64(void)
{
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return seed;
}

/* Random valid blocks: random quants and scale codes, small finite f16 scales. */
static void *random_weights(enum bp_type t, int64_t nblocks)
{
    const size_t bs = bp_type_size(t);
    unsigned char *w = malloc(bs * (size_t)nblocks);
    for (size_t i = 0; i < bs * (size_t)nblocks; i++) w[i] = (unsigned char)rnd64();
    for (int64_t i = 0; !bp_type_is_quantized(t) && i < nblocks; i++) {
        const float v = (float)((double)(rnd64() % 2001) / 1000.0 - 1.0);
        if (t == BP_TYPE_F32) memcpy(w + 4 * i, &v, 4);
        const uint16_t h = t == BP_TYPE_F16 ? bp_f32_to_f16(v) : bp_f32_to_bf16(v);
        if (t != BP_TYPE_F32) memcpy(w + 2 * i, &h, 2);
    }
    for (int64_t b = 0; b < nblocks; b++) {
        unsigned char *blk = w + (size_t)b * bs;
        uint16_t d = bp_f32_to_f16(0.01f + (float)(rnd64() % 100) * 1e-4f);
        uint16_t dm = bp_f32_to_f16((float)(rnd64() % 100) * 1e-4f);
        if (t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q5_0 || t == BP_TYPE_IQ4_NL ||
            t == BP_TYPE_IQ4_XS)
            memcpy(blk, &d, 2);
        if (t == BP_TYPE_Q4_K || t == BP_TYPE_Q5_K || t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) {
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dm, 2);
        }
        if (t == BP_TYPE_Q6_K) memcpy(blk + 208, &d, 2);
        if (t == BP_TYPE_Q2_K) { memcpy(blk + 80, &d, 2); memcpy(blk + 82, &dm, 2); }
        if (t == BP_TYPE_Q3_K) memcpy(blk + 108, &d, 2);
    }
    return w;
}

struct mm_case {
    struct fx f;
    struct bp_tensor *w, *x, *y, *rows;
    int64_t K, N, M, wb2, xb2;
};

/* y = mul_mat(w[K, N, wb2], x[K, M, xb2]); rows = get_rows(w, 0..N-1) of slice 0.. */
static void mm_build(struct mm_case *c, enum bp_type t, int64_t K, int64_t N, int64_t M,
                     int64_t wb2, int64_t xb2)
{
    c->K = K; c->N = N; c->M = M; c->wb2 = wb2; c->xb2 = xb2;
    fx_init(&c->f);
    c->w = bp_tensor_new_3d(c->f.ctx, t, K, N, wb2);
    c->x = bp_tensor_new_3d(c->f.ctx, BP_TYPE_F32, K, M, xb2);
    struct bp_tensor *ids = bp_tensor_new_2d(c->f.ctx, BP_TYPE_I32, N, wb2);
    c->y = bp_mul_mat(c->f.ctx, c->w, c->x);
    c->rows = bp_get_rows(c->f.ctx, c->w, ids);
    ck_assert_ptr_nonnull(c->y);
    ck_assert_ptr_nonnull(c->rows);
    fx_alloc(&c->f);
    const int64_t nblk = K / bp_type_block_size(t) * N * wb2;
    void *wd = random_weights(t, nblk);
    ck_assert_int_eq(bp_tensor_set(c->w, wd, 0, bp_type_size(t) * (size_t)nblk), BP_OK);
    free(wd);
    float *xd = malloc((size_t)(K * M * xb2) * sizeof *xd);
    for (int64_t i = 0; i < K * M * xb2; i++) {
        xd[i] = (float)((double)(rnd64() % 20001) / 10000.0 - 1.0);
        if (rnd64() % 53 == 0) xd[i] *= 50.0f; /* long tail */
    }
    ck_assert_int_eq(bp_tensor_set(c->x, xd, 0, (size_t)(K * M * xb2) * sizeof *xd), BP_OK);
    free(xd);
    int32_t *id = malloc((size_t)(N * wb2) * sizeof *id);
    for (int64_t i = 0; i < N * wb2; i++) id[i] = (int32_t)(i % N);
    ck_assert_int_eq(bp_tensor_set(ids, id, 0, (size_t)(N * wb2) * sizeof *id), BP_OK);
    free(id);
}

static float *mm_run(struct mm_case *c, int threads)
{
    ck_assert_int_eq(bp_backend_set_n_threads(c->f.be, threads), BP_OK);
    ck_assert_msg(fx_compute(&c->f, c->y) == BP_OK, "mul_mat: %s", bp_last_error());
    const size_t n = (size_t)(c->N * c->M * c->xb2);
    float *out = malloc(n * sizeof *out);
    ck_assert_int_eq(bp_tensor_get(c->y, out, 0, n * sizeof *out), BP_OK);
    return out;
}

/* The reference: dequantized weights (GET_ROWS) times the F32 activation in
 * double. Q8 activation error is at most amax/254 per element (round to
 * nearest of a step amax/127), so |err| <= sum|w| * max|x| / 254. */
static void mm_check(struct mm_case *c, const float *got, const char *what)
{
    ck_assert_msg(fx_compute(&c->f, c->rows) == BP_OK, "get_rows: %s", bp_last_error());
    const int64_t K = c->K, N = c->N, M = c->M;
    float *wf = malloc((size_t)(K * N * c->wb2) * sizeof *wf);
    float *xf = malloc((size_t)(K * M * c->xb2) * sizeof *xf);
    ck_assert_int_eq(bp_tensor_get(c->rows, wf, 0, (size_t)(K * N * c->wb2) * 4), BP_OK);
    ck_assert_int_eq(bp_tensor_get(c->x, xf, 0, (size_t)(K * M * c->xb2) * 4), BP_OK);
    const bool quant = bp_type_is_quantized((enum bp_type)c->w->type);
    for (int64_t b = 0; b < c->xb2; b++) {
        const float *ws = wf + (size_t)(b / (c->xb2 / c->wb2)) * (size_t)(K * N);
        for (int64_t m = 0; m < M; m++) {
            const float *xr = xf + (size_t)((b * M + m) * K);
            double xmax = 0;
            for (int64_t k = 0; k < K; k++) xmax = fmax(xmax, fabs(xr[k]));
            for (int64_t n = 0; n < N; n++) {
                double want = 0, wabs = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    want += (double)ws[n * K + k] * xr[k];
                    wabs += fabs(ws[n * K + k]);
                    mag += fabs((double)ws[n * K + k] * xr[k]);
                }
                const double tol = (quant ? wabs * xmax / 254.0 * 1.01 : 0) + 1e-5 * mag + 1e-6;
                const double g = got[(b * M + m) * N + n];
                ck_assert_msg(fabs(g - want) <= tol,
                              "%s %s: y[%lld, %lld, %lld] = %.7g, want %.7g (tolerance %.3g)",
                              what, bp_type_name((enum bp_type)c->w->type), (long long)n,
                              (long long)m, (long long)b, g, want, tol);
            }
        }
    }
    free(wf);
    free(xf);
}

static const enum bp_type weight_types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K,
                                             BP_TYPE_Q6_K, BP_TYPE_F16, BP_TYPE_BF16,
                                             BP_TYPE_F32, BP_TYPE_Q4_1, BP_TYPE_Q5_0,
                                             BP_TYPE_Q5_1, BP_TYPE_IQ4_NL, BP_TYPE_Q2_K,
                                             BP_TYPE_Q3_K, BP_TYPE_Q5_K, BP_TYPE_IQ4_XS };
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

/* (N, M): single rows on either side (64-row chunks), fewer than four
 * chunks per thread (one per thread along the longer side), many 16x16
 * chunks, odd counts everywhere. */
static const int64_t shapes[][2] = { { 1, 1 }, { 5, 1 }, { 1, 3 }, { 130, 1 }, { 1, 70 },
                                     { 37, 3 }, { 20, 20 }, { 70, 33 } };

START_TEST(test_mul_mat_matches_dequantized_reference_in_every_chunk_regime)
{
    const enum bp_type t = weight_types[_i];
    const int64_t K = bp_type_block_size(t) > 32 ? 512 : 96;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct mm_case c;
        mm_build(&c, t, K, shapes[s][0], shapes[s][1], 1, 1);
        float *one = mm_run(&c, 1);
        mm_check(&c, one, "1 thread");
        static const int thread_counts[] = { 2, 3, 4, 5, 8 }; /* 5, 8: more threads than chunks */
        for (size_t ti = 0; ti < sizeof thread_counts / sizeof thread_counts[0]; ti++) {
            const int th = thread_counts[ti];
            float *many = mm_run(&c, th);
            /* OpenBLAS (large-M F32 in the SIMD variants) blocks each
             * thread's slice its own way: held to the bound, not to bits */
            if (t == BP_TYPE_F32) mm_check(&c, many, "n threads");
            else ck_assert_msg(memcmp(one, many, (size_t)(c.N * c.M) * 4) == 0,
                          "%s N=%lld M=%lld: %d threads differ from 1", bp_type_name(t),
                          (long long)c.N, (long long)c.M, th);
            free(many);
        }
        free(one);
        fx_free(&c.f);
    }
}
END_TEST

START_TEST(test_mul_mat_broadcasts_weights_over_batches)
{
    const enum bp_type t = weight_types[_i];
    const int64_t K = bp_type_block_size(t) > 32 ? 256 : 64;
    struct mm_case c;
    mm_build(&c, t, K, 19, 5, 2, 6); /* each weight slice serves 3 activation slices */
    float *y = mm_run(&c, 3);
    mm_check(&c, y, "broadcast");
    free(y);
    fx_free(&c.f);
}
END_TEST

/* GET_ROWS of a quantized table gives, for every id (repeated, out of
 * order), bp_dequantize of that row's bytes, to the bit; with 1 to 4
 * threads. */
START_TEST(test_get_rows_of_every_quantized_type_is_bp_dequantize_of_the_row)
{
    const enum bp_type t = weight_types[_i];
    if (!bp_type_is_quantized(t)) return;
    const int64_t K = 2 * (bp_type_block_size(t) > 32 ? 256 : 32), N = 7;
    static const int32_t ids[] = { 6, 0, 3, 3, 5, 1, 6, 2, 4 };
    const int64_t n_ids = (int64_t)(sizeof ids / sizeof ids[0]);
    struct fx f;
    fx_init(&f);
    struct bp_tensor *w = bp_tensor_new_2d(f.ctx, t, K, N);
    struct bp_tensor *id = bp_tensor_new_1d(f.ctx, BP_TYPE_I32, n_ids);
    struct bp_tensor *rows = bp_get_rows(f.ctx, w, id);
    ck_assert_ptr_nonnull(rows);
    fx_alloc(&f);
    const size_t rs = bp_row_size(t, K);
    unsigned char *wd = random_weights(t, K / bp_type_block_size(t) * N);
    ck_assert_int_eq(bp_tensor_set(w, wd, 0, rs * (size_t)N), BP_OK);
    ck_assert_int_eq(bp_tensor_set(id, ids, 0, sizeof ids), BP_OK);
    float *want = malloc((size_t)(K * n_ids) * sizeof *want), *got = malloc((size_t)(K * n_ids) * sizeof *got);
    for (int64_t r = 0; r < n_ids; r++)
        ck_assert_int_eq(bp_dequantize(t, wd + rs * (size_t)ids[r], want + r * K, K), BP_OK);
    for (int th = 1; th <= 4; th++) {
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, th), BP_OK);
        ck_assert_msg(fx_compute(&f, rows) == BP_OK, "get_rows %s: %s", bp_type_name(t), bp_last_error());
        ck_assert_int_eq(bp_tensor_get(rows, got, 0, (size_t)(K * n_ids) * sizeof *got), BP_OK);
        ck_assert_msg(memcmp(got, want, (size_t)(K * n_ids) * sizeof *got) == 0,
                      "get_rows %s with %d threads differs from bp_dequantize", bp_type_name(t), th);
    }
    free(wd);
    free(want);
    free(got);
    fx_free(&f);
}
END_TEST

/* F32 with M >= 32 and K >= 64 may go to OpenBLAS in the SIMD variants:
 * held to the bound there, not to bits. */
static const enum bp_type float_types[] = { BP_TYPE_F16, BP_TYPE_BF16, BP_TYPE_F32 };

START_TEST(test_float_mul_mat_with_many_rows_matches_reference_at_every_tile_edge)
{
    const enum bp_type t = float_types[_i];
    const int64_t Ms[] = { 2, 3, 5, 7, 16, 33, 67 }, Ns[] = { 1, 7, 31, 67 };
    int n = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++, n++) {
            const int64_t K = n % 2 ? 37 : 100;
            const int64_t wb2 = n % 3 == 0 ? 2 : 1, xb2 = n % 3 == 0 ? 6 : 1;
            struct mm_case c;
            mm_build(&c, t, K, Ns[b], Ms[a], wb2, xb2);
            float *one = mm_run(&c, 1);
            mm_check(&c, one, "1 thread");
            for (int th = 2; th <= 7; th += 5) {
                float *many = mm_run(&c, th);
                if (t == BP_TYPE_F32 && c.M >= 32)
                    mm_check(&c, many, "n threads");
                else
                    ck_assert_msg(memcmp(one, many, (size_t)(c.N * c.M * xb2) * 4) == 0,
                                  "%s K=%lld N=%lld M=%lld batches %lld/%lld: %d threads differ "
                                  "from 1", bp_type_name(t), (long long)K, (long long)c.N,
                                  (long long)c.M, (long long)wb2, (long long)xb2, th);
                free(many);
            }
            free(one);
            fx_free(&c.f);
        }
}
END_TEST

START_TEST(test_forced_variant_is_the_one_loaded)
{
    expect_loaded_variant_is_the_chosen_one();
    struct bp_device *dev = cpu_device();
    const char *want = dev->reg->variant;
    bp_get_features_fn gf = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull(gf);
    bool seen = false;
    for (const struct bp_feature *f = gf(dev->reg); f->name; f++)
        if (!strcmp(f->name, "variant")) seen = !strcmp(f->value, want);
    ck_assert_msg(seen, "features do not name variant %s", want);
}
END_TEST

/* What the compiler's runtime (its own CPUID + XGETBV probe) says. */
static bool machine_runs(const char *variant)
{
    if (!strcmp(variant, "scalar")) return true;
#if defined(__x86_64__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!strcmp(variant, "avx2")) return avx2;
    if (!strcmp(variant, "avx512"))
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
#endif
    return false;
}

START_TEST(test_score_entries_agree_with_the_machine)
{
    const char *variants[] = { "scalar", "avx2", "avx512" };
    int prev = 0;
    for (int i = 0; i < 3; i++) {
        int s = variant_file_score(BP_TEST_PLUGIN_DIR, variants[i]);
        if (s == -1) continue; /* not built on this architecture */
        ck_assert_msg(s != -2, "libbackplane-cpu-%s.so exports no bp_plugin_score", variants[i]);
        ck_assert_msg((s > 0) == machine_runs(variants[i]), "variant %s scores %d here",
                      variants[i], s);
        if (s > 0) {
            ck_assert_msg(s > prev, "variant %s does not outscore the one below it", variants[i]);
            prev = s;
        }
    }
}
END_TEST

START_TEST(test_many_small_graphs_in_a_row_are_all_correct)
{
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 4), BP_OK);
    struct bp_tensor *a = bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 5000);
    struct bp_tensor *b = bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 5000);
    struct bp_tensor *s = bp_add(f.ctx, a, b);
    fx_alloc(&f);
    float av[5000], bv[5000], out[5000];
    for (int i = 0; i < 5000; i++) bv[i] = (float)i;
    for (int g = 0; g < 300; g++) {
        for (int i = 0; i < 5000; i++) av[i] = (float)g;
        ck_assert_int_eq(bp_tensor_set(a, av, 0, sizeof av), BP_OK);
        ck_assert_int_eq(bp_tensor_set(b, bv, 0, sizeof bv), BP_OK);
        ck_assert_int_eq(fx_compute(&f, s), BP_OK);
        ck_assert_int_eq(bp_tensor_get(s, out, 0, sizeof out), BP_OK);
        ck_assert_msg(out[0] == (float)g && out[4999] == (float)(g + 4999), "graph %d wrong", g);
    }
    fx_free(&f);
}
END_TEST

struct abort_state { int calls, stop_at; };
static bp_status abort_after(void *data)
{
    struct abort_state *s = data;
    return ++s->calls >= s->stop_at ? BP_ERR_TIMEOUT : BP_OK;
}

START_TEST(test_abort_callback_cancels_mid_graph_and_the_pool_stays_usable)
{
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 3), BP_OK);
    bp_cpu_set_abort_callback_fn set_abort = (bp_cpu_set_abort_callback_fn)bp_device_proc_address(
        cpu_device(), BP_CPU_PROC_SET_ABORT_CALLBACK);
    ck_assert_ptr_nonnull(set_abort);
    struct bp_tensor *x = bp_tensor_new_1d(f.ctx, BP_TYPE_F32, 8192), *y = x;
    for (int i = 0; i < 6; i++) y = bp_scale(f.ctx, y, 2.0f, 0.0f);
    fx_alloc(&f);
    float *v = malloc(8192 * sizeof *v);
    for (int i = 0; i < 8192; i++) v[i] = 1.0f;
    ck_assert_int_eq(bp_tensor_set(x, v, 0, 8192 * sizeof *v), BP_OK);
    struct abort_state st = { 0, 3 };
    ck_assert_int_eq(set_abort(f.be, abort_after, &st), BP_OK);
    ck_assert_int_eq(fx_compute(&f, y), BP_ERR_TIMEOUT);
    ck_assert_int_eq(st.calls, 3); /* checked after every node, stopped after the third */
    ck_assert_int_eq(set_abort(f.be, NULL, NULL), BP_OK);
    ck_assert_int_eq(fx_compute(&f, y), BP_OK);
    ck_assert_int_eq(bp_tensor_get(y, v, 0, 8192 * sizeof *v), BP_OK);
    ck_assert(v[0] == 64.0f && v[8191] == 64.0f);
    free(v);
    fx_free(&f);
}
END_TEST

START_TEST(test_thread_count_changed_between_graphs_keeps_results)
{
    struct mm_case c;
    mm_build(&c, BP_TYPE_Q4_0, 256, 67, 9, 1, 1);
    float *ref = mm_run(&c, 1);
    const int order[] = { 8, 2, 7, 1, 3, 6, 4, 5, 8, 1 };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        float *y = mm_run(&c, order[i]);
        ck_assert_msg(memcmp(ref, y, (size_t)(67 * 9) * 4) == 0, "%d threads differ", order[i]);
        free(y);
    }
    free(ref);
    fx_free(&c.f);
}
END_TEST

/* ---- CPU_REPACK ---- */

static struct bp_buffer_type *repack_buft(void)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_REPACK_BUFFER_TYPE);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_REPACK_BUFFER_TYPE);
    bp_cpu_repack_buffer_type_fn fn;
    memcpy(&fn, &p, sizeof p);
    struct bp_buffer_type *bt = fn(cpu_device());
    ck_assert_ptr_nonnull(bt);
    return bt;
}

/* The types a variant may repack (which ones it does is its
 * cpu_repack_type_ok: all twelve in avx512 and scalar, all but Q2_K in
 * avx2, none in neon), and F16, which a CPU_REPACK buffer stores as it is:
 * they must round-trip and multiply all the same. */
static const enum bp_type repack_types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K,
                                             BP_TYPE_Q6_K, BP_TYPE_Q5_0, BP_TYPE_Q5_K,
                                             BP_TYPE_Q3_K, BP_TYPE_IQ4_XS, BP_TYPE_Q2_K,
                                             BP_TYPE_IQ4_NL, BP_TYPE_Q4_1, BP_TYPE_Q5_1,
                                             BP_TYPE_F16 };

static void expect_bytes(const struct bp_tensor *t, const unsigned char *want, size_t off,
                         size_t n, const char *what)
{
    unsigned char *got = malloc(n ? n : 1);
    ck_assert_int_eq(bp_tensor_get(t, got, off, n), BP_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s %s: byte %zu of [%zu, +%zu) is %u, set %u", what,
                      bp_type_name((enum bp_type)t->type), off + i, off, n, got[i], want[i]);
    free(got);
}

START_TEST(test_repacked_tensor_gives_back_every_byte_range_set)
{
    const enum bp_type t = repack_types[_i];
    const int64_t K = bp_type_block_size(t) * 3, N = 29, S = 2; /* 3 groups of 8 + 5 tail rows */
    struct bp_context *ctx;
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *w = bp_tensor_new_3d(ctx, t, K, N, S);
    /* rows 5..20 of slice 1 as a 2-D view: it straddles two groups */
    const size_t rs = bp_row_size(t, K);
    struct bp_tensor *v = bp_view(ctx, w, 2, (const int64_t[]){ K, 16 }, (const size_t[]){ bp_type_size(t), rs },
                                  rs * (size_t)N + 5 * rs);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, repack_buft(), NULL, &buf), BP_OK);
    const size_t n = rs * (size_t)(N * S);
    unsigned char *model = random_weights(t, (int64_t)(n / bp_type_size(t)));
    ck_assert_int_eq(bp_tensor_set(w, model, 0, n), BP_OK);
    expect_bytes(w, model, 0, n, "whole");
    /* The device bytes (w is the buffer's first tensor): x8 exactly where
     * the plugin repacks the type (its weight buffer type is CPU_REPACK for
     * those): the avx512 variant every quantized type here, the avx2 one
     * all but Q2_K. An x8 block starts with the 8 rows' f16 scales d. */
    const bool repacked = bp_device_weight_buffer_type(cpu_device(), t) == repack_buft();
    const char *variant = getenv("BP_TEST_EXPECT_VARIANT");
    const bool avx2 = variant && strcmp(variant, "avx2") == 0;
    if (variant && (strcmp(variant, "avx512") == 0 || avx2))
        ck_assert_msg(repacked == (t != BP_TYPE_F16 && !(avx2 && t == BP_TYPE_Q2_K)), "the %s variant %s %s",
                      variant, repacked ? "repacks" : "does not repack", bp_type_name(t));
    unsigned char *raw = malloc(n);
    ck_assert_int_eq(bp_buffer_read(buf, 0, raw, n), BP_OK);
    ck_assert_msg((memcmp(raw, model, n) != 0) == repacked, "%s: device bytes %s the bytes set",
                  bp_type_name(t), repacked ? "equal" : "differ from");
    const size_t d_at = t == BP_TYPE_Q6_K ? 208 : t == BP_TYPE_Q3_K ? 108 : t == BP_TYPE_Q2_K ? 80 : 0;
    for (int r = 0; repacked && r < 8; r++)
        ck_assert_msg(memcmp(raw + 2 * r, model + (size_t)r * rs + d_at, 2) == 0,
                      "%s: x8 block 0 does not start with row %d's d", bp_type_name(t), r);
    free(raw);
    /* ranges: inside one group, across groups, whole groups, tail rows,
     * across the slice boundary, single bytes */
    const size_t ranges[][2] = { { 7, 40 }, { rs * 3 - 5, rs * 9 + 11 }, { rs * 8, rs * 8 },
                                 { rs * 24 + 3, rs * 5 - 3 }, { rs * 27, rs * 4 + 17 },
                                 { n - 1, 1 }, { 0, 1 }, { rs * 16 + 1, 0 } };
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        const size_t off = ranges[r][0], len = ranges[r][1];
        unsigned char *fresh = random_weights(t, (int64_t)(len / bp_type_size(t)) + 1);
        memcpy(model + off, fresh, len);
        ck_assert_int_eq(bp_tensor_set(w, fresh, off, len), BP_OK);
        expect_bytes(w, model + off, off, len, "partial get");
        expect_bytes(w, model, 0, n, "whole after a partial set");
        free(fresh);
    }
    /* through the view */
    const size_t vn = 16 * rs, voff = rs * (size_t)N + 5 * rs;
    expect_bytes(v, model + voff, 0, vn, "view get");
    unsigned char *fresh = random_weights(t, (int64_t)(vn / bp_type_size(t)));
    memcpy(model + voff + 3, fresh, vn - 9);
    ck_assert_int_eq(bp_tensor_set(v, fresh, 3, vn - 9), BP_OK);
    expect_bytes(w, model, 0, n, "whole after a view set");
    free(fresh);
    /* a fill means the same in both layouts */
    ck_assert_int_eq(bp_buffer_clear(buf, 0x5A), BP_OK);
    memset(model, 0x5A, n);
    expect_bytes(w, model, 0, n, "after clear");
    free(model);
    bp_buffer_free(buf);
    bp_context_free(ctx);
}
END_TEST

/* y = mul_mat(w, x) with w alone in a CPU_REPACK buffer; the reference is
 * bp_dequantize of the bytes set, times the F32 activation in double, held
 * to the bound of the activation's 8-bit quantization (as mm_check). */
static void repacked_mm(enum bp_type t, int64_t K, int64_t N, int64_t M, int64_t wb2, int64_t xb2)
{
    struct fx f;
    fx_init(&f);
    struct bp_context *wctx;
    struct bp_buffer *wbuf;
    ck_assert_int_eq(bp_context_new(4, &wctx), BP_OK);
    struct bp_tensor *w = bp_tensor_new_3d(wctx, t, K, N, wb2);
    ck_assert_int_eq(bp_context_alloc_tensors(wctx, repack_buft(), NULL, &wbuf), BP_OK);
    struct bp_tensor *x = bp_tensor_new_3d(f.ctx, BP_TYPE_F32, K, M, xb2);
    struct bp_tensor *y = bp_mul_mat(f.ctx, w, x);
    fx_alloc(&f);
    const int64_t nblk = K / bp_type_block_size(t) * N * wb2;
    unsigned char *wd = random_weights(t, nblk);
    ck_assert_int_eq(bp_tensor_set(w, wd, 0, bp_type_size(t) * (size_t)nblk), BP_OK);
    float *wf = malloc((size_t)(K * N * wb2) * sizeof *wf);
    ck_assert_int_eq(bp_dequantize(t, wd, wf, K * N * wb2), BP_OK);
    float *xf = malloc((size_t)(K * M * xb2) * sizeof *xf);
    for (int64_t i = 0; i < K * M * xb2; i++) {
        xf[i] = (float)((double)(rnd64() % 20001) / 10000.0 - 1.0);
        if (rnd64() % 53 == 0) xf[i] *= 50.0f;
    }
    ck_assert_int_eq(bp_tensor_set(x, xf, 0, (size_t)(K * M * xb2) * sizeof *xf), BP_OK);
    const size_t ny = (size_t)(N * M * xb2);
    float *one = malloc(ny * 4), *many = malloc(ny * 4);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 1), BP_OK);
    ck_assert_msg(fx_compute(&f, y) == BP_OK, "mul_mat: %s", bp_last_error());
    ck_assert_int_eq(bp_tensor_get(y, one, 0, ny * 4), BP_OK);
    for (int64_t b = 0; b < xb2; b++)
        for (int64_t m = 0; m < M; m++) {
            const float *xr = xf + (size_t)((b * M + m) * K);
            const float *ws = wf + (size_t)(b / (xb2 / wb2)) * (size_t)(K * N);
            double xmax = 0;
            for (int64_t k = 0; k < K; k++) xmax = fmax(xmax, fabs(xr[k]));
            for (int64_t n = 0; n < N; n++) {
                double want = 0, wabs = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    want += (double)ws[n * K + k] * xr[k];
                    wabs += fabs(ws[n * K + k]);
                    mag += fabs((double)ws[n * K + k] * xr[k]);
                }
                const double tol = wabs * xmax / 254.0 * 1.01 + 1e-5 * mag + 1e-6;
                const double g = one[(b * M + m) * N + n];
                ck_assert_msg(fabs(g - want) <= tol,
                              "repacked %s N=%lld M=%lld: y[%lld, %lld, %lld] = %.7g, want %.7g "
                              "(tolerance %.3g)", bp_type_name(t), (long long)N, (long long)M,
                              (long long)n, (long long)m, (long long)b, g, want, tol);
            }
        }
    for (int th = 2; th <= 5; th += 3) {
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, th), BP_OK);
        ck_assert_int_eq(fx_compute(&f, y), BP_OK);
        ck_assert_int_eq(bp_tensor_get(y, many, 0, ny * 4), BP_OK);
        ck_assert_msg(memcmp(one, many, ny * 4) == 0, "repacked %s N=%lld M=%lld: %d threads "
                      "differ from 1", bp_type_name(t), (long long)N, (long long)M, th);
    }
    free(one); free(many); free(wd); free(wf); free(xf);
    fx_free(&f);
    bp_buffer_free(wbuf);
    bp_context_free(wctx);
}

START_TEST(test_mul_mat_with_repacked_weights_matches_dequantized_reference)
{
    const enum bp_type t = repack_types[_i];
    const int64_t K = bp_type_block_size(t) > 32 ? 512 : 96;
    /* (N, M): tails of 5 and 7 rows, exactly one group, 64-row chunks with a
     * single activation row, 2-D chunks, column runs of 1..4, and M = 150:
     * two chunks of 128 activation rows (MM_X8_ROWS), the last one short;
     * where AMX runs (M >= 16): 16-row tiles with a partial last one, pairs
     * of x8 groups with a lone group and a plain tail (45, 77), exactly one
     * tile (32 x 16), a full 8-tile call and one row past it (45, 129) */
    const int64_t shapes_r[][2] = { { 29, 1 }, { 8, 1 }, { 135, 1 }, { 8, 5 }, { 37, 33 },
                                    { 70, 7 }, { 5, 3 }, { 24, 150 }, { 45, 77 }, { 32, 16 },
                                    { 45, 129 } };
    for (size_t s = 0; s < sizeof shapes_r / sizeof shapes_r[0]; s++)
        repacked_mm(t, K, shapes_r[s][0], shapes_r[s][1], 1, 1);
    repacked_mm(t, K, 19, 5, 2, 6); /* broadcast: runs stop at slice changes */
    repacked_mm(t, K, 40, 24, 2, 4); /* tiles that cross a slice and tiles inside one */
}
END_TEST

START_TEST(test_ops_other_than_mul_mat_refuse_repacked_weights)
{
    struct bp_context *ctx;
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *w = bp_tensor_new_2d(ctx, BP_TYPE_Q4_0, 64, 16);
    struct bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 2);
    struct bp_tensor *rows = bp_get_rows(ctx, w, ids);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, 64, 2);
    struct bp_tensor *y = bp_mul_mat(ctx, w, x);
    struct bp_tensor *wt = bp_mul_mat(ctx, x, w); /* the weight on the activation side */
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, repack_buft(), NULL, &buf), BP_OK);
    struct bp_device *dev = cpu_device();
    ck_assert(bp_device_supports_op(dev, y));
    ck_assert(!bp_device_supports_op(dev, rows));
    ck_assert(!bp_device_supports_op(dev, wt));
    bp_buffer_free(buf);
    bp_context_free(ctx);
}
END_TEST

int main(void)
{
    const int gate = variant_gate();
    if (gate) return gate;
    Suite *s = suite_create("cpu_fast");
    TCase *tc = tcase_create("fast");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_forced_variant_is_the_one_loaded);
    tcase_add_test(tc, test_score_entries_agree_with_the_machine);
    tcase_add_loop_test_thinned(tc, test_mul_mat_matches_dequantized_reference_in_every_chunk_regime, 0,
                                N_WEIGHT_TYPES);
    tcase_add_loop_test_thinned(tc, test_mul_mat_broadcasts_weights_over_batches, 0, N_WEIGHT_TYPES);
    tcase_add_loop_test_thinned(tc, test_get_rows_of_every_quantized_type_is_bp_dequantize_of_the_row, 0,
                                N_WEIGHT_TYPES);
    tcase_add_loop_test_thinned(tc, test_float_mul_mat_with_many_rows_matches_reference_at_every_tile_edge,
                                0, (int)(sizeof float_types / sizeof float_types[0]));
    tcase_add_test(tc, test_many_small_graphs_in_a_row_are_all_correct);
    tcase_add_test(tc, test_abort_callback_cancels_mid_graph_and_the_pool_stays_usable);
    tcase_add_test(tc, test_thread_count_changed_between_graphs_keeps_results);
    tcase_add_loop_test_thinned(tc, test_repacked_tensor_gives_back_every_byte_range_set, 0,
                                (int)(sizeof repack_types / sizeof repack_types[0]));
    tcase_add_loop_test_thinned(tc, test_mul_mat_with_repacked_weights_matches_dequantized_reference, 0,
                                (int)(sizeof repack_types / sizeof repack_types[0]));
    tcase_add_test(tc, test_ops_other_than_mul_mat_refuse_repacked_weights);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
