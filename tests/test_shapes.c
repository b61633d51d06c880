/* test_shapes.c — op constructors infer shapes, strides and view offsets as
 * bp_ops.h specifies, reject every invalid case with a sentence naming the
 * op, both shapes and the tensor names, and graphs list nodes in dependency
 * order. Expected values are computed by hand in each test. */
#include <check.h>
#include <math.h>
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
    ctx = NULL;
}

/* A fresh context, for tests that check several rejections (the sticky
 * error keeps only the first). */
static void fresh(void)
{
    teardown();
    setup();
}

static struct bp_tensor *T(enum bp_type type, int64_t a, int64_t b, int64_t c, int64_t d, const char *name)
{
    struct bp_tensor *t = bp_tensor_new_4d(ctx, type, a, b, c, d);
    ck_assert_ptr_nonnull(t);
    return bp_tensor_set_name(t, name);
}

static void assert_ne(const struct bp_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ne[0], a);
    ck_assert_int_eq(t->ne[1], b);
    ck_assert_int_eq(t->ne[2], c);
    ck_assert_int_eq(t->ne[3], d);
}

static void assert_nb(const struct bp_tensor *t, size_t a, size_t b, size_t c, size_t d)
{
    ck_assert_uint_eq(t->nb[0], a);
    ck_assert_uint_eq(t->nb[1], b);
    ck_assert_uint_eq(t->nb[2], c);
    ck_assert_uint_eq(t->nb[3], d);
}

/* The result is NULL, the context keeps `status`, and the last error
 * contains every given fragment. */
#define ASSERT_REJECTED(expr, status, ...)                                                   \
    do {                                                                                     \
        struct bp_tensor *r_ = (expr);                                                       \
        ck_assert_msg(r_ == NULL, "%s was accepted", #expr);                                 \
        ck_assert_int_eq(bp_context_status(ctx), (status));                                  \
        const char *frags_[] = {__VA_ARGS__, NULL};                                          \
        for (int i_ = 0; frags_[i_]; i_++)                                                   \
            ck_assert_msg(strstr(bp_last_error(), frags_[i_]) != NULL,                       \
                          "error \"%s\" lacks \"%s\"", bp_last_error(), frags_[i_]);         \
        fresh();                                                                             \
    } while (0)

/* ---------------------------------------------------------------- tensors */

START_TEST(test_tensor_new_has_packed_strides)
{
    struct bp_tensor *t = T(BP_TYPE_F32, 3, 5, 7, 2, "t");
    assert_nb(t, 4, 12, 60, 420);
    ck_assert_int_eq(t->op, BP_OP_NONE);
    ck_assert_ptr_null(t->data);
    ck_assert_ptr_null(t->view_src);
    /* q4_0: 18 bytes per 32 elements, so a 64-wide row is 36 bytes. */
    struct bp_tensor *q = bp_tensor_new_2d(ctx, BP_TYPE_Q4_0, 64, 3);
    assert_ne(q, 64, 3, 1, 1);
    assert_nb(q, 18, 36, 108, 108);
    struct bp_tensor *h = bp_tensor_new_1d(ctx, BP_TYPE_F16, 5);
    assert_ne(h, 5, 1, 1, 1);
    assert_nb(h, 2, 10, 10, 10);
    ck_assert_uint_eq(bp_context_tensor_count(ctx), 3);
    ck_assert_ptr_eq(bp_context_tensor(ctx, 1), q);
    ck_assert_ptr_null(bp_context_tensor(ctx, 3));
    ck_assert_ptr_eq(bp_context_find(ctx, "t"), t);
    ck_assert_ptr_null(bp_context_find(ctx, "nope"));
    /* reserved bytes are zero */
    for (size_t i = 0; i < sizeof t->reserved; i++) ck_assert_int_eq(t->reserved[i], 0);
}
END_TEST

START_TEST(test_tensor_new_rejects_partial_block_bad_type_and_negative_size)
{
    ASSERT_REJECTED(bp_tensor_new_2d(ctx, BP_TYPE_Q4_0, 48, 2), BP_ERR_SHAPE, "q4_0", "32", "48");
    ASSERT_REJECTED(bp_tensor_new_1d(ctx, (enum bp_type)99, 4), BP_ERR_INVALID_ARGUMENT, "99");
    ASSERT_REJECTED(bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, -1), BP_ERR_SHAPE, "-1");
    ASSERT_REJECTED(bp_tensor_new(ctx, BP_TYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}), BP_ERR_INVALID_ARGUMENT,
                    "n_dims");
    ASSERT_REJECTED(bp_tensor_new_4d(ctx, BP_TYPE_F32, INT64_MAX / 2, INT64_MAX / 2, 4, 4), BP_ERR_SHAPE,
                    "too large");
}
END_TEST

START_TEST(test_full_context_fails_and_stays_failed)
{
    struct bp_context *small;
    ck_assert_int_eq(bp_context_new(2, &small), BP_OK);
    struct bp_tensor *a = bp_tensor_new_1d(small, BP_TYPE_F32, 4);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(bp_silu(small, a));
    ck_assert_ptr_null(bp_gelu(small, a));
    ck_assert_int_eq(bp_context_status(small), BP_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "full"));
    bp_context_free(small);
}
END_TEST

START_TEST(test_set_name_truncates)
{
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    struct bp_tensor *t = T(BP_TYPE_F32, 1, 1, 1, 1, longname);
    ck_assert_uint_eq(strlen(t->name), BP_MAX_NAME - 1);
}
END_TEST

/* ------------------------------------------------------------ computing ops */

START_TEST(test_get_rows_gives_f32_rows_of_table)
{
    struct bp_tensor *table = T(BP_TYPE_F16, 8, 10, 3, 2, "tok_embd");
    struct bp_tensor *ids = T(BP_TYPE_I32, 5, 3, 2, 1, "ids");
    struct bp_tensor *r = bp_get_rows(ctx, table, ids);
    assert_ne(r, 8, 5, 3, 2);
    ck_assert_int_eq(r->type, BP_TYPE_F32);
    assert_nb(r, 4, 32, 160, 480);
    ck_assert_int_eq(r->op, BP_OP_GET_ROWS);
    ck_assert_ptr_eq(r->src[0], table);
    ck_assert_ptr_eq(r->src[1], ids);
    ck_assert_str_eq(r->name, "get_rows(tok_embd,ids)");
}
END_TEST

START_TEST(test_get_rows_rejects_bad_ids)
{
    struct bp_tensor *table = T(BP_TYPE_F32, 8, 10, 3, 1, "tok_embd");
    ASSERT_REJECTED(bp_get_rows(ctx, table, T(BP_TYPE_F32, 5, 1, 1, 1, "ids")), BP_ERR_INVALID_ARGUMENT,
                    "GET_ROWS", "ids 'ids' [5, 1, 1, 1]", "f32", "i32");
    table = T(BP_TYPE_F32, 8, 10, 3, 1, "tok_embd");
    ASSERT_REJECTED(bp_get_rows(ctx, table, T(BP_TYPE_I32, 5, 2, 1, 1, "ids")), BP_ERR_SHAPE, "GET_ROWS",
                    "table 'tok_embd' [8, 10, 3, 1]", "ids 'ids' [5, 2, 1, 1]");
    table = T(BP_TYPE_F32, 8, 10, 1, 1, "tok_embd");
    ASSERT_REJECTED(bp_get_rows(ctx, table, T(BP_TYPE_I32, 5, 1, 2, 1, "ids")), BP_ERR_SHAPE, "GET_ROWS",
                    "[5, 1, 2, 1]");
    table = T(BP_TYPE_F32, 8, 10, 1, 1, "tok_embd");
    ASSERT_REJECTED(bp_get_rows(ctx, table, T(BP_TYPE_I32, 5, 1, 1, 2, "ids")), BP_ERR_SHAPE, "GET_ROWS",
                    "[5, 1, 1, 2]");
}
END_TEST

