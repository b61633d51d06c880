/* test_meta_views.c — meta graphs the decoder runner builds: views that take
 * whole segments of a tensor split by segments (fused QKV), views that
 * cannot be expressed per device (refused by name), binary ops whose
 * mirrored operand is cut to the split one's slices, and SET_ROWS with i32
 * ids in graphs rebuilt every step, the ids an input leaf or computed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "meta_test_util.h"
#include "log_capture.h"
#include "suite_main.h"

/* Compute g on a fresh backend of dev with the log lines captured into text. */
static bp_status compute_capturing(struct bp_device *dev, struct bp_graph *g, char *text, size_t cap)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, "n_threads=1", &be), BP_OK);
    log_capture_begin();
    bp_status st = bp_backend_graph_compute(be, g);
    if (st == BP_OK) st = bp_backend_synchronize(be);
    snprintf(text, cap, "%s", log_capture_end());
    bp_backend_free(be);
    return st;
}

/* ---- views of whole segments ---- */

/* A [E, T] activation split along dim 0 in segments Q (NQ heads) | K | V
 * (NKV heads each) of HD elements per head, as a column-parallel fused QKV
 * mul_mat leaves it. Viewing [HD, heads, T] at a segment's offset must read
 * exactly that segment's elements on every device. */
enum { HD = 4, NQ = 6, NKV = 3, T = 3, E = (NQ + 2 * NKV) * HD };

static void check_segment_views(size_t n, const float *ratios, bool three_segments)
{
    struct bp_device *m = meta_over_cpu(n, ratios);
    meta_test_split = three_segments
        ? (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0, .n_segments = 3,
                                 .seg = {{NQ * HD, 1, 2 * HD}, {NKV * HD, 1, HD}, {NKV * HD, 1, HD}}}
        : (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0, .n_segments = 2,
                                 .seg = {{NQ * HD, 1, 2 * HD}, {NKV * HD, 2, HD}}};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(16, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, E, T), "split_qkv");
    size_t nb[3] = {4, HD * 4, E * 4};
    /* Q, K, V, and K+V together (a range of two whole segments) */
    const int64_t heads[4] = {NQ, NKV, NKV, 2 * NKV};
    const int64_t first[4] = {0, NQ, NQ + NKV, NQ};
    struct bp_tensor *y[4];
    for (int v = 0; v < 4; v++) {
        struct bp_tensor *w = bp_view(c, x, 3, (int64_t[]){HD, heads[v], T}, nb, (size_t)(first[v] * HD * 4));
        y[v] = bp_scale(c, w, (float)(v + 2), 0.0f);
        ck_assert_ptr_nonnull(y[v]);
        y[v]->flags |= BP_TENSOR_FLAG_OUTPUT;
    }
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    float xv[E * T];
    for (int i = 0; i < E * T; i++) xv[i] = (float)(i % 97) - 40.0f;
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(32, &g), BP_OK);
    for (int v = 0; v < 4; v++) ck_assert_int_eq(bp_graph_build(g, y[v]), BP_OK);
    char text[4096];
    bp_status st = compute_capturing(m, g, text, sizeof text);
    ck_assert_msg(st == BP_OK, "%zu devices: %s", n, text);
    for (int v = 0; v < 4; v++) {
        float got[2 * NKV * HD * T];
        size_t bytes = (size_t)(HD * heads[v] * T) * 4;
        ck_assert_int_eq(bp_tensor_get(y[v], got, 0, bytes), BP_OK);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < heads[v]; h++)
                for (int e = 0; e < HD; e++) {
                    float want = xv[t * E + (first[v] + h) * HD + e] * (float)(v + 2);
                    float have = got[(t * heads[v] + h) * HD + e];
                    ck_assert_msg(have == want, "%zu devices%s, view %d: [%d,%d,%d] = %g, want %g", n,
                                  three_segments ? " (3 segments)" : "", v, e, h, t, (double)have,
                                  (double)want);
                }
        int32_t state;
        ck_assert_int_eq(bp_meta_tensor_split(y[v], &state, NULL), BP_OK);
        ck_assert_int_eq(state, BP_META_SPLIT_AXIS_1); /* the heads dimension carries the split */
    }
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}

