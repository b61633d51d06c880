/*
 * test_op_shapes.c — bp_op_shapes_ok (abi/backplane/bp_op_shapes.h), the
 * shape rules every device's supports_op starts from: each node the host's
 * op constructors build passes it (the two sets of rules agree), and
 * breaking any one relation of each op — a dimension, a fixed type, a
 * missing source — makes it fail.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "suite_main.h"

static struct bp_context *ctx;

static void setup(void)
{
    ck_assert_int_eq(bp_context_new(256, &ctx), BP_OK);
}

static void teardown(void)
{
    bp_context_free(ctx);
}

static struct bp_tensor *t4(enum bp_type type, int64_t a, int64_t b, int64_t c, int64_t d)
{
    struct bp_tensor *t = bp_tensor_new_4d(ctx, type, a, b, c, d);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* One node of every computing op, built through the public constructors
 * with broadcasts, masks and grouped-query heads. */
static int build_all(struct bp_tensor **out)
{
    int n = 0;
    struct bp_tensor *w = t4(BP_TYPE_Q4_0, 64, 24, 2, 2), *x = t4(BP_TYPE_F32, 64, 5, 6, 4);
    out[n++] = bp_mul_mat(ctx, w, x);
    struct bp_tensor *tab = t4(BP_TYPE_F16, 16, 40, 1, 1), *ids = t4(BP_TYPE_I32, 7, 1, 1, 1);
    out[n++] = bp_get_rows(ctx, tab, ids);
    struct bp_tensor *a = t4(BP_TYPE_F32, 8, 6, 4, 2), *b = t4(BP_TYPE_F32, 8, 1, 2, 1);
    out[n++] = bp_add(ctx, a, b);
    out[n++] = bp_mul(ctx, a, b);
    out[n++] = bp_scale(ctx, a, 2.0f, 1.0f);
    out[n++] = bp_rms_norm(ctx, a, 1e-5f);
    out[n++] = bp_silu(ctx, a);
    out[n++] = bp_gelu(ctx, a);
    out[n++] = bp_sqr(ctx, a);
    struct bp_tensor *sx = t4(BP_TYPE_F32, 10, 3, 4, 1), *mask = t4(BP_TYPE_F16, 10, 5, 2, 1);
    out[n++] = bp_soft_max(ctx, sx, mask, 0.5f);
    out[n++] = bp_soft_max(ctx, sx, NULL, 1.0f);
    struct bp_tensor *rx = t4(BP_TYPE_F32, 16, 4, 3, 1), *pos = t4(BP_TYPE_I32, 3, 1, 1, 1);
    out[n++] = bp_rope(ctx, rx, pos, 8, BP_ROPE_MODE_NEOX, 10000.0f, 1.0f);
    struct bp_tensor *ff = t4(BP_TYPE_F32, 6, 1, 1, 1);
    const struct bp_rope_ext_params rp = { .n_dims = 12, .mode = BP_ROPE_MODE_NORMAL, .freq_base = 1e4f,
                                           .freq_scale = 0.25f, .n_ctx_orig = 2048, .ext_factor = 1.0f,
                                           .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f };
    out[n++] = bp_rope_ext(ctx, rx, pos, ff, &rp);
    out[n++] = bp_rope_ext(ctx, rx, pos, NULL, &rp);
    out[n++] = bp_tanh(ctx, a);
    struct bp_tensor *dst = t4(BP_TYPE_F16, 8, 6, 4, 2);
    out[n++] = bp_cpy(ctx, a, dst);
    out[n++] = bp_cont(ctx, bp_transpose(ctx, a));
    struct bp_tensor *cache = t4(BP_TYPE_F16, 16, 32, 4, 1), *vals = t4(BP_TYPE_F32, 16, 3, 4, 1),
                     *rows = t4(BP_TYPE_I32, 3, 2, 1, 1);
    out[n++] = bp_set_rows(ctx, cache, vals, rows);
    struct bp_tensor *q = t4(BP_TYPE_F32, 32, 2, 8, 1), *k = t4(BP_TYPE_F16, 32, 9, 2, 1),
                     *v = t4(BP_TYPE_F16, 24, 9, 2, 1), *fm = t4(BP_TYPE_F16, 9, 4, 1, 1);
    out[n++] = bp_flash_attn_ext(ctx, q, k, v, fm, 0.125f);
    out[n++] = bp_flash_attn_ext(ctx, q, k, v, NULL, 0.125f);
    out[n++] = bp_flash_attn_softcap(ctx, q, k, v, fm, 0.125f, 50.0f);
    struct bp_tensor *ew = t4(BP_TYPE_Q4_K, 256, 12, 8, 1), *ex = t4(BP_TYPE_F32, 256, 1, 5, 1),
                     *eids = t4(BP_TYPE_I32, 2, 5, 1, 1), *ex2 = t4(BP_TYPE_F32, 256, 2, 5, 1);
    out[n++] = bp_mul_mat_id(ctx, ew, ex, eids);
    out[n++] = bp_mul_mat_id(ctx, ew, ex2, eids);
    out[n++] = bp_top_k(ctx, a, 3);
    out[n++] = bp_sum_rows(ctx, a);
    out[n++] = bp_div(ctx, a, b);
    out[n++] = bp_clamp(ctx, a, -1.0f, 1.0f);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);
    return n;
}