START_TEST(test_mul_mat_shape_and_broadcast)
{
    struct bp_tensor *w = T(BP_TYPE_F32, 16, 32, 2, 1, "w");
    struct bp_tensor *x = T(BP_TYPE_F32, 16, 7, 6, 3, "x");
    struct bp_tensor *y = bp_mul_mat(ctx, w, x);
    assert_ne(y, 32, 7, 6, 3);
    ck_assert_int_eq(y->type, BP_TYPE_F32);
    assert_nb(y, 4, 128, 896, 5376);
    ck_assert_str_eq(y->name, "mul_mat(w,x)");
    /* a quantized weight with an f16 activation still gives f32 */
    struct bp_tensor *wq = T(BP_TYPE_Q4_0, 64, 8, 1, 1, "wq");
    struct bp_tensor *xh = T(BP_TYPE_F16, 64, 3, 1, 1, "xh");
    struct bp_tensor *yq = bp_mul_mat(ctx, wq, xh);
    assert_ne(yq, 8, 3, 1, 1);
    ck_assert_int_eq(yq->type, BP_TYPE_F32);
}
END_TEST

START_TEST(test_mul_mat_rejects_k_mismatch_with_the_documented_sentence)
{
    struct bp_tensor *w = T(BP_TYPE_F16, 4096, 4096, 1, 1, "blk.0.attn_q");
    struct bp_tensor *x = T(BP_TYPE_F32, 4000, 7, 1, 1, "inp");
    ck_assert_ptr_null(bp_mul_mat(ctx, w, x));
    ck_assert_str_eq(bp_last_error(), "MUL_MAT: w 'blk.0.attn_q' [4096, 4096, 1, 1] and x 'inp' "
                                      "[4000, 7, 1, 1] disagree in dim 0 (K); they must be equal.");
    ck_assert_int_eq(bp_context_status(ctx), BP_ERR_SHAPE);
}
END_TEST

START_TEST(test_mul_mat_rejects_bad_broadcast_and_quantized_x)
{
    struct bp_tensor *w = T(BP_TYPE_F32, 16, 8, 4, 1, "w");
    ASSERT_REJECTED(bp_mul_mat(ctx, w, T(BP_TYPE_F32, 16, 3, 6, 1, "x")), BP_ERR_SHAPE, "MUL_MAT",
                    "w 'w' [16, 8, 4, 1]", "x 'x' [16, 3, 6, 1]", "dim 2");
    w = T(BP_TYPE_F32, 16, 8, 1, 2, "w");
    ASSERT_REJECTED(bp_mul_mat(ctx, w, T(BP_TYPE_F32, 16, 3, 1, 3, "x")), BP_ERR_SHAPE, "MUL_MAT",
                    "dim 3");
    w = T(BP_TYPE_F32, 64, 8, 1, 1, "w");
    ASSERT_REJECTED(bp_mul_mat(ctx, w, T(BP_TYPE_Q8_0, 64, 3, 1, 1, "xq")), BP_ERR_INVALID_ARGUMENT,
                    "MUL_MAT", "x 'xq' [64, 3, 1, 1]", "q8_0");
}
END_TEST

START_TEST(test_add_and_mul_repeat_b_over_a)
{
    struct bp_tensor *a = T(BP_TYPE_F16, 8, 4, 6, 2, "a");
    struct bp_tensor *b = T(BP_TYPE_F32, 8, 1, 3, 1, "b");
    struct bp_tensor *s = bp_add(ctx, a, b);
    assert_ne(s, 8, 4, 6, 2);
    ck_assert_int_eq(s->type, BP_TYPE_F16);
    assert_nb(s, 2, 16, 64, 384);
    ck_assert_int_eq(s->op, BP_OP_ADD);
    struct bp_tensor *m = bp_mul(ctx, a, b);
    ck_assert_int_eq(m->op, BP_OP_MUL);
    ck_assert_ptr_eq(m->src[1], b);
}
END_TEST

START_TEST(test_add_and_mul_reject_non_repeating_and_int)
{
    struct bp_tensor *a = T(BP_TYPE_F32, 8, 4, 1, 1, "a");
    ASSERT_REJECTED(bp_add(ctx, a, T(BP_TYPE_F32, 8, 3, 1, 1, "b")), BP_ERR_SHAPE, "ADD",
                    "a 'a' [8, 4, 1, 1]", "b 'b' [8, 3, 1, 1]", "dim 1");
    a = T(BP_TYPE_F32, 8, 4, 1, 1, "a");
    ASSERT_REJECTED(bp_mul(ctx, a, T(BP_TYPE_F32, 16, 4, 1, 1, "b")), BP_ERR_SHAPE, "MUL", "dim 0");
    a = T(BP_TYPE_I32, 8, 4, 1, 1, "a");
    ASSERT_REJECTED(bp_add(ctx, a, T(BP_TYPE_F32, 8, 4, 1, 1, "b")), BP_ERR_INVALID_ARGUMENT, "ADD", "i32");
    a = T(BP_TYPE_F32, 8, 4, 1, 1, "a");
    ASSERT_REJECTED(bp_mul(ctx, a, T(BP_TYPE_Q8_0, 32, 4, 1, 1, "b")), BP_ERR_INVALID_ARGUMENT, "MUL", "q8_0");
}
END_TEST

START_TEST(test_scale_norm_silu_gelu_keep_shape_and_store_params)
{
    struct bp_tensor *x = T(BP_TYPE_F16, 6, 5, 1, 1, "x");
    struct bp_tensor *s = bp_scale(ctx, x, 0.125f, -3.5f);
    assert_ne(s, 6, 5, 1, 1);
    ck_assert_int_eq(s->type, BP_TYPE_F16);
    ck_assert_float_eq(bp_op_param_f32(s, 0), 0.125f);
    ck_assert_float_eq(bp_op_param_f32(s, 1), -3.5f);
    struct bp_tensor *n = bp_rms_norm(ctx, x, 1e-6f);
    ck_assert_int_eq(n->op, BP_OP_RMS_NORM);
    ck_assert_float_eq(bp_op_param_f32(n, 0), 1e-6f);
    struct bp_tensor *si = bp_silu(ctx, x);
    struct bp_tensor *ge = bp_gelu(ctx, x);
    assert_ne(si, 6, 5, 1, 1);
    assert_ne(ge, 6, 5, 1, 1);
    ck_assert_int_eq(si->op, BP_OP_SILU);
    ck_assert_int_eq(ge->op, BP_OP_GELU);
    ck_assert_int_eq(ge->type, BP_TYPE_F16);
    /* bf16 passes the constructor; devices decide in supports_op */
    struct bp_tensor *hb = bp_silu(ctx, T(BP_TYPE_BF16, 6, 5, 1, 1, "xb"));
    ck_assert_int_eq(hb->type, BP_TYPE_BF16);
}
END_TEST

