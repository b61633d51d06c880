/*
 * test_cpu_mm_grid.c — the chunk grid of the cpu plugin's MUL_MAT
 * (plugins/cpu/ops/matmul.c) hands every output element to exactly one
 * kernel call, for every thread count and chunk order.
 *
 * matmul.c is compiled into this test with recording kernels in place of
 * the real ones: each call counts the (weight row, activation row) pairs it
 * computes, checks that the weight rows it was given belong to the right
 * broadcast slice, and writes a value that names the pair, so the output
 * also shows that the results landed where they belong. Every chunk of the
 * grid is run, in a shuffled order, for 1 to 7 threads, on weights in the
 * x8 layout with and without AMX tiles, plain quantized weights and F16
 * weights through the tiled float kernel, at shapes that put chunk and tile
 * edges (16, 128 activation rows; 8, 16 weight rows) inside and at the
 * ends of the output. An element missed has count 0, one done twice count
 * 2. Which kernel computes an element (a tile, an x8 group, a vec_dot)
 * must not change with the thread count or with AMX switched off and on
 * for the grid, or results would not be bit-identical across them.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_amx.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "ops.h"
#include "ops/matmul_blas.h"
#include "suite_main.h"

enum kind { K_NONE, K_DOT, K_X8, K_AMX, K_FLOAT };

/* The node being run and what the recording kernels saw. */
struct recorder {
    const struct bp_tensor *w, *x, *t;
    const char *xbase;       /* converted rows, or NULL: X read in place */
    size_t ys;               /* their stride */
    int *count;              /* [act row * N + weight row] */
    unsigned char *kind;
    int errors;
    bool repacked, amx;
};
static struct recorder R;

/* A failure seen inside a kernel or the element loop: counted, the first
 * few printed, asserted once per grid (a ck_assert per element would send
 * the runner a message each). */
static void bad(const char *what, long long a, long long b)
{
    if (R.errors++ < 5)
        fprintf(stderr, "%s (%lld, %lld)\n", what, a, b);
}

static int64_t rows_n(void) { return R.t->ne[0]; }
static int64_t rows_m(void) { return R.t->ne[1] * R.t->ne[2] * R.t->ne[3]; }

/* The weight row a kernel was handed, checked against the slice that
 * activation row m must read (W broadcast over dim 2). */
static int64_t weight_row(const void *p, int64_t m)
{
    const size_t off = (size_t)((const char *)p - (const char *)R.w->data);
    const int64_t slice = (int64_t)(off / R.w->nb[2]);
    const int64_t i12 = (m / R.x->ne[1]) % R.x->ne[2];
    if (slice != i12 / (R.x->ne[2] / R.w->ne[2]))
        bad("activation row, weight slice: a row was given another slice's weight",
             (long long)m, (long long)slice);
    return (int64_t)((off % R.w->nb[2]) / R.w->nb[1]);
}

static int64_t act_row(const void *p)
{
    if (R.xbase)
        return (int64_t)((size_t)((const char *)p - R.xbase) / R.ys);
    return (int64_t)((size_t)((const char *)p - (const char *)R.x->data) / R.x->nb[1]);
}

/* One output element computed by kernel k: counted, and its value names it. */
static float record(int64_t n, int64_t m, enum kind k)
{
    if (n < 0 || n >= rows_n() || m < 0 || m >= rows_m()) {
        bad("a kernel computed an element outside the output", (long long)n, (long long)m);
        return -1.0f;
    }
    R.count[m * rows_n() + n]++;
    R.kind[m * rows_n() + n] = (unsigned char)k;
    return (float)(m * 4096 + n);
}

static void rec_dot(int64_t k, float *s, const void *w, const void *x)
{
    (void)k;
    const int64_t m = act_row(x);
    *s = record(weight_row(w, m), m, K_DOT);
}

static void rec_x8(int64_t k, float *s, size_t bs, const void *w, size_t gs, int64_t ng,
                   const void *y, size_t ys, int ncols)
{
    (void)k;
    const int most = cpu_gemm_x8_cols(cpu_kernels_for((enum bp_type)R.w->type));
    if (ncols < 1 || ncols > most)
        bad("gemm_x8 was called with ncols out of range", ncols, most);
    if (ng < 1)
        bad("gemm_x8 was called with no x8 group", ng, 1);
    for (int64_t g = 0; g < ng; g++)
        for (int c = 0; c < ncols; c++) {
            const int64_t m = act_row((const char *)y + (size_t)c * ys);
            const int64_t n0 = weight_row((const char *)w + (size_t)g * gs, m);
            for (int r = 0; r < CPU_REPACK_ROWS; r++)
                s[(size_t)c * bs + (size_t)(8 * g + r)] = record(n0 + r, m, K_X8);
        }
}

