/* test_meta.c — meta buffers and refusals: set/get round trips for every
 * split state, segment layout and type; PARTIAL reads refused; the butterfly
 * all-reduce for 2..6 devices against a scalar sum; an op without a split
 * rule refused by name; a meta device made of meta devices refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "meta_test_util.h"
#include "log_capture.h"
#include "suite_main.h"

static void roundtrip(struct bp_device *m, enum bp_type ty, const int64_t ne[4], struct bp_meta_split split)
{
    meta_test_split = split;
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *t = bp_tensor_set_name(bp_tensor_new(c, ty, 4, ne), "split");
    ck_assert_ptr_nonnull(t);
    struct bp_buffer *buf;
    ck_assert_msg(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf) == BP_OK, "%s", bp_last_error());
    size_t n = bp_nbytes(t);
    unsigned char *in = malloc(n), *out = malloc(n);
    for (size_t i = 0; i < n; i++) in[i] = (unsigned char)(i * 7 + 3);
    if (split.state == BP_META_SPLIT_PARTIAL) {
        ck_assert_int_eq(bp_tensor_set(t, in, 0, n), BP_OK);
        ck_assert_msg(bp_tensor_get(t, out, 0, n) != BP_OK, "reading a PARTIAL tensor must be refused");
    } else {
        ck_assert_msg(bp_tensor_set(t, in, 0, n) == BP_OK, "%s", bp_last_error());
        ck_assert_int_eq(bp_tensor_get(t, out, 0, n), BP_OK);
        ck_assert_msg(memcmp(in, out, n) == 0, "%s state %d round trip differs", bp_type_name(ty), split.state);
        /* a partial-range write lands in the right slice */
        unsigned char patch[4] = {1, 2, 3, 4};
        size_t off = n / 2 - (n / 2) % 4;
        ck_assert_int_eq(bp_tensor_set(t, patch, off, 4), BP_OK);
        memcpy(in + off, patch, 4);
        ck_assert_int_eq(bp_tensor_get(t, out, 0, n), BP_OK);
        ck_assert_msg(memcmp(in, out, n) == 0, "partial write misplaced");
        int32_t state;
        int64_t lne[BP_META_MAX_DEVICES];
        ck_assert_int_eq(bp_meta_tensor_split(t, &state, lne), BP_OK);
        ck_assert_int_eq(state, split.state);
        if (state <= BP_META_SPLIT_AXIS_3) {
            int64_t sum = 0;
            for (int d = 0; d < BP_META_MAX_DEVICES; d++) sum += lne[d];
            ck_assert_int_eq(sum, ne[state]);
        }
    }
    free(in);
    free(out);
    bp_buffer_free(buf);
    bp_context_free(c);
}

START_TEST(test_meta_buffer_roundtrips_every_state_and_type)
{
    struct bp_device *m = meta_over_cpu(3, (const float[]){2, 1, 1});
    const int64_t ne[4] = {64, 6, 5, 4};
    const enum bp_type types[] = {BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_I32, BP_TYPE_Q8_0, BP_TYPE_Q4_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (int s = 0; s <= BP_META_SPLIT_MIRRORED; s++)
            roundtrip(m, types[k], ne, (struct bp_meta_split){.state = s});
    }
    /* segments: axis 1 as {2 x1, 2 x2} (fused QKV-like) */
    struct bp_meta_split seg = {.state = BP_META_SPLIT_AXIS_1, .n_segments = 2,
                                .seg = {{2, 1, 1}, {2, 2, 1}}};
    roundtrip(m, BP_TYPE_F32, ne, seg);
    roundtrip(m, BP_TYPE_Q8_0, ne, seg);
    /* axis 0 of a block type with granularity: whole blocks only */
    roundtrip(m, BP_TYPE_Q8_0, ne, (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0, .granularity = 32});
}
END_TEST

START_TEST(test_meta_buffer_refuses_reading_partial)
{
    struct bp_device *m = meta_over_cpu(2, NULL);
    roundtrip(m, BP_TYPE_F32, (const int64_t[]){8, 2, 1, 1}, (struct bp_meta_split){.state = BP_META_SPLIT_PARTIAL});
}
END_TEST

