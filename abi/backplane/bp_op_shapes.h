/*
 * bp_op_shapes.h — whether a node's shapes (and the types its op fixes:
 * I32 ids and positions, F32 results, "same type as src0") agree with the
 * op's definition in bp_ops.h.
 *
 * Every device's supports_op starts from this question, and before this
 * header each plugin answered it with its own copy of the rules, which
 * drifted. A device adds only what is its own (which weight types it has
 * kernels for, contiguity its kernels need, size limits) after
 * bp_op_shapes_ok(). Hosts build well-formed nodes, but a plugin is also
 * handed tensors by other hosts and by tests, so it must not trust them.
 *
 * Header-only (static inline): a plugin built against these headers alone
 * gets the rules of the ABI version it was built for.
 */
#ifndef BP_OP_SHAPES_H
#define BP_OP_SHAPES_H

#include <stdbool.h>

#include "bp_ops.h"
#include "bp_tensor.h"
#include "bp_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every dimension at least 1 (an operand that is divided by or indexed). */
static inline bool bp_shape_positive(const struct bp_tensor *t)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] < 1) return false;
    return true;
}

static inline bool bp_shape_same(const struct bp_tensor *a, const struct bp_tensor *b)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

static inline bool bp_shape_is(const struct bp_tensor *t, int64_t n0, int64_t n1, int64_t n2,
                               int64_t n3)
{
    return t->ne[0] == n0 && t->ne[1] == n1 && t->ne[2] == n2 && t->ne[3] == n3;
}

/* An optional attention/softmax mask [n, r' >= rows, m2, m3] broadcast over
 * dims 2 and 3 of a [.., rows, d2, d3] operand. */
static inline bool bp__mask_ok(const struct bp_tensor *m, int64_t n, int64_t rows, int64_t d2,
                               int64_t d3)
{
    return !m || ((m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16) && bp_shape_positive(m) &&
                  m->ne[0] == n && m->ne[1] >= rows && d2 % m->ne[2] == 0 && d3 % m->ne[3] == 0);
}

static inline bool bp__mul_mat_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    return w && x && t->type == BP_TYPE_F32 && bp_shape_positive(w) && bp_shape_positive(x) &&
           w->ne[0] == x->ne[0] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0 &&
           bp_shape_is(t, w->ne[1], x->ne[1], x->ne[2], x->ne[3]);
}

static inline bool bp__binary_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (!a || !b || t->type != a->type || !bp_shape_same(t, a) || !bp_shape_positive(b))
        return false;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (a->ne[i] % b->ne[i] != 0) return false;
    return true;
}

static inline bool bp__rope_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *pos = t->src[1];
    if (!x || !pos || t->type != x->type || !bp_shape_same(t, x) || pos->type != BP_TYPE_I32 ||
        !bp_shape_is(pos, x->ne[2], 1, 1, 1))
        return false;
    const int32_t n_dims = bp_op_param_i32(t, 0), mode = bp_op_param_i32(t, 1);
    if (t->op == BP_OP_ROPE_EXT && t->src[2] &&
        (t->src[2]->type != BP_TYPE_F32 || !bp_shape_is(t->src[2], n_dims / 2, 1, 1, 1)))
        return false;
    return (mode == BP_ROPE_MODE_NORMAL || mode == BP_ROPE_MODE_NEOX) && n_dims >= 0 &&
           n_dims % 2 == 0 && n_dims <= x->ne[0];
}

static inline bool bp__get_rows_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *tab = t->src[0], *ids = t->src[1];
    return tab && ids && ids->type == BP_TYPE_I32 && t->type == BP_TYPE_F32 &&
           ids->ne[1] == tab->ne[2] && ids->ne[2] == tab->ne[3] && ids->ne[3] == 1 &&
           bp_shape_is(t, tab->ne[0], ids->ne[0], tab->ne[2], tab->ne[3]);
}

static inline bool bp__set_rows_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *d = t->src[0], *v = t->src[1], *ids = t->src[2];
    return d && v && ids && ids->type == BP_TYPE_I32 && t->type == d->type &&
           bp_shape_same(t, d) && bp_shape_positive(ids) && ids->ne[3] == 1 &&
           v->ne[0] == d->ne[0] && v->ne[2] == d->ne[2] && v->ne[3] == d->ne[3] &&
           ids->ne[0] == v->ne[1] && d->ne[2] % ids->ne[1] == 0 && d->ne[3] % ids->ne[2] == 0;
}

