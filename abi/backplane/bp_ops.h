/*
 * bp_ops.h — the op set and the meaning of each op's sources and parameters.
 *
 * Shapes follow ggml: ne[0] is the innermost (contiguous) dimension, so a
 * matrix with K columns and N rows is [K, N]. "F" below means F32 or F16
 * (devices report what they support through supports_op).
 *
 * Op parameters live in bp_tensor.op_params as 32-bit words; floats are
 * stored bit-for-bit (memcpy), read them with bp_op_param_f32().
 *
 * ABI: enum values are frozen; new ops are appended before BP_OP_COUNT, and
 * an op's sources and parameters never change meaning (a changed op is a new
 * op). A device that does not know an op answers false from supports_op.
 */
#ifndef BP_OPS_H
#define BP_OPS_H

#include <assert.h>

#ifdef __cplusplus
extern "C" {
#endif

enum bp_op {
    BP_OP_NONE = 0,       /* a leaf: weights, inputs, caches */

    /* GET_ROWS: src0 table [K, R, d2, d3] (any type), src1 ids I32 [n, d2, d3, 1]
     * -> F32 [K, n, d2, d3]; row i of the result is row src1[i] of src0.
     * An id outside [0, R) makes compute fail with BP_ERR_INVALID_ARGUMENT. */
    BP_OP_GET_ROWS = 1,

    /* MUL_MAT: src0 W [K, N, d2, d3] (any type), src1 X [K, M, e2, e3] (F)
     * -> F32 [N, M, e2, e3]; e2 % d2 == 0 and e3 % d3 == 0 are required
     * (a node that breaks them is malformed, see bp_op_shapes_ok).
     * dst[n, m, i2, i3] = sum_k W[k, n, i2 / r2, i3 / r3] * X[k, m, i2, i3]
     * with r2 = e2 / d2 and r3 = e3 / d3: each W matrix serves r2 (r3)
     * consecutive batches of X — integer division, not i2 % d2 — as in ggml
     * (grouped-query attention lays out kv heads so). */
    BP_OP_MUL_MAT = 2,

    /* ADD, MUL: src0 a [n0..n3] (F), src1 b with a.ne[i] % b.ne[i] == 0
     * (b repeats over a) -> same shape and type as a; elementwise a+b, a*b. */
    BP_OP_ADD = 3,
    BP_OP_MUL = 4,

    /* SCALE: src0 x -> same shape; x * s + b. params: f32 s, f32 b. */
    BP_OP_SCALE = 5,

    /* RMS_NORM: src0 x [n, ...] -> same shape; each row (dim 0) divided by
     * sqrt(mean(x^2) + eps). params: f32 eps. */
    BP_OP_RMS_NORM = 6,

    /* SOFT_MAX: src0 x [n, r, d2, d3], optional src1 mask [n, r', m2, m3]
     * (F32 or F16, r' >= r, d2 % m2 == 0, d3 % m3 == 0) -> F32 same shape as x;
     * softmax over dim 0 of (x * scale + mask). params: f32 scale. */
    BP_OP_SOFT_MAX = 7,

    /* ROPE: src0 x [head_dim, n_head, n_tok, 1], src1 pos I32 [n_tok]
     * -> same shape and type as x. The first n_dims (even, <= head_dim)
     * elements of each head are rotated by pos * freq_scale * base^(-2i/n_dims);
     * the rest are copied. mode 0 (normal) rotates adjacent pairs (x[2i],
     * x[2i+1]); mode 2 (NEOX) rotates (x[i], x[i + n_dims/2]).
     * params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale. */
    BP_OP_ROPE = 8,

    /* SILU, GELU: src0 x -> same shape and type. GELU is the tanh approximation
     * 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))). A device may compute it
     * as ggml's CPU backend does, which llama.cpp's results carry: for
     * -10 < x < 10, x rounded to F16 (h) and the result 0.5h(1 +
     * tanh(0.79788456 h (1 + 0.044715 h^2))) worked out in float and rounded
     * to F16; 0 for x <= -10 and x for x >= 10. The cpu plugin computes it
     * so (a 64K-entry table); the result then differs from the formula by
     * up to F16's rounding, 2^-11 of itself. */
    BP_OP_SILU = 9,
    BP_OP_GELU = 10,

    /* CPY: src0 a, src1 b with the same number of elements -> a view of b;
     * copies a into b in row-major element order, converting between F32,
     * F16 and BF16. */
    BP_OP_CPY = 11,

    /* CONT: src0 a (any strides) -> a contiguous tensor of a's shape and type. */
    BP_OP_CONT = 12,

    /* RESHAPE, VIEW, PERMUTE, TRANSPOSE: no computation; the result aliases
     * its view source (view_src, view_offs). Devices treat them as no-ops.
     * PERMUTE params: i32 axis[4] (axis[i] is where source dim i goes). */
    BP_OP_RESHAPE = 13,
    BP_OP_VIEW = 14,
    BP_OP_PERMUTE = 15,
    BP_OP_TRANSPOSE = 16,

    /* SET_ROWS: src0 dst [K, R, d2, d3] (F), src1 values F32 [K, n, d2, d3],
     * src2 ids I32 [n, d2', d3'] (d2 % d2' == 0, d3 % d3' == 0)
     * -> a view of src0; row src2[i] of src0 = row i of src1 (converted).
     * An id outside [0, R) makes compute fail with BP_ERR_INVALID_ARGUMENT. */
    BP_OP_SET_ROWS = 17,

    /* FLASH_ATTN_EXT: src0 q [D, n_q, H, B] (F32), src1 k [D, n_kv, H_kv, B] (F),
     * src2 v [Dv, n_kv, H_kv, B] (F), optional src3 mask [n_kv, n_q', 1, 1]
     * (F32 or F16, n_q' >= n_q; -INFINITY masks) with H % H_kv == 0
     * (grouped-query: head h reads kv head h / (H / H_kv))
     * -> F32 [Dv, H, n_q, B] (note: heads before tokens, ready for reshape).
     * out = softmax(scale * q.k^T + mask) . v. params: f32 scale. */
    BP_OP_FLASH_ATTN_EXT = 18,

    /* CUSTOM (ABI 1.1): a vendor-defined op, the route by which a vendor adds
     * an op without a new ABI minor. The node carries the op's registered
     * name, "<vendor>.<op>" (lower-case letters, digits, '_' and '.'; fewer
     * than BP_CUSTOM_NAME_MAX bytes): op_params words [0, BP_CUSTOM_PARAM_FIRST)
     * hold it NUL-terminated and zero-padded; words [BP_CUSTOM_PARAM_FIRST,
     * BP_MAX_OP_PARAMS) are the op's own parameters. Sources (src0..src3, in
     * order, no gaps) and the result's type and shape are what the op's
     * vendor defines; the application states them (bp_custom), the host
     * checks only this form. A name is an ABI symbol of its vendor: a change
     * of sources, parameters or meaning takes a new name ("acme.thing_v2").
     * A device that does not know the name declines the node in supports_op;
     * bp_op_shapes_ok answers false for CUSTOM (it cannot know the vendor's
     * rules), so the shipped plugins decline every custom op, and a device
     * that implements one tests the name (bp_custom_op_is, bp_custom_op.h)
     * and its own shape rules. Reading and checking: bp_custom_op.h. */
    BP_OP_CUSTOM = 19,

    /* SQR (ABI 1.1): src0 x -> same shape and type; x*x element by element. */
    BP_OP_SQR = 20,

    /* ROPE_EXT (ABI 1.2): ROPE as llama.cpp scales it. src0 x and src1 pos
     * as for ROPE; optional src2 freq_factors F32 [n_dims / 2] (NULL: all 1).
     * params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale (as ROPE),
     * i32 n_ctx_orig, f32 ext_factor, f32 attn_factor, f32 beta_fast,
     * f32 beta_slow. For pair i (0 <= i < n_dims/2) of a token at pos p:
     *   theta_ext = p * freq_base^(-2i/n_dims) / freq_factors[i]
     *   theta_int = freq_scale * theta_ext
     * When ext_factor != 0 (YaRN), with
     *   corr(b) = n_dims * ln(n_ctx_orig / (2 pi b)) / (2 ln freq_base),
     *   lo = max(0, floor(corr(beta_fast))), hi = min(n_dims - 1, ceil(corr(beta_slow))),
     *   ramp = (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)) * ext_factor:
     *   theta = theta_int (1 - ramp) + theta_ext ramp,
     *   m = attn_factor (1 + 0.1 ln(1 / freq_scale));
     * otherwise theta = theta_int and m = attn_factor. The pair turns by
     * theta with cos and sin both multiplied by m (ggml's rope_yarn). With
     * no factors, ext_factor 0 and attn_factor 1 it is ROPE. */
    BP_OP_ROPE_EXT = 21,

    /* TANH (ABI 1.2): src0 x -> same shape and type; tanh(x) element by
     * element (with SCALE around it, the logit softcap c tanh(x / c)). */
    BP_OP_TANH = 22,

    /* FLASH_ATTN_SOFTCAP (ABI 1.2): FLASH_ATTN_EXT with its scores capped
     * before the mask: out = softmax(c tanh(scale q.k^T / c) + mask) . v.
     * Sources and result as FLASH_ATTN_EXT. params: f32 scale, f32 c (> 0). */
    BP_OP_FLASH_ATTN_SOFTCAP = 23,

    /* MUL_MAT_ID (ABI 1.2): a mixture-of-experts product, as ggml's
     * mul_mat_id. src0 W [K, N, n_expert, 1] (any type: the stacked expert
     * matrices), src1 X [K, X1, n_tok, 1] (F32) with X1 == 1 or X1 == n_used,
     * src2 ids I32 [n_used, n_tok, 1, 1] (any strides)
     * -> F32 [N, n_used, n_tok, 1] with
     *   dst[n, u, t] = sum_k W[k, n, ids[u, t]] * X[k, u % X1, t]:
     * slot u of token t is expert ids[u, t] applied to that token's
     * activation for the slot (X1 == 1: one activation per token shared by
     * its slots). ids may repeat within a token, come in any order and leave
     * experts unused; an expert no slot names is never read. An id outside
     * [0, n_expert) makes compute fail with BP_ERR_INVALID_ARGUMENT. */
    BP_OP_MUL_MAT_ID = 24,

    /* TOP_K (ABI 1.2): src0 x F32 [n, r, d2, d3] -> I32 [k, r, d2, d3] with
     * 1 <= k <= n; row i of the result holds the indices (in [0, n)) of the
     * k largest values of row i of x, largest first; equal values in
     * ascending index order (the first k of a stable descending argsort;
     * k == n is the whole argsort, ggml's GGML_SORT_ORDER_DESC). -0.0 and
     * +0.0 are equal. A row holding a NaN gives k distinct indices in an
     * unspecified order. params: i32 k. */
    BP_OP_TOP_K = 25,

    /* SUM_ROWS (ABI 1.2): src0 x F32 [n, r, d2, d3] -> F32 [1, r, d2, d3];
     * the sum of each row (dim 0), in any order of addition. */
    BP_OP_SUM_ROWS = 26,

    /* DIV (ABI 1.2): as ADD and MUL (b repeats over a, the result has a's
     * shape and type): a / b element by element, IEEE division. */
    BP_OP_DIV = 27,

    /* CLAMP (ABI 1.2): src0 x -> same shape and type; min(max(x, lo), hi)
     * element by element (NaN stays NaN). params: f32 lo, f32 hi (lo <= hi;
     * either may be infinite). */
    BP_OP_CLAMP = 28,

    BP_OP_COUNT
};

static_assert(BP_OP_GET_ROWS == 1 && BP_OP_MUL_MAT == 2 && BP_OP_ADD == 3 && BP_OP_MUL == 4 &&
              BP_OP_SCALE == 5 && BP_OP_RMS_NORM == 6 && BP_OP_SOFT_MAX == 7 && BP_OP_ROPE == 8,
              "bp_op values are frozen");
static_assert(BP_OP_SILU == 9 && BP_OP_GELU == 10 && BP_OP_CPY == 11 && BP_OP_CONT == 12 &&
              BP_OP_RESHAPE == 13 && BP_OP_VIEW == 14 && BP_OP_PERMUTE == 15 &&
              BP_OP_TRANSPOSE == 16 && BP_OP_SET_ROWS == 17 && BP_OP_FLASH_ATTN_EXT == 18,
              "bp_op values are frozen");
static_assert(BP_OP_CUSTOM == 19 && BP_OP_SQR == 20, "bp_op values are frozen");
static_assert(BP_OP_ROPE_EXT == 21 && BP_OP_TANH == 22 && BP_OP_FLASH_ATTN_SOFTCAP == 23,
              "bp_op values are frozen");
static_assert(BP_OP_MUL_MAT_ID == 24 && BP_OP_TOP_K == 25 && BP_OP_SUM_ROWS == 26 &&
              BP_OP_DIV == 27 && BP_OP_CLAMP == 28, "bp_op values are frozen");

/* The op-param layout of BP_OP_CUSTOM (words of bp_tensor.op_params). */
#define BP_CUSTOM_NAME_MAX    32  /* bytes of the name field, its NUL included */
#define BP_CUSTOM_PARAM_FIRST  8  /* first word of the op's own parameters */
#define BP_CUSTOM_MAX_PARAMS   8  /* words of the op's own parameters */

#define BP_ROPE_MODE_NORMAL 0
#define BP_ROPE_MODE_NEOX   2

/* Upper-case op name ("MUL_MAT"); "UNKNOWN" otherwise. */
static inline const char *bp_op_name(enum bp_op op)
{
    static const char *const names[BP_OP_COUNT] = {
        "NONE", "GET_ROWS", "MUL_MAT", "ADD", "MUL", "SCALE", "RMS_NORM", "SOFT_MAX",
        "ROPE", "SILU", "GELU", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE",
        "SET_ROWS", "FLASH_ATTN_EXT", "CUSTOM", "SQR", "ROPE_EXT", "TANH",
        "FLASH_ATTN_SOFTCAP", "MUL_MAT_ID", "TOP_K", "SUM_ROWS", "DIV", "CLAMP",
    };
    return ((unsigned)op < BP_OP_COUNT) ? names[op] : "UNKNOWN";
}

/* True for ops that only re-describe memory (no kernel runs). */
static inline int bp_op_is_view(enum bp_op op)
{
    return op == BP_OP_NONE || op == BP_OP_RESHAPE || op == BP_OP_VIEW ||
           op == BP_OP_PERMUTE || op == BP_OP_TRANSPOSE;
}

#ifdef __cplusplus
}
#endif
#endif /* BP_OPS_H */
