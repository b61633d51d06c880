/*
 * test_cpu_join.c — MUL_MATs that read the same activation run in one
 * chunk step of the CPU backend (plugins/cpu/backend.c, join_mul_mats).
 *
 * One graph on one activation x, in this node order:
 *   y1 = W1 x                 the group's first node
 *   b  = 2 x                  between: reads x
 *   y2 = W2 x                 joins y1
 *   c  = silu(view of z)      between: reads z through a view
 *   y3 = W3 x                 joins y1
 *   y4 = W4 x, placed over z  must not join: c would read y4's output
 *   y5 = W5 x, placed over x  must not join: b would read y5's output
 * Every result must equal the node computed alone in a graph of its own,
 * bit for bit (the same chunks run, whoever runs them), with 1, 2 and 3
 * threads. Whether nodes joined is seen through the abort callback, which
 * runs once per node or joint group: 5 calls when y2 and y3 join, 7 when
 * nothing does. The placements over z and x are what a graph allocator does
 * when it reuses the memory of a tensor after its last reader.
 *
 * A second graph (test_converted_activation_reused_only_while_unchanged)
 * holds MUL_MATs that cannot join to the converted rows they may share, and
 * to converting again once the activation or the rows were rewritten.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"
#include "suite_main.h"

#define K 512
#define NZ 96   /* floats of z per activation row */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random blocks of t with sane scales (as test_cpu_fast.c makes them). */
static void set_random_weights(struct bp_tensor *w)
{
    const enum bp_type t = (enum bp_type)w->type;
    const size_t bs = bp_type_size(t);
    const int64_t nblk = w->ne[0] / bp_type_block_size(t) * w->ne[1];
    unsigned char *d = malloc(bs * (size_t)nblk);
    for (size_t i = 0; i < bs * (size_t)nblk; i++) d[i] = (unsigned char)rnd64();
    for (int64_t b = 0; b < nblk; b++) {
        unsigned char *blk = d + (size_t)b * bs;
        const uint16_t s = bp_f32_to_f16(0.01f + (float)(rnd64() % 100) * 1e-4f);
        const uint16_t m = bp_f32_to_f16((float)(rnd64() % 100) * 1e-4f);
        memcpy(blk, &s, 2);
        if (t == BP_TYPE_Q4_K) memcpy(blk + 2, &m, 2);
        if (t == BP_TYPE_Q6_K) memcpy(blk + offsetof(struct bp_block_q6_K, d), &s, 2);
    }
    ck_assert_int_eq(bp_tensor_set(w, d, 0, bs * (size_t)nblk), BP_OK);
    free(d);
}

static void set_random_floats(struct bp_tensor *t, float *keep)
{
    const int64_t n = bp_nelements(t);
    for (int64_t i = 0; i < n; i++) {
        keep[i] = (float)((double)(rnd64() % 20001) / 10000.0 - 1.0);
        if (rnd64() % 53 == 0) keep[i] *= 50.0f; /* long tail */
    }
    ck_assert_int_eq(bp_tensor_set(t, keep, 0, (size_t)n * sizeof *keep), BP_OK);
}

static struct bp_buffer_type *repack_buft(void)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_REPACK_BUFFER_TYPE);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_REPACK_BUFFER_TYPE);
    bp_cpu_repack_buffer_type_fn fn;
    memcpy(&fn, &p, sizeof p);
    return fn(cpu_device());
}

static int abort_calls;
static bp_status count_call(void *data)
{
    (void)data;
    abort_calls++;
    return BP_OK;
}

/* Node t's result, as floats (malloc'd). */
static float *get_all(const struct bp_tensor *t)
{
    const size_t n = (size_t)bp_nelements(t);
    float *v = malloc(n * sizeof *v);
    ck_assert_int_eq(bp_tensor_get(t, v, 0, n * sizeof *v), BP_OK);
    return v;
}

/* Compute out alone (its own graph) and return its values. */
static float *alone(struct bp_backend *be, struct bp_tensor *out)
{
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(16, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, out), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    bp_graph_free(g);
    return get_all(out);
}

static void expect_equal(const float *got, const float *want, int64_t n, const char *what, int th)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof *got) == 0,
                      "%s, %d threads: element %lld is %.9g, computed alone %.9g", what, th,
                      (long long)i, (double)got[i], (double)want[i]);
}

struct join_case {
    enum bp_type type;
    bool repack;        /* weights in CPU_REPACK (the x8 layout where the type has one) */
    bool w2_plain;      /* W2 in a CPU buffer: another activation layout when repacked Q4_0 */
    int64_t M;          /* activation rows */
    int want_calls;     /* abort callbacks per graph: 5 when y2 and y3 join y1 */
};