static void rec_amx(int64_t k, float *s, const void *w, size_t gs, const void *y, size_t ys,
                    int nt)
{
    (void)k;
    if (nt < 1 || nt > CPU_AMX_MAX_TILES)
        bad("gemm_amx was called with ntiles out of range", nt, CPU_AMX_MAX_TILES);
    const int64_t m0 = act_row(y);
    if (m0 % CPU_AMX_ROWS != 0)
        bad("a tile starts off a multiple of 16 activation rows", m0, 0);
    for (int m = 0; m < CPU_AMX_ROWS * nt; m++) {
        if (act_row((const char *)y + (size_t)m * ys) != m0 + m)
            bad("a tile's activation rows are not ys apart", m0, m);
        const int64_t n0 = weight_row(w, m0 + m), n8 = weight_row((const char *)w + gs, m0 + m);
        if (n8 != n0 + CPU_REPACK_ROWS)
            bad("a tile's second x8 group is not the one after the first", n0, n8);
        for (int r = 0; r < CPU_AMX_ROWS; r++)
            s[m * CPU_AMX_ROWS + r] = record(n0 + r, m0 + m, K_AMX);
    }
}

static void rec_float(int64_t k, const void *w, size_t ws, int64_t nw, const float *const *x,
                      float *const *y, int nx)
{
    (void)k;
    (void)ws;
    for (int j = 0; j < nx; j++) {
        const int64_t m = act_row(x[j]);
        const size_t off = (size_t)((const char *)y[j] - (const char *)R.t->data);
        const int64_t n0 = weight_row(w, m);
        if ((int64_t)(off / R.t->nb[1]) != m || (int64_t)(off % R.t->nb[1] / sizeof(float)) != n0)
            bad("gemm_float writes another row than it reads", m, n0);
        for (int64_t r = 0; r < nw; r++)
            y[j][r] = record(n0 + r, m, K_FLOAT);
    }
}

/* ---- what matmul.c links against, recorded ---- */

static void no_from_float(const float *x, void *y, int64_t n) { (void)x; (void)y; (void)n; }

const struct cpu_type_kernels *cpu_kernels_for(enum bp_type t)
{
    static const struct cpu_type_kernels none = { 0 };
    /* Q4_0 / Q8_0 with a wide x8 kernel (up to CPU_GEMM_WIDE_COLS rows a
     * call), Q4_K with the others' CPU_GEMM_MAX_COLS. */
    static const struct cpu_type_kernels q8_0 = { BP_TYPE_Q8_0, rec_dot, no_from_float, NULL,
                                                  rec_x8, NULL, CPU_GEMM_WIDE_COLS };
    static const struct cpu_type_kernels q4_k = { BP_TYPE_Q8_K, rec_dot, NULL, NULL, rec_x8, NULL, 0 };
    static const struct cpu_type_kernels q8_k = { BP_TYPE_Q8_K, rec_dot, no_from_float, NULL,
                                                  NULL, NULL, 0 };
    static const struct cpu_type_kernels f16 = { BP_TYPE_F32, rec_dot, NULL, NULL, NULL, rec_float,
                                                 0 };
    static const struct cpu_type_kernels f32 = { BP_TYPE_F32, rec_dot, no_from_float, NULL, NULL,
                                                 NULL, 0 };
    switch (t) {
    case BP_TYPE_Q4_0: case BP_TYPE_Q8_0: return &q8_0;
    case BP_TYPE_Q4_K: return &q4_k;
    case BP_TYPE_Q8_K: return &q8_k;
    case BP_TYPE_F16: return &f16;
    case BP_TYPE_F32: return &f32;
    default: return &none;
    }
}

bool cpu_tensor_repacked(const struct bp_tensor *t) { return t == R.w && R.repacked; }

cpu_gemm_amx_fn cpu_gemm_amx_for(enum bp_type t) { (void)t; return R.amx ? rec_amx : NULL; }

bool cpu_mul_mat_blas(const struct cpu_compute_params *p, struct bp_tensor *t, const int64_t *nr0,
                      const int64_t *nr1)
{
    (void)p; (void)t; (void)nr0; (void)nr1;
    return false;
}

