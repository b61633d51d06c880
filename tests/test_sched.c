/*
 * test_sched.c — the scheduler on hand-built graphs over the test plugin
 * `partial` (F32 ADD, MUL, MUL_MAT only; reads no memory but its own) and
 * the cpu device:
 *  - bad arguments to the API give a status and a sentence;
 *  - a graph whose nodes all run on one device gets no copies;
 *  - a split graph gets exactly its boundary copies, the runs and fallbacks
 *    counted by hand, and values equal to a double-precision reference;
 *  - a second compute plans and allocates nothing;
 *  - intermediates share memory along the graph (measured and allocated alike);
 *  - an op no backend computes, and strict mode (option and environment),
 *    are errors that name the op;
 *  - a weight in the cpu's repacked layout is read where it lives, never copied;
 *  - between two backends with events and copy_tensor_async (the plugin's
 *    "streams" build) a copy is queued behind an event;
 *  - resetting a graph's plan takes the memory back from its tensors.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "suite_main.h"

#define K 16
#define N 8

static struct bp_device *dev(const char *name)
{
    struct bp_device *d = bp_device_by_name(name);
    ck_assert_msg(d != NULL, "no device %s: %s", name, bp_last_error());
    return d;
}

static struct bp_backend *backend(const char *name)
{
    struct bp_backend *b = NULL;
    ck_assert_int_eq(bp_backend_init(dev(name), NULL, &b), BP_OK);
    return b;
}

static float val(int i, int salt)
{
    return (float)((i * 37 + salt * 11) % 23 - 11) / 16.0f;
}

/* Weights of a test: a context allocated on one buffer type, filled with val(). */
struct weights {
    struct bp_context *ctx;
    struct bp_buffer *buf;
};

static struct bp_tensor *weight(struct weights *w, enum bp_type type, int64_t ne0, int64_t ne1, const char *name)
{
    struct bp_tensor *t = bp_tensor_set_name(bp_tensor_new_2d(w->ctx, type, ne0, ne1), name);
    ck_assert_ptr_nonnull(t);
    t->flags |= BP_TENSOR_FLAG_PARAM;
    return t;
}

static void fill(struct bp_tensor *t, int salt)
{
    int64_t n = bp_nelements(t);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = val((int)i, salt);
    ck_assert_int_eq(bp_tensor_set(t, v, 0, (size_t)n * sizeof *v), BP_OK);
    free(v);
}