START_TEST(test_constructed_nodes_pass)
{
    struct bp_tensor *nodes[48];
    const int n = build_all(nodes);
    for (int i = 0; i < n; i++)
        ck_assert_msg(bp_op_shapes_ok(nodes[i]), "%s node %d rejected",
                      bp_op_name((enum bp_op)nodes[i]->op), i);
    /* A view op and a leaf are always well-formed. */
    ck_assert(bp_op_shapes_ok(bp_transpose(ctx, nodes[2])));
    ck_assert(bp_op_shapes_ok(t4(BP_TYPE_F32, 1, 1, 1, 1)));
}
END_TEST

/* Each mutation breaks one relation on a copy of a constructed node and
 * its sources, so the originals (which nodes share) stay intact. */
struct mutation {
    enum bp_op op;
    const char *what;
    void (*apply)(struct bp_tensor *node, struct bp_tensor *srcs);
};

static void m_dst_dim(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->ne[0] += 1; }
static void m_dst_dim1(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->ne[1] += 1; }
static void m_src0_dim0(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[0].ne[0] += 1; }
static void m_src1_dim0(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[0] += 1; }
static void m_src1_dim2(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[2] = 5; }
/* X and the result agree on a batch dim that W's does not divide: only the
 * divisibility rule of MUL_MAT's broadcast can refuse it. */
static void m_batch2(struct bp_tensor *t, struct bp_tensor *s) { s[1].ne[2] = t->ne[2] = 5; }
static void m_batch3(struct bp_tensor *t, struct bp_tensor *s) { s[1].ne[3] = t->ne[3] = 3; }
static void m_src1_dim1(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[1] += 1; }
static void m_src1_rows(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[1] = 1; }
static void m_src2_dim0(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].ne[0] += 1; }
static void m_src2_dim1(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].ne[1] += 1; }
static void m_src1_type(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].type = BP_TYPE_F32; }
static void m_src2_type(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].type = BP_TYPE_F32; }
static void m_dst_type(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->type = BP_TYPE_F16; }
static void m_dst_f32(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->type = BP_TYPE_F32; }
static void m_no_src1(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->src[1] = NULL; }
static void m_no_src0(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->src[0] = NULL; }
static void m_neg_dim(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->ne[3] = -1; }
static void m_src1_zero(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[3] = 0; }
static void m_src3_dim0(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[3].ne[0] += 1; }
static void m_src3_rows(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[3].ne[1] = 1; }
static void m_src3_type(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[3].type = BP_TYPE_BF16; }
static void m_rope_odd(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op_params[0] = 7; }
static void m_rope_mode(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op_params[1] = 1; }
static void m_rope_wide(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op_params[0] = 18; }
static void m_bad_op(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op = BP_OP_COUNT; }
static void m_src2_f16(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].type = BP_TYPE_F16; }
static void m_src1_slots(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[1].ne[1] = 3; }
static void m_src2_toks(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].ne[1] += 1; }
static void m_src0_dim3(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[0].ne[3] = 2; }
static void m_topk_zero(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op_params[0] = 0; }
static void m_topk_wide(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->op_params[0] = 9; }
static void m_dst_i32(struct bp_tensor *t, struct bp_tensor *s) { (void)s; t->type = BP_TYPE_I32; }
static void m_src0_f16(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[0].type = BP_TYPE_F16; }
static void m_src2_rows(struct bp_tensor *t, struct bp_tensor *s) { (void)t; s[2].ne[1] = 2; }