START_TEST(test_unary_ops_reject_int_and_bad_eps)
{
    ASSERT_REJECTED(bp_silu(ctx, T(BP_TYPE_I32, 4, 1, 1, 1, "ids")), BP_ERR_INVALID_ARGUMENT, "SILU",
                    "x 'ids' [4, 1, 1, 1]", "i32");
    ASSERT_REJECTED(bp_gelu(ctx, T(BP_TYPE_Q4_0, 32, 1, 1, 1, "q")), BP_ERR_INVALID_ARGUMENT, "GELU", "q4_0");
    ASSERT_REJECTED(bp_scale(ctx, T(BP_TYPE_I32, 4, 1, 1, 1, "i"), 1, 0), BP_ERR_INVALID_ARGUMENT, "SCALE");
    ASSERT_REJECTED(bp_rms_norm(ctx, T(BP_TYPE_F32, 4, 1, 1, 1, "h"), -1.0f), BP_ERR_INVALID_ARGUMENT,
                    "RMS_NORM", "eps", "'h'");
    ASSERT_REJECTED(bp_rms_norm(ctx, T(BP_TYPE_F32, 4, 1, 1, 1, "h"), NAN), BP_ERR_INVALID_ARGUMENT, "RMS_NORM");
}
END_TEST

START_TEST(test_soft_max_gives_f32_with_optional_mask)
{
    struct bp_tensor *x = T(BP_TYPE_F16, 10, 4, 6, 1, "kq");
    struct bp_tensor *mask = T(BP_TYPE_F16, 10, 8, 3, 1, "mask");
    struct bp_tensor *p = bp_soft_max(ctx, x, mask, 0.25f);
    assert_ne(p, 10, 4, 6, 1);
    ck_assert_int_eq(p->type, BP_TYPE_F32);
    assert_nb(p, 4, 40, 160, 960);
    ck_assert_ptr_eq(p->src[1], mask);
    ck_assert_float_eq(bp_op_param_f32(p, 0), 0.25f);
    struct bp_tensor *q = bp_soft_max(ctx, x, NULL, 1.0f);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_null(q->src[1]);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);
}
END_TEST

START_TEST(test_soft_max_rejects_bad_mask)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 10, 4, 6, 1, "kq");
    ASSERT_REJECTED(bp_soft_max(ctx, x, T(BP_TYPE_F32, 10, 3, 1, 1, "mask"), 1), BP_ERR_SHAPE, "SOFT_MAX",
                    "x 'kq' [10, 4, 6, 1]", "mask 'mask' [10, 3, 1, 1]", "rows");
    x = T(BP_TYPE_F32, 10, 4, 6, 1, "kq");
    ASSERT_REJECTED(bp_soft_max(ctx, x, T(BP_TYPE_F32, 9, 4, 1, 1, "mask"), 1), BP_ERR_SHAPE, "SOFT_MAX",
                    "dim 0");
    x = T(BP_TYPE_F32, 10, 4, 6, 1, "kq");
    ASSERT_REJECTED(bp_soft_max(ctx, x, T(BP_TYPE_F32, 10, 4, 4, 1, "mask"), 1), BP_ERR_SHAPE, "SOFT_MAX",
                    "[10, 4, 4, 1]");
    x = T(BP_TYPE_F32, 10, 4, 6, 1, "kq");
    ASSERT_REJECTED(bp_soft_max(ctx, x, T(BP_TYPE_I32, 10, 4, 1, 1, "mask"), 1), BP_ERR_INVALID_ARGUMENT,
                    "SOFT_MAX", "i32");
}
END_TEST

START_TEST(test_rope_keeps_shape_and_stores_params)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 64, 8, 5, 1, "q");
    struct bp_tensor *pos = T(BP_TYPE_I32, 5, 1, 1, 1, "pos");
    struct bp_tensor *r = bp_rope(ctx, x, pos, 32, BP_ROPE_MODE_NEOX, 10000.0f, 0.5f);
    assert_ne(r, 64, 8, 5, 1);
    ck_assert_int_eq(r->type, BP_TYPE_F32);
    ck_assert_int_eq(bp_op_param_i32(r, 0), 32);
    ck_assert_int_eq(bp_op_param_i32(r, 1), BP_ROPE_MODE_NEOX);
    ck_assert_float_eq(bp_op_param_f32(r, 2), 10000.0f);
    ck_assert_float_eq(bp_op_param_f32(r, 3), 0.5f);
    ck_assert_ptr_eq(r->src[1], pos);
}
END_TEST

START_TEST(test_rope_rejects_bad_dims_positions_and_mode)
{
#define X() T(BP_TYPE_F32, 64, 8, 5, 1, "q")
#define P() T(BP_TYPE_I32, 5, 1, 1, 1, "pos")
    ASSERT_REJECTED(bp_rope(ctx, X(), P(), 33, 0, 10000, 1), BP_ERR_INVALID_ARGUMENT, "ROPE", "n_dims is 33",
                    "x 'q' [64, 8, 5, 1]");
    ASSERT_REJECTED(bp_rope(ctx, X(), P(), 66, 0, 10000, 1), BP_ERR_INVALID_ARGUMENT, "ROPE", "66");
    ASSERT_REJECTED(bp_rope(ctx, X(), P(), 0, 0, 10000, 1), BP_ERR_INVALID_ARGUMENT, "ROPE", "n_dims");
    ASSERT_REJECTED(bp_rope(ctx, X(), P(), 64, 1, 10000, 1), BP_ERR_INVALID_ARGUMENT, "ROPE", "mode is 1");
    ASSERT_REJECTED(bp_rope(ctx, X(), P(), 64, 0, 0, 1), BP_ERR_INVALID_ARGUMENT, "ROPE", "freq_base");
    ASSERT_REJECTED(bp_rope(ctx, X(), T(BP_TYPE_I32, 4, 1, 1, 1, "pos"), 64, 0, 10000, 1), BP_ERR_SHAPE,
                    "ROPE", "x 'q' [64, 8, 5, 1]", "pos 'pos' [4, 1, 1, 1]");
    ASSERT_REJECTED(bp_rope(ctx, X(), T(BP_TYPE_I32, 5, 2, 1, 1, "pos"), 64, 0, 10000, 1), BP_ERR_SHAPE,
                    "ROPE", "[5, 2, 1, 1]");
    ASSERT_REJECTED(bp_rope(ctx, X(), T(BP_TYPE_F32, 5, 1, 1, 1, "pos"), 64, 0, 10000, 1),
                    BP_ERR_INVALID_ARGUMENT, "ROPE", "i32");
    ASSERT_REJECTED(bp_rope(ctx, T(BP_TYPE_F32, 64, 8, 5, 2, "q"), P(), 64, 0, 10000, 1), BP_ERR_SHAPE,
                    "ROPE", "[64, 8, 5, 2]");
#undef X
#undef P
}
END_TEST

START_TEST(test_flash_attn_ext_gives_heads_before_tokens)
{
    struct bp_tensor *q = T(BP_TYPE_F32, 64, 5, 8, 2, "q");
    struct bp_tensor *k = T(BP_TYPE_F16, 64, 40, 2, 2, "k");
    struct bp_tensor *v = T(BP_TYPE_F16, 32, 40, 2, 2, "v");
    struct bp_tensor *m = T(BP_TYPE_F16, 40, 8, 1, 1, "kq_mask");
    struct bp_tensor *o = bp_flash_attn_ext(ctx, q, k, v, m, 0.125f);
    assert_ne(o, 32, 8, 5, 2); /* [Dv, H, n_q, B] */
    ck_assert_int_eq(o->type, BP_TYPE_F32);
    assert_nb(o, 4, 128, 1024, 5120);
    ck_assert_ptr_eq(o->src[3], m);
    ck_assert_float_eq(bp_op_param_f32(o, 0), 0.125f);
    struct bp_tensor *o2 = bp_flash_attn_ext(ctx, q, k, v, NULL, 1.0f);
    ck_assert_ptr_nonnull(o2);
    ck_assert_ptr_null(o2->src[3]);
}
END_TEST

