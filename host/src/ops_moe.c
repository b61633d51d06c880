/* ops_moe.c — the mixture-of-experts ops: MUL_MAT_ID and the routing ops
 * TOP_K, SUM_ROWS, DIV and CLAMP. The shape rules are those of bp_ops.h. */
#include <math.h>
#include <string.h>

#include "tensor_internal.h"

struct bp_tensor *bp_mul_mat_id(struct bp_context *ctx, struct bp_tensor *w, struct bp_tensor *x,
                                struct bp_tensor *ids)
{
    const enum bp_op op = BP_OP_MUL_MAT_ID;
    if (!bp__op_ctx_ok(ctx, op) || !w || !x || !ids) return NULL;
    if (x->type != BP_TYPE_F32) return bp__op_type_fail(ctx, op, "x", x, "f32");
    if (ids->type != BP_TYPE_I32) return bp__op_type_fail(ctx, op, "ids", ids, "i32");
    if (w->ne[3] != 1 || x->ne[3] != 1)
        return bp__op_mismatch(ctx, op, "w", w, "x", x,
                               "have a dim 3; both must have 3 dimensions at most.");
    if (ids->ne[2] != 1 || ids->ne[3] != 1)
        return bp__op_mismatch(ctx, op, "x", x, "ids", ids,
                               "disagree: ids must be 2-D [n_used, n_tokens].");
    if (w->ne[0] != x->ne[0])
        return bp__op_mismatch(ctx, op, "w", w, "x", x, "disagree in dim 0 (K); they must be equal.");
    if (x->ne[1] != 1 && x->ne[1] != ids->ne[0])
        return bp__op_mismatch(ctx, op, "x", x, "ids", ids,
                               "disagree: dim 1 of x must be 1 (shared by the slots) or dim 0 "
                               "of ids (one activation per slot).");
    if (x->ne[2] != ids->ne[1])
        return bp__op_mismatch(ctx, op, "x", x, "ids", ids,
                               "disagree in the token count: dim 2 of x must equal dim 1 of ids.");
    const int64_t ne[4] = {w->ne[1], ids->ne[0], ids->ne[1], 1};
    return bp__op_result(ctx, op, BP_TYPE_F32, ne, w, x, ids, NULL);
}

struct bp_tensor *bp_top_k(struct bp_context *ctx, struct bp_tensor *x, int k)
{
    const enum bp_op op = BP_OP_TOP_K;
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    if (x->type != BP_TYPE_F32) return bp__op_type_fail(ctx, op, "x", x, "f32");
    if (k < 1 || k > x->ne[0]) {
        bp__operand_buf d;
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "k is %d for %s; it must be between 1 and the row length.", k,
                           bp__operand("x", x, d));
    }
    const int64_t ne[4] = {k, x->ne[1], x->ne[2], x->ne[3]};
    struct bp_tensor *t = bp__op_result(ctx, op, BP_TYPE_I32, ne, x, NULL, NULL, NULL);
    if (t) t->op_params[0] = k;
    return t;
}

struct bp_tensor *bp_sum_rows(struct bp_context *ctx, struct bp_tensor *x)
{
    const enum bp_op op = BP_OP_SUM_ROWS;
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    if (x->type != BP_TYPE_F32) return bp__op_type_fail(ctx, op, "x", x, "f32");
    const int64_t ne[4] = {1, x->ne[1], x->ne[2], x->ne[3]};
    return bp__op_result(ctx, op, BP_TYPE_F32, ne, x, NULL, NULL, NULL);
}

struct bp_tensor *bp_div(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b)
{
    const enum bp_op op = BP_OP_DIV;
    if (!bp__op_ctx_ok(ctx, op) || !a || !b) return NULL;
    if (!bp__is_float(a)) return bp__op_type_fail(ctx, op, "a", a, "f32, f16 or bf16");
    if (!bp__is_float(b)) return bp__op_type_fail(ctx, op, "b", b, "f32, f16 or bf16");
    for (int d = 0; d < 4; d++)
        if (!bp__repeats(a->ne[d], b->ne[d]))
            return bp__op_mismatch(ctx, op, "a", a, "b", b,
                                   "disagree in dim %d: b repeats over a, so dim %d of b must "
                                   "divide dim %d of a.", d, d, d);
    return bp__op_result(ctx, op, (enum bp_type)a->type, a->ne, a, b, NULL, NULL);
}

struct bp_tensor *bp_clamp(struct bp_context *ctx, struct bp_tensor *x, float lo, float hi)
{
    const enum bp_op op = BP_OP_CLAMP;
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    if (!bp__is_float(x)) return bp__op_type_fail(ctx, op, "x", x, "f32, f16 or bf16");
    if (isnan(lo) || isnan(hi) || lo > hi) {
        bp__operand_buf d;
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "the bounds [%g, %g] for %s are not an interval; lo <= hi, neither NaN.",
                           (double)lo, (double)hi, bp__operand("x", x, d));
    }
    struct bp_tensor *t = bp__op_result(ctx, op, (enum bp_type)x->type, x->ne, x, NULL, NULL, NULL);
    if (t) {
        memcpy(&t->op_params[0], &lo, sizeof lo);
        memcpy(&t->op_params[1], &hi, sizeof hi);
    }
    return t;
}