START_TEST(test_meta_butterfly_sums_row_parallel_matmul_on_2_to_6_devices)
{
    size_t n = (size_t)_i;
    struct bp_device *m = meta_over_cpu(n, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    enum { K = 48, N = 5, M = 3 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, N), "split_w");
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, M), "split_x");
    struct bp_tensor *y = bp_mul_mat(c, w, x);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    float wv[K * N], xv[K * M], yv[N * M];
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 37) % 11) - 5;
    for (int i = 0; i < K * M; i++) xv[i] = (float)((i * 13) % 7) - 3;
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof wv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
    for (int mm = 0; mm < M; mm++)
        for (int nn = 0; nn < N; nn++) {
            float want = 0;  /* small integers: exact in any order */
            for (int k = 0; k < K; k++) want += wv[nn * K + k] * xv[mm * K + k];
            ck_assert_msg(yv[mm * N + nn] == want, "n=%zu y[%d,%d] = %g, want %g", n, nn, mm,
                          (double)yv[mm * N + nn], (double)want);
        }
    struct bp_meta_stats st = {.size = sizeof st};
    ck_assert_int_eq(bp_meta_backend_stats(be, &st), BP_OK);
    ck_assert_uint_eq(st.reductions, 1);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_refuses_op_without_rule_naming_it)
{
    struct bp_device *m = meta_over_cpu(2, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 16, 2), "split_rows");
    struct bp_tensor *y = bp_tensor_set_name(bp_rms_norm(c, x, 1e-5f), "normed");
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    log_capture_begin();
    bp_status st = bp_backend_graph_compute(be, g);
    const char *text = log_capture_end();
    ck_assert_int_eq(st, BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(text, "RMS_NORM") && strstr(text, "normed"), "log does not name op and tensor: %s", text);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

/* ROPE_EXT's frequency factors hold one value per pair of every head, so
 * a device holding part of them cannot rotate: refused by name. */
START_TEST(test_meta_refuses_rope_ext_with_split_factors)
{
    struct bp_device *m = meta_over_cpu(2, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_3d(c, BP_TYPE_F32, 64, 4, 3), "x");
    struct bp_tensor *pos = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_I32, 3), "pos");
    struct bp_tensor *ff = bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_F32, 32), "split_factors");
    const struct bp_rope_ext_params p = {.n_dims = 64, .mode = BP_ROPE_MODE_NEOX, .freq_base = 5e5f,
                                         .freq_scale = 1.0f, .attn_factor = 1.0f};
    struct bp_tensor *y = bp_tensor_set_name(bp_rope_ext(c, x, pos, ff, &p), "q_rot");
    ck_assert_ptr_nonnull(y);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    log_capture_begin();
    bp_status st = bp_backend_graph_compute(be, g);
    const char *text = log_capture_end();
    ck_assert_int_eq(st, BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(text, "ROPE_EXT") && strstr(text, "q_rot") && strstr(text, "frequency factors"),
                  "log does not name op, tensor and the split factors: %s", text);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_refuses_meta_of_meta)
{
    struct bp_device *m = meta_over_cpu(2, NULL);
    struct bp_device *subs[2] = {m, bp_device_by_name("cpu")};
    struct bp_device *mm = NULL;
    ck_assert_int_eq(bp_meta_device_new(subs, 2, NULL, NULL, NULL, &mm), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(mm);
}
END_TEST

START_TEST(test_meta_device_sums_memory)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct bp_device *m = meta_over_cpu(3, NULL);
    size_t f1, t1, f3, t3;
    bp_device_memory(cpu, &f1, &t1);
    bp_device_memory(m, &f3, &t3);
    ck_assert_uint_eq(t3, 3 * t1);
}
END_TEST



START_TEST(test_meta_buffer_holds_only_each_devices_slices)
{
    /* a 4-way column split of a 256 x 512 f32 weight plus a small mirrored
     * tensor: each device holds a quarter of the weight and the whole
     * small tensor, not the meta buffer's full size */
    struct bp_device *m = meta_over_cpu(4, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_1};
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 256, 512), "split_w");
    bp_tensor_set_name(bp_tensor_new_1d(c, BP_TYPE_F32, 64), "norm");
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    size_t bytes[BP_META_MAX_DEVICES];
    ck_assert_msg(bp_meta_buffer_device_bytes(buf, bytes) == BP_OK, "%s", bp_last_error());
    size_t quarter = bp_nbytes(w) / 4, small = 64 * 4;
    for (int d = 0; d < 4; d++)
        ck_assert_msg(bytes[d] >= quarter + small && bytes[d] <= quarter + small + 256,
                      "device %d holds %zu bytes; its slices take %zu", d, bytes[d], quarter + small);
    ck_assert_uint_eq(bytes[4], 0);
    bp_buffer_free(buf);
    bp_context_free(c);

    /* ratios 3,1: three quarters on the first device, one on the second */
    m = meta_over_cpu(2, (const float[]){3, 1});
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    w = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, 256, 512), "split_w");
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_meta_buffer_device_bytes(buf, bytes), BP_OK);
    ck_assert_uint_eq(bytes[0], bp_nbytes(w) / 4 * 3);
    ck_assert_uint_eq(bytes[1], bp_nbytes(w) / 4);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

