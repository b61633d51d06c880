/* ops_view.c — constructors whose result aliases existing memory: RESHAPE,
 * VIEW, PERMUTE, TRANSPOSE, and the writers CPY and SET_ROWS (their result
 * is a view of the destination, so later ops read what they wrote). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tensor_internal.h"

static void shape_str(const int64_t ne[4], char *buf, size_t cap)
{
    snprintf(buf, cap, "[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]", ne[0], ne[1], ne[2], ne[3]);
}

enum { SHAPE_STR = 96 };

/* The start reshape and view share: fills ne[0..4) from the caller's n_dims
 * entries and s with their text for messages; false on an unusable context,
 * a NULL x, or a bad count or size. */
static bool read_shape(struct bp_context *ctx, enum bp_op op, const struct bp_tensor *x, int n_dims,
                       const int64_t *ne_in, int64_t ne[4], char s[SHAPE_STR])
{
    if (!bp__op_ctx_ok(ctx, op) || !x) return false;
    bp__operand_buf d;
    if (n_dims < 1 || n_dims > BP_MAX_DIMS || !ne_in) {
        bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "n_dims is %d and ne is %s for %s; pass 1 to 4 dimensions.",
                    n_dims, ne_in ? "set" : "NULL", bp__operand("x", x, d));
        return false;
    }
    for (int i = 0; i < BP_MAX_DIMS; i++) ne[i] = i < n_dims ? ne_in[i] : 1;
    shape_str(ne, s, SHAPE_STR);
    for (int i = 0; i < BP_MAX_DIMS; i++) {
        if (ne[i] < 0) {
            bp__op_fail(ctx, op, BP_ERR_SHAPE, "the new shape %s for %s has a negative dimension.", s,
                        bp__operand("x", x, d));
            return false;
        }
    }
    int64_t bs = bp_type_block_size((enum bp_type)x->type);
    if (ne[0] % bs != 0) {
        bp__op_fail(ctx, op, BP_ERR_SHAPE,
                    "the new shape %s for %s (%s) needs dim 0 to be a multiple of the block size %" PRId64 ".",
                    s, bp__operand("x", x, d), bp_type_name((enum bp_type)x->type), bs);
        return false;
    }
    return true;
}

struct bp_tensor *bp_reshape(struct bp_context *ctx, struct bp_tensor *x, int n_dims, const int64_t *ne_in)
{
    const enum bp_op op = BP_OP_RESHAPE;
    int64_t ne[4];
    char s[SHAPE_STR];
    if (!read_shape(ctx, op, x, n_dims, ne_in, ne, s)) return NULL;
    bp__operand_buf d;
    if (!bp_is_contiguous(x))
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "%s is not contiguous, so it cannot take the shape %s; "
                           "copy it with bp_cont first.", bp__operand("x", x, d), s);
    int64_t n = 1;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (__builtin_mul_overflow(n, ne[i], &n)) n = -1;
    if (n != bp_nelements(x))
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "%s has %" PRId64 " elements but the new shape %s "
                           "has %" PRId64 "; they must be equal.", bp__operand("x", x, d), bp_nelements(x), s, n);
    size_t nb[4];
    if (!bp__contiguous_strides((enum bp_type)x->type, ne, nb))
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "the new shape %s for %s is too large to address.", s,
                           bp__operand("x", x, d));
    return bp__op_view(ctx, op, x, ne, nb, 0, x, NULL, NULL);
}

struct bp_tensor *bp_view(struct bp_context *ctx, struct bp_tensor *x, int n_dims, const int64_t *ne_in,
                          const size_t *nb_in, size_t offset)
{
    const enum bp_op op = BP_OP_VIEW;
    int64_t ne[4];
    char s[SHAPE_STR];
    if (!read_shape(ctx, op, x, n_dims, ne_in, ne, s)) return NULL;
    bp__operand_buf d;
    if (n_dims > 1 && !nb_in)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "nb is NULL for a %d-D view %s of %s; "
                           "pass the byte strides.", n_dims, s, bp__operand("x", x, d));
    enum bp_type type = (enum bp_type)x->type;
    size_t nb[4];
    nb[0] = bp_type_size(type);
    for (int i = 1; i < BP_MAX_DIMS; i++) {
        if (i < n_dims) nb[i] = nb_in[i];
        else if (__builtin_mul_overflow(nb[i - 1], (size_t)(i == 1 ? ne[0] / bp_type_block_size(type) : ne[i - 1]), &nb[i]))
            return bp__op_fail(ctx, op, BP_ERR_SHAPE, "the view %s of %s is too large to address.", s,
                               bp__operand("x", x, d));
    }
    size_t align = bp__type_align(type);
    for (int i = 1; i < n_dims; i++)
        if (nb[i] % align != 0)
            return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "stride nb[%d] = %zu of the view %s of %s "
                               "is not a multiple of %zu bytes, which %s elements need.",
                               i, nb[i], s, bp__operand("x", x, d), align, bp_type_name(type));
    if (offset % align != 0)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "offset %zu of the view %s of %s is not a "
                           "multiple of %zu bytes, which %s elements need.",
                           offset, s, bp__operand("x", x, d), align, bp_type_name(type));
    size_t span, end, have = bp_nbytes(x);
    if (!bp__span_bytes(type, ne, nb, &span) || __builtin_add_overflow(offset, span, &end) || end > have)
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "the view %s at offset %zu reaches past the end of %s, "
                           "which spans %zu bytes; keep the view inside its source.",
                           s, offset, bp__operand("x", x, d), have);
    return bp__op_view(ctx, op, x, ne, nb, offset, x, NULL, NULL);
}

