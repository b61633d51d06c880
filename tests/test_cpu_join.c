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
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"

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

int main(void)
{
    Suite *s = suite_create("cpu_join");
    TCase *tc = tcase_create("join");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_mul_mats_sharing_an_activation_equal_each_computed_alone, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