START_TEST(test_flash_attn_ext_rejects_mismatches)
{
#define Q() T(BP_TYPE_F32, 64, 5, 8, 2, "q")
#define K() T(BP_TYPE_F16, 64, 40, 2, 2, "k")
#define V() T(BP_TYPE_F16, 32, 40, 2, 2, "v")
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), T(BP_TYPE_F16, 64, 40, 3, 2, "k"), T(BP_TYPE_F16, 32, 40, 3, 2, "v"),
                                      NULL, 1), BP_ERR_SHAPE, "FLASH_ATTN_EXT", "q 'q' [64, 5, 8, 2]",
                    "k 'k' [64, 40, 3, 2]", "multiple");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), T(BP_TYPE_F16, 32, 40, 2, 2, "k"), V(), NULL, 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "dim 0");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), T(BP_TYPE_F16, 32, 39, 2, 2, "v"), NULL, 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "k 'k' [64, 40, 2, 2]", "v 'v' [32, 39, 2, 2]");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), T(BP_TYPE_F16, 64, 40, 2, 1, "k"), V(), NULL, 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "batch");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), T(BP_TYPE_F16, 32, 40, 2, 1, "v"), NULL, 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "batch");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), V(), T(BP_TYPE_F16, 39, 8, 1, 1, "m"), 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "mask 'm' [39, 8, 1, 1]");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), V(), T(BP_TYPE_F16, 40, 4, 1, 1, "m"), 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "mask 'm' [40, 4, 1, 1]");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), V(), T(BP_TYPE_F16, 40, 8, 8, 1, "m"), 1), BP_ERR_SHAPE,
                    "FLASH_ATTN_EXT", "2-D");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, T(BP_TYPE_F16, 64, 5, 8, 2, "q"), K(), V(), NULL, 1),
                    BP_ERR_INVALID_ARGUMENT, "FLASH_ATTN_EXT", "q 'q'", "f16");
    ASSERT_REJECTED(bp_flash_attn_ext(ctx, Q(), K(), V(), T(BP_TYPE_I32, 40, 8, 1, 1, "m"), 1),
                    BP_ERR_INVALID_ARGUMENT, "FLASH_ATTN_EXT", "i32");
#undef Q
#undef K
#undef V
}
END_TEST

/* -------------------------------------------------------- ABI 1.2's ops */

static struct bp_rope_ext_params yarn_params(void)
{
    return (struct bp_rope_ext_params){ .n_dims = 32, .mode = BP_ROPE_MODE_NEOX, .freq_base = 10000.0f,
                                        .freq_scale = 0.25f, .n_ctx_orig = 4096, .ext_factor = 1.0f,
                                        .attn_factor = 0.9f, .beta_fast = 32.0f, .beta_slow = 1.0f };
}

START_TEST(test_rope_ext_keeps_shape_and_stores_params_and_factors)
{
    struct bp_tensor *x = T(BP_TYPE_F16, 64, 8, 5, 1, "k");
    struct bp_tensor *pos = T(BP_TYPE_I32, 5, 1, 1, 1, "pos");
    struct bp_tensor *ff = T(BP_TYPE_F32, 16, 1, 1, 1, "rope_freqs");
    const struct bp_rope_ext_params p = yarn_params();
    struct bp_tensor *r = bp_rope_ext(ctx, x, pos, ff, &p);
    assert_ne(r, 64, 8, 5, 1);
    ck_assert_int_eq(r->op, BP_OP_ROPE_EXT);
    ck_assert_int_eq(r->type, BP_TYPE_F16);
    ck_assert_ptr_eq(r->src[1], pos);
    ck_assert_ptr_eq(r->src[2], ff);
    ck_assert_int_eq(bp_op_param_i32(r, 0), 32);
    ck_assert_int_eq(bp_op_param_i32(r, 1), BP_ROPE_MODE_NEOX);
    ck_assert_float_eq(bp_op_param_f32(r, 2), 10000.0f);
    ck_assert_float_eq(bp_op_param_f32(r, 3), 0.25f);
    ck_assert_int_eq(bp_op_param_i32(r, 4), 4096);
    ck_assert_float_eq(bp_op_param_f32(r, 5), 1.0f);
    ck_assert_float_eq(bp_op_param_f32(r, 6), 0.9f);
    ck_assert_float_eq(bp_op_param_f32(r, 7), 32.0f);
    ck_assert_float_eq(bp_op_param_f32(r, 8), 1.0f);
    /* Without factors and YaRN: src2 stays NULL, n_ctx_orig may be 0. */
    struct bp_rope_ext_params plain = p;
    plain.ext_factor = 0.0f;
    plain.n_ctx_orig = 0;
    struct bp_tensor *r2 = bp_rope_ext(ctx, x, pos, NULL, &plain);
    ck_assert_ptr_nonnull(r2);
    ck_assert_ptr_null(r2->src[2]);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);
}
END_TEST

START_TEST(test_rope_ext_rejects_bad_factors_and_scaling)
{
#define X() T(BP_TYPE_F32, 64, 8, 5, 1, "q")
#define P() T(BP_TYPE_I32, 5, 1, 1, 1, "pos")
    struct bp_rope_ext_params p = yarn_params();
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, NULL), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "NULL");
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), T(BP_TYPE_F32, 17, 1, 1, 1, "rope_freqs"), &p), BP_ERR_SHAPE,
                    "ROPE_EXT", "freq_factors 'rope_freqs' [17, 1, 1, 1] is f32", "must be f32 [16]");
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), T(BP_TYPE_F16, 16, 1, 1, 1, "rope_freqs"), &p), BP_ERR_SHAPE,
                    "ROPE_EXT", "is f16");
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), T(BP_TYPE_F32, 16, 2, 1, 1, "rope_freqs"), &p), BP_ERR_SHAPE,
                    "ROPE_EXT", "[16, 2, 1, 1]");
    p.n_ctx_orig = 0; /* YaRN needs the original context */
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "n_ctx_orig 0");
    p = yarn_params();
    p.beta_fast = 0.0f;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "beta");
    p = yarn_params();
    p.beta_slow = -1.0f;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "beta");
    p = yarn_params();
    p.freq_scale = 0.0f; /* YaRN's magnitude takes ln(1 / freq_scale) */
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "freq_scale");
    p = yarn_params();
    p.attn_factor = NAN;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "finite");
    p = yarn_params();
    p.ext_factor = INFINITY;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "finite");
    /* ROPE's own rules, in ROPE_EXT's name */
    p = yarn_params();
    p.n_dims = 33;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "n_dims is 33");
    p = yarn_params();
    p.mode = 1;
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), P(), NULL, &p), BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "mode is 1");
    p = yarn_params();
    ASSERT_REJECTED(bp_rope_ext(ctx, X(), T(BP_TYPE_I32, 4, 1, 1, 1, "pos"), NULL, &p), BP_ERR_SHAPE,
                    "ROPE_EXT", "pos 'pos' [4, 1, 1, 1]");
    ASSERT_REJECTED(bp_rope_ext(ctx, T(BP_TYPE_I32, 64, 8, 5, 1, "q"), P(), NULL, &p),
                    BP_ERR_INVALID_ARGUMENT, "ROPE_EXT", "i32");
#undef X
#undef P
}
END_TEST

