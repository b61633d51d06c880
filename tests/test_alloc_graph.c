/*
 * test_alloc_graph.c — bp_context_alloc_graph: tensors placed along a graph
 * with the bytes of a dead intermediate reused.
 *
 * - A chain of five SILUs holds at most the input, the output and two
 *   intermediates at once, so its buffer is at most four tensors, not seven;
 *   the output equals silu applied five times in double.
 * - A random graph of 300 ADD / MUL / SILU / RMS_NORM / VIEW / PERMUTE nodes:
 *   no two tensors whose lifetimes (computed here, from the node that writes
 *   each to the last node that reads it or a view of it) overlap share a
 *   byte; inputs and outputs share none with anything; and the outputs on
 *   the cpu device are the bytes the same graph gives with every tensor
 *   apart (bp_context_alloc_tensors).
 * - A NULL graph or context is refused with a sentence.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "cpu_test_util.h"
#include "suite_main.h"

#define E 64
#define ROWS 3

START_TEST(test_alloc_graph_chain_reuses_dead_intermediates)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, E, ROWS), *t = x;
    x->flags |= BP_TENSOR_FLAG_INPUT;
    for (int i = 0; i < 5; i++) t = bp_silu(f.ctx, t);
    t->flags |= BP_TENSOR_FLAG_OUTPUT;
    ck_assert_int_eq(bp_graph_new(16, &f.g), BP_OK);
    ck_assert_int_eq(bp_graph_build(f.g, t), BP_OK);
    ck_assert_msg(bp_context_alloc_graph(f.ctx, f.g, bp_device_buffer_type(cpu_device()), &f.buf) == BP_OK,
                  "%s", bp_last_error());
    const size_t one = E * ROWS * sizeof(float); /* a multiple of the cpu's 64-byte alignment */
    ck_assert_msg(bp_buffer_size(f.buf) <= 4 * one, "a 5-SILU chain took %zu bytes, want <= %zu",
                  bp_buffer_size(f.buf), 4 * one);
    double *v = fill(x, 5, 3.0);
    ck_assert_int_eq(bp_backend_graph_compute(f.be, f.g), BP_OK);
    double *got = fetch(t);
    for (int i = 0; i < E * ROWS; i++)
        for (int k = 0; k < 5; k++) v[i] = v[i] / (1.0 + exp(-v[i]));
    expect_close(got, v, E * ROWS, 1e-6, 1e-5, "silu^5");
    free(v);
    free(got);
    fx_free(&f);
}
END_TEST

/* The random graph: every tensor it makes, its inputs and its outputs. */
struct rgraph {
    struct bp_tensor *in[4], *out[3];
    struct bp_graph *g;
};

static unsigned rs = 12345;
static unsigned rn(unsigned n) { rs = rs * 1103515245u + 12345u; return (rs >> 8) % n; }

static void build_random(struct bp_context *c, struct rgraph *r)
{
    struct bp_tensor *pool[400];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        r->in[i] = pool[n++] = bp_tensor_new_2d(c, BP_TYPE_F32, E, ROWS);
        r->in[i]->flags |= BP_TENSOR_FLAG_INPUT;
    }
    for (int k = 0; k < 300; k++) {
        /* Mostly recent tensors, sometimes old ones: long and short lives. */
        struct bp_tensor *a = pool[n - 1 - (int)rn(n < 6 ? (unsigned)n : 6)];
        struct bp_tensor *b = pool[rn(20) ? n - 1 - (int)rn(n < 12 ? (unsigned)n : 12) : (int)rn((unsigned)n)];
        struct bp_tensor *t;
        switch (rn(6)) {
        case 0: t = bp_add(c, a, b); break;
        case 1: t = bp_mul(c, a, b); break;
        case 2: t = bp_silu(c, a); break;
        case 3: t = bp_rms_norm(c, a, 1e-5f); break;
        /* [E, ROWS] seen as [ROWS, E] twice over: a view chain back to the shape */
        case 4: t = bp_permute(c, bp_permute(c, a, 1, 0, 2, 3), 1, 0, 2, 3); break;
        default: t = bp_view(c, a, 2, (int64_t[]){E, ROWS}, (size_t[]){sizeof(float), E * sizeof(float)}, 0);
        }
        ck_assert_ptr_nonnull(t);
        /* Keep the pool's tensors contiguous for the elementwise ops. */
        pool[n++] = bp_op_is_view((enum bp_op)t->op) ? bp_add(c, t, a) : t;
    }
    for (int i = 0; i < 3; i++) {
        r->out[i] = pool[n - 1 - 40 * i];
        r->out[i]->flags |= BP_TENSOR_FLAG_OUTPUT;
    }
    ck_assert_int_eq(bp_graph_new(2048, &r->g), BP_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(bp_graph_build(r->g, r->out[i]), BP_OK);
}

static const struct bp_tensor *owner(const struct bp_tensor *t)
{
    return t->view_src ? t->view_src : t;
}