START_TEST(test_meta_views_of_whole_segments_read_each_devices_slice)
{
    static const size_t counts[] = {2, 3, 4};
    check_segment_views(counts[_i], NULL, false);
    check_segment_views(counts[_i], NULL, true);
    check_segment_views(counts[_i], (const float[]){3, 1, 1, 1}, true);
}
END_TEST

START_TEST(test_meta_view_cutting_a_slice_is_refused_by_name)
{
    /* [16, 2] split 8 + 8 along dim 0, viewed as pairs from element 7: the
     * pair (7, 8) would straddle the two devices */
    struct bp_device *m = meta_over_cpu(2, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 16, 2), "split_rows");
    struct bp_tensor *v = bp_view(c, x, 3, (int64_t[]){2, 4, 2}, (size_t[]){4, 8, 64}, 7 * 4);
    ck_assert_ptr_nonnull(v);
    bp_tensor_set_name(v, "pairs");
    struct bp_tensor *y = bp_scale(c, v, 2.0f, 0.0f);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    char text[4096];
    ck_assert_int_eq(compute_capturing(m, g, text, sizeof text), BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(text, "VIEW") && strstr(text, "pairs") && strstr(text, "split_rows"),
                  "log does not name op and tensors: %s", text);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

/* ---- binary ops with a mirrored operand cut to the split one ---- */

/* x split along dim 1, m mirrored of the same shape: x + m and m * x read
 * each device's rows of m. */
static void check_sliced_operand(size_t n, const float *ratios)
{
    enum { C = 5, R = 7 };
    struct bp_device *meta = meta_over_cpu(n, ratios);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_1};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, C, R), "split_x");
    struct bp_tensor *m = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, C, R), "mirrored");
    struct bp_tensor *sum = bp_add(c, x, m), *prod = bp_mul(c, m, x);
    sum->flags |= BP_TENSOR_FLAG_OUTPUT;
    prod->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(meta), NULL, &buf), BP_OK);
    float xv[C * R], mv[C * R], s[C * R], p[C * R];
    for (int i = 0; i < C * R; i++) {
        xv[i] = (float)(i % 11) - 5.0f;
        mv[i] = (float)(i % 7) * 0.5f + 1.0f;
    }
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(m, mv, 0, sizeof mv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, sum), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, prod), BP_OK);
    char text[4096];
    ck_assert_msg(compute_capturing(meta, g, text, sizeof text) == BP_OK, "%zu devices: %s", n, text);
    ck_assert_int_eq(bp_tensor_get(sum, s, 0, sizeof s), BP_OK);
    ck_assert_int_eq(bp_tensor_get(prod, p, 0, sizeof p), BP_OK);
    for (int i = 0; i < C * R; i++) {
        ck_assert_msg(s[i] == xv[i] + mv[i], "%zu devices: sum[%d] = %g, want %g", n, i, (double)s[i],
                      (double)(xv[i] + mv[i]));
        ck_assert_msg(p[i] == xv[i] * mv[i], "%zu devices: product[%d] = %g, want %g", n, i, (double)p[i],
                      (double)(xv[i] * mv[i]));
    }
    int32_t state;
    ck_assert_int_eq(bp_meta_tensor_split(sum, &state, NULL), BP_OK);
    ck_assert_int_eq(state, BP_META_SPLIT_AXIS_1);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}

START_TEST(test_meta_binary_op_cuts_mirrored_operand_to_split_slices)
{
    check_sliced_operand(2, NULL);
    check_sliced_operand(3, (const float[]){1, 2, 1});
    check_sliced_operand(4, NULL); /* 7 rows over 4: uneven slices */
}
END_TEST

START_TEST(test_meta_binary_op_refuses_cutting_mirrored_operand_into_pieces)
{
    /* x split in two segments: each device holds two runs of rows, which
     * no single view of the mirrored operand can express */
    struct bp_device *meta = meta_over_cpu(2, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_1, .n_segments = 2, .seg = {{4, 1, 1}, {4, 1, 1}}};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 3, 8), "split_x");
    struct bp_tensor *m = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 3, 8), "mirrored");
    struct bp_tensor *sum = bp_tensor_set_name(bp_add(c, x, m), "the_sum");
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(meta), NULL, &buf), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, sum), BP_OK);
    char text[4096];
    ck_assert_int_eq(compute_capturing(meta, g, text, sizeof text), BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(text, "ADD") && strstr(text, "the_sum"), "log does not name op and tensor: %s", text);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