START_TEST(test_sched_new_refuses_bad_arguments)
{
    struct bp_backend *cpu = backend("cpu"), *two[2] = { cpu, cpu };
    struct bp_sched *s = (struct bp_sched *)1;
    ck_assert_int_eq(bp_sched_new(&cpu, 1, NULL, NULL), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_sched_new(NULL, 1, NULL, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(bp_sched_new(&cpu, 0, NULL, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(bp_last_error(), "no backends"), "%s", bp_last_error());
    ck_assert_int_eq(bp_sched_new(two, 2, NULL, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(bp_last_error(), "listed twice"), "%s", bp_last_error());
    struct bp_backend *many[BP_SCHED_MAX_BACKENDS + 1] = { 0 };
    ck_assert_int_eq(bp_sched_new(many, BP_SCHED_MAX_BACKENDS + 1, NULL, &s), BP_ERR_INVALID_ARGUMENT);
    struct bp_backend *withnull[2] = { cpu, NULL };
    ck_assert_int_eq(bp_sched_new(withnull, 2, NULL, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(bp_last_error(), "backend 1 is NULL"), "%s", bp_last_error());
    struct bp_sched_options o = { 0 };
    ck_assert_int_eq(bp_sched_new(&cpu, 1, &o, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(bp_last_error(), "size"), "%s", bp_last_error());
    ck_assert_int_eq(bp_sched_new(&cpu, 1, NULL, &s), BP_OK);
    ck_assert_int_eq(bp_sched_graph_compute(s, NULL), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_sched_alloc_graph(NULL, NULL), BP_ERR_INVALID_ARGUMENT);
    struct bp_sched_summary sum = { .size = sizeof sum };
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_sched_graph_summary(s, g, &sum), BP_ERR_NOT_FOUND);
    bp_graph_free(g);
    bp_sched_free(s);
    bp_backend_free(cpu);
}
END_TEST

/* The graph of the split tests, over K-element columns:
 *   h = W1 x          partial (weight there)
 *   a = silu(h)       cpu (partial lacks SILU; cpu reads partial memory)
 *   y = W2 a          partial (weight there; a is cpu memory: one copy)
 *   z = y + b         partial (bias there)
 *   out = 0.5 z       cpu (SCALE)
 * W1 [K, K], W2 [K, N], b [N]. */
struct split_graph {
    struct weights w;
    struct bp_context *ctx;
    struct bp_graph *g;
    struct bp_tensor *W1, *W2, *b, *x, *a, *out;
};

static void split_graph_make(struct split_graph *sg, struct bp_device *wdev)
{
    memset(sg, 0, sizeof *sg);
    ck_assert_int_eq(bp_context_new(8, &sg->w.ctx), BP_OK);
    sg->W1 = weight(&sg->w, BP_TYPE_F32, K, K, "W1");
    sg->W2 = weight(&sg->w, BP_TYPE_F32, K, N, "W2");
    sg->b = weight(&sg->w, BP_TYPE_F32, N, 1, "b");
    ck_assert_int_eq(bp_context_alloc_tensors(sg->w.ctx, bp_device_buffer_type(wdev), NULL, &sg->w.buf), BP_OK);
    fill(sg->W1, 1);
    fill(sg->W2, 2);
    fill(sg->b, 3);
    ck_assert_int_eq(bp_context_new(16, &sg->ctx), BP_OK);
    struct bp_context *c = sg->ctx;
    sg->x = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_F32, K), "x");
    sg->x->flags |= BP_TENSOR_FLAG_INPUT;
    struct bp_tensor *h = bp_tensor_set_name(bp_mul_mat(c, sg->W1, sg->x), "h");
    sg->a = bp_tensor_set_name(bp_silu(c, h), "a");
    struct bp_tensor *y = bp_tensor_set_name(bp_mul_mat(c, sg->W2, sg->a), "y");
    struct bp_tensor *z = bp_tensor_set_name(bp_add(c, y, sg->b), "z");
    sg->out = bp_tensor_set_name(bp_scale(c, z, 0.5f, 0.0f), "out");
    ck_assert_int_eq(bp_graph_new(16, &sg->g), BP_OK);
    ck_assert_int_eq(bp_graph_build(sg->g, sg->out), BP_OK);
}

static void split_graph_free(struct split_graph *sg)
{
    bp_graph_free(sg->g);
    bp_context_free(sg->ctx);
    bp_buffer_free(sg->w.buf);
    bp_context_free(sg->w.ctx);
}

/* out computed in double from the same values. */
static void split_graph_reference(double *out)
{
    double x[K], a[K];
    for (int k = 0; k < K; k++) x[k] = val(k, 4);
    for (int n = 0; n < K; n++) {
        double h = 0;
        for (int k = 0; k < K; k++) h += (double)val(n * K + k, 1) * x[k];
        a[n] = h / (1.0 + exp(-h));
    }
    for (int n = 0; n < N; n++) {
        double y = 0;
        for (int k = 0; k < K; k++) y += (double)val(n * K + k, 2) * a[k];
        out[n] = 0.5 * (y + (double)val(n, 3));
    }
}

static void compute_and_check(struct bp_sched *s, struct split_graph *sg)
{
    ck_assert_msg(bp_sched_alloc_graph(s, sg->g) == BP_OK, "%s", bp_last_error());
    fill(sg->x, 4);
    ck_assert_msg(bp_sched_graph_compute(s, sg->g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_sched_synchronize(s), BP_OK);
    float got[N];
    double ref[N];
    ck_assert_int_eq(bp_tensor_get(sg->out, got, 0, sizeof got), BP_OK);
    split_graph_reference(ref);
    for (int n = 0; n < N; n++)
        ck_assert_msg(fabs(got[n] - ref[n]) <= 1e-4 * (1.0 + fabs(ref[n])), "out[%d] = %g, reference %g", n,
                      got[n], ref[n]);
}

START_TEST(test_split_graph_gets_exactly_the_boundary_copies)
{
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, NULL, &s), BP_OK);
    struct split_graph sg;
    split_graph_make(&sg, dev("partial0"));
    compute_and_check(s, &sg);

    ck_assert_ptr_eq(bp_sched_node_backend(s, sg.a), be[1]);
    ck_assert_ptr_eq(bp_sched_node_backend(s, sg.out), be[1]);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_sched_graph_summary(s, sg.g, &sum), BP_OK);
    ck_assert_uint_eq(sum.n_backends, 2);
    ck_assert_uint_eq(sum.backends[0].n_nodes, 3);   /* h, y, z */
    ck_assert_uint_eq(sum.backends[0].n_runs, 2);    /* [h] [y z] */
    ck_assert_uint_eq(sum.backends[1].n_nodes, 2);   /* a, out */
    ck_assert_uint_eq(sum.backends[1].n_runs, 2);
    ck_assert_uint_eq(sum.n_runs, 4);
    /* One copy: a (cpu memory) into partial for y. cpu reads partial memory. */
    ck_assert_uint_eq(sum.n_copies, 1);
    ck_assert_uint_eq(sum.backends[0].n_copies_in, 1);
    ck_assert_uint_eq(sum.bytes_copied, K * sizeof(float));
    ck_assert_uint_eq(sum.n_fallback_nodes, 2);
    ck_assert_uint_eq(sum.n_fallback_ops, 2);
    ck_assert_int_eq(sum.fallback_ops[0].op, BP_OP_SCALE);
    ck_assert_int_eq(sum.fallback_ops[1].op, BP_OP_SILU);
    char line[512];
    bp_sched_summary_format(&sum, line, sizeof line);
    ck_assert_msg(strstr(line, "partial0 3 nodes/2 runs, cpu 2 nodes/2 runs; fell back: SCALE x1, SILU x1; 1 copies"),
                  "%s", line);

    struct bp_sched_stats st = { .size = sizeof st };
    bp_sched_get_stats(s, &st);
    ck_assert_uint_eq(st.plans_made, 1);
    ck_assert_uint_eq(st.copies, 1);
    split_graph_free(&sg);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}
END_TEST

START_TEST(test_second_compute_plans_and_allocates_nothing)
{
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, NULL, &s), BP_OK);
    struct split_graph sg;
    split_graph_make(&sg, dev("partial0"));
    compute_and_check(s, &sg);
    struct bp_sched_stats first = { .size = sizeof first }, later = { .size = sizeof later };
    bp_sched_get_stats(s, &first);
    ck_assert_uint_eq(first.plans_made, 1);
    ck_assert_uint_gt(first.buffers_allocated, 0);
    for (int i = 0; i < 3; i++) compute_and_check(s, &sg);
    bp_sched_get_stats(s, &later);
    ck_assert_uint_eq(later.plans_made, first.plans_made);
    ck_assert_uint_eq(later.buffers_allocated, first.buffers_allocated);
    ck_assert_uint_eq(later.computes, first.computes + 3);
    ck_assert_uint_eq(later.copies, first.copies + 3);

    /* A new graph object over the same nodes is the same structure. */
    struct bp_graph *g2 = NULL;
    ck_assert_int_eq(bp_graph_new(16, &g2), BP_OK);
    ck_assert_int_eq(bp_graph_build(g2, sg.out), BP_OK);
    ck_assert_int_eq(bp_sched_graph_compute(s, g2), BP_OK);
    bp_sched_get_stats(s, &later);
    ck_assert_uint_eq(later.plans_made, first.plans_made);

    /* Reset takes the memory back from the tensors it placed. */
    bp_sched_reset_graph(s, g2);
    ck_assert_ptr_null(sg.a->buffer);
    ck_assert_ptr_null(sg.x->buffer);
    ck_assert_ptr_nonnull(sg.W1->buffer);
    bp_graph_free(g2);
    split_graph_free(&sg);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}