START_TEST(test_tanh_keeps_shape_and_type_and_rejects_int)
{
    struct bp_tensor *x = T(BP_TYPE_BF16, 7, 3, 2, 1, "logits");
    struct bp_tensor *y = bp_tanh(ctx, x);
    assert_ne(y, 7, 3, 2, 1);
    ck_assert_int_eq(y->op, BP_OP_TANH);
    ck_assert_int_eq(y->type, BP_TYPE_BF16);
    ck_assert_ptr_eq(y->src[0], x);
    ASSERT_REJECTED(bp_tanh(ctx, T(BP_TYPE_I32, 4, 1, 1, 1, "ids")), BP_ERR_INVALID_ARGUMENT, "TANH",
                    "x 'ids' [4, 1, 1, 1]", "i32");
    ASSERT_REJECTED(bp_tanh(ctx, T(BP_TYPE_Q8_0, 32, 1, 1, 1, "w")), BP_ERR_INVALID_ARGUMENT, "TANH", "q8_0");
}
END_TEST

START_TEST(test_flash_attn_softcap_stores_scale_and_cap)
{
    struct bp_tensor *q = T(BP_TYPE_F32, 64, 5, 8, 2, "q");
    struct bp_tensor *k = T(BP_TYPE_F16, 64, 40, 2, 2, "k");
    struct bp_tensor *v = T(BP_TYPE_F16, 32, 40, 2, 2, "v");
    struct bp_tensor *m = T(BP_TYPE_F16, 40, 8, 1, 1, "kq_mask");
    struct bp_tensor *o = bp_flash_attn_softcap(ctx, q, k, v, m, 0.125f, 50.0f);
    assert_ne(o, 32, 8, 5, 2);
    ck_assert_int_eq(o->op, BP_OP_FLASH_ATTN_SOFTCAP);
    ck_assert_int_eq(o->type, BP_TYPE_F32);
    ck_assert_ptr_eq(o->src[3], m);
    ck_assert_float_eq(bp_op_param_f32(o, 0), 0.125f);
    ck_assert_float_eq(bp_op_param_f32(o, 1), 50.0f);
}
END_TEST

START_TEST(test_flash_attn_softcap_rejects_bad_caps_and_shapes)
{
#define Q() T(BP_TYPE_F32, 64, 5, 8, 2, "q")
#define K() T(BP_TYPE_F16, 64, 40, 2, 2, "k")
#define V() T(BP_TYPE_F16, 32, 40, 2, 2, "v")
    const float bad[] = { 0.0f, -50.0f, INFINITY, NAN };
    for (int i = 0; i < 4; i++)
        ASSERT_REJECTED(bp_flash_attn_softcap(ctx, Q(), K(), V(), NULL, 0.125f, bad[i]), BP_ERR_INVALID_ARGUMENT,
                        "FLASH_ATTN_SOFTCAP", "softcap", "finite and positive");
    ASSERT_REJECTED(bp_flash_attn_softcap(ctx, Q(), T(BP_TYPE_F16, 32, 40, 2, 2, "k"), V(), NULL, 1, 50),
                    BP_ERR_SHAPE, "FLASH_ATTN_SOFTCAP", "dim 0");
    ASSERT_REJECTED(bp_flash_attn_softcap(ctx, Q(), K(), V(), T(BP_TYPE_F16, 40, 4, 1, 1, "m"), 1, 50),
                    BP_ERR_SHAPE, "FLASH_ATTN_SOFTCAP", "mask 'm' [40, 4, 1, 1]");
    ASSERT_REJECTED(bp_flash_attn_softcap(ctx, T(BP_TYPE_F16, 64, 5, 8, 2, "q"), K(), V(), NULL, 1, 50),
                    BP_ERR_INVALID_ARGUMENT, "FLASH_ATTN_SOFTCAP", "q 'q'", "f16");
#undef Q
#undef K
#undef V
}
END_TEST

/* ------------------------------------------------------------------ views */

START_TEST(test_reshape_aliases_the_owner)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 6, 4, 1, 1, "x");
    struct bp_tensor *r = bp_reshape(ctx, x, 2, (int64_t[]){3, 8});
    assert_ne(r, 3, 8, 1, 1);
    assert_nb(r, 4, 12, 96, 96);
    ck_assert_int_eq(r->op, BP_OP_RESHAPE);
    ck_assert_ptr_eq(r->view_src, x);
    ck_assert_uint_eq(r->view_offs, 0);
    ck_assert_ptr_eq(r->src[0], x);
    /* a reshape of a reshape still points at the owner of the memory */
    struct bp_tensor *r2 = bp_reshape(ctx, r, 1, (int64_t[]){24});
    assert_ne(r2, 24, 1, 1, 1);
    ck_assert_ptr_eq(r2->view_src, x);
    ck_assert_ptr_eq(r2->src[0], r);
}
END_TEST

START_TEST(test_reshape_rejects_count_contiguity_and_blocks)
{
    ASSERT_REJECTED(bp_reshape(ctx, T(BP_TYPE_F32, 6, 4, 1, 1, "x"), 2, (int64_t[]){5, 5}), BP_ERR_SHAPE,
                    "RESHAPE", "x 'x' [6, 4, 1, 1]", "[5, 5, 1, 1]", "24", "25");
    struct bp_tensor *t = bp_transpose(ctx, T(BP_TYPE_F32, 6, 4, 1, 1, "x"));
    bp_tensor_set_name(t, "xt");
    ASSERT_REJECTED(bp_reshape(ctx, t, 1, (int64_t[]){24}), BP_ERR_SHAPE, "RESHAPE", "'xt' [4, 6, 1, 1]",
                    "not contiguous");
    ASSERT_REJECTED(bp_reshape(ctx, T(BP_TYPE_Q4_0, 64, 2, 1, 1, "w"), 2, (int64_t[]){16, 8}), BP_ERR_SHAPE,
                    "RESHAPE", "block size 32");
    ASSERT_REJECTED(bp_reshape(ctx, T(BP_TYPE_F32, 6, 4, 1, 1, "x"), 0, (int64_t[]){24}),
                    BP_ERR_INVALID_ARGUMENT, "RESHAPE", "n_dims");
}
END_TEST

START_TEST(test_view_offsets_accumulate_to_the_owner)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 10, 6, 4, 1, "cache"); /* nb = 4, 40, 240, 960 */
    struct bp_tensor *v = bp_view(ctx, x, 2, (int64_t[]){4, 3}, (size_t[]){0, 40}, 240 + 8);
    assert_ne(v, 4, 3, 1, 1);
    assert_nb(v, 4, 40, 120, 120);
    ck_assert_ptr_eq(v->view_src, x);
    ck_assert_uint_eq(v->view_offs, 248);
    struct bp_tensor *vv = bp_view(ctx, v, 1, (int64_t[]){2}, NULL, 40 + 4);
    ck_assert_ptr_eq(vv->view_src, x);
    ck_assert_uint_eq(vv->view_offs, 248 + 44);
    assert_nb(vv, 4, 8, 8, 8);
    ck_assert_ptr_eq(vv->src[0], v);
    /* the last byte of the source is reachable */
    struct bp_tensor *last = bp_view(ctx, x, 1, (int64_t[]){1}, NULL, 960 - 4);
    ck_assert_ptr_nonnull(last);
    /* a 4-D view keeps the given strides */
    struct bp_tensor *v4 = bp_view(ctx, x, 4, (int64_t[]){2, 2, 2, 2}, (size_t[]){0, 8, 40, 240}, 0);
    assert_nb(v4, 4, 8, 40, 240);
}
END_TEST

