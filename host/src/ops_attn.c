/* ops_attn.c — the attention ops: SOFT_MAX, ROPE, ROPE_EXT, FLASH_ATTN_EXT,
 * FLASH_ATTN_SOFTCAP. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "tensor_internal.h"

static void set_param_f32(struct bp_tensor *t, int i, float v)
{
    memcpy(&t->op_params[i], &v, sizeof v);
}

static bool mask_type(const struct bp_tensor *m)
{
    return m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16;
}

struct bp_tensor *bp_soft_max(struct bp_context *ctx, struct bp_tensor *x, struct bp_tensor *mask,
                              float scale)
{
    const enum bp_op op = BP_OP_SOFT_MAX;
    if (!bp__op_ctx_ok(ctx, op) || !x) return NULL;
    if (!bp__is_float(x)) return bp__op_type_fail(ctx, op, "x", x, "f32, f16 or bf16");
    if (mask) {
        if (!mask_type(mask)) return bp__op_type_fail(ctx, op, "mask", mask, "f32 or f16");
        if (mask->ne[0] != x->ne[0])
            return bp__op_mismatch(ctx, op, "x", x, "mask", mask, "disagree in dim 0; they must be equal.");
        if (mask->ne[1] < x->ne[1])
            return bp__op_mismatch(ctx, op, "x", x, "mask", mask,
                                   "disagree in dim 1: the mask needs at least as many rows as x.");
        if (!bp__repeats(x->ne[2], mask->ne[2]) || !bp__repeats(x->ne[3], mask->ne[3]))
            return bp__op_mismatch(ctx, op, "x", x, "mask", mask,
                                   "disagree in dims 2-3: the mask is broadcast, so its dims 2 and 3 "
                                   "must divide those of x.");
    }
    struct bp_tensor *t = bp__op_result(ctx, op, BP_TYPE_F32, x->ne, x, mask, NULL, NULL);
    if (t) set_param_f32(t, 0, scale);
    return t;
}

/* ROPE and ROPE_EXT share their checks; ff (ROPE_EXT's factors) may be NULL. */
static struct bp_tensor *rope_node(struct bp_context *ctx, enum bp_op op, struct bp_tensor *x,
                                   struct bp_tensor *pos, struct bp_tensor *ff, int n_dims, int mode,
                                   float freq_base, float freq_scale)
{
    if (!bp__op_ctx_ok(ctx, op) || !x || !pos) return NULL;
    bp__operand_buf d;
    if (!bp__is_float(x)) return bp__op_type_fail(ctx, op, "x", x, "f32, f16 or bf16");
    if (pos->type != BP_TYPE_I32) return bp__op_type_fail(ctx, op, "pos", pos, "i32");
    if (x->ne[3] != 1)
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "%s has dim 3 = %" PRId64 "; x must be "
                           "[head_dim, n_head, n_tok, 1].", bp__operand("x", x, d), x->ne[3]);
    if (pos->ne[0] != x->ne[2] || pos->ne[1] != 1 || pos->ne[2] != 1 || pos->ne[3] != 1)
        return bp__op_mismatch(ctx, op, "x", x, "pos", pos,
                               "disagree: pos must be 1-D with one position per token (dim 2 of x).");
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > x->ne[0])
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "n_dims is %d for %s; it must be even, "
                           "positive and at most head_dim (dim 0).", n_dims, bp__operand("x", x, d));
    if (mode != BP_ROPE_MODE_NORMAL && mode != BP_ROPE_MODE_NEOX)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "mode is %d for %s; use BP_ROPE_MODE_NORMAL (0) "
                           "or BP_ROPE_MODE_NEOX (2).", mode, bp__operand("x", x, d));
    if (!(freq_base > 0.0f) || !isfinite(freq_base) || !isfinite(freq_scale))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "freq_base %g and freq_scale %g for %s: the "
                           "base must be finite and positive (10000 is usual), the scale finite.",
                           (double)freq_base, (double)freq_scale, bp__operand("x", x, d));
    if (ff && (ff->type != BP_TYPE_F32 || ff->ne[0] != n_dims / 2 || ff->ne[1] != 1 || ff->ne[2] != 1 ||
               ff->ne[3] != 1))
        return bp__op_fail(ctx, op, BP_ERR_SHAPE, "%s is %s; it must be f32 [%d] (one factor per "
                           "rotated pair of n_dims %d).", bp__operand("freq_factors", ff, d),
                           bp_type_name((enum bp_type)ff->type), n_dims / 2, n_dims);
    struct bp_tensor *t = bp__op_result(ctx, op, (enum bp_type)x->type, x->ne, x, pos, ff, NULL);
    if (t) {
        t->op_params[0] = n_dims;
        t->op_params[1] = mode;
        set_param_f32(t, 2, freq_base);
        set_param_f32(t, 3, freq_scale);
    }
    return t;
}

struct bp_tensor *bp_rope(struct bp_context *ctx, struct bp_tensor *x, struct bp_tensor *pos, int n_dims,
                          int mode, float freq_base, float freq_scale)
{
    return rope_node(ctx, BP_OP_ROPE, x, pos, NULL, n_dims, mode, freq_base, freq_scale);
}