END_TEST

START_TEST(test_graph_on_one_device_gets_no_copies)
{
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, NULL, &s), BP_OK);
    struct weights w = { 0 };
    ck_assert_int_eq(bp_context_new(4, &w.ctx), BP_OK);
    struct bp_tensor *W = weight(&w, BP_TYPE_F32, K, N, "W"), *b = weight(&w, BP_TYPE_F32, N, 1, "b");
    ck_assert_int_eq(bp_context_alloc_tensors(w.ctx, bp_device_buffer_type(dev("partial0")), NULL, &w.buf), BP_OK);
    fill(W, 5);
    fill(b, 6);
    struct bp_context *c = NULL;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_new_1d(c, BP_TYPE_F32, K);
    struct bp_tensor *y = bp_mul(c, bp_add(c, bp_mul_mat(c, W, x), b), b);
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    ck_assert_int_eq(bp_sched_alloc_graph(s, g), BP_OK);
    fill(x, 7);
    ck_assert_int_eq(bp_sched_graph_compute(s, g), BP_OK);
    ck_assert_int_eq(bp_sched_synchronize(s), BP_OK);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_sched_graph_summary(s, g, &sum), BP_OK);
    ck_assert_uint_eq(sum.n_copies, 0);
    ck_assert_uint_eq(sum.n_runs, 1);
    ck_assert_uint_eq(sum.backends[0].n_nodes, 3);
    ck_assert_uint_eq(sum.backends[1].n_nodes, 0);
    ck_assert_uint_eq(sum.n_fallback_ops, 0);
    float got[N];
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);
    for (int n = 0; n < N; n++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += (double)val(n * K + k, 5) * val(k, 7);
        double ref = (acc + val(n, 6)) * val(n, 6);
        ck_assert_msg(fabs(got[n] - ref) <= 1e-4 * (1 + fabs(ref)), "y[%d] = %g, reference %g", n, got[n], ref);
    }
    bp_graph_free(g);
    bp_context_free(c);
    bp_buffer_free(w.buf);
    bp_context_free(w.ctx);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}
