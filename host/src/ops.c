/* ops.c — what every op constructor shares (error sentences, results,
 * views) and the simple ops: GET_ROWS, MUL_MAT, ADD, MUL, SCALE, RMS_NORM,
 * SILU, GELU, CONT. The shape rules are those of bp_ops.h. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor_internal.h"

const char *bp__operand(const char *role, const struct bp_tensor *t, bp__operand_buf buf)
{
    char d[sizeof(bp__operand_buf) - 16];
    snprintf(buf, sizeof(bp__operand_buf), "%s %s", role, bp__tensor_describe(t, d, sizeof d));
    return buf;
}

static struct bp_tensor *op_vfail(struct bp_context *ctx, enum bp_op op, bp_status status,
                                  const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    bp__context_fail(ctx, status, "%s: %s", bp_op_name(op), msg);
    return NULL;
}

struct bp_tensor *bp__op_fail(struct bp_context *ctx, enum bp_op op, bp_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    op_vfail(ctx, op, status, fmt, ap);
    va_end(ap);
    return NULL;
}

struct bp_tensor *bp__op_mismatch(struct bp_context *ctx, enum bp_op op, const char *ra,
                                  const struct bp_tensor *a, const char *rb, const struct bp_tensor *b,
                                  const char *fmt, ...)
{
    char rest[256];
    bp__operand_buf da, db;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    return bp__op_fail(ctx, op, BP_ERR_SHAPE, "%s and %s %s", bp__operand(ra, a, da),
                       bp__operand(rb, b, db), rest);
}

struct bp_tensor *bp__op_type_fail(struct bp_context *ctx, enum bp_op op, const char *role,
                                   const struct bp_tensor *t, const char *want)
{
    bp__operand_buf d;
    return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "%s is %s; it must be %s.",
                       bp__operand(role, t, d), bp_type_name((enum bp_type)t->type), want);
}

bool bp__op_ctx_ok(struct bp_context *ctx, enum bp_op op)
{
    if (ctx) return true;
    bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the context is NULL; create one with bp_context_new.", bp_op_name(op));
    return false;
}

bool bp__is_float(const struct bp_tensor *t)
{
    /* bf16 too: whether a device computes it is supports_op's call. */
    return t->type == BP_TYPE_F32 || t->type == BP_TYPE_F16 || t->type == BP_TYPE_BF16;
}

bool bp__repeats(int64_t big, int64_t small)
{
    return small == 0 ? big == 0 : big % small == 0;
}

size_t bp__type_align(enum bp_type type)
{
    return bp_type_size(type) % 4 == 0 ? 4 : 2;
}

/* "mul_mat(w,x)": short enough to read in an error, truncated when long. */
static void default_name(struct bp_tensor *t, enum bp_op op)
{
    char buf[BP_MAX_NAME * 2];
    size_t n = 0;
    for (const char *p = bp_op_name(op); *p && n < sizeof buf - 1; p++)
        buf[n++] = (char)tolower((unsigned char)*p);
    buf[n] = '\0';
    int any = 0;
    for (int i = 0; i < BP_MAX_SRC; i++)
        if (t->src[i] && t->src[i]->name[0]) any = 1;
    if (any) {
        for (int i = 0; i < BP_MAX_SRC && t->src[i]; i++) {
            const char *sn = t->src[i]->name[0] ? t->src[i]->name : "?";
            n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, "%s%.*s",
                                  i ? "," : "(", BP_MAX_NAME, sn);
            if (n >= sizeof buf) break;
        }
        if (n < sizeof buf - 1) {
            buf[n++] = ')';
            buf[n] = '\0';
        }
    }
    snprintf(t->name, sizeof t->name, "%.*s", BP_MAX_NAME - 1, buf);
}

static void set_sources(struct bp_tensor *t, struct bp_tensor *s0, struct bp_tensor *s1,
                        struct bp_tensor *s2, struct bp_tensor *s3)
{
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->src[3] = s3;
}

struct bp_tensor *bp__op_result(struct bp_context *ctx, enum bp_op op, enum bp_type type,
                                const int64_t ne[4], struct bp_tensor *s0, struct bp_tensor *s1,
                                struct bp_tensor *s2, struct bp_tensor *s3)
{
    struct bp_tensor *t = bp__tensor_make(ctx, bp_op_name(op), type, ne);
    if (!t) return NULL;
    t->op = op;
    set_sources(t, s0, s1, s2, s3);
    default_name(t, op);
    return t;
}

struct bp_tensor *bp__op_view(struct bp_context *ctx, enum bp_op op, struct bp_tensor *base,
                              const int64_t ne[4], const size_t nb[4], size_t offs,
                              struct bp_tensor *s0, struct bp_tensor *s1, struct bp_tensor *s2)
{
    struct bp_tensor *t = bp__context_new_tensor(ctx, bp_op_name(op));
    if (!t) return NULL;
    t->type = base->type;
    t->op = op;
    memcpy(t->ne, ne, sizeof t->ne);
    memcpy(t->nb, nb, sizeof t->nb);
    set_sources(t, s0, s1, s2, NULL);
    /* Point at the owner of the memory so that nobody walks chains. */
    t->view_src = base->view_src ? base->view_src : base;
    t->view_offs = (base->view_src ? base->view_offs : 0) + offs;
    default_name(t, op);
    if (bp__view_resolve(t) != BP_OK) {
        bp__context_fail(ctx, BP_ERR_PLUGIN, "%s: %s", bp_op_name(op), bp_last_error());
        return NULL;
    }
    return t;
}