void cpu_q8_0_fill_aux(void *row, int64_t n) { (void)row; (void)n; }
void cpu_q8_1_fill_s(const float *x, void *row, int64_t n) { (void)x; (void)row; (void)n; }

void cpu_params_barrier(const struct cpu_compute_params *p) { (void)p; }

/* ---- the test ---- */

static void init_tensor(struct bp_tensor *t, enum bp_type type, int64_t ne0, int64_t ne1,
                        int64_t ne2)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = 1;
    t->nb[0] = bp_type_size(type);
    t->nb[1] = bp_row_size(type, ne0);
    t->nb[2] = t->nb[1] * (size_t)ne1;
    t->nb[3] = t->nb[2] * (size_t)ne2;
}

/* Runs every chunk of W[K, N, wb] x X[K, M, xb] for nth threads (in a
 * shuffled order) and checks each output element was computed once, by
 * the kernel kinds[] says (filled by the first call). */
static void run_grid(enum bp_type wt, bool repacked, bool amx, int64_t N, int64_t M, int64_t wb,
                     int64_t xb, int nth, unsigned char *kinds, int64_t *n_chunks_no_amx)
{
    const int64_t K = 256;
    struct bp_tensor w, x, t;
    init_tensor(&w, wt, K, N, wb);
    init_tensor(&x, BP_TYPE_F32, K, M, xb);
    init_tensor(&t, BP_TYPE_F32, N, M, xb);
    t.op = BP_OP_MUL_MAT;
    t.src[0] = &w;
    t.src[1] = &x;
    w.data = malloc(w.nb[3]);
    x.data = malloc(x.nb[3]);
    t.data = calloc(1, t.nb[3]);
    const int64_t nel = N * M * xb;
    R = (struct recorder){ .w = &w, .x = &x, .t = &t, .count = calloc((size_t)nel, sizeof(int)),
                           .kind = calloc((size_t)nel, 1), .repacked = repacked, .amx = amx };
    const size_t work = cpu_work_mul_mat(&t);
    void *shared = malloc(work ? work : 1);
    R.xbase = work ? shared : NULL;
    R.ys = work ? work / (size_t)(M * xb) : 0;
    ck_assert(w.data && x.data && t.data && shared && R.count && R.kind);
    ck_assert_msg(cpu_supports_mul_mat(&t), "%s N=%lld M=%lld is not supported",
                  bp_type_name(wt), (long long)N, (long long)M);

    const int64_t n = cpu_mul_mat_n_chunks(&t, nth);
    /* the grid follows the shape, not whether AMX runs (bp_cpu_set_amx) */
    if (n_chunks_no_amx)
        ck_assert_int_eq(n, *n_chunks_no_amx);
    int64_t *order = malloc((size_t)n * sizeof *order);
    ck_assert(order);
    for (int64_t c = 0; c < n; c++) order[c] = c;
    unsigned seed = (unsigned)(N * 131 + M * 7 + nth);
    for (int64_t c = n - 1; c > 0; c--) {
        seed = seed * 1103515245u + 12345u;
        const int64_t j = (int64_t)(seed >> 8) % (c + 1), v = order[c];
        order[c] = order[j];
        order[j] = v;
    }
    struct cpu_compute_params p = { .ith = 0, .nth = nth, .wshared = shared, .wshared_size = work };
    for (int64_t c = 0; c < n; c++) {
        p.ith = (int)(order[c] % nth); /* any thread may take any chunk */
        cpu_mul_mat_chunk(&p, &t, order[c]);
    }

    const float *y = t.data;
    char what[200];
    snprintf(what, sizeof what, "%s%s%s N=%lld M=%lld x %lld, %d threads, %lld chunks",
             bp_type_name(wt), repacked ? " x8" : "", amx ? "+amx" : "", (long long)N,
             (long long)M, (long long)xb, nth, (long long)n);
    for (int64_t m = 0; m < M * xb; m++)
        for (int64_t r = 0; r < N; r++) {
            const int64_t e = m * N + r;
            if (R.count[e] != 1)
                bad(R.count[e] ? "an output element (weight row, activation row) was computed "
                                  "more than once" : "an output element (weight row, activation "
                                  "row) was never computed", (long long)r, (long long)m);
            else if (y[e] != (float)(m * 4096 + r))
                bad("an output element holds another element's result", (long long)r,
                     (long long)m);
            if (kinds[e] == K_NONE)
                kinds[e] = R.kind[e];
            if (kinds[e] != R.kind[e])
                bad("an output element's kernel changed with the thread count", (long long)r,
                     (long long)m);
        }
    ck_assert_msg(R.errors == 0, "%s: %d failures (printed above)", what, R.errors);
    free(order);
    free(R.count);
    free(R.kind);
    free(shared);
    free(w.data);
    free(x.data);
    free(t.data);
}