END_TEST

/* The graph's intermediates share memory along it: a chain of 8 ADDs on
 * partial0 holds its input, its output and at most two links at once, not
 * all nine tensors; bp_sched_measure_graph says the same bytes before, and
 * the values stay right (x + 8 b). */
START_TEST(test_intermediates_share_memory_along_the_graph)
{
    enum { L = 8, M = 1024 };
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, NULL, &s), BP_OK);
    struct weights w = { 0 };
    ck_assert_int_eq(bp_context_new(4, &w.ctx), BP_OK);
    struct bp_tensor *b = weight(&w, BP_TYPE_F32, M, 1, "b");
    ck_assert_int_eq(bp_context_alloc_tensors(w.ctx, bp_device_buffer_type(dev("partial0")), NULL, &w.buf), BP_OK);
    fill(b, 6);
    struct bp_context *c = NULL;
    ck_assert_int_eq(bp_context_new(4 * L, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_new_1d(c, BP_TYPE_F32, M), *y = x;
    x->flags |= BP_TENSOR_FLAG_INPUT;
    for (int i = 0; i < L; i++) y = bp_add(c, y, b);
    y->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(4 * L, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    size_t measured[2] = {0, 0};
    ck_assert_int_eq(bp_sched_measure_graph(s, g, NULL, NULL, 0, measured), BP_OK);
    ck_assert_int_eq(bp_sched_alloc_graph(s, g), BP_OK);
    const size_t held = bp_sched_buffer_bytes(s, dev("partial0")), one = M * sizeof(float);
    ck_assert_msg(held >= 4 * one && held < 5 * one, "the chain holds %zu bytes, %zu per tensor", held, one);
    ck_assert_uint_eq(measured[0], held);
    fill(x, 7);
    ck_assert_int_eq(bp_sched_graph_compute(s, g), BP_OK);
    ck_assert_int_eq(bp_sched_synchronize(s), BP_OK);
    float *got = malloc(one);
    ck_assert_int_eq(bp_tensor_get(y, got, 0, one), BP_OK);
    for (int n = 0; n < M; n++) {
        double ref = (double)val(n, 7) + L * (double)val(n, 6);
        ck_assert_msg(fabs(got[n] - ref) <= 1e-5 * (1 + fabs(ref)), "y[%d] = %g, reference %g", n, got[n], ref);
    }
    free(got);
    bp_graph_free(g);
    bp_context_free(c);
    bp_buffer_free(w.buf);
    bp_context_free(w.ctx);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}
END_TEST

START_TEST(test_op_no_backend_computes_is_an_error_naming_it)
{
    struct bp_backend *p = backend("partial0");
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(&p, 1, NULL, &s), BP_OK);
    struct split_graph sg;
    split_graph_make(&sg, dev("partial0"));
    ck_assert_int_eq(bp_sched_graph_compute(s, sg.g), BP_ERR_UNSUPPORTED);
    const char *e = bp_last_error();
    ck_assert_msg(strstr(e, "SILU") && strstr(e, "'a'") && strstr(e, "partial0"), "%s", e);
    struct bp_sched_stats st = { .size = sizeof st };
    bp_sched_get_stats(s, &st);
    ck_assert_uint_eq(st.plans_made, 0);
    ck_assert_ptr_null(sg.x->buffer);
    split_graph_free(&sg);
    bp_sched_free(s);
    bp_backend_free(p);
}
END_TEST

static void expect_strict_refusal(const struct bp_sched_options *o)
{
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, o, &s), BP_OK);
    struct split_graph sg;
    split_graph_make(&sg, dev("partial0"));
    ck_assert_int_eq(bp_sched_alloc_graph(s, sg.g), BP_ERR_UNSUPPORTED);
    const char *e = bp_last_error();
    ck_assert_msg(strstr(e, "strict") && strstr(e, "SCALE x1") && strstr(e, "SILU x1"), "%s", e);
    split_graph_free(&sg);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}