START_TEST(test_alloc_graph_never_overlaps_live_tensors_and_computes_the_same)
{
    struct bp_context *ca, *cb;
    ck_assert_int_eq(bp_context_new(2048, &ca), BP_OK);
    ck_assert_int_eq(bp_context_new(2048, &cb), BP_OK);
    struct rgraph ra, rb;
    rs = 777;
    build_random(ca, &ra);
    rs = 777;
    build_random(cb, &rb);
    struct bp_buffer *ba, *bb;
    struct bp_buffer_type *buft = bp_device_buffer_type(cpu_device());
    ck_assert_msg(bp_context_alloc_graph(ca, ra.g, buft, &ba) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_context_alloc_tensors(cb, buft, NULL, &bb), BP_OK);
    ck_assert_uint_lt(bp_buffer_size(ba), bp_buffer_size(bb) / 2);

    /* Lifetimes: [the node that writes it, the last node that reads it];
     * inputs and outputs forever. */
    const int nn = ra.g->n_nodes;
    const size_t count = bp_context_tensor_count(ca);
    int *def = malloc(count * sizeof *def), *last = malloc(count * sizeof *last);
    for (size_t i = 0; i < count; i++) {
        const struct bp_tensor *t = bp_context_tensor(ca, i);
        const bool forever = (t->flags & (BP_TENSOR_FLAG_INPUT | BP_TENSOR_FLAG_OUTPUT)) != 0;
        def[i] = forever ? -1 : nn;
        last[i] = forever ? nn : -1;
        for (int k = 0; k < nn; k++) {
            const struct bp_tensor *node = ra.g->nodes[k];
            if (!forever && node == t) def[i] = k;
            for (int s = 0; s < 4; s++)
                if (node->src[s] && owner(node->src[s]) == t && k > last[i]) last[i] = k;
            if (owner(node) == t && node != t && k > last[i]) last[i] = k;
        }
        if (last[i] < def[i]) last[i] = def[i];
    }
    for (size_t i = 0; i < count; i++) {
        const struct bp_tensor *a = bp_context_tensor(ca, i);
        if (a->view_src || def[i] == nn) continue;
        for (size_t j = i + 1; j < count; j++) {
            const struct bp_tensor *b = bp_context_tensor(ca, j);
            if (b->view_src || def[j] == nn || last[i] < def[j] || last[j] < def[i]) continue;
            const char *a0 = a->data, *b0 = b->data;
            ck_assert_msg(a0 + bp_nbytes(a) <= b0 || b0 + bp_nbytes(b) <= a0,
                          "'%s' (nodes %d..%d) and '%s' (nodes %d..%d) are alive together and "
                          "share bytes", a->name, def[i], last[i], b->name, def[j], last[j]);
        }
    }
    free(def);
    free(last);

    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(cpu_device(), NULL, &be), BP_OK);
    for (int i = 0; i < 4; i++) {
        double *v = fill(ra.in[i], 100 + (unsigned)i, 1.0);
        free(fill(rb.in[i], 100 + (unsigned)i, 1.0));
        free(v);
    }
    ck_assert_msg(bp_backend_graph_compute(be, ra.g) == BP_OK, "%s", bp_last_error());
    ck_assert_msg(bp_backend_graph_compute(be, rb.g) == BP_OK, "%s", bp_last_error());
    for (int i = 0; i < 3; i++) {
        float ya[E * ROWS], yb[E * ROWS];
        ck_assert_int_eq(bp_tensor_get(ra.out[i], ya, 0, sizeof ya), BP_OK);
        ck_assert_int_eq(bp_tensor_get(rb.out[i], yb, 0, sizeof yb), BP_OK);
        ck_assert_msg(!memcmp(ya, yb, sizeof ya), "output %d differs from the graph with every "
                      "tensor apart", i);
    }
    bp_backend_free(be);
    bp_graph_free(ra.g);
    bp_graph_free(rb.g);
    bp_buffer_free(ba);
    bp_buffer_free(bb);
    bp_context_free(ca);
    bp_context_free(cb);
}
END_TEST

START_TEST(test_alloc_graph_refuses_a_missing_graph_or_context)
{
    struct bp_context *c;
    struct bp_graph *g;
    struct bp_buffer *b = (struct bp_buffer *)1;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    struct bp_buffer_type *buft = bp_device_buffer_type(cpu_device());
    ck_assert_int_eq(bp_context_alloc_graph(c, NULL, buft, &b), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "NULL"));
    ck_assert_int_eq(bp_context_alloc_graph(NULL, g, buft, &b), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_context_alloc_graph(c, g, buft, NULL), BP_ERR_INVALID_ARGUMENT);
    bp_graph_free(g);
    bp_context_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc_graph");
    TCase *tc = tcase_create("alloc_graph");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_alloc_graph_chain_reuses_dead_intermediates);
    tcase_add_test(tc, test_alloc_graph_never_overlaps_live_tensors_and_computes_the_same);
    tcase_add_test(tc, test_alloc_graph_refuses_a_missing_graph_or_context);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