static void every_thread_count(enum bp_type wt, bool repacked, bool amx, int64_t N, int64_t M,
                               int64_t wb, int64_t xb)
{
    unsigned char *kinds = calloc((size_t)(N * M * xb), 1);
    ck_assert(kinds);
    for (int nth = 1; nth <= 7; nth++) {
        int64_t no_amx = 0;
        if (amx) {
            R.amx = false;
            struct bp_tensor w, x, t;
            init_tensor(&w, wt, 256, N, wb);
            init_tensor(&x, BP_TYPE_F32, 256, M, xb);
            init_tensor(&t, BP_TYPE_F32, N, M, xb);
            t.src[0] = &w;
            t.src[1] = &x;
            R.w = &w;
            R.repacked = repacked;
            no_amx = cpu_mul_mat_n_chunks(&t, nth);
        }
        run_grid(wt, repacked, amx, N, M, wb, xb, nth, kinds, amx ? &no_amx : NULL);
    }
    if (amx && N >= CPU_AMX_ROWS && M >= CPU_AMX_ROWS) {
        bool tiles = false;
        for (int64_t e = 0; e < N * M * xb && !tiles; e++) tiles = kinds[e] == K_AMX;
        ck_assert_msg(tiles, "N=%lld M=%lld: no element went through the tile kernel",
                      (long long)N, (long long)M);
    }
    free(kinds);
}

/* Weight rows: one, a lone x8 group with a tail, x8 pairs with a lone
 * group and a tail, several 16-row strips. Activation rows: decode, fewer
 * than a tile, one tile and one row past it, one AMX call's 128 rows and
 * the rows either side of it, several 128-row chunks with a short last. */
static const int64_t shape_n[] = { 1, 13, 45, 96, 200 };
static const int64_t shape_m[] = { 1, 3, 16, 17, 127, 128, 129, 150, 300 };

START_TEST(test_x8_grid_with_amx_covers_every_output_once)
{
    const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q4_K };
    for (size_t i = 0; i < 2; i++)
        every_thread_count(types[i], true, true, shape_n[_i / 9], shape_m[_i % 9], 1, 1);
}
END_TEST

START_TEST(test_x8_grid_without_amx_covers_every_output_once)
{
    every_thread_count(BP_TYPE_Q4_0, true, false, shape_n[_i / 9], shape_m[_i % 9], 1, 1);
}
END_TEST

START_TEST(test_plain_and_float_grids_cover_every_output_once)
{
    every_thread_count(BP_TYPE_Q8_0, false, false, shape_n[_i / 9], shape_m[_i % 9], 1, 1);
    every_thread_count(BP_TYPE_F16, false, false, shape_n[_i / 9], shape_m[_i % 9], 1, 1);
}
END_TEST

START_TEST(test_broadcast_weights_keep_each_row_on_its_slice)
{
    /* 3 activation batches per weight slice; tiles and 128-row chunks that
     * cross a batch boundary (M = 40, 100) and ones that do not (M = 128) */
    const int64_t ms[] = { 5, 40, 100, 128 };
    for (size_t i = 0; i < 4; i++) {
        every_thread_count(BP_TYPE_Q4_0, true, true, 45, ms[i], 2, 6);
        every_thread_count(BP_TYPE_Q8_0, false, false, 45, ms[i], 2, 6);
        every_thread_count(BP_TYPE_F16, false, false, 45, ms[i], 2, 6);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_mm_grid");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 300);
    const int n = (int)(sizeof shape_n / sizeof shape_n[0] * 9);
    tcase_add_loop_test(tc, test_x8_grid_with_amx_covers_every_output_once, 0, n);
    tcase_add_loop_test(tc, test_x8_grid_without_amx_covers_every_output_once, 0, n);
    tcase_add_loop_test(tc, test_plain_and_float_grids_cover_every_output_once, 0, n);
    tcase_add_test(tc, test_broadcast_weights_keep_each_row_on_its_slice);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