static struct bp_tensor *permute(struct bp_context *ctx, enum bp_op op, struct bp_tensor *x,
                                 const int axis[4])
{
    bp__operand_buf d;
    int seen = 0;
    for (int i = 0; i < 4; i++)
        if (axis[i] >= 0 && axis[i] < 4) seen |= 1 << axis[i];
    if (seen != 0xf)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "axes (%d, %d, %d, %d) for %s are not a "
                           "permutation of 0, 1, 2, 3.", axis[0], axis[1], axis[2], axis[3],
                           bp__operand("x", x, d));
    if (bp_type_is_quantized((enum bp_type)x->type) && axis[0] != 0)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "%s is %s: dim 0 holds whole blocks and "
                           "cannot move; dequantize it with bp_cpy first.", bp__operand("x", x, d),
                           bp_type_name((enum bp_type)x->type));
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) {
        ne[axis[i]] = x->ne[i];
        nb[axis[i]] = x->nb[i];
    }
    struct bp_tensor *t = bp__op_view(ctx, op, x, ne, nb, 0, x, NULL, NULL);
    if (t)
        for (int i = 0; i < 4; i++) t->op_params[i] = axis[i];
    return t;
}

struct bp_tensor *bp_permute(struct bp_context *ctx, struct bp_tensor *x, int a0, int a1, int a2, int a3)
{
    if (!bp__op_ctx_ok(ctx, BP_OP_PERMUTE) || !x) return NULL;
    return permute(ctx, BP_OP_PERMUTE, x, (const int[4]){a0, a1, a2, a3});
}

struct bp_tensor *bp_transpose(struct bp_context *ctx, struct bp_tensor *x)
{
    if (!bp__op_ctx_ok(ctx, BP_OP_TRANSPOSE) || !x) return NULL;
    return permute(ctx, BP_OP_TRANSPOSE, x, (const int[4]){1, 0, 2, 3});
}

static bool cpy_type(const struct bp_tensor *t)
{
    return t->type == BP_TYPE_F32 || t->type == BP_TYPE_F16 || t->type == BP_TYPE_BF16;
}

struct bp_tensor *bp_cpy(struct bp_context *ctx, struct bp_tensor *src, struct bp_tensor *dst)
{
    const enum bp_op op = BP_OP_CPY;
    if (!bp__op_ctx_ok(ctx, op) || !src || !dst) return NULL;
    if (!cpy_type(src)) return bp__op_type_fail(ctx, op, "src", src, "f32, f16 or bf16");
    if (!cpy_type(dst)) return bp__op_type_fail(ctx, op, "dst", dst, "f32, f16 or bf16");
    if (bp_nelements(src) != bp_nelements(dst))
        return bp__op_mismatch(ctx, op, "src", src, "dst", dst,
                               "have %" PRId64 " and %" PRId64 " elements; they must have the same count.",
                               bp_nelements(src), bp_nelements(dst));
    return bp__op_view(ctx, op, dst, dst->ne, dst->nb, 0, src, dst, NULL);
}

struct bp_tensor *bp_set_rows(struct bp_context *ctx, struct bp_tensor *dst, struct bp_tensor *values,
                              struct bp_tensor *ids)
{
    const enum bp_op op = BP_OP_SET_ROWS;
    if (!bp__op_ctx_ok(ctx, op) || !dst || !values || !ids) return NULL;
    if (!bp__is_float(dst)) return bp__op_type_fail(ctx, op, "dst", dst, "f32, f16 or bf16");
    if (values->type != BP_TYPE_F32) return bp__op_type_fail(ctx, op, "values", values, "f32");
    if (ids->type != BP_TYPE_I32) return bp__op_type_fail(ctx, op, "ids", ids, "i32");
    if (values->ne[0] != dst->ne[0])
        return bp__op_mismatch(ctx, op, "dst", dst, "values", values,
                               "disagree in dim 0 (row length); they must be equal.");
    for (int d = 2; d < 4; d++)
        if (values->ne[d] != dst->ne[d])
            return bp__op_mismatch(ctx, op, "dst", dst, "values", values,
                                   "disagree in dim %d; they must be equal.", d);
    if (ids->ne[0] != values->ne[1])
        return bp__op_mismatch(ctx, op, "values", values, "ids", ids,
                               "disagree: dim 0 of ids (one id per row) must equal dim 1 of values.");
    if (!bp__repeats(dst->ne[2], ids->ne[1]) || !bp__repeats(dst->ne[3], ids->ne[2]))
        return bp__op_mismatch(ctx, op, "dst", dst, "ids", ids,
                               "disagree: dims 1 and 2 of ids must divide dims 2 and 3 of dst.");
    if (ids->ne[3] != 1)
        return bp__op_mismatch(ctx, op, "dst", dst, "ids", ids,
                               "disagree: ids must have 3 dimensions at most (dim 3 = 1).");
    return bp__op_view(ctx, op, dst, dst->ne, dst->nb, 0, dst, values, ids);
}