START_TEST(test_view_rejects_out_of_bounds_and_misaligned)
{
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 2, (int64_t[]){10, 6}, (size_t[]){0, 40}, 4),
                    BP_ERR_SHAPE, "VIEW", "x 'x' [10, 6, 1, 1]", "[10, 6, 1, 1]", "offset 4", "240 bytes");
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 1, (int64_t[]){1}, NULL, 240),
                    BP_ERR_SHAPE, "VIEW", "'x'");
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 2, (int64_t[]){2, 2}, (size_t[]){0, 41}, 0),
                    BP_ERR_INVALID_ARGUMENT, "VIEW", "nb[1]", "'x'");
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 1, (int64_t[]){2}, NULL, 2),
                    BP_ERR_INVALID_ARGUMENT, "VIEW", "offset 2");
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 2, (int64_t[]){2, 2}, NULL, 0),
                    BP_ERR_INVALID_ARGUMENT, "VIEW", "nb is NULL");
    ASSERT_REJECTED(bp_view(ctx, T(BP_TYPE_F32, 10, 6, 1, 1, "x"), 2, (int64_t[]){2, 2},
                            (size_t[]){0, (SIZE_MAX / 2) & ~(size_t)3}, 0),
                    BP_ERR_SHAPE, "VIEW");
}
END_TEST

START_TEST(test_permute_moves_shape_and_strides)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 2, 3, 4, 5, "x"); /* nb = 4, 8, 24, 96 */
    struct bp_tensor *p = bp_permute(ctx, x, 1, 2, 0, 3);
    /* source dim i goes to axis[i]: ne[1] = 2, ne[2] = 3, ne[0] = 4 */
    assert_ne(p, 4, 2, 3, 5);
    assert_nb(p, 24, 4, 8, 96);
    ck_assert_int_eq(p->op, BP_OP_PERMUTE);
    ck_assert_int_eq(p->op_params[0], 1);
    ck_assert_int_eq(p->op_params[1], 2);
    ck_assert_int_eq(p->op_params[2], 0);
    ck_assert_int_eq(p->op_params[3], 3);
    ck_assert_ptr_eq(p->view_src, x);
    ck_assert(!bp_is_contiguous(p));
    struct bp_tensor *t = bp_transpose(ctx, x);
    assert_ne(t, 3, 2, 4, 5);
    assert_nb(t, 8, 4, 24, 96);
    ck_assert_int_eq(t->op, BP_OP_TRANSPOSE);
    /* contiguous copy of a permuted view: packed strides of the new shape */
    struct bp_tensor *c = bp_cont(ctx, p);
    assert_ne(c, 4, 2, 3, 5);
    assert_nb(c, 4, 16, 32, 96);
    ck_assert_ptr_null(c->view_src);
    ck_assert_int_eq(c->op, BP_OP_CONT);
}
END_TEST

START_TEST(test_permute_rejects_non_permutations_and_moving_blocks)
{
    ASSERT_REJECTED(bp_permute(ctx, T(BP_TYPE_F32, 2, 3, 4, 5, "x"), 0, 0, 2, 3), BP_ERR_INVALID_ARGUMENT,
                    "PERMUTE", "(0, 0, 2, 3)", "x 'x' [2, 3, 4, 5]");
    ASSERT_REJECTED(bp_permute(ctx, T(BP_TYPE_F32, 2, 3, 4, 5, "x"), 0, 1, 2, 4), BP_ERR_INVALID_ARGUMENT,
                    "PERMUTE", "(0, 1, 2, 4)");
    ASSERT_REJECTED(bp_transpose(ctx, T(BP_TYPE_Q8_0, 32, 3, 1, 1, "w")), BP_ERR_INVALID_ARGUMENT,
                    "TRANSPOSE", "q8_0");
    /* a quantized tensor may still permute its outer dims */
    struct bp_tensor *p = bp_permute(ctx, T(BP_TYPE_Q8_0, 32, 3, 2, 1, "w"), 0, 2, 1, 3);
    assert_ne(p, 32, 2, 3, 1);
}
END_TEST

START_TEST(test_cpy_result_is_a_view_of_dst)
{
    struct bp_tensor *cache = T(BP_TYPE_F16, 8, 16, 1, 1, "k_cache"); /* nb = 2, 16 */
    struct bp_tensor *slot = bp_view(ctx, cache, 2, (int64_t[]){8, 3}, (size_t[]){0, 16}, 5 * 16);
    struct bp_tensor *k = T(BP_TYPE_F32, 8, 3, 1, 1, "k");
    struct bp_tensor *c = bp_cpy(ctx, k, slot);
    assert_ne(c, 8, 3, 1, 1);
    ck_assert_int_eq(c->type, BP_TYPE_F16);
    assert_nb(c, 2, 16, 48, 48);
    ck_assert_int_eq(c->op, BP_OP_CPY);
    ck_assert_ptr_eq(c->src[0], k);
    ck_assert_ptr_eq(c->src[1], slot);
    ck_assert_ptr_eq(c->view_src, cache);
    ck_assert_uint_eq(c->view_offs, 80);
    /* element counts match with different shapes */
    ck_assert_ptr_nonnull(bp_cpy(ctx, T(BP_TYPE_BF16, 6, 4, 1, 1, "a"), T(BP_TYPE_F32, 24, 1, 1, 1, "b")));
}
END_TEST

START_TEST(test_cpy_rejects_count_and_types)
{
    ASSERT_REJECTED(bp_cpy(ctx, T(BP_TYPE_F32, 6, 4, 1, 1, "a"), T(BP_TYPE_F16, 25, 1, 1, 1, "b")),
                    BP_ERR_SHAPE, "CPY", "src 'a' [6, 4, 1, 1]", "dst 'b' [25, 1, 1, 1]", "24", "25");
    ASSERT_REJECTED(bp_cpy(ctx, T(BP_TYPE_I32, 4, 1, 1, 1, "a"), T(BP_TYPE_F32, 4, 1, 1, 1, "b")),
                    BP_ERR_INVALID_ARGUMENT, "CPY", "src 'a'", "i32");
    ASSERT_REJECTED(bp_cpy(ctx, T(BP_TYPE_F32, 32, 1, 1, 1, "a"), T(BP_TYPE_Q8_0, 32, 1, 1, 1, "b")),
                    BP_ERR_INVALID_ARGUMENT, "CPY", "dst 'b'", "q8_0");
}
END_TEST

START_TEST(test_set_rows_result_is_a_view_of_dst)
{
    struct bp_tensor *dst = T(BP_TYPE_F16, 16, 32, 4, 1, "v_cache");
    struct bp_tensor *val = T(BP_TYPE_F32, 16, 3, 4, 1, "v_cur");
    struct bp_tensor *ids = T(BP_TYPE_I32, 3, 2, 1, 1, "slots");
    struct bp_tensor *s = bp_set_rows(ctx, dst, val, ids);
    assert_ne(s, 16, 32, 4, 1);
    ck_assert_int_eq(s->type, BP_TYPE_F16);
    assert_nb(s, 2, 32, 1024, 4096);
    ck_assert_int_eq(s->op, BP_OP_SET_ROWS);
    ck_assert_ptr_eq(s->view_src, dst);
    ck_assert_uint_eq(s->view_offs, 0);
    ck_assert_ptr_eq(s->src[0], dst);
    ck_assert_ptr_eq(s->src[1], val);
    ck_assert_ptr_eq(s->src[2], ids);
}
END_TEST