static const struct join_case cases[] = {
    { BP_TYPE_Q4_K, false, false, 1, 5 },
    { BP_TYPE_Q4_K, true, false, 1, 5 },
    { BP_TYPE_Q4_K, true, false, 3, 5 },
    { BP_TYPE_Q4_0, true, false, 1, 5 },
    { BP_TYPE_Q8_0, false, false, 5, 5 },
    /* Repacked Q4_0 rows carry per-block sums, plain ones do not: y2
     * converts x differently and must keep its own steps. */
    { BP_TYPE_Q4_0, true, true, 1, 6 },
};

START_TEST(test_mul_mats_sharing_an_activation_equal_each_computed_alone)
{
    const struct join_case *jc = &cases[_i];
    const int64_t M = jc->M;
    static const int64_t N[6] = { 0, 64, 40, 136, 64, 64 };
    struct bp_context *ctx, *wctx, *w2ctx;
    ck_assert_int_eq(bp_context_new(64, &ctx), BP_OK);
    ck_assert_int_eq(bp_context_new(8, &wctx), BP_OK);
    ck_assert_int_eq(bp_context_new(8, &w2ctx), BP_OK);
    struct bp_tensor *w[6] = { NULL }, *y[6] = { NULL }, *ref[6] = { NULL };
    for (int k = 1; k <= 5; k++)
        w[k] = bp_tensor_new_2d(k == 2 && jc->w2_plain ? w2ctx : wctx, jc->type, K, N[k]);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *z = bp_tensor_new_2d(ctx, BP_TYPE_F32, NZ, M);
    for (int k = 1; k <= 5; k++) {
        y[k] = bp_mul_mat(ctx, w[k], x);
        ref[k] = bp_mul_mat(ctx, w[k], x);
    }
    struct bp_tensor *b = bp_scale(ctx, x, 2.0f, 0.0f), *b_ref = bp_scale(ctx, x, 2.0f, 0.0f);
    /* The first 80 floats of each z row: silu reads z through a view. */
    struct bp_tensor *zv = bp_view(ctx, z, 2, (int64_t[]){ 80, M },
                                   (size_t[]){ 4, NZ * sizeof(float) }, 0);
    struct bp_tensor *c = bp_silu(ctx, zv), *c_ref = bp_silu(ctx, zv);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);

    struct bp_buffer *buf, *wbuf, *w2buf = NULL;
    struct bp_device *dev = cpu_device();
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(wctx, jc->repack ? repack_buft()
                                                               : bp_device_buffer_type(dev),
                                              NULL, &wbuf), BP_OK);
    if (jc->w2_plain)
        ck_assert_int_eq(bp_context_alloc_tensors(w2ctx, bp_device_buffer_type(dev), NULL, &w2buf),
                         BP_OK);
    /* What an allocator reusing memory does: y4 over z (dead after c), y5
     * over x (dead after y5 has converted it). Both fit. */
    ck_assert_uint_le(bp_nbytes(y[4]), bp_nbytes(z));
    ck_assert_uint_le(bp_nbytes(y[5]), bp_nbytes(x));
    y[4]->data = z->data;
    y[4]->buffer = z->buffer;
    y[5]->data = x->data;
    y[5]->buffer = x->buffer;

    for (int k = 1; k <= 5; k++) set_random_weights(w[k]);
    float *xv = malloc((size_t)(K * M) * sizeof *xv), *zd = malloc((size_t)(NZ * M) * sizeof *zd);
    set_random_floats(x, xv);
    set_random_floats(z, zd);

    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    bp_cpu_set_abort_callback_fn set_abort = (bp_cpu_set_abort_callback_fn)bp_device_proc_address(
        dev, BP_CPU_PROC_SET_ABORT_CALLBACK);
    ck_assert_ptr_nonnull(set_abort);

    /* Each node alone, while x and z hold their values. */
    float *want[6] = { NULL };
    for (int k = 1; k <= 5; k++) want[k] = alone(be, ref[k]);
    float *want_b = alone(be, b_ref), *want_c = alone(be, c_ref);

    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(64, &g), BP_OK);
    struct bp_tensor *order[] = { y[1], b, y[2], c, y[3], y[4], y[5] };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        ck_assert_int_eq(bp_graph_build(g, order[i]), BP_OK);
    ck_assert_int_eq(set_abort(be, count_call, NULL), BP_OK);
    for (int th = 1; th <= 3; th++) {
        ck_assert_int_eq(bp_backend_set_n_threads(be, th), BP_OK);
        for (int rep = 0; rep < 4; rep++) {
            ck_assert_int_eq(bp_tensor_set(x, xv, 0, (size_t)(K * M) * sizeof *xv), BP_OK);
            ck_assert_int_eq(bp_tensor_set(z, zd, 0, (size_t)(NZ * M) * sizeof *zd), BP_OK);
            abort_calls = 0;
            ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
            ck_assert_msg(abort_calls == jc->want_calls,
                          "%s case %d, %d threads: %d node steps, expected %d", bp_type_name(jc->type),
                          _i, th, abort_calls, jc->want_calls);
            char what[64];
            for (int k = 1; k <= 5; k++) {
                float *got = get_all(y[k]);
                snprintf(what, sizeof what, "%s case %d: y%d", bp_type_name(jc->type), _i, k);
                expect_equal(got, want[k], bp_nelements(y[k]), what, th);
                free(got);
            }
            float *got = get_all(b);
            expect_equal(got, want_b, bp_nelements(b), "b = 2 x", th);
            free(got);
            got = get_all(c);
            expect_equal(got, want_c, bp_nelements(c), "c = silu(view of z)", th);
            free(got);
        }
    }
    ck_assert_int_eq(set_abort(be, NULL, NULL), BP_OK);
    bp_graph_free(g);
    bp_backend_free(be);
    for (int k = 1; k <= 5; k++) free(want[k]);
    free(want_b);
    free(want_c);
    free(xv);
    free(zd);
    bp_buffer_free(buf);
    bp_buffer_free(wbuf);
    bp_buffer_free(w2buf);
    bp_context_free(ctx);
    bp_context_free(wctx);
    bp_context_free(w2ctx);
}
END_TEST