static const struct mutation mutations[] = {
    { BP_OP_MUL_MAT, "K of W differs from K of X", m_src0_dim0 },
    { BP_OP_MUL_MAT, "X batch not a multiple of W's", m_src1_dim2 },
    { BP_OP_MUL_MAT, "X dim 2 (with the result's) not a multiple of W's", m_batch2 },
    { BP_OP_MUL_MAT, "X dim 3 (with the result's) not a multiple of W's", m_batch3 },
    { BP_OP_MUL_MAT, "result rows not N", m_dst_dim },
    { BP_OP_MUL_MAT, "result not F32", m_dst_type },
    { BP_OP_MUL_MAT, "no X", m_no_src1 },
    { BP_OP_MUL_MAT, "a zero dimension in X", m_src1_zero },
    { BP_OP_GET_ROWS, "ids not I32", m_src1_type },
    { BP_OP_GET_ROWS, "result rows not the id count", m_dst_dim1 },
    { BP_OP_GET_ROWS, "result row length not the table's", m_dst_dim },
    { BP_OP_ADD, "b does not divide a", m_src1_dim0 },
    { BP_OP_ADD, "result shape not a's", m_dst_dim },
    { BP_OP_ADD, "result type not a's", m_dst_type },
    { BP_OP_MUL, "no b", m_no_src1 },
    { BP_OP_SCALE, "result shape not x's", m_dst_dim },
    { BP_OP_RMS_NORM, "no x", m_no_src0 },
    { BP_OP_SILU, "result type not x's", m_dst_type },
    { BP_OP_GELU, "a negative dimension", m_neg_dim },
    { BP_OP_SQR, "result type not x's", m_dst_type },
    { BP_OP_SOFT_MAX, "mask row length not x's", m_src1_dim0 },
    { BP_OP_SOFT_MAX, "mask with fewer rows than x", m_src1_rows },
    { BP_OP_SOFT_MAX, "result not F32", m_dst_type },
    { BP_OP_ROPE, "positions not one per token", m_src1_dim0 },
    { BP_OP_ROPE, "odd n_dims", m_rope_odd },
    { BP_OP_ROPE, "unknown mode", m_rope_mode },
    { BP_OP_ROPE, "n_dims beyond the head", m_rope_wide },
    { BP_OP_CPY, "element counts differ", m_src1_dim0 },
    { BP_OP_CPY, "result type not the destination's", m_dst_f32 },
    { BP_OP_CONT, "result shape not the source's", m_dst_dim },
    { BP_OP_SET_ROWS, "value rows not the id count", m_src1_dim1 },
    { BP_OP_SET_ROWS, "value row length not the cache's", m_src1_dim0 },
    { BP_OP_SET_ROWS, "ids not I32", m_src2_type },
    { BP_OP_SET_ROWS, "result not the cache", m_dst_dim1 },
    { BP_OP_FLASH_ATTN_EXT, "K head size not Q's", m_src1_dim0 },
    { BP_OP_FLASH_ATTN_EXT, "V length not K's", m_src2_dim1 },
    { BP_OP_FLASH_ATTN_EXT, "result length not Dv", m_src2_dim0 },
    { BP_OP_FLASH_ATTN_EXT, "mask length not n_kv", m_src3_dim0 },
    { BP_OP_FLASH_ATTN_EXT, "mask with fewer rows than queries", m_src3_rows },
    { BP_OP_FLASH_ATTN_EXT, "mask neither F32 nor F16", m_src3_type },
    { BP_OP_ROPE_EXT, "factors not one per pair", m_src2_dim0 },
    { BP_OP_ROPE_EXT, "factors not F32", m_src2_f16 },
    { BP_OP_ROPE_EXT, "factors not one row", m_src2_rows },
    { BP_OP_ROPE_EXT, "odd n_dims", m_rope_odd },
    { BP_OP_ROPE_EXT, "unknown mode", m_rope_mode },
    { BP_OP_ROPE_EXT, "n_dims beyond the head", m_rope_wide },
    { BP_OP_ROPE_EXT, "positions not one per token", m_src1_dim0 },
    { BP_OP_TANH, "result type not x's", m_dst_type },
    { BP_OP_TANH, "result shape not x's", m_dst_dim },
    { BP_OP_FLASH_ATTN_SOFTCAP, "K head size not Q's", m_src1_dim0 },
    { BP_OP_FLASH_ATTN_SOFTCAP, "V length not K's", m_src2_dim1 },
    { BP_OP_FLASH_ATTN_SOFTCAP, "mask with fewer rows than queries", m_src3_rows },
    { BP_OP_MUL_MAT_ID, "K of W differs from K of X", m_src0_dim0 },
    { BP_OP_MUL_MAT_ID, "X slots neither 1 nor n_used", m_src1_slots },
    { BP_OP_MUL_MAT_ID, "ids tokens not X's", m_src2_toks },
    { BP_OP_MUL_MAT_ID, "ids not I32", m_src2_type },
    { BP_OP_MUL_MAT_ID, "W with a dim 3", m_src0_dim3 },
    { BP_OP_MUL_MAT_ID, "result rows not N", m_dst_dim },
    { BP_OP_MUL_MAT_ID, "result not F32", m_dst_type },
    { BP_OP_TOP_K, "k of 0", m_topk_zero },
    { BP_OP_TOP_K, "k beyond the row", m_topk_wide },
    { BP_OP_TOP_K, "result not I32", m_dst_f32 },
    { BP_OP_TOP_K, "x not F32", m_src0_f16 },
    { BP_OP_SUM_ROWS, "result not one per row", m_dst_dim },
    { BP_OP_SUM_ROWS, "result not F32", m_dst_i32 },
    { BP_OP_DIV, "b does not divide a", m_src1_dim0 },
    { BP_OP_DIV, "result type not a's", m_dst_type },
    { BP_OP_CLAMP, "result shape not x's", m_dst_dim },
    { BP_OP_ADD, "an op outside the table", m_bad_op },
};