START_TEST(test_set_rows_rejects_mismatches)
{
#define D() T(BP_TYPE_F16, 16, 32, 4, 1, "v_cache")
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F32, 8, 3, 4, 1, "v_cur"), T(BP_TYPE_I32, 3, 1, 1, 1, "ids")),
                    BP_ERR_SHAPE, "SET_ROWS", "dst 'v_cache' [16, 32, 4, 1]", "values 'v_cur' [8, 3, 4, 1]");
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F32, 16, 3, 4, 1, "v_cur"), T(BP_TYPE_I32, 2, 1, 1, 1, "ids")),
                    BP_ERR_SHAPE, "SET_ROWS", "values 'v_cur' [16, 3, 4, 1]", "ids 'ids' [2, 1, 1, 1]");
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F32, 16, 3, 4, 1, "v_cur"), T(BP_TYPE_I32, 3, 3, 1, 1, "ids")),
                    BP_ERR_SHAPE, "SET_ROWS", "ids 'ids' [3, 3, 1, 1]");
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F32, 16, 3, 2, 1, "v_cur"), T(BP_TYPE_I32, 3, 1, 1, 1, "ids")),
                    BP_ERR_SHAPE, "SET_ROWS", "dim 2");
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F16, 16, 3, 4, 1, "v_cur"), T(BP_TYPE_I32, 3, 1, 1, 1, "ids")),
                    BP_ERR_INVALID_ARGUMENT, "SET_ROWS", "values 'v_cur'", "f16");
    ASSERT_REJECTED(bp_set_rows(ctx, D(), T(BP_TYPE_F32, 16, 3, 4, 1, "v_cur"), T(BP_TYPE_F32, 3, 1, 1, 1, "ids")),
                    BP_ERR_INVALID_ARGUMENT, "SET_ROWS", "ids 'ids'", "i32");
    ASSERT_REJECTED(bp_set_rows(ctx, T(BP_TYPE_I32, 16, 32, 4, 1, "c"), T(BP_TYPE_F32, 16, 3, 4, 1, "v"),
                                T(BP_TYPE_I32, 3, 1, 1, 1, "ids")),
                    BP_ERR_INVALID_ARGUMENT, "SET_ROWS", "dst 'c'");
#undef D
}
END_TEST

/* ------------------------------------------------ NULL and sticky errors */

START_TEST(test_null_inputs_give_null_and_keep_the_first_error)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 4, 3, 1, 1, "x");
    /* A NULL input alone is not a new error. */
    ck_assert_ptr_null(bp_add(ctx, x, NULL));
    ck_assert_ptr_null(bp_mul_mat(ctx, NULL, x));
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);

    struct bp_tensor *w = T(BP_TYPE_F32, 5, 3, 1, 1, "w");
    struct bp_tensor *bad = bp_mul_mat(ctx, w, x); /* K: 5 vs 4 */
    ck_assert_ptr_null(bad);
    char first[1024];
    strcpy(first, bp_last_error());
    ck_assert_ptr_nonnull(strstr(first, "MUL_MAT"));
    /* The rest of the graph builds on NULL without new sentences. */
    struct bp_tensor *y = bp_silu(ctx, bp_add(ctx, bad, x));
    ck_assert_ptr_null(y);
    ck_assert_str_eq(bp_last_error(), first);
    /* A second real failure keeps the context's first status. */
    ck_assert_ptr_null(bp_add(ctx, x, T(BP_TYPE_I32, 4, 3, 1, 1, "i")));
    ck_assert_int_eq(bp_context_status(ctx), BP_ERR_SHAPE);
    /* Every constructor passes NULL through. */
    ck_assert_ptr_null(bp_get_rows(ctx, NULL, x));
    ck_assert_ptr_null(bp_scale(ctx, NULL, 1, 0));
    ck_assert_ptr_null(bp_rms_norm(ctx, NULL, 1e-5f));
    ck_assert_ptr_null(bp_soft_max(ctx, NULL, NULL, 1));
    ck_assert_ptr_null(bp_rope(ctx, NULL, x, 2, 0, 1e4f, 1));
    ck_assert_ptr_null(bp_gelu(ctx, NULL));
    ck_assert_ptr_null(bp_cpy(ctx, x, NULL));
    ck_assert_ptr_null(bp_cont(ctx, NULL));
    ck_assert_ptr_null(bp_reshape(ctx, NULL, 1, (int64_t[]){12}));
    ck_assert_ptr_null(bp_view(ctx, NULL, 1, (int64_t[]){1}, NULL, 0));
    ck_assert_ptr_null(bp_permute(ctx, NULL, 0, 1, 2, 3));
    ck_assert_ptr_null(bp_transpose(ctx, NULL));
    ck_assert_ptr_null(bp_set_rows(ctx, x, NULL, NULL));
    ck_assert_ptr_null(bp_flash_attn_ext(ctx, x, NULL, x, NULL, 1));
    const struct bp_rope_ext_params rp = yarn_params();
    ck_assert_ptr_null(bp_rope_ext(ctx, NULL, x, NULL, &rp));
    ck_assert_ptr_null(bp_tanh(ctx, NULL));
    ck_assert_ptr_null(bp_flash_attn_softcap(ctx, x, NULL, x, NULL, 1, 50));
    /* A NULL context is an error of its own. */
    ck_assert_ptr_null(bp_silu(NULL, x));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "context is NULL"));
}
END_TEST

/* ------------------------------------------------------------------ graphs */

static int index_of(const struct bp_graph *g, const struct bp_tensor *t)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == t) return i;
    return -1;
}

/* Sources and memory owners that are nodes come before their users; no
 * node twice; no leaf. */
static void assert_well_ordered(const struct bp_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *n = g->nodes[i];
        ck_assert_int_ne(n->op, BP_OP_NONE);
        ck_assert_int_eq(index_of(g, n), i);
        for (int s = 0; s < BP_MAX_SRC; s++)
            if (n->src[s] && n->src[s]->op != BP_OP_NONE) ck_assert_int_lt(index_of(g, n->src[s]), i);
        if (n->view_src && n->view_src->op != BP_OP_NONE) ck_assert_int_lt(index_of(g, n->view_src), i);
    }
}

START_TEST(test_graph_lists_sources_first_once_without_leaves)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 4, 3, 1, 1, "x");
    struct bp_tensor *a = bp_silu(ctx, x);
    struct bp_tensor *b = bp_mul(ctx, a, a);
    struct bp_tensor *c = bp_add(ctx, a, b);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(16, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, c), BP_OK);
    /* post-order over src[0] then src[1]: a, b, c, each once, x left out */
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_ptr_eq(g->nodes[0], a);
    ck_assert_ptr_eq(g->nodes[1], b);
    ck_assert_ptr_eq(g->nodes[2], c);
    ck_assert_int_eq(g->capacity, 16);
    bp_graph_free(g);
}
END_TEST