START_TEST(test_strict_option_refuses_fallback_naming_the_ops)
{
    struct bp_sched_options o = { .size = sizeof o, .strict = true };
    expect_strict_refusal(&o);
}
END_TEST

START_TEST(test_strict_environment_refuses_fallback_naming_the_ops)
{
    setenv("BACKPLANE_SCHED_STRICT", "1", 1);
    expect_strict_refusal(NULL);
    unsetenv("BACKPLANE_SCHED_STRICT");
}
END_TEST

/* A Q8_0 weight in the cpu's weight buffer type (its repacked layout):
 * partial lacks Q8_0 MUL_MAT, so the node runs on the cpu where the weight
 * is; the only copy is the F32 product into partial for the ADD. */
START_TEST(test_repacked_cpu_weight_is_read_where_it_lives)
{
    struct bp_device *cd = dev("cpu");
    struct bp_backend *be[2] = { backend("partial0"), backend("cpu") };
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 2, NULL, &s), BP_OK);
    const int64_t KK = 64, NN = 8;
    struct weights wq = { 0 }, wb = { 0 };
    ck_assert_int_eq(bp_context_new(2, &wq.ctx), BP_OK);
    ck_assert_int_eq(bp_context_new(2, &wb.ctx), BP_OK);
    struct bp_tensor *W = weight(&wq, BP_TYPE_Q8_0, KK, NN, "Wq");
    struct bp_tensor *b = weight(&wb, BP_TYPE_F32, NN, 1, "bias");
    struct bp_buffer_type *rep = bp_device_weight_buffer_type(cd, BP_TYPE_Q8_0);
    ck_assert_int_eq(bp_context_alloc_tensors(wq.ctx, rep, NULL, &wq.buf), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(wb.ctx, bp_device_buffer_type(dev("partial0")), NULL, &wb.buf), BP_OK);
    /* Q8_0 blocks of 34 bytes: scale 1.0 (f16 0x3c00), quants i % 7 - 3. */
    size_t nb = (size_t)(KK / 32 * NN);
    unsigned char *blk = calloc(nb, 34);
    for (size_t i = 0; i < nb; i++) {
        blk[i * 34] = 0x00;
        blk[i * 34 + 1] = 0x3c;
        for (int j = 0; j < 32; j++) blk[i * 34 + 2 + j] = (unsigned char)(signed char)((int)(i * 32 + j) % 7 - 3);
    }
    ck_assert_int_eq(bp_tensor_set(W, blk, 0, nb * 34), BP_OK);
    fill(b, 8);
    struct bp_context *c = NULL;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_new_1d(c, BP_TYPE_F32, KK);
    struct bp_tensor *y = bp_add(c, bp_mul_mat(c, W, x), b);
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    ck_assert_int_eq(bp_sched_alloc_graph(s, g), BP_OK);
    float xv[64];
    for (int k = 0; k < KK; k++) xv[k] = (float)(k % 3 - 1) * 127.0f;   /* exact in Q8_0: scale 1 */
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    ck_assert_msg(bp_sched_graph_compute(s, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_sched_synchronize(s), BP_OK);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_sched_graph_summary(s, g, &sum), BP_OK);
    ck_assert_ptr_eq(bp_sched_node_backend(s, y->src[0]), be[1]);
    ck_assert_ptr_eq(bp_sched_node_backend(s, y), be[0]);
    ck_assert_uint_eq(sum.n_copies, 1);
    ck_assert_uint_eq(sum.bytes_copied, NN * sizeof(float));
    float got[8];
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);
    for (int n = 0; n < NN; n++) {
        double ref = val(n, 8);
        for (int k = 0; k < KK; k++) ref += (double)((n * KK + k) % 7 - 3) * xv[k];
        ck_assert_msg(fabs(got[n] - ref) <= 1e-3, "y[%d] = %g, reference %g", n, got[n], ref);
    }
    free(blk);
    bp_graph_free(g);
    bp_context_free(c);
    bp_buffer_free(wq.buf);
    bp_buffer_free(wb.buf);
    bp_context_free(wq.ctx);
    bp_context_free(wb.ctx);
    bp_sched_free(s);
    bp_backend_free(be[0]);
    bp_backend_free(be[1]);
}
END_TEST