/* ---- the simple ops ---- */

struct bp_tensor *bp_get_rows(struct bp_context *ctx, struct bp_tensor *table, struct bp_tensor *ids)
{
    const enum bp_op op = BP_OP_GET_ROWS;
    if (!bp__op_ctx_ok(ctx, op) || !table || !ids) return NULL;
    if (ids->type != BP_TYPE_I32) return bp__op_type_fail(ctx, op, "ids", ids, "i32");
    if (ids->ne[1] != table->ne[2])
        return bp__op_mismatch(ctx, op, "table", table, "ids", ids,
                               "disagree: dim 1 of ids must equal dim 2 of table.");
    if (ids->ne[2] != table->ne[3])
        return bp__op_mismatch(ctx, op, "table", table, "ids", ids,
                               "disagree: dim 2 of ids must equal dim 3 of table.");
    if (ids->ne[3] != 1)
        return bp__op_mismatch(ctx, op, "table", table, "ids", ids,
                               "disagree: ids must have 3 dimensions at most (dim 3 = 1).");
    const int64_t ne[4] = {table->ne[0], ids->ne[0], table->ne[2], table->ne[3]};
    return bp__op_result(ctx, op, BP_TYPE_F32, ne, table, ids, NULL, NULL);
}

struct bp_tensor *bp_mul_mat(struct bp_context *ctx, struct bp_tensor *w, struct bp_tensor *x)
{
    const enum bp_op op = BP_OP_MUL_MAT;
    if (!bp__op_ctx_ok(ctx, op) || !w || !x) return NULL;
    if (!bp__is_float(x)) return bp__op_type_fail(ctx, op, "x", x, "f32, f16 or bf16");
    if (w->ne[0] != x->ne[0])
        return bp__op_mismatch(ctx, op, "w", w, "x", x, "disagree in dim 0 (K); they must be equal.");
    for (int d = 2; d < 4; d++)
        if (!bp__repeats(x->ne[d], w->ne[d]))
            return bp__op_mismatch(ctx, op, "w", w, "x", x,
                                   "disagree in dim %d: w is broadcast over x, so dim %d of w "
                                   "must divide dim %d of x.", d, d, d);
    const int64_t ne[4] = {w->ne[1], x->ne[1], x->ne[2], x->ne[3]};
    return bp__op_result(ctx, op, BP_TYPE_F32, ne, w, x, NULL, NULL);
}

static struct bp_tensor *binary(struct bp_context *ctx, enum bp_op op, struct bp_tensor *a,
                                struct bp_tensor *b)
{
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

struct bp_tensor *bp_add(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b)
{
    return binary(ctx, BP_OP_ADD, a, b);
}

struct bp_tensor *bp_mul(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b)
{
    return binary(ctx, BP_OP_MUL, a, b);
}

static struct bp_tensor *unary(struct bp_context *ctx, enum bp_op op, struct bp_tensor *x)
{
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    if (!bp__is_float(x)) return bp__op_type_fail(ctx, op, "x", x, "f32, f16 or bf16");
    return bp__op_result(ctx, op, (enum bp_type)x->type, x->ne, x, NULL, NULL, NULL);
}

static void set_param_f32(struct bp_tensor *t, int i, float v)
{
    memcpy(&t->op_params[i], &v, sizeof v);
}

struct bp_tensor *bp_scale(struct bp_context *ctx, struct bp_tensor *x, float s, float b)
{
    struct bp_tensor *t = unary(ctx, BP_OP_SCALE, x);
    if (t) {
        set_param_f32(t, 0, s);
        set_param_f32(t, 1, b);
    }
    return t;
}

struct bp_tensor *bp_rms_norm(struct bp_context *ctx, struct bp_tensor *x, float eps)
{
    if (ctx && x && !(eps >= 0.0f && isfinite(eps))) {
        bp__operand_buf d;
        return bp__op_fail(ctx, BP_OP_RMS_NORM, BP_ERR_INVALID_ARGUMENT,
                           "eps is %g for %s; it must be a finite number >= 0 (1e-5 or 1e-6 is usual).",
                           (double)eps, bp__operand("x", x, d));
    }
    struct bp_tensor *t = unary(ctx, BP_OP_RMS_NORM, x);
    if (t) set_param_f32(t, 0, eps);
    return t;
}

struct bp_tensor *bp_silu(struct bp_context *ctx, struct bp_tensor *x)
{
    return unary(ctx, BP_OP_SILU, x);
}

struct bp_tensor *bp_gelu(struct bp_context *ctx, struct bp_tensor *x)
{
    return unary(ctx, BP_OP_GELU, x);
}

struct bp_tensor *bp_sqr(struct bp_context *ctx, struct bp_tensor *x)
{
    return unary(ctx, BP_OP_SQR, x);
}

struct bp_tensor *bp_tanh(struct bp_context *ctx, struct bp_tensor *x)
{
    return unary(ctx, BP_OP_TANH, x);
}

struct bp_tensor *bp_cont(struct bp_context *ctx, struct bp_tensor *x)
{
    const enum bp_op op = BP_OP_CONT;
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    return bp__op_result(ctx, op, (enum bp_type)x->type, x->ne, x, NULL, NULL, NULL);
}