START_TEST(test_graph_includes_views_and_appends_further_outputs)
{
    /* A decoder-ish fragment: k written into a cache view, then read back. */
    struct bp_tensor *cache = T(BP_TYPE_F16, 8, 16, 1, 1, "k_cache");
    struct bp_tensor *wk = T(BP_TYPE_F32, 8, 8, 1, 1, "wk");
    struct bp_tensor *inp = T(BP_TYPE_F32, 8, 3, 1, 1, "inp");
    struct bp_tensor *k = bp_mul_mat(ctx, wk, inp);
    struct bp_tensor *slot = bp_view(ctx, cache, 2, (int64_t[]){8, 3}, (size_t[]){0, 16}, 0);
    struct bp_tensor *store = bp_cpy(ctx, k, slot);
    struct bp_tensor *kt = bp_transpose(ctx, bp_reshape(ctx, k, 2, (int64_t[]){3, 8}));
    struct bp_tensor *out1 = bp_cont(ctx, kt);
    struct bp_tensor *out2 = bp_scale(ctx, k, 2, 0);
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);

    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(32, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, store), BP_OK);
    /* k, slot (a view of a leaf), store */
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_int_ge(index_of(g, slot), 0);
    ck_assert_int_eq(index_of(g, cache), -1);
    ck_assert_int_eq(bp_graph_build(g, out1), BP_OK);
    /* + reshape, transpose, cont; k not again */
    ck_assert_int_eq(g->n_nodes, 6);
    ck_assert_int_eq(bp_graph_build(g, out2), BP_OK);
    ck_assert_int_eq(g->n_nodes, 7);
    ck_assert_ptr_eq(g->nodes[6], out2);
    /* building an output again adds nothing; a leaf adds nothing */
    ck_assert_int_eq(bp_graph_build(g, out1), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, inp), BP_OK);
    ck_assert_int_eq(g->n_nodes, 7);
    assert_well_ordered(g);
    bp_graph_free(g);
}
END_TEST

START_TEST(test_graph_full_fails_and_leaves_graph_unchanged)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 4, 1, 1, 1, "x");
    struct bp_tensor *a = bp_silu(ctx, x);
    struct bp_tensor *b = bp_gelu(ctx, a);
    struct bp_tensor *c = bp_silu(ctx, b);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(2, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, a), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, c), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "full"));
    ck_assert_int_eq(g->n_nodes, 1);
    ck_assert_ptr_eq(g->nodes[0], a);
    /* still usable: b fits */
    ck_assert_int_eq(bp_graph_build(g, b), BP_OK);
    ck_assert_int_eq(g->n_nodes, 2);
    ck_assert_ptr_eq(g->nodes[1], b);
    bp_graph_free(g);
}
END_TEST

START_TEST(test_graph_build_refuses_failed_context_and_null_output)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 4, 3, 1, 1, "x");
    struct bp_tensor *good = bp_silu(ctx, x);
    struct bp_tensor *bad = bp_mul_mat(ctx, T(BP_TYPE_F32, 5, 2, 1, 1, "w"), x);
    ck_assert_ptr_null(bad);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, bad), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "NULL"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "MUL_MAT"));
    ck_assert_int_eq(bp_graph_build(g, good), BP_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "MUL_MAT"));
    ck_assert_int_eq(g->n_nodes, 0);
    bp_graph_free(g);
}
END_TEST

START_TEST(test_graph_build_detects_hand_made_cycles)
{
    struct bp_tensor *x = T(BP_TYPE_F32, 4, 1, 1, 1, "x");
    struct bp_tensor *a = bp_silu(ctx, x);
    struct bp_tensor *b = bp_silu(ctx, a);
    a->src[0] = b; /* edited by hand */
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, b), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "cycle"));
    ck_assert_int_eq(g->n_nodes, 0);
    bp_graph_free(g);
}
END_TEST

START_TEST(test_graph_handles_long_chains)
{
    struct bp_context *big;
    ck_assert_int_eq(bp_context_new(20001, &big), BP_OK);
    struct bp_tensor *t = bp_tensor_new_1d(big, BP_TYPE_F32, 4);
    for (int i = 0; i < 20000; i++) t = bp_silu(big, t);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(20000, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, t), BP_OK);
    ck_assert_int_eq(g->n_nodes, 20000);
    ck_assert_ptr_eq(g->nodes[19999], t);
    ck_assert_ptr_eq(g->nodes[0], bp_context_tensor(big, 1));
    bp_graph_free(g);
    bp_context_free(big);
}
END_TEST

static Suite *shapes_suite(void)
{
    Suite *s = suite_create("shapes");
    TCase *tc = tcase_create("constructors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tensor_new_has_packed_strides);
    tcase_add_test(tc, test_tensor_new_rejects_partial_block_bad_type_and_negative_size);
    tcase_add_test(tc, test_full_context_fails_and_stays_failed);
    tcase_add_test(tc, test_set_name_truncates);
    tcase_add_test(tc, test_get_rows_gives_f32_rows_of_table);
    tcase_add_test(tc, test_get_rows_rejects_bad_ids);
    tcase_add_test(tc, test_mul_mat_shape_and_broadcast);
    tcase_add_test(tc, test_mul_mat_rejects_k_mismatch_with_the_documented_sentence);
    tcase_add_test(tc, test_mul_mat_rejects_bad_broadcast_and_quantized_x);
    tcase_add_test(tc, test_add_and_mul_repeat_b_over_a);
    tcase_add_test(tc, test_add_and_mul_reject_non_repeating_and_int);
    tcase_add_test(tc, test_scale_norm_silu_gelu_keep_shape_and_store_params);
    tcase_add_test(tc, test_unary_ops_reject_int_and_bad_eps);
    tcase_add_test(tc, test_soft_max_gives_f32_with_optional_mask);
    tcase_add_test(tc, test_soft_max_rejects_bad_mask);
    tcase_add_test(tc, test_rope_keeps_shape_and_stores_params);
    tcase_add_test(tc, test_rope_rejects_bad_dims_positions_and_mode);
    tcase_add_test(tc, test_flash_attn_ext_gives_heads_before_tokens);
    tcase_add_test(tc, test_flash_attn_ext_rejects_mismatches);
    tcase_add_test(tc, test_rope_ext_keeps_shape_and_stores_params_and_factors);
    tcase_add_test(tc, test_rope_ext_rejects_bad_factors_and_scaling);
    tcase_add_test(tc, test_tanh_keeps_shape_and_type_and_rejects_int);
    tcase_add_test(tc, test_flash_attn_softcap_stores_scale_and_cap);
    tcase_add_test(tc, test_flash_attn_softcap_rejects_bad_caps_and_shapes);
    tcase_add_test(tc, test_reshape_aliases_the_owner);
    tcase_add_test(tc, test_reshape_rejects_count_contiguity_and_blocks);
    tcase_add_test(tc, test_view_offsets_accumulate_to_the_owner);
    tcase_add_test(tc, test_view_rejects_out_of_bounds_and_misaligned);
    tcase_add_test(tc, test_permute_moves_shape_and_strides);
    tcase_add_test(tc, test_permute_rejects_non_permutations_and_moving_blocks);
    tcase_add_test(tc, test_cpy_result_is_a_view_of_dst);
    tcase_add_test(tc, test_cpy_rejects_count_and_types);
    tcase_add_test(tc, test_set_rows_result_is_a_view_of_dst);
    tcase_add_test(tc, test_set_rows_rejects_mismatches);
    tcase_add_test(tc, test_null_inputs_give_null_and_keep_the_first_error);
    suite_add_tcase(s, tc);

    TCase *tg = tcase_create("graphs");
    tcase_add_checked_fixture(tg, setup, teardown);
    tcase_add_test(tg, test_graph_lists_sources_first_once_without_leaves);
    tcase_add_test(tg, test_graph_includes_views_and_appends_further_outputs);
    tcase_add_test(tg, test_graph_full_fails_and_leaves_graph_unchanged);
    tcase_add_test(tg, test_graph_build_refuses_failed_context_and_null_output);
    tcase_add_test(tg, test_graph_build_detects_hand_made_cycles);
    tcase_add_test(tg, test_graph_handles_long_chains);
    suite_add_tcase(s, tg);
    return s;
}

int main(void)
{
    return run_suite(shapes_suite());
}