/* Two devices that offer events and copy_tensor_async (the "streams" build
 * of the test plugin): h = W1 x on streams0, y = W2 h on streams1. h is
 * copied once, queued on streams1 behind an event of streams0; the input x
 * goes in with set_tensor_async when it lives elsewhere. */
struct streams_counts {
    unsigned set_async, copy_async, event_record, event_wait;
};
typedef const struct streams_counts *(*streams_counts_fn)(void);

START_TEST(test_copy_between_async_backends_is_queued_behind_an_event)
{
    struct bp_backend *be[3] = { backend("streams0"), backend("streams1"), backend("cpu") };
    streams_counts_fn counts = (streams_counts_fn)bp_device_proc_address(dev("streams0"), "streams_counts");
    ck_assert_ptr_nonnull(counts);
    struct bp_sched *s = NULL;
    ck_assert_int_eq(bp_sched_new(be, 3, NULL, &s), BP_OK);
    struct weights w0 = { 0 }, w1 = { 0 };
    ck_assert_int_eq(bp_context_new(2, &w0.ctx), BP_OK);
    ck_assert_int_eq(bp_context_new(2, &w1.ctx), BP_OK);
    struct bp_tensor *W1 = weight(&w0, BP_TYPE_F32, K, K, "W1"), *W2 = weight(&w1, BP_TYPE_F32, K, N, "W2");
    ck_assert_int_eq(bp_context_alloc_tensors(w0.ctx, bp_device_buffer_type(dev("streams0")), NULL, &w0.buf), BP_OK);
    ck_assert_int_eq(bp_context_alloc_tensors(w1.ctx, bp_device_buffer_type(dev("streams1")), NULL, &w1.buf), BP_OK);
    fill(W1, 1);
    fill(W2, 2);
    struct bp_context *c = NULL;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_new_1d(c, BP_TYPE_F32, K);
    struct bp_tensor *h = bp_mul_mat(c, W1, x), *y = bp_mul_mat(c, W2, h);
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    ck_assert_int_eq(bp_sched_alloc_graph(s, g), BP_OK);
    fill(x, 4);
    const struct streams_counts before = *counts();
    ck_assert_msg(bp_sched_graph_compute(s, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_sched_synchronize(s), BP_OK);
    const struct streams_counts after = *counts();
    ck_assert_uint_eq(after.copy_async - before.copy_async, 1);
    ck_assert_uint_ge(after.event_record - before.event_record, 1);
    ck_assert_uint_ge(after.event_wait - before.event_wait, 1);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_sched_graph_summary(s, g, &sum), BP_OK);
    ck_assert_uint_eq(sum.n_copies, 1);
    ck_assert_uint_eq(sum.backends[1].n_copies_in, 1);
    float got[N];
    ck_assert_int_eq(bp_tensor_get(y, got, 0, sizeof got), BP_OK);
    for (int n = 0; n < N; n++) {
        double ref = 0;
        for (int k = 0; k < K; k++) {
            double hk = 0;
            for (int j = 0; j < K; j++) hk += (double)val(k * K + j, 1) * val(j, 4);
            ref += (double)val(n * K + k, 2) * hk;
        }
        ck_assert_msg(fabs(got[n] - ref) <= 1e-4 * (1 + fabs(ref)), "y[%d] = %g, reference %g", n, got[n], ref);
    }
    bp_graph_free(g);
    bp_context_free(c);
    bp_buffer_free(w0.buf);
    bp_buffer_free(w1.buf);
    bp_context_free(w0.ctx);
    bp_context_free(w1.ctx);
    bp_sched_free(s);
    for (int i = 0; i < 3; i++) bp_backend_free(be[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sched_new_refuses_bad_arguments);
    tcase_add_test(tc, test_split_graph_gets_exactly_the_boundary_copies);
    tcase_add_test(tc, test_second_compute_plans_and_allocates_nothing);
    tcase_add_test(tc, test_graph_on_one_device_gets_no_copies);
    tcase_add_test(tc, test_intermediates_share_memory_along_the_graph);
    tcase_add_test(tc, test_op_no_backend_computes_is_an_error_naming_it);
    tcase_add_test(tc, test_strict_option_refuses_fallback_naming_the_ops);
    tcase_add_test(tc, test_strict_environment_refuses_fallback_naming_the_ops);
    tcase_add_test(tc, test_repacked_cpu_weight_is_read_where_it_lives);
    tcase_add_test(tc, test_copy_between_async_backends_is_queued_behind_an_event);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