START_TEST(test_each_broken_relation_fails)
{
    struct bp_tensor *nodes[48];
    const int n = build_all(nodes);
    const struct mutation *mu = &mutations[_i];
    const bool wants_mask = mu->apply == m_src3_dim0 || mu->apply == m_src3_rows ||
                            mu->apply == m_src3_type;
    struct bp_tensor *orig = NULL;  /* the first node of the op (with a mask, if needed) */
    for (int i = 0; i < n && !orig; i++)
        if (nodes[i]->op == (int32_t)mu->op && (!wants_mask || nodes[i]->src[3]))
            orig = nodes[i];
    ck_assert_msg(orig != NULL, "no %s node", bp_op_name(mu->op));
    struct bp_tensor node = *orig, srcs[BP_MAX_SRC];
    for (int s = 0; s < BP_MAX_SRC; s++)
        if (orig->src[s]) {
            srcs[s] = *orig->src[s];
            node.src[s] = &srcs[s];
        }
    ck_assert(bp_op_shapes_ok(&node));
    mu->apply(&node, srcs);
    ck_assert_msg(!bp_op_shapes_ok(&node), "%s: %s accepted", bp_op_name(mu->op), mu->what);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("op_shapes");
    TCase *tc = tcase_create("op_shapes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_constructed_nodes_pass);
    tcase_add_loop_test(tc, test_each_broken_relation_fails, 0,
                        (int)(sizeof mutations / sizeof mutations[0]));
    suite_add_tcase(s, tc);
    return run_suite(s);
}