/* ---- converted rows reused by MUL_MATs that cannot join ----
 *
 * Node order (inputs x, u, v; y2, y3 and y4 are placed over y1's bytes
 * after its reader, as a graph allocator reusing memory places a layer's K
 * over Q once Q's RoPE has read it, so none can join y1's step):
 *   y1 = W1 x   r1 = 1 y1    converts x
 *   y2 = W2 x   r2 = 1 y2    reads the rows y1's step converted
 *   s  = 3 u, over x         rewrites x
 *   y3 = W3 x   r3 = 1 y3    must convert again: x changed
 *   yv = W4 v   rv = 1 yv    converts v into the same work rows
 *   y4 = W5 x   r4 = 1 y4    must convert again: the rows hold v
 * r1, r2 must equal W1 x and W2 x computed alone on x's first values, r3 and
 * r4 W3 x and W5 x alone on x = 3 u, rv W4 v alone, with 1-3 threads; and
 * every plan made of this graph shares exactly one conversion
 * (bp_cpu_plan_stats). A stale conversion reused gives r3 from the old x or
 * r4 from v. */
struct reuse_case {
    enum bp_type type;
    bool repack;
    int64_t M;
};

static const struct reuse_case reuse_cases[] = {
    { BP_TYPE_Q4_K, false, 3 }, { BP_TYPE_Q4_K, true, 20 }, { BP_TYPE_Q6_K, true, 1 },
    { BP_TYPE_Q8_0, true, 5 },  { BP_TYPE_Q4_0, false, 2 },
};

static struct bp_cpu_plan_stats plan_stats(struct bp_backend *be)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_PLAN_STATS);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_PLAN_STATS);
    bp_cpu_plan_stats_fn fn;
    memcpy(&fn, &p, sizeof fn);
    struct bp_cpu_plan_stats s = { .size = sizeof s };
    ck_assert_int_eq(fn(be, &s), BP_OK);
    return s;
}

/* Values equal (r = 1 y + 0 turns -0 into +0, so not bits). */
static void expect_same_values(const struct bp_tensor *t, const float *want, const char *what,
                               int th)
{
    float *got = get_all(t);
    for (int64_t i = 0; i < bp_nelements(t); i++)
        ck_assert_msg(got[i] == want[i], "%s, %d threads: element %lld is %.9g, computed alone "
                      "%.9g", what, th, (long long)i, (double)got[i], (double)want[i]);
    free(got);
}