struct bp_tensor *bp_rope_ext(struct bp_context *ctx, struct bp_tensor *x, struct bp_tensor *pos,
                              struct bp_tensor *freq_factors, const struct bp_rope_ext_params *p)
{
    const enum bp_op op = BP_OP_ROPE_EXT;
    if (!bp__op_ctx_ok(ctx, op) || !x || !pos) return NULL;
    if (!p) return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT, "the parameters are NULL.");
    if (!isfinite(p->ext_factor) || !isfinite(p->attn_factor) || !isfinite(p->beta_fast) ||
        !isfinite(p->beta_slow) || (p->ext_factor != 0.0f && (p->n_ctx_orig <= 0 || !(p->beta_fast > 0.0f) ||
                                                             !(p->beta_slow > 0.0f) || p->freq_scale <= 0.0f)))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "ext_factor %g, attn_factor %g, beta %g/%g, n_ctx_orig %d: the factors must be "
                           "finite, and YaRN (ext_factor != 0) needs positive betas, freq_scale and "
                           "n_ctx_orig.", (double)p->ext_factor, (double)p->attn_factor,
                           (double)p->beta_fast, (double)p->beta_slow, p->n_ctx_orig);
    struct bp_tensor *t = rope_node(ctx, op, x, pos, freq_factors, p->n_dims, p->mode, p->freq_base,
                                    p->freq_scale);
    if (t) {
        t->op_params[4] = p->n_ctx_orig;
        set_param_f32(t, 5, p->ext_factor);
        set_param_f32(t, 6, p->attn_factor);
        set_param_f32(t, 7, p->beta_fast);
        set_param_f32(t, 8, p->beta_slow);
    }
    return t;
}

static struct bp_tensor *attn_node(struct bp_context *ctx, enum bp_op op, struct bp_tensor *q,
                                   struct bp_tensor *k, struct bp_tensor *v, struct bp_tensor *mask,
                                   float scale)
{
    if (!bp__op_ctx_ok(ctx, op) || !q || !k || !v) return NULL;
    if (q->type != BP_TYPE_F32) return bp__op_type_fail(ctx, op, "q", q, "f32");
    if (!bp__is_float(k)) return bp__op_type_fail(ctx, op, "k", k, "f32, f16 or bf16");
    if (!bp__is_float(v)) return bp__op_type_fail(ctx, op, "v", v, "f32, f16 or bf16");
    if (q->ne[0] != k->ne[0])
        return bp__op_mismatch(ctx, op, "q", q, "k", k, "disagree in dim 0 (head size D); they must be equal.");
    if (k->ne[1] != v->ne[1])
        return bp__op_mismatch(ctx, op, "k", k, "v", v, "disagree in dim 1 (n_kv); they must be equal.");
    if (k->ne[2] != v->ne[2])
        return bp__op_mismatch(ctx, op, "k", k, "v", v, "disagree in dim 2 (kv heads); they must be equal.");
    if (k->ne[2] == 0 ? q->ne[2] != 0 : q->ne[2] % k->ne[2] != 0)
        return bp__op_mismatch(ctx, op, "q", q, "k", k,
                               "disagree in dim 2: the q heads must be a multiple of the kv heads.");
    if (k->ne[3] != q->ne[3])
        return bp__op_mismatch(ctx, op, "q", q, "k", k, "disagree in dim 3 (batch); they must be equal.");
    if (v->ne[3] != q->ne[3])
        return bp__op_mismatch(ctx, op, "q", q, "v", v, "disagree in dim 3 (batch); they must be equal.");
    if (mask) {
        if (!(mask->type == BP_TYPE_F32 || mask->type == BP_TYPE_F16))
            return bp__op_type_fail(ctx, op, "mask", mask, "f32 or f16");
        if (mask->ne[0] != k->ne[1])
            return bp__op_mismatch(ctx, op, "k", k, "mask", mask,
                                   "disagree: dim 0 of the mask must equal dim 1 of k (n_kv).");
        if (mask->ne[1] < q->ne[1])
            return bp__op_mismatch(ctx, op, "q", q, "mask", mask,
                                   "disagree: the mask needs a row per query (dim 1 of q) at least.");
        if (mask->ne[2] != 1 || mask->ne[3] != 1)
            return bp__op_mismatch(ctx, op, "q", q, "mask", mask,
                                   "disagree: the mask must be 2-D [n_kv, n_q], shared by all heads.");
    }
    const int64_t ne[4] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    struct bp_tensor *t = bp__op_result(ctx, op, BP_TYPE_F32, ne, q, k, v, mask);
    if (t) set_param_f32(t, 0, scale);
    return t;
}

struct bp_tensor *bp_flash_attn_ext(struct bp_context *ctx, struct bp_tensor *q, struct bp_tensor *k,
                                    struct bp_tensor *v, struct bp_tensor *mask, float scale)
{
    return attn_node(ctx, BP_OP_FLASH_ATTN_EXT, q, k, v, mask, scale);
}

struct bp_tensor *bp_flash_attn_softcap(struct bp_context *ctx, struct bp_tensor *q, struct bp_tensor *k,
                                        struct bp_tensor *v, struct bp_tensor *mask, float scale,
                                        float softcap)
{
    const enum bp_op op = BP_OP_FLASH_ATTN_SOFTCAP;
    if (!bp__op_ctx_ok(ctx, op)) return NULL;
    if (!(softcap > 0.0f) || !isfinite(softcap))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "softcap %g: the cap must be finite and positive (Gemma 2 uses 50).",
                           (double)softcap);
    struct bp_tensor *t = attn_node(ctx, op, q, k, v, mask, scale);
    if (t) set_param_f32(t, 1, softcap);
    return t;
}