/* ---- SET_ROWS in graphs rebuilt every step ---- */

enum { W = 8, NCTX = 6, NH = 2, STEPS = 4 };

/* One decode-like step: a new context, buffer and graph writing row `pos`
 * of every head of the cache (split by heads) with `val`; the row id is an
 * input leaf, or computed (CONT of a view of a leaf of candidates). The
 * step's graph, tensors and meta offsets repeat from one step to the next,
 * as in the decoder runner. */
static void set_rows_step(struct bp_device *m, struct bp_backend *be, struct bp_tensor *cache, int pos,
                          bool computed_ids, float val)
{
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *rows = bp_tensor_set_name(bp_tensor_new_3d(c, BP_TYPE_F32, W, 1, NH), "split_rows");
    struct bp_tensor *ids, *cand = NULL;
    if (computed_ids) {
        cand = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, 3), "candidates");
        ids = bp_cont(c, bp_view(c, cand, 1, (int64_t[]){1}, NULL, 4));
    } else {
        ids = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, 1), "ids");
    }
    struct bp_tensor *out = bp_set_rows(c, cache, rows, ids);
    ck_assert_ptr_nonnull(out);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    float rv[W * NH];
    for (int i = 0; i < W * NH; i++) rv[i] = val + (float)i;
    ck_assert_int_eq(bp_tensor_set(rows, rv, 0, sizeof rv), BP_OK);
    if (computed_ids) {
        int32_t cv[3] = {-1, pos, -1};
        ck_assert_int_eq(bp_tensor_set(cand, cv, 0, sizeof cv), BP_OK);
    } else {
        ck_assert_int_eq(bp_tensor_set(ids, &pos, 0, sizeof pos), BP_OK);
    }
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, out), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "step at %d (%s ids): %s", pos,
                  computed_ids ? "computed" : "leaf", bp_last_error());
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}

START_TEST(test_meta_set_rows_with_i32_ids_in_rebuilt_graphs)
{
    size_t n = (size_t)_i;
    struct bp_device *m = meta_over_cpu(n, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_2};
    struct bp_context *kc;
    ck_assert_int_eq(bp_context_new(2, &kc), BP_OK);
    struct bp_tensor *cache = bp_tensor_set_name(bp_tensor_new_3d(kc, BP_TYPE_F32, W, NCTX, NH), "split_cache");
    struct bp_buffer *kb;
    ck_assert_int_eq(bp_context_alloc_tensors(kc, bp_device_buffer_type(m), NULL, &kb), BP_OK);
    float want[W * NCTX * NH] = {0}, got[W * NCTX * NH];
    ck_assert_int_eq(bp_tensor_set(cache, want, 0, sizeof want), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    for (int s = 0; s < 2 * STEPS; s++) {
        bool computed = s >= STEPS;
        int pos = s % NCTX;
        float val = 100.0f * (float)(s + 1);
        set_rows_step(m, be, cache, pos, computed, val);
        for (int h = 0; h < NH; h++)
            for (int e = 0; e < W; e++) want[(h * NCTX + pos) * W + e] = val + (float)(h * W + e);
        ck_assert_int_eq(bp_tensor_get(cache, got, 0, sizeof got), BP_OK);
        for (int i = 0; i < W * NCTX * NH; i++)
            ck_assert_msg(got[i] == want[i], "%zu devices, step %d (%s ids): cache[%d] = %g, want %g", n, s,
                          computed ? "computed" : "leaf", i, (double)got[i], (double)want[i]);
    }
    bp_backend_free(be);
    bp_buffer_free(kb);
    bp_context_free(kc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta_views");
    TCase *tc = tcase_create("views");
    tcase_add_loop_test(tc, test_meta_views_of_whole_segments_read_each_devices_slice, 0, 3);
    tcase_add_test(tc, test_meta_view_cutting_a_slice_is_refused_by_name);
    tcase_add_test(tc, test_meta_binary_op_cuts_mirrored_operand_to_split_slices);
    tcase_add_test(tc, test_meta_binary_op_refuses_cutting_mirrored_operand_into_pieces);
    tcase_add_loop_test(tc, test_meta_set_rows_with_i32_ids_in_rebuilt_graphs, 1, 4);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