START_TEST(test_converted_activation_reused_only_while_unchanged)
{
    const struct reuse_case rc = reuse_cases[_i];
    const int64_t M = rc.M, NW = 48;
    struct bp_context *ctx, *wctx;
    ck_assert_int_eq(bp_context_new(64, &ctx), BP_OK);
    ck_assert_int_eq(bp_context_new(8, &wctx), BP_OK);
    struct bp_tensor *w[6];
    for (int k = 1; k <= 5; k++) w[k] = bp_tensor_new_2d(wctx, rc.type, K, NW);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *u = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *v = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *y1 = bp_mul_mat(ctx, w[1], x), *r1 = bp_scale(ctx, y1, 1.0f, 0.0f);
    struct bp_tensor *y2 = bp_mul_mat(ctx, w[2], x), *r2 = bp_scale(ctx, y2, 1.0f, 0.0f);
    struct bp_tensor *s = bp_scale(ctx, u, 3.0f, 0.0f);
    struct bp_tensor *y3 = bp_mul_mat(ctx, w[3], x), *r3 = bp_scale(ctx, y3, 1.0f, 0.0f);
    struct bp_tensor *yv = bp_mul_mat(ctx, w[4], v), *rv = bp_scale(ctx, yv, 1.0f, 0.0f);
    struct bp_tensor *y4 = bp_mul_mat(ctx, w[5], x), *r4 = bp_scale(ctx, y4, 1.0f, 0.0f);
    struct bp_tensor *ref[6] = { NULL };
    for (int k = 1; k <= 5; k++) ref[k] = bp_mul_mat(ctx, w[k], k == 4 ? v : x);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);

    struct bp_buffer *buf, *wbuf;
    struct bp_device *dev = cpu_device();
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(wctx, rc.repack ? repack_buft()
                                                              : bp_device_buffer_type(dev),
                                              NULL, &wbuf), BP_OK);
    struct bp_tensor *over_y1[] = { y2, y3, y4 };
    for (int k = 0; k < 3; k++) {
        over_y1[k]->data = y1->data;
        over_y1[k]->buffer = y1->buffer;
    }
    s->data = x->data;
    s->buffer = x->buffer;

    for (int k = 1; k <= 5; k++) set_random_weights(w[k]);
    float *xv = malloc((size_t)(K * M) * sizeof *xv), *tmp = malloc((size_t)(K * M) * sizeof *tmp);
    set_random_floats(x, xv);
    set_random_floats(u, tmp);
    set_random_floats(v, tmp);

    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    float *want[6];
    want[1] = alone(be, ref[1]);
    want[2] = alone(be, ref[2]);
    want[4] = alone(be, ref[4]);
    free(alone(be, s)); /* x = 3 u from here */
    want[3] = alone(be, ref[3]);
    want[5] = alone(be, ref[5]);

    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(64, &g), BP_OK);
    struct bp_tensor *order[] = { y1, r1, y2, r2, s, y3, r3, yv, rv, y4, r4 };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        ck_assert_int_eq(bp_graph_build(g, order[i]), BP_OK);
    char what[80];
    for (int th = 1; th <= 3; th++) {
        ck_assert_int_eq(bp_backend_set_n_threads(be, th), BP_OK);
        for (int rep = 0; rep < 2; rep++) {
            ck_assert_int_eq(bp_tensor_set(x, xv, 0, (size_t)(K * M) * sizeof *xv), BP_OK);
            const struct bp_cpu_plan_stats before = plan_stats(be);
            ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
            const struct bp_cpu_plan_stats after = plan_stats(be);
            ck_assert_msg(after.converts_shared - before.converts_shared == after.made - before.made,
                          "%s case %d, %d threads: %llu conversions shared in %llu plans made, "
                          "expected one a plan", bp_type_name(rc.type), _i, th,
                          (unsigned long long)(after.converts_shared - before.converts_shared),
                          (unsigned long long)(after.made - before.made));
            const struct bp_tensor *got[6] = { NULL, r1, r2, r3, rv, r4 };
            const int wk[6] = { 0, 1, 2, 3, 4, 5 };
            for (int k = 1; k <= 5; k++) {
                snprintf(what, sizeof what, "%s case %d: %s", bp_type_name(rc.type), _i,
                         k == 3 ? "W3 x after x was rewritten" : k == 5 ? "W5 x after W4 v"
                                                                        : "a reader of y");
                expect_same_values(got[k], want[wk[k]], what, th);
            }
        }
    }
    bp_graph_free(g);
    bp_backend_free(be);
    for (int k = 1; k <= 5; k++) free(want[k]);
    free(xv);
    free(tmp);
    bp_buffer_free(buf);
    bp_buffer_free(wbuf);
    bp_context_free(ctx);
    bp_context_free(wctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_join");
    TCase *tc = tcase_create("join");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_mul_mats_sharing_an_activation_equal_each_computed_alone, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_loop_test(tc, test_converted_activation_reused_only_while_unchanged, 0,
                        (int)(sizeof reuse_cases / sizeof reuse_cases[0]));
    suite_add_tcase(s, tc);
    return run_suite(s);
}