/* A graph's computed tensors share device bytes as the host's graph
 * allocator planned (each slice at its tensor's meta offset, so a device
 * holds at most the graph buffer's meta size): a chain of 24 SCALEs over a
 * row-split 64 x 256 f32 tensor holds a few links a device, not 24 slices,
 * and bp_meta_measure_graph says so before anything is allocated; the
 * chain's result is still x * 2^24 (no link overwrote a live one), twice
 * over (a cached plan). */
START_TEST(test_meta_graph_tensors_share_device_bytes_along_the_graph)
{
    struct bp_device *m = meta_over_cpu(2, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_1};
    enum { C = 64, R = 256, LINKS = 24 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(LINKS + 4, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, C, R), "split_x");
    x->flags |= BP_TENSOR_FLAG_INPUT;
    struct bp_tensor *y = x;
    for (int i = 0; i < LINKS; i++) y = bp_scale(c, y, 2.0f, 0.0f);
    y->flags |= BP_TENSOR_FLAG_OUTPUT;
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(LINKS + 4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    size_t planned[BP_META_MAX_DEVICES], scratch[BP_META_MAX_DEVICES], held[BP_META_MAX_DEVICES];
    ck_assert_msg(bp_meta_measure_graph(m, g, NULL, 0, planned, scratch) == BP_OK, "%s", bp_last_error());
    struct bp_buffer *buf;
    ck_assert_msg(bp_context_alloc_graph(c, g, bp_device_buffer_type(m), &buf) == BP_OK, "%s", bp_last_error());
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    const size_t slice = (size_t)C * R / 2 * sizeof(float);
    for (int run = 0; run < 2; run++) {
        float xv[C * R], yv[C * R];
        for (int i = 0; i < C * R; i++) xv[i] = (float)(i % 13 - 6 + run);
        ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
        ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
        ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
        for (int i = 0; i < C * R; i++)
            ck_assert_msg(yv[i] == xv[i] * 16777216.0f, "run %d: y[%d] = %g, want %g", run, i, (double)yv[i],
                          (double)xv[i] * 16777216.0f);
    }
    ck_assert_msg(bp_meta_buffer_device_bytes(buf, held) == BP_OK, "%s", bp_last_error());
    for (int d = 0; d < 2; d++) {
        /* the meta size of x, y and two live links, and x's slice */
        ck_assert_msg(held[d] <= 9 * slice, "device %d holds %zu bytes for %d links of %zu", d, held[d], LINKS,
                      slice);
        ck_assert_msg(planned[d] == held[d], "device %d: measured %zu bytes, holds %zu", d, planned[d], held[d]);
    }
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_view_of_split_tensor_writes_and_reads_its_slices)
{
    struct bp_device *m = meta_over_cpu(3, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_1};
    enum { C = 8, R = 6 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *t = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, C, R), "split");
    size_t nb[2] = {4, C * 4};
    /* rows 2..4: they straddle the devices' slices (2 rows each) */
    struct bp_tensor *v = bp_view(c, t, 2, (int64_t[]){C, 3}, nb, 2 * C * 4);
    ck_assert_ptr_nonnull(v);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    float all[C * R], rows[3 * C], got[C * R];
    for (int i = 0; i < C * R; i++) all[i] = (float)i;
    for (int i = 0; i < 3 * C; i++) rows[i] = -1.0f - (float)i;
    ck_assert_int_eq(bp_tensor_set(t, all, 0, sizeof all), BP_OK);
    ck_assert_msg(bp_tensor_set(v, rows, 0, sizeof rows) == BP_OK, "%s", bp_last_error());
    memcpy(all + 2 * C, rows, sizeof rows);
    ck_assert_int_eq(bp_tensor_get(t, got, 0, sizeof got), BP_OK);
    ck_assert_msg(memcmp(all, got, sizeof all) == 0, "the view's write did not land in rows 2..4");
    float back[3 * C];
    ck_assert_int_eq(bp_tensor_get(v, back, 0, sizeof back), BP_OK);
    ck_assert_int_eq(memcmp(back, rows, sizeof rows), 0);
    /* the buffer's raw bytes are the tensors' bytes at their offsets */
    ck_assert_int_eq(bp_buffer_read(buf, 0, got, sizeof got), BP_OK);
    ck_assert_int_eq(memcmp(all, got, sizeof all), 0);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_partial_leaf_reduction_is_idempotent)
{
    /* a PARTIAL leaf is reduced in place before RMS_NORM; computing the
     * graph again (cached plan) must not sum the copies a second time */
    struct bp_device *m = meta_over_cpu(3, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_PARTIAL};
    enum { C = 16, R = 2 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, C, R), "split_x");
    struct bp_tensor *y = bp_rms_norm(c, x, 1e-5f);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    for (int round = 0; round < 2; round++) {
        float xv[C * R], yv[C * R];
        for (int i = 0; i < C * R; i++) xv[i] = (float)((i * 5 + round * 3) % 9) - 4.0f;
        ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
        for (int run = 0; run < 2; run++) {
            ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
            ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
            float xr[C * R];
            ck_assert_int_eq(bp_tensor_get(x, xr, 0, sizeof xr), BP_OK);
            ck_assert_msg(memcmp(xr, xv, sizeof xv) == 0, "round %d run %d: x is no longer what was written",
                          round, run);
            for (int r = 0; r < R; r++) {
                double ss = 0;
                for (int k = 0; k < C; k++) ss += (double)xv[r * C + k] * xv[r * C + k];
                double sc = 1.0 / sqrt(ss / C + 1e-5);
                for (int k = 0; k < C; k++)
                    ck_assert_msg(fabs(yv[r * C + k] - xv[r * C + k] * sc) < 1e-5,
                                  "round %d run %d: y[%d,%d] = %g, want %g", round, run, k, r,
                                  (double)yv[r * C + k], xv[r * C + k] * sc);
            }
        }
    }
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_merges_two_partial_branches_into_one_reduction)
{
    /* y = W1 x1 + W2 x2, both row-parallel: the two partial sums meet in an
     * ADD and are reduced once, counted as one merged reduction */
    struct bp_device *m = meta_over_cpu(3, NULL);
    meta_test_split = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    enum { K = 48, N = 4 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *w1 = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, N), "split_w1");
    struct bp_tensor *w2 = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, N), "split_w2");
    struct bp_tensor *x1 = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, 1), "split_x1");
    struct bp_tensor *x2 = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, 1), "split_x2");
    struct bp_tensor *y = bp_add(c, bp_mul_mat(c, w1, x1), bp_mul_mat(c, w2, x2));
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    float a[K * N], b[K * N], u[K], v[K], yv[N];
    for (int i = 0; i < K * N; i++) { a[i] = (float)(i % 7) - 3; b[i] = (float)(i % 5) - 2; }
    for (int i = 0; i < K; i++) { u[i] = (float)(i % 3) - 1; v[i] = (float)(i % 4) - 1; }
    ck_assert_int_eq(bp_tensor_set(w1, a, 0, sizeof a), BP_OK);
    ck_assert_int_eq(bp_tensor_set(w2, b, 0, sizeof b), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x1, u, 0, sizeof u), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x2, v, 0, sizeof v), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(m, "n_threads=1", &be), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
    for (int nn = 0; nn < N; nn++) {
        float want = 0;
        for (int k = 0; k < K; k++) want += a[nn * K + k] * u[k] + b[nn * K + k] * v[k];
        ck_assert_msg(yv[nn] == want, "y[%d] = %g, want %g", nn, (double)yv[nn], (double)want);
    }
    struct bp_meta_stats st = {.size = sizeof st};
    ck_assert_int_eq(bp_meta_backend_stats(be, &st), BP_OK);
    ck_assert_uint_eq(st.reductions, 1);
    ck_assert_uint_eq(st.merged, 1);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta");
    TCase *tc = tcase_create("meta");
    tcase_add_test(tc, test_meta_buffer_roundtrips_every_state_and_type);
    tcase_add_test(tc, test_meta_buffer_refuses_reading_partial);
    tcase_add_loop_test(tc, test_meta_butterfly_sums_row_parallel_matmul_on_2_to_6_devices, 2, 7);
    tcase_add_test(tc, test_meta_refuses_op_without_rule_naming_it);
    tcase_add_test(tc, test_meta_refuses_rope_ext_with_split_factors);
    tcase_add_test(tc, test_meta_refuses_meta_of_meta);
    tcase_add_test(tc, test_meta_device_sums_memory);
    tcase_add_test(tc, test_meta_buffer_holds_only_each_devices_slices);
    tcase_add_test(tc, test_meta_graph_tensors_share_device_bytes_along_the_graph);
    tcase_add_test(tc, test_meta_view_of_split_tensor_writes_and_reads_its_slices);
    tcase_add_test(tc, test_meta_partial_leaf_reduction_is_idempotent);
    tcase_add_test(tc, test_meta_merges_two_partial_branches_into_one_reduction);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