static inline bool bp__flash_attn_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
    return q && k && v && t->type == BP_TYPE_F32 && bp_shape_positive(k) &&
           q->ne[0] == k->ne[0] && k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2] &&
           k->ne[3] == q->ne[3] && v->ne[3] == q->ne[3] && q->ne[2] % k->ne[2] == 0 &&
           bp_shape_is(t, v->ne[0], q->ne[2], q->ne[1], q->ne[3]) &&
           bp__mask_ok(t->src[3], k->ne[1], q->ne[1], q->ne[2], q->ne[3]);
}

static inline bool bp__mul_mat_id_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1], *ids = t->src[2];
    if (!w || !x || !ids || t->type != BP_TYPE_F32 || x->type != BP_TYPE_F32 ||
        ids->type != BP_TYPE_I32 || !bp_shape_positive(w) || !bp_shape_positive(x) ||
        !bp_shape_positive(ids))
        return false;
    const int64_t n_used = ids->ne[0], n_tok = ids->ne[1];
    return w->ne[3] == 1 && x->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1 &&
           w->ne[0] == x->ne[0] && (x->ne[1] == 1 || x->ne[1] == n_used) && x->ne[2] == n_tok &&
           bp_shape_is(t, w->ne[1], n_used, n_tok, 1);
}

static inline bool bp__top_k_shapes_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0];
    const int32_t k = bp_op_param_i32(t, 0);
    return x && x->type == BP_TYPE_F32 && t->type == BP_TYPE_I32 && bp_shape_positive(x) &&
           k >= 1 && k <= x->ne[0] && bp_shape_is(t, k, x->ne[1], x->ne[2], x->ne[3]);
}

/* True when node t is well-formed for its op: its required sources are
 * there and every shape and fixed type relation of bp_ops.h holds. Says
 * nothing about which element types a device can compute. False for
 * BP_OP_CUSTOM, whose rules are its vendor's (bp_ops.h). */
static inline bool bp_op_shapes_ok(const struct bp_tensor *t)
{
    if (!t || t->op < 0 || t->op >= BP_OP_COUNT)
        return false;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] < 0) return false;
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    switch ((enum bp_op)t->op) {
    case BP_OP_NONE: case BP_OP_RESHAPE: case BP_OP_VIEW: case BP_OP_PERMUTE:
    case BP_OP_TRANSPOSE:
        return true;
    case BP_OP_GET_ROWS: return bp__get_rows_shapes_ok(t);
    case BP_OP_MUL_MAT: return bp__mul_mat_shapes_ok(t);
    case BP_OP_ADD: case BP_OP_MUL: case BP_OP_DIV: return bp__binary_shapes_ok(t);
    case BP_OP_SCALE: case BP_OP_RMS_NORM: case BP_OP_SILU: case BP_OP_GELU: case BP_OP_SQR:
    case BP_OP_TANH: case BP_OP_CLAMP:
        return a && t->type == a->type && bp_shape_same(t, a);
    case BP_OP_SOFT_MAX:
        return a && t->type == BP_TYPE_F32 && bp_shape_same(t, a) &&
               bp__mask_ok(b, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    case BP_OP_ROPE: case BP_OP_ROPE_EXT: return bp__rope_shapes_ok(t);
    case BP_OP_CPY:
        return a && b && t->type == b->type && bp_shape_positive(a) &&
               bp_nelements(a) == bp_nelements(t) && bp_nelements(b) == bp_nelements(t);
    case BP_OP_CONT:
        return a && t->type == a->type && bp_shape_same(t, a);
    case BP_OP_SET_ROWS: return bp__set_rows_shapes_ok(t);
    case BP_OP_FLASH_ATTN_EXT: case BP_OP_FLASH_ATTN_SOFTCAP: return bp__flash_attn_shapes_ok(t);
    case BP_OP_MUL_MAT_ID: return bp__mul_mat_id_shapes_ok(t);
    case BP_OP_TOP_K: return bp__top_k_shapes_ok(t);
    case BP_OP_SUM_ROWS:
        return a && a->type == BP_TYPE_F32 && t->type == BP_TYPE_F32 &&
               bp_shape_is(t, 1, a->ne[1], a->ne[2], a->ne[3]);
    case BP_OP_CUSTOM: break; /* its vendor's rules: bp_ops.h */
    case BP_OP_COUNT: break;
    }
    return false;
}

#ifdef __cplusplus
}
#endif

#endif
