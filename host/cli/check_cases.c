/*
 * check_cases.c — the cases of the op-equivalence harness.
 *
 * Each template below is expanded once per element type in its `types` mask.
 * Shapes favour odd sizes (1, 3, 17, 33, 65) because vector kernels break at
 * their tails, and every op gets at least one non-contiguous input because
 * plugins that assume packed tensors are the commonest bug.
 *
 * Input layouts (low nibbles of `variant`, check_harness.h): how a logical
 * shape is laid out.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_harness.h"

/* An input of logical shape ne laid out as `layout` (a view of a leaf). */
static struct bp_tensor *in_layout(struct check_builder *b, const char *name, enum bp_type type,
                                   enum check_fill fill, int64_t range, const int64_t ne[4],
                                   int layout)
{
    struct bp_tensor *leaf;
    switch (layout) {
    case LAYOUT_PERMUTED:
        leaf = check_input(b, name, type, fill, range, ne[1], ne[0], ne[2], ne[3]);
        return bp_permute(b->ctx, leaf, 1, 0, 2, 3);
    case LAYOUT_STRIDED_VIEW: {
        const int64_t pad = 7;
        leaf = check_input(b, name, type, fill, range, ne[0] + pad, ne[1], ne[2], ne[3]);
        size_t ts = bp_type_size(type);
        size_t nb[4] = {ts, (size_t)(ne[0] + pad) * ts, 0, 0};
        nb[2] = nb[1] * (size_t)ne[1];
        nb[3] = nb[2] * (size_t)ne[2];
        return bp_view(b->ctx, leaf, 4, ne, nb, 3 * ts);
    }
    case LAYOUT_ROWS_PERMUTED:
        leaf = check_input(b, name, type, fill, range, ne[0], ne[2], ne[1], ne[3]);
        return bp_permute(b->ctx, leaf, 0, 2, 1, 3);
    default:
        return check_input(b, name, type, fill, range, ne[0], ne[1], ne[2], ne[3]);
    }
}

static struct bp_tensor *in_uniform(struct check_builder *b, const char *name, enum bp_type type,
                                    const int64_t ne[4], int layout)
{
    return in_layout(b, name, type, CHECK_FILL_UNIFORM, 0, ne, layout);
}

/* ---- builders ---- */

static struct bp_tensor *build_binary(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "a", c->type, c->a, LAYOUT0(c->variant));
    struct bp_tensor *y = in_uniform(b, "b", c->type, c->b, LAYOUT1(c->variant));
    return c->op == BP_OP_ADD ? bp_add(b->ctx, x, y) : bp_mul(b->ctx, x, y);
}

static struct bp_tensor *build_unary(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "x", c->type, c->a, LAYOUT0(c->variant));
    switch (c->op) {
    case BP_OP_SCALE: return bp_scale(b->ctx, x, c->f0, c->f1);
    case BP_OP_RMS_NORM: return bp_rms_norm(b->ctx, x, c->f0);
    case BP_OP_SILU: return bp_silu(b->ctx, x);
    case BP_OP_GELU: return bp_gelu(b->ctx, x);
    case BP_OP_SQR: return bp_sqr(b->ctx, x);
    case BP_OP_TANH: return bp_tanh(b->ctx, x);
    case BP_OP_CLAMP: return bp_clamp(b->ctx, x, c->f0, c->f1);
    case BP_OP_SUM_ROWS: return bp_sum_rows(b->ctx, x);
    case BP_OP_CONT: return bp_cont(b->ctx, x);
    default: return NULL;
    }
}

static struct bp_tensor *build_soft_max(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "x", BP_TYPE_F32, c->a, LAYOUT0(c->variant));
    struct bp_tensor *mask = NULL;
    if (c->variant & WITH_MASK)
        mask = in_layout(b, "mask", c->type, CHECK_FILL_MASK, 0, c->b, LAYOUT_CONTIGUOUS);
    return bp_soft_max(b->ctx, x, mask, c->f0);
}

static struct bp_tensor *build_rope(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "x", c->type, c->a, LAYOUT0(c->variant));
    struct bp_tensor *pos = check_input(b, "pos", BP_TYPE_I32, CHECK_FILL_IDS, 100, c->a[2], 1, 1, 1);
    return bp_rope(b->ctx, x, pos, c->i0, c->i1, c->f0, c->f1);
}

/* ROPE_EXT: i0 n_dims, i1 mode, f0 base, f1 freq_scale, f2 ext_factor, f3
 * attn_factor (0: 1), c[0] n_ctx_orig (0: none, positions below 100);
 * with n_ctx_orig the positions reach twice it, past the original context
 * where YaRN matters. WITH_FACTORS: freq factors in [1, 8). */
static struct bp_tensor *build_rope_ext(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "x", c->type, c->a, LAYOUT0(c->variant));
    const int64_t n_ctx_orig = c->c[0], range = n_ctx_orig ? 2 * n_ctx_orig : 100;
    struct bp_tensor *pos = check_input(b, "pos", BP_TYPE_I32, CHECK_FILL_IDS, range, c->a[2], 1, 1, 1);
    struct bp_tensor *ff = NULL;
    if (c->variant & WITH_FACTORS)
        ff = check_input(b, "freq_factors", BP_TYPE_F32, CHECK_FILL_FACTORS, 0, c->i0 / 2, 1, 1, 1);
    const struct bp_rope_ext_params p = {
        .n_dims = c->i0, .mode = c->i1, .freq_base = c->f0, .freq_scale = c->f1,
        .n_ctx_orig = (int)n_ctx_orig, .ext_factor = c->f2,
        .attn_factor = c->f3 != 0.0f ? c->f3 : 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f,
    };
    return bp_rope_ext(b->ctx, x, pos, ff, &p);
}

/* i0: source type, i1: destination type; b: the destination leaf when it is
 * larger than the copy (a view of b[1] rows starting at row c[0] is written). */
static struct bp_tensor *build_cpy(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *src = in_uniform(b, "src", (enum bp_type)c->i0, c->a, LAYOUT0(c->variant));
    struct bp_tensor *dst;
    if (c->b[0] > 0) {
        struct bp_tensor *cache = check_input(b, "dst", (enum bp_type)c->i1, CHECK_FILL_UNIFORM, 0,
                                              c->b[0], c->b[1], 1, 1);
        size_t ts = bp_type_size((enum bp_type)c->i1);
        size_t row = (size_t)c->b[0] * ts;
        size_t nb[4] = {ts, row, row * (size_t)c->a[1], row * (size_t)c->a[1]};
        dst = bp_view(b->ctx, cache, 2, c->a, nb, row * (size_t)c->c[0]);
    } else {
        dst = check_input(b, "dst", (enum bp_type)c->i1, CHECK_FILL_UNIFORM, 0, c->a[0], c->a[1],
                          c->a[2], c->a[3]);
    }
    return bp_cpy(b->ctx, src, dst);
}

/* a: table shape; b: ids shape. */
static struct bp_tensor *build_get_rows(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *table = in_uniform(b, "table", c->type, c->a, LAYOUT_CONTIGUOUS);
    struct bp_tensor *ids = in_layout(b, "ids", BP_TYPE_I32, CHECK_FILL_IDS, c->a[1], c->b,
                                      LAYOUT_CONTIGUOUS);
    return bp_get_rows(b->ctx, table, ids);
}

/* a: destination shape; b: values shape; c: ids shape. */
static struct bp_tensor *build_set_rows(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *dst = in_uniform(b, "dst", c->type, c->a, LAYOUT_CONTIGUOUS);
    struct bp_tensor *values = in_uniform(b, "values", BP_TYPE_F32, c->b, LAYOUT0(c->variant));
    struct bp_tensor *ids = in_layout(b, "ids", BP_TYPE_I32, CHECK_FILL_IDS_UNIQUE, c->a[1], c->c,
                                      LAYOUT_CONTIGUOUS);
    return bp_set_rows(b->ctx, dst, values, ids);
}

/* a: W shape (type), b: X shape (type2). */
static struct bp_tensor *build_mul_mat(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *w = in_uniform(b, "w", c->type, c->a, LAYOUT0(c->variant));
    struct bp_tensor *x = in_uniform(b, "x", c->type2, c->b, LAYOUT1(c->variant));
    return bp_mul_mat(b->ctx, w, x);
}

/* a: {D, n_q, H, B}; b: {Dv, n_kv, H_kv}; K/V of c->type, mask of type2;
 * FLASH_ATTN_SOFTCAP: f0 the cap. */
static struct bp_tensor *build_flash_attn(struct check_builder *b, const struct check_case *c)
{
    int64_t D = c->a[0], nq = c->a[1], H = c->a[2], B = c->a[3];
    int64_t Dv = c->b[0], nkv = c->b[1], Hkv = c->b[2];
    const int64_t qne[4] = {D, nq, H, B}, kne[4] = {D, nkv, Hkv, B}, vne[4] = {Dv, nkv, Hkv, B};
    struct bp_tensor *q = in_uniform(b, "q", BP_TYPE_F32, qne, LAYOUT_CONTIGUOUS);
    struct bp_tensor *k = in_uniform(b, "k", c->type, kne, LAYOUT0(c->variant));
    struct bp_tensor *v = in_uniform(b, "v", c->type, vne, LAYOUT0(c->variant));
    struct bp_tensor *mask = NULL;
    if (c->variant & WITH_MASK) {
        /* Padded past n_q, as callers that round batches up do. */
        const int64_t mne[4] = {nkv, nq + 2, 1, 1};
        mask = in_layout(b, "mask", c->type2, CHECK_FILL_MASK, 0, mne, LAYOUT_CONTIGUOUS);
    }
    const float scale = 1.0f / sqrtf((float)D);
    if (c->op == BP_OP_FLASH_ATTN_SOFTCAP) return bp_flash_attn_softcap(b->ctx, q, k, v, mask, scale, c->f0);
    return bp_flash_attn_ext(b->ctx, q, k, v, mask, scale);
}

/* MUL_MAT_ID: a W [K, N, n_expert] (case type), b X [K, X1, n_tok] (F32),
 * c ids [n_used, n_tok]; i0 how the ids are drawn (a check_fill of ids),
 * i1 their range (0: every expert; fewer leaves experts no token picks);
 * WITH_IDS_T: ids a transposed view (strided); LAYOUT1 X's layout. */
static struct bp_tensor *build_mul_mat_id(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *w = in_uniform(b, "w", c->type, c->a, LAYOUT_CONTIGUOUS);
    struct bp_tensor *x = in_uniform(b, "x", BP_TYPE_F32, c->b, LAYOUT1(c->variant));
    const int64_t range = c->i1 ? c->i1 : c->a[2];
    struct bp_tensor *ids;
    if (c->variant & WITH_IDS_T) {
        /* Drawn per token along dim 1 of the leaf: no distinctness per token. */
        struct bp_tensor *leaf = check_input(b, "ids", BP_TYPE_I32, CHECK_FILL_IDS, range,
                                             c->c[1], c->c[0], 1, 1);
        ids = bp_transpose(b->ctx, leaf);
    } else {
        ids = check_input(b, "ids", BP_TYPE_I32, (enum check_fill)c->i0, range, c->c[0], c->c[1],
                          1, 1);
    }
    return bp_mul_mat_id(b->ctx, w, x, ids);
}

/* TOP_K: a x (F32), i0 k; variant: the fill (CHECK_FILL_TIES for ties),
 * LAYOUT0 in bits 4..7 (PERM) of it. */
static struct bp_tensor *build_top_k(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_layout(b, "x", BP_TYPE_F32, (enum check_fill)LAYOUT0(c->variant), 0,
                                    c->a, LAYOUT1(c->variant));
    return bp_top_k(b->ctx, x, c->i0);
}

/* DIV: as build_binary, b drawn from [1, 8) (no division by about zero). */
static struct bp_tensor *build_div(struct check_builder *b, const struct check_case *c)
{
    struct bp_tensor *x = in_uniform(b, "a", c->type, c->a, LAYOUT0(c->variant));
    struct bp_tensor *y = in_layout(b, "b", c->type, CHECK_FILL_FACTORS, 0, c->b, LAYOUT1(c->variant));
    return bp_div(b->ctx, x, y);
}

/* ---- the table ---- */

#define T(t) (1u << (t))
static_assert(BP_TYPE_COUNT <= 32, "a template's types are a 32-bit mask");
#define F32 T(BP_TYPE_F32)
#define F16 T(BP_TYPE_F16)
#define BF16 T(BP_TYPE_BF16)
#define Q4_0 T(BP_TYPE_Q4_0)
#define Q8_0 T(BP_TYPE_Q8_0)
#define Q4_K T(BP_TYPE_Q4_K)
#define Q6_K T(BP_TYPE_Q6_K)
/* blocks of 32 */
#define QUANT_32 (Q4_0 | Q8_0 | T(BP_TYPE_Q4_1) | T(BP_TYPE_Q5_0) | T(BP_TYPE_Q5_1) | T(BP_TYPE_IQ4_NL))
/* K a multiple of 256 fits every block size */
#define QUANT_ALL (QUANT_32 | Q4_K | Q6_K | T(BP_TYPE_Q2_K) | T(BP_TYPE_Q3_K) | T(BP_TYPE_Q5_K) | \
                   T(BP_TYPE_IQ4_XS))

struct check_template {
    enum bp_op op;
    unsigned types;
    enum bp_type type2;
    int64_t a[4], b[4], c[4];
    int variant;
    float f0, f1, f2, f3;
    int i0, i1;
    check_build_fn build;
    const char *desc;
};

#define NEOX BP_ROPE_MODE_NEOX
#define PERM(l0, l1) ((l0) | ((l1) << 4))

static const struct check_template templates[] = {
    /* ADD, MUL: broadcast of b over a, and non-contiguous operands. */
#define BINARY(OP)                                                                              \
    {.op = OP, .types = F32 | F16, .a = {17, 3, 2, 1}, .b = {17, 3, 2, 1}, .build = build_binary, \
     .desc = "a[17,3,2] b[17,3,2]"},                                                            \
    {.op = OP, .types = F32 | F16, .a = {33, 5, 3, 2}, .b = {33, 1, 1, 1}, .build = build_binary, \
     .desc = "a[33,5,3,2] b[33] broadcast"},                                                    \
    {.op = OP, .types = F32 | F16, .a = {33, 5, 3, 2}, .b = {33, 5, 1, 2}, .build = build_binary, \
     .desc = "a[33,5,3,2] b[33,5,1,2] broadcast"},                                              \
    {.op = OP, .types = F32 | F16, .a = {16, 5, 3, 1}, .b = {1, 5, 3, 1}, .build = build_binary,  \
     .desc = "a[16,5,3] b[1,5,3] broadcast dim 0"},                                             \
    {.op = OP, .types = F32 | F16, .a = {17, 5, 3, 1}, .b = {17, 5, 3, 1},                        \
     .variant = PERM(LAYOUT_PERMUTED, 0), .build = build_binary,                                \
     .desc = "a[17,5,3] permuted b[17,5,3]"},                                                   \
    {.op = OP, .types = F32 | F16, .a = {33, 7, 1, 1}, .b = {33, 1, 1, 1},                        \
     .variant = PERM(LAYOUT_STRIDED_VIEW, 0), .build = build_binary,                            \
     .desc = "a[33,7] strided view b[33] broadcast"},                                           \
    {.op = OP, .types = F32 | F16, .a = {17, 5, 3, 1}, .b = {17, 5, 1, 1},                        \
     .variant = PERM(0, LAYOUT_PERMUTED), .build = build_binary,                                \
     .desc = "a[17,5,3] b[17,5] permuted broadcast"},                                           \
    {.op = OP, .types = F32 | F16, .a = {65, 3, 2, 1}, .b = {65, 3, 2, 1},                        \
     .variant = PERM(LAYOUT_ROWS_PERMUTED, LAYOUT_ROWS_PERMUTED), .build = build_binary,        \
     .desc = "a[65,3,2] b[65,3,2] rows permuted"},                                              \
    {.op = OP, .types = F32 | F16, .a = {1, 1, 1, 1}, .b = {1, 1, 1, 1}, .build = build_binary,   \
     .desc = "a[1] b[1]"}
    BINARY(BP_OP_ADD),
    BINARY(BP_OP_MUL),
#undef BINARY

    {.op = BP_OP_SCALE, .types = F32 | F16, .a = {65, 3, 2, 1}, .f0 = 0.7f, .f1 = -0.25f,
     .build = build_unary, .desc = "x[65,3,2] s=0.7 b=-0.25"},
    {.op = BP_OP_SCALE, .types = F32 | F16, .a = {33, 17, 1, 1}, .f0 = -1.5f, .f1 = 0.0f,
     .variant = LAYOUT_PERMUTED, .build = build_unary, .desc = "x[33,17] permuted s=-1.5"},
    {.op = BP_OP_SCALE, .types = F32 | F16, .a = {40, 7, 3, 1}, .f0 = 2.0f, .f1 = 1.0f,
     .variant = LAYOUT_STRIDED_VIEW, .build = build_unary, .desc = "x[40,7,3] strided view s=2 b=1"},
    {.op = BP_OP_SCALE, .types = F32 | F16, .a = {1, 1, 1, 1}, .f0 = 3.0f, .f1 = 0.5f,
     .build = build_unary, .desc = "x[1] s=3 b=0.5"},

#define UNARY(OP)                                                                                 \
    {.op = OP, .types = F32 | F16, .a = {65, 3, 2, 1}, .build = build_unary, .desc = "x[65,3,2]"}, \
    {.op = OP, .types = F32 | F16, .a = {1, 1, 1, 1}, .build = build_unary, .desc = "x[1]"},       \
    {.op = OP, .types = F32 | F16, .a = {33, 17, 1, 1}, .variant = LAYOUT_PERMUTED,                \
     .build = build_unary, .desc = "x[33,17] permuted"},                                         \
    {.op = OP, .types = F32 | F16, .a = {17, 5, 3, 1}, .variant = LAYOUT_STRIDED_VIEW,             \
     .build = build_unary, .desc = "x[17,5,3] strided view"}
    UNARY(BP_OP_SILU),
    UNARY(BP_OP_GELU),

    {.op = BP_OP_RMS_NORM, .types = F32 | F16, .a = {65, 4, 3, 1}, .f0 = 1e-6f,
     .build = build_unary, .desc = "x[65,4,3] eps=1e-6"},
    {.op = BP_OP_RMS_NORM, .types = F32 | F16, .a = {1, 5, 1, 1}, .f0 = 1e-5f,
     .build = build_unary, .desc = "x[1,5] eps=1e-5"},
    {.op = BP_OP_RMS_NORM, .types = F32 | F16, .a = {33, 4, 3, 1}, .f0 = 1e-6f,
     .variant = LAYOUT_ROWS_PERMUTED, .build = build_unary, .desc = "x[33,4,3] rows permuted"},
    {.op = BP_OP_RMS_NORM, .types = F32 | F16, .a = {17, 6, 1, 1}, .f0 = 1e-5f,
     .variant = LAYOUT_STRIDED_VIEW, .build = build_unary, .desc = "x[17,6] strided view"},

    /* SOFT_MAX: x is F32; the type is the mask's. */
    {.op = BP_OP_SOFT_MAX, .types = F32, .a = {33, 7, 4, 1}, .f0 = 1.0f, .build = build_soft_max,
     .desc = "x[33,7,4] no mask"},
    {.op = BP_OP_SOFT_MAX, .types = F32, .a = {1, 3, 1, 1}, .f0 = 1.0f, .build = build_soft_max,
     .desc = "x[1,3] no mask"},
    {.op = BP_OP_SOFT_MAX, .types = F32, .a = {65, 5, 3, 1}, .f0 = 0.5f,
     .variant = LAYOUT_ROWS_PERMUTED, .build = build_soft_max,
     .desc = "x[65,5,3] rows permuted scale=0.5"},
    {.op = BP_OP_SOFT_MAX, .types = F32 | F16, .a = {33, 7, 4, 1}, .b = {33, 7, 1, 1},
     .f0 = 0.125f, .variant = WITH_MASK, .build = build_soft_max,
     .desc = "x[33,7,4] mask[33,7] broadcast scale=0.125"},
    {.op = BP_OP_SOFT_MAX, .types = F32 | F16, .a = {17, 5, 4, 1}, .b = {17, 9, 2, 1},
     .f0 = 1.0f, .variant = WITH_MASK, .build = build_soft_max,
     .desc = "x[17,5,4] mask[17,9,2] padded broadcast"},

    /* ROPE: i0 n_dims, i1 mode, f0 base, f1 freq_scale. */
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = 0,
     .f0 = 10000.0f, .f1 = 1.0f, .build = build_rope, .desc = "x[64,4,5] normal n_dims=64"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 1.0f, .build = build_rope, .desc = "x[64,4,5] neox n_dims=64"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {48, 3, 7, 1}, .i0 = 32, .i1 = 0,
     .f0 = 10000.0f, .f1 = 0.5f, .build = build_rope,
     .desc = "x[48,3,7] normal n_dims=32 freq_scale=0.5"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {48, 3, 7, 1}, .i0 = 32, .i1 = NEOX,
     .f0 = 500000.0f, .f1 = 1.0f, .build = build_rope,
     .desc = "x[48,3,7] neox n_dims=32 base=5e5"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {18, 2, 1, 1}, .i0 = 10, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 1.0f, .build = build_rope, .desc = "x[18,2,1] neox n_dims=10"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {64, 4, 3, 1}, .i0 = 64, .i1 = 0,
     .f0 = 10000.0f, .f1 = 1.0f, .variant = LAYOUT_ROWS_PERMUTED, .build = build_rope,
     .desc = "x[64,4,3] rows permuted normal"},
    {.op = BP_OP_ROPE, .types = F32 | F16, .a = {64, 4, 3, 1}, .i0 = 32, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 1.0f, .variant = LAYOUT_ROWS_PERMUTED, .build = build_rope,
     .desc = "x[64,4,3] rows permuted neox n_dims=32"},

    /* CPY: i0 source type, i1 destination type; the case type is the narrower. */
    {.op = BP_OP_CPY, .types = F16, .a = {33, 5, 1, 1}, .i0 = BP_TYPE_F32, .i1 = BP_TYPE_F16,
     .build = build_cpy, .desc = "[33,5] f32->f16"},
    {.op = BP_OP_CPY, .types = F16, .a = {33, 5, 1, 1}, .i0 = BP_TYPE_F16, .i1 = BP_TYPE_F32,
     .build = build_cpy, .desc = "[33,5] f16->f32"},
    {.op = BP_OP_CPY, .types = BF16, .a = {33, 5, 1, 1}, .i0 = BP_TYPE_F32, .i1 = BP_TYPE_BF16,
     .build = build_cpy, .desc = "[33,5] f32->bf16"},
    {.op = BP_OP_CPY, .types = BF16, .a = {33, 5, 1, 1}, .i0 = BP_TYPE_BF16, .i1 = BP_TYPE_F32,
     .build = build_cpy, .desc = "[33,5] bf16->f32"},
    {.op = BP_OP_CPY, .types = F32, .a = {17, 9, 3, 1}, .i0 = BP_TYPE_F32, .i1 = BP_TYPE_F32,
     .variant = LAYOUT_PERMUTED, .build = build_cpy, .desc = "[17,9,3] f32->f32 src permuted"},
    {.op = BP_OP_CPY, .types = F16, .a = {17, 9, 3, 1}, .i0 = BP_TYPE_F32, .i1 = BP_TYPE_F16,
     .variant = LAYOUT_PERMUTED, .build = build_cpy, .desc = "[17,9,3] f32->f16 src permuted"},
    {.op = BP_OP_CPY, .types = F16, .a = {16, 7, 1, 1}, .i0 = BP_TYPE_F16, .i1 = BP_TYPE_F16,
     .variant = LAYOUT_STRIDED_VIEW, .build = build_cpy, .desc = "[16,7] f16->f16 src strided view"},
    {.op = BP_OP_CPY, .types = F16, .a = {64, 3, 1, 1}, .b = {64, 10}, .c = {2},
     .i0 = BP_TYPE_F32, .i1 = BP_TYPE_F16, .build = build_cpy,
     .desc = "[64,3] f32->f16 into rows 2..4 of dst[64,10]"},
    {.op = BP_OP_CPY, .types = F32, .a = {1, 1, 1, 1}, .i0 = BP_TYPE_F32, .i1 = BP_TYPE_F32,
     .build = build_cpy, .desc = "[1] f32->f32"},

    {.op = BP_OP_CONT, .types = F32 | F16, .a = {17, 5, 3, 2}, .variant = LAYOUT_PERMUTED,
     .build = build_unary, .desc = "x[17,5,3,2] permuted"},
    {.op = BP_OP_CONT, .types = F32 | F16, .a = {33, 17, 1, 1}, .variant = LAYOUT_PERMUTED,
     .build = build_unary, .desc = "x[33,17] transposed"},
    {.op = BP_OP_CONT, .types = F32 | F16, .a = {33, 7, 2, 1}, .variant = LAYOUT_STRIDED_VIEW,
     .build = build_unary, .desc = "x[33,7,2] strided view"},
    {.op = BP_OP_CONT, .types = F32 | F16, .a = {9, 4, 3, 2}, .variant = LAYOUT_ROWS_PERMUTED,
     .build = build_unary, .desc = "x[9,4,3,2] rows permuted"},

    {.op = BP_OP_GET_ROWS, .types = F32 | F16 | BF16, .a = {33, 20, 1, 1}, .b = {7, 1, 1, 1},
     .build = build_get_rows, .desc = "table[33,20] ids[7]"},
    {.op = BP_OP_GET_ROWS, .types = F32 | F16 | BF16, .a = {17, 9, 3, 1}, .b = {5, 3, 1, 1},
     .build = build_get_rows, .desc = "table[17,9,3] ids[5,3]"},
    {.op = BP_OP_GET_ROWS, .types = F32 | F16 | BF16, .a = {65, 4, 1, 1}, .b = {1, 1, 1, 1},
     .build = build_get_rows, .desc = "table[65,4] ids[1]"},
    {.op = BP_OP_GET_ROWS, .types = F32 | F16 | BF16, .a = {16, 12, 2, 2}, .b = {6, 2, 2, 1},
     .build = build_get_rows, .desc = "table[16,12,2,2] ids[6,2,2]"},

    /* Quantized tables: rows of whole blocks, dequantized to f32. */
    {.op = BP_OP_GET_ROWS, .types = QUANT_ALL, .a = {256, 20, 1, 1}, .b = {7, 1, 1, 1},
     .build = build_get_rows, .desc = "table[256,20] ids[7]"},
    {.op = BP_OP_GET_ROWS, .types = QUANT_ALL, .a = {512, 9, 3, 1}, .b = {5, 3, 1, 1},
     .build = build_get_rows, .desc = "table[512,9,3] ids[5,3]"},
    {.op = BP_OP_GET_ROWS, .types = QUANT_32, .a = {96, 12, 2, 2}, .b = {6, 2, 2, 1},
     .build = build_get_rows, .desc = "table[96,12,2,2] ids[6,2,2]"},

    {.op = BP_OP_SET_ROWS, .types = F32 | F16, .a = {33, 16, 1, 1}, .b = {33, 5, 1, 1},
     .c = {5, 1, 1, 1}, .build = build_set_rows, .desc = "dst[33,16] values[33,5] ids[5]"},
    {.op = BP_OP_SET_ROWS, .types = F32 | F16, .a = {17, 8, 4, 1}, .b = {17, 3, 4, 1},
     .c = {3, 2, 1, 1}, .build = build_set_rows,
     .desc = "dst[17,8,4] values[17,3,4] ids[3,2] broadcast"},
    {.op = BP_OP_SET_ROWS, .types = F32 | F16, .a = {64, 32, 1, 1}, .b = {64, 1, 1, 1},
     .c = {1, 1, 1, 1}, .build = build_set_rows, .desc = "dst[64,32] values[64,1] ids[1]"},
    {.op = BP_OP_SET_ROWS, .types = F32 | F16, .a = {33, 16, 1, 1}, .b = {33, 4, 1, 1},
     .c = {4, 1, 1, 1}, .variant = LAYOUT_STRIDED_VIEW, .build = build_set_rows,
     .desc = "dst[33,16] values[33,4] strided view ids[4]"},

    /* MUL_MAT: W of the case type, X of type2. */
#define MM(TYPES, XT, W0, W1, W2, W3, X0, X1, X2, X3, V, D)                                   \
    {.op = BP_OP_MUL_MAT, .types = TYPES, .type2 = XT, .a = {W0, W1, W2, W3},                 \
     .b = {X0, X1, X2, X3}, .variant = V, .build = build_mul_mat, .desc = D}
    MM(F32 | F16 | BF16, BP_TYPE_F32, 33, 17, 1, 1, 33, 5, 1, 1, 0, "w[33,17] x[33,5]"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 64, 65, 1, 1, 64, 1, 1, 1, 0, "w[64,65] x[64,1]"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 17, 3, 1, 1, 17, 33, 1, 1, 0, "w[17,3] x[17,33]"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 1, 3, 1, 1, 1, 4, 1, 1, 0, "w[1,3] x[1,4]"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 32, 8, 2, 1, 32, 4, 6, 2, 0,
       "w[32,8,2] x[32,4,6,2] broadcast"),
    /* W's own dim 3 > 1 with X's a multiple of it: batch i3 of X reads W at
     * i3 / (e3 / d3), which a device using i3 % d3 gets wrong (bp_ops.h). */
    MM(F32 | F16 | BF16, BP_TYPE_F32, 17, 5, 1, 3, 17, 3, 2, 6, 0,
       "w[17,5,1,3] x[17,3,2,6] broadcast dim 3"),
    MM(F32 | F16, BP_TYPE_F32, 32, 8, 2, 2, 32, 4, 6, 4, PERM(0, LAYOUT_ROWS_PERMUTED),
       "w[32,8,2,2] x[32,4,6,4] rows permuted broadcast dims 2 and 3"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 33, 17, 1, 1, 33, 5, 3, 1, PERM(0, LAYOUT_ROWS_PERMUTED),
       "w[33,17] x[33,5,3] rows permuted"),
    MM(F32 | F16 | BF16, BP_TYPE_F32, 16, 9, 1, 1, 16, 7, 1, 1, PERM(0, LAYOUT_PERMUTED),
       "w[16,9] x[16,7] transposed"),
    MM(F32 | F16, BP_TYPE_F32, 33, 9, 2, 1, 33, 4, 2, 1, PERM(LAYOUT_ROWS_PERMUTED, 0),
       "w[33,9,2] rows permuted x[33,4,2]"),
    MM(F32 | F16, BP_TYPE_F32, 40, 7, 1, 1, 40, 3, 1, 1, PERM(LAYOUT_STRIDED_VIEW, 0),
       "w[40,7] strided view x[40,3]"),
    MM(F16, BP_TYPE_F16, 33, 17, 1, 1, 33, 5, 1, 1, 0, "w[33,17] x[33,5] f16"),
    MM(F16, BP_TYPE_F16, 64, 65, 2, 1, 64, 3, 4, 1, 0, "w[64,65,2] x[64,3,4] f16 broadcast"),
    /* Quantized weights (bytes from bp_quantize), f32 activations: M = 1
     * (decode), small and odd M and N, K of one and several super-blocks,
     * and broadcast over dims 2 and 3. */
    MM(QUANT_ALL, BP_TYPE_F32, 256, 17, 1, 1, 256, 1, 1, 1, 0, "w[256,17] x[256,1]"),
    MM(QUANT_ALL, BP_TYPE_F32, 256, 17, 1, 1, 256, 7, 1, 1, 0, "w[256,17] x[256,7]"),
    MM(QUANT_ALL, BP_TYPE_F32, 512, 17, 1, 1, 512, 33, 1, 1, 0, "w[512,17] x[512,33]"),
    MM(QUANT_ALL, BP_TYPE_F32, 768, 5, 1, 1, 768, 3, 1, 1, 0, "w[768,5] x[768,3]"),
    MM(QUANT_ALL, BP_TYPE_F32, 256, 9, 2, 1, 256, 5, 4, 3, 0, "w[256,9,2] x[256,5,4,3] broadcast"),
    MM(QUANT_32, BP_TYPE_F32, 64, 9, 1, 2, 64, 3, 3, 4, 0, "w[64,9,1,2] x[64,3,3,4] broadcast dim 3"),
    MM(QUANT_ALL, BP_TYPE_F32, 256, 33, 1, 1, 256, 4, 3, 1, PERM(0, LAYOUT_ROWS_PERMUTED),
       "w[256,33] x[256,4,3] rows permuted"),
    MM(QUANT_32, BP_TYPE_F32, 96, 17, 1, 1, 96, 7, 1, 1, 0, "w[96,17] x[96,7]"),
    MM(QUANT_32, BP_TYPE_F32, 32, 65, 1, 1, 32, 1, 1, 1, 0, "w[32,65] x[32,1]"),
#undef MM

    /* FLASH_ATTN_EXT: a {D, n_q, H, B}, b {Dv, n_kv, H_kv}; K/V of the case
     * type, mask of type2. */
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .a = {64, 4, 4, 1}, .b = {64, 33, 4},
     .build = build_flash_attn, .desc = "q[64,4,4] kv[64,33,4] no mask"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 3, 8, 1},
     .b = {64, 17, 2}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[64,3,8] kv[64,17,2] GQA mask f32"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F16, .a = {32, 1, 4, 1},
     .b = {48, 65, 1}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[32,1,4] k[32,65,1] v[48,65,1] GQA mask f16"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 5, 4, 2},
     .b = {64, 16, 2}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[64,5,4,2] kv[64,16,2,2] GQA mask"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 3, 4, 1},
     .b = {64, 17, 2}, .variant = WITH_MASK | LAYOUT_ROWS_PERMUTED, .build = build_flash_attn,
     .desc = "q[64,3,4] kv[64,17,2] rows permuted mask"},

    /* Ops added later go last: a case's inputs are seeded by its index, so
     * appending keeps every earlier case's inputs and results as they were. */
    UNARY(BP_OP_SQR),

    /* ROPE_EXT (ABI 1.2): i0 n_dims, i1 mode, f0 base, f1 freq_scale, f2
     * ext_factor, f3 attn_factor, c[0] n_ctx_orig. Llama 3's factors; YaRN
     * at a quarter of the frequency over an original context of 512 (pairs
     * 3 to 16 of 32 mixed); magnitudes other than 1; partial n_dims. */
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = 0,
     .f0 = 500000.0f, .f1 = 1.0f, .variant = WITH_FACTORS, .build = build_rope_ext,
     .desc = "x[64,4,5] normal n_dims=64 factors"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = NEOX,
     .f0 = 500000.0f, .f1 = 1.0f, .variant = WITH_FACTORS, .build = build_rope_ext,
     .desc = "x[64,4,5] neox n_dims=64 factors"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = 0,
     .f0 = 10000.0f, .f1 = 0.25f, .f2 = 1.0f, .c = {512}, .build = build_rope_ext,
     .desc = "x[64,4,5] normal yarn freq_scale=0.25 ext=1 n_ctx_orig=512"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {64, 4, 5, 1}, .i0 = 64, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 0.25f, .f2 = 1.0f, .f3 = 0.8f, .c = {512}, .variant = WITH_FACTORS,
     .build = build_rope_ext,
     .desc = "x[64,4,5] neox yarn freq_scale=0.25 ext=1 attn=0.8 factors"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {48, 3, 7, 1}, .i0 = 32, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 0.25f, .f2 = 1.0f, .c = {512}, .build = build_rope_ext,
     .desc = "x[48,3,7] neox n_dims=32 yarn freq_scale=0.25 ext=1"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {48, 3, 7, 1}, .i0 = 32, .i1 = 0,
     .f0 = 10000.0f, .f1 = 0.5f, .f3 = 1.5f, .variant = WITH_FACTORS, .build = build_rope_ext,
     .desc = "x[48,3,7] normal n_dims=32 freq_scale=0.5 attn=1.5 factors"},
    {.op = BP_OP_ROPE_EXT, .types = F32 | F16, .a = {64, 4, 3, 1}, .i0 = 64, .i1 = NEOX,
     .f0 = 10000.0f, .f1 = 0.25f, .f2 = 1.0f, .c = {512}, .variant = LAYOUT_ROWS_PERMUTED | WITH_FACTORS,
     .build = build_rope_ext, .desc = "x[64,4,3] rows permuted neox yarn factors"},

    /* TANH (ABI 1.2). */
    UNARY(BP_OP_TANH),
#undef UNARY

    /* FLASH_ATTN_SOFTCAP (ABI 1.2): as FLASH_ATTN_EXT, f0 the cap. 0.5
     * bends these scores (std about 0.33) hard; 50 is Gemma 2's. */
    {.op = BP_OP_FLASH_ATTN_SOFTCAP, .types = F32 | F16, .a = {64, 4, 4, 1}, .b = {64, 33, 4},
     .f0 = 0.5f, .build = build_flash_attn, .desc = "q[64,4,4] kv[64,33,4] no mask cap=0.5"},
    {.op = BP_OP_FLASH_ATTN_SOFTCAP, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 3, 8, 1},
     .b = {64, 17, 2}, .f0 = 0.5f, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[64,3,8] kv[64,17,2] GQA mask f32 cap=0.5"},
    {.op = BP_OP_FLASH_ATTN_SOFTCAP, .types = F32 | F16, .type2 = BP_TYPE_F16, .a = {32, 1, 4, 1},
     .b = {48, 65, 1}, .f0 = 50.0f, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[32,1,4] k[32,65,1] v[48,65,1] GQA mask f16 cap=50"},
    {.op = BP_OP_FLASH_ATTN_SOFTCAP, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 5, 4, 2},
     .b = {64, 16, 2}, .f0 = 1.0f, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[64,5,4,2] kv[64,16,2,2] GQA mask cap=1"},
    {.op = BP_OP_FLASH_ATTN_SOFTCAP, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {64, 3, 4, 1},
     .b = {64, 17, 2}, .f0 = 0.5f, .variant = WITH_MASK | LAYOUT_ROWS_PERMUTED,
     .build = build_flash_attn, .desc = "q[64,3,4] kv[64,17,2] rows permuted mask cap=0.5"},

    /* MUL_MAT_ID (ABI 1.2): a W [K, N, n_expert], b X [K, X1, n_tok], c ids
     * [n_used, n_tok]; i0 the ids' fill, i1 their range (0: all experts).
     * One token (decode), many tokens (prefill, experts shared by several
     * tokens), per-slot activations, ids repeated and unsorted within a
     * token, the same ids for every token, experts no token picks (range
     * below n_expert), strided ids and rows-permuted activations. */
#define MMID(TYPES, W0, W1, W2, X1, NT, NU, FILL, RANGE, V, D)                                  \
    {.op = BP_OP_MUL_MAT_ID, .types = TYPES, .a = {W0, W1, W2, 1}, .b = {W0, X1, NT, 1},         \
     .c = {NU, NT, 1, 1}, .i0 = FILL, .i1 = RANGE, .variant = V, .build = build_mul_mat_id,     \
     .desc = D}
#define MMID_SET(TYPES, K, KS)                                                                   \
    MMID(TYPES, K, 17, 8, 1, 1, 2, CHECK_FILL_IDS_UNIQUE, 0, 0,                                 \
         "w[" KS ",17,8] x[" KS ",1,1] ids[2,1] one token"),                                    \
    MMID(TYPES, K, 17, 8, 1, 9, 2, CHECK_FILL_IDS, 0, 0,                                        \
         "w[" KS ",17,8] x[" KS ",1,9] ids[2,9] repeated unsorted"),                            \
    MMID(TYPES, K, 17, 6, 2, 9, 2, CHECK_FILL_IDS_UNIQUE, 0, 0,                                 \
         "w[" KS ",17,6] x[" KS ",2,9] ids[2,9] per slot"),                                     \
    MMID(TYPES, K, 9, 8, 1, 7, 3, CHECK_FILL_IDS_SAME, 0, 0,                                    \
         "w[" KS ",9,8] x[" KS ",1,7] ids[3,7] same for all tokens"),                           \
    MMID(TYPES, K, 33, 8, 2, 37, 2, CHECK_FILL_IDS_UNIQUE, 3, 0,                                \
         "w[" KS ",33,8] x[" KS ",2,37] ids[2,37] experts 3..7 unpicked"),                      \
    MMID(TYPES, K, 17, 5, 1, 11, 4, CHECK_FILL_IDS, 0, WITH_IDS_T,                              \
         "w[" KS ",17,5] x[" KS ",1,11] ids[4,11] strided"),                                    \
    MMID(TYPES, K, 17, 4, 2, 5, 2, CHECK_FILL_IDS_UNIQUE, 0, PERM(0, LAYOUT_ROWS_PERMUTED),    \
         "w[" KS ",17,4] x[" KS ",2,5] rows permuted ids[2,5]")
    MMID_SET(F32 | F16 | BF16, 33, "33"),
    MMID_SET(QUANT_ALL, 256, "256"),
    MMID(QUANT_32, 96, 17, 8, 1, 6, 2, CHECK_FILL_IDS_UNIQUE, 0, 0, "w[96,17,8] x[96,1,6] ids[2,6]"),
    MMID(F32 | Q4_0 | Q4_K, 512, 40, 16, 1, 70, 4, CHECK_FILL_IDS_UNIQUE, 0, 0,
         "w[512,40,16] x[512,1,70] ids[4,70] many tokens"),
#undef MMID_SET
#undef MMID

    /* TOP_K (ABI 1.2): i0 k; variant PERM(fill, layout). Ties (values drawn
     * from five levels) check the order rule: equal values by ascending
     * index; k == n is the whole descending argsort. */
    {.op = BP_OP_TOP_K, .types = F32, .a = {8, 5, 1, 1}, .i0 = 2, .build = build_top_k,
     .desc = "x[8,5] k=2"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {64, 3, 2, 1}, .i0 = 8, .build = build_top_k,
     .desc = "x[64,3,2] k=8"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {1, 4, 1, 1}, .i0 = 1, .build = build_top_k,
     .desc = "x[1,4] k=1"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {8, 7, 1, 1}, .i0 = 8, .variant = PERM(CHECK_FILL_TIES, 0),
     .build = build_top_k, .desc = "x[8,7] k=8 ties (argsort)"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {33, 4, 1, 1}, .i0 = 5, .variant = PERM(CHECK_FILL_TIES, 0),
     .build = build_top_k, .desc = "x[33,4] k=5 ties"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {60, 3, 4, 1}, .i0 = 4,
     .variant = PERM(CHECK_FILL_UNIFORM, LAYOUT_ROWS_PERMUTED), .build = build_top_k,
     .desc = "x[60,3,4] rows permuted k=4"},
    {.op = BP_OP_TOP_K, .types = F32, .a = {128, 9, 1, 1}, .i0 = 8, .variant = PERM(CHECK_FILL_UNIFORM, LAYOUT_PERMUTED),
     .build = build_top_k, .desc = "x[128,9] transposed k=8"},

    /* SUM_ROWS (ABI 1.2). */
    {.op = BP_OP_SUM_ROWS, .types = F32, .a = {65, 3, 2, 1}, .build = build_unary, .desc = "x[65,3,2]"},
    {.op = BP_OP_SUM_ROWS, .types = F32, .a = {1, 5, 1, 1}, .build = build_unary, .desc = "x[1,5]"},
    {.op = BP_OP_SUM_ROWS, .types = F32, .a = {33, 4, 3, 1}, .variant = LAYOUT_ROWS_PERMUTED,
     .build = build_unary, .desc = "x[33,4,3] rows permuted"},
    {.op = BP_OP_SUM_ROWS, .types = F32, .a = {8, 7, 1, 1}, .variant = LAYOUT_PERMUTED,
     .build = build_unary, .desc = "x[8,7] transposed"},

    /* DIV (ABI 1.2): b in [1, 8). */
    {.op = BP_OP_DIV, .types = F32 | F16, .a = {17, 3, 2, 1}, .b = {17, 3, 2, 1}, .build = build_div,
     .desc = "a[17,3,2] b[17,3,2]"},
    {.op = BP_OP_DIV, .types = F32 | F16, .a = {1, 8, 5, 1}, .b = {1, 1, 5, 1}, .build = build_div,
     .desc = "a[1,8,5] b[1,1,5] broadcast"},
    {.op = BP_OP_DIV, .types = F32 | F16, .a = {33, 5, 3, 2}, .b = {33, 1, 1, 1}, .build = build_div,
     .desc = "a[33,5,3,2] b[33] broadcast"},
    {.op = BP_OP_DIV, .types = F32 | F16, .a = {17, 5, 3, 1}, .b = {17, 5, 1, 1},
     .variant = PERM(LAYOUT_PERMUTED, LAYOUT_PERMUTED), .build = build_div,
     .desc = "a[17,5,3] permuted b[17,5] permuted broadcast"},

    /* CLAMP (ABI 1.2): f0 lo, f1 hi. */
    {.op = BP_OP_CLAMP, .types = F32 | F16, .a = {65, 3, 2, 1}, .f0 = -0.5f, .f1 = 0.25f,
     .build = build_unary, .desc = "x[65,3,2] [-0.5, 0.25]"},
    {.op = BP_OP_CLAMP, .types = F32 | F16, .a = {33, 17, 1, 1}, .f0 = -INFINITY, .f1 = 0.0f,
     .variant = LAYOUT_PERMUTED, .build = build_unary, .desc = "x[33,17] permuted [-inf, 0]"},
    {.op = BP_OP_CLAMP, .types = F32 | F16, .a = {17, 5, 3, 1}, .f0 = 6.103515625e-5f,
     .f1 = INFINITY, .variant = LAYOUT_STRIDED_VIEW, .build = build_unary,
     .desc = "x[17,5,3] strided view [6.1e-5, inf]"},

    /* MUL_MAT where devices switch kernels: rows not a multiple of a
     * workgroup's rows, K not a multiple of a 32-element chunk, M on both
     * sides of a column group (8) and of the matrix-vector limit (64). */
#define MM(TYPES, W0, W1, X1, D)                                                                 \
    {.op = BP_OP_MUL_MAT, .types = TYPES, .type2 = BP_TYPE_F32, .a = {W0, W1, 1, 1},          \
     .b = {W0, X1, 1, 1}, .build = build_mul_mat, .desc = D}
    MM(F32 | F16 | BF16, 80, 7, 9, "w[80,7] x[80,9]"),
    MM(F32 | F16, 45, 5, 64, "w[45,5] x[45,64]"),
    MM(F32 | F16, 33, 3, 65, "w[33,3] x[33,65]"),
    MM(QUANT_ALL, 256, 5, 8, "w[256,5] x[256,8]"),
    MM(QUANT_ALL, 512, 3, 64, "w[512,3] x[512,64]"),
    MM(QUANT_ALL, 256, 7, 65, "w[256,7] x[256,65]"),
    MM(QUANT_32, 96, 3, 15, "w[96,3] x[96,15]"),
    /* The tiled kernel past the matrix-vector limit (16 on a software
     * device): rows and columns past one tile (64 x 32) and not filling
     * the next, K over several 32-element steps and not a multiple of one. */
    MM(F32 | F16 | BF16, 80, 70, 17, "w[80,70] x[80,17]"),
    MM(F32 | F16, 45, 5, 16, "w[45,5] x[45,16]"),
    MM(QUANT_ALL, 256, 70, 40, "w[256,70] x[256,40]"),
    MM(QUANT_ALL, 512, 3, 17, "w[512,3] x[512,17]"),
    MM(QUANT_32, 96, 65, 33, "w[96,65] x[96,33]"),
    /* A CPU device's lane kernel (Vulkan's mul_mat_cpu, past M = 4): 64
     * rows and 8 columns per workgroup, K in steps of 16. Rows past two
     * workgroups, K three steps (not a whole 32), M at and just past the
     * matrix-vector limit. */
    MM(F32 | F16 | BF16, 48, 130, 5, "w[48,130] x[48,5]"),
    MM(QUANT_ALL, 256, 65, 4, "w[256,65] x[256,4]"),
    MM(QUANT_ALL, 256, 129, 5, "w[256,129] x[256,5]"),
#undef MM
    /* FLASH_ATTN_EXT with heads wider than a workgroup-per-row kernel holds
     * (the Vulkan plugin's 256), over more keys than one 64-key block. */
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {288, 2, 2, 1},
     .b = {288, 70, 1}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[288,2,2] kv[288,70,1] GQA mask"},
    /* FLASH_ATTN_EXT at the Vulkan plugin's switch between its one-subgroup
     * kernel for CPU devices (heads up to 128, eight elements a lane) and
     * the 64-invocation one: the largest head the first takes, the next
     * size up, and heads that are not a multiple of eight. */
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {128, 2, 2, 1},
     .b = {128, 11, 1}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[128,2,2] kv[128,11,1] GQA mask"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {136, 2, 2, 1},
     .b = {136, 11, 1}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[136,2,2] kv[136,11,1] GQA mask"},
    {.op = BP_OP_FLASH_ATTN_EXT, .types = F32 | F16, .type2 = BP_TYPE_F32, .a = {36, 3, 2, 1},
     .b = {44, 9, 2}, .variant = WITH_MASK, .build = build_flash_attn,
     .desc = "q[36,3,2] k[36,9,2] v[44,9,2] mask"},
};

#define MAX_CASES 1024
static struct check_case cases[MAX_CASES];
static size_t n_cases;

static void expand(void)
{
    if (n_cases) return;
    for (size_t t = 0; t < sizeof templates / sizeof templates[0]; t++) {
        const struct check_template *tp = &templates[t];
        for (int ty = 0; ty < BP_TYPE_COUNT; ty++) {
            if (!(tp->types & T(ty))) continue;
            if (n_cases == MAX_CASES) {
                /* A case left out would pass unnoticed: say so. */
                fprintf(stderr, "check: the case table holds %d cases; %s %s %s and the rest "
                        "are not run (raise MAX_CASES in host/cli/check_cases.c)\n", MAX_CASES,
                        bp_op_name(tp->op), bp_type_name((enum bp_type)ty), tp->desc);
                return;
            }
            struct check_case *c = &cases[n_cases++];
            *c = (struct check_case){
                .op = tp->op, .type = (enum bp_type)ty, .type2 = tp->type2,
                .variant = tp->variant, .f0 = tp->f0, .f1 = tp->f1, .f2 = tp->f2, .f3 = tp->f3,
                .i0 = tp->i0, .i1 = tp->i1,
                .build = tp->build,
            };
            for (int d = 0; d < 4; d++) {
                c->a[d] = tp->a[d] ? tp->a[d] : 1;
                c->b[d] = tp->b[d] ? tp->b[d] : 1;
                c->c[d] = tp->c[d];
            }
            /* CPY without a larger destination is marked by b[0] == 0. */
            if (tp->op == BP_OP_CPY && tp->b[0] == 0) c->b[0] = 0;
            snprintf(c->desc, sizeof c->desc, "%s", tp->desc);
        }
    }
}

size_t check_case_count(void)
{
    expand();
    return n_cases;
}

const struct check_case *check_case_get(size_t i)
{
    expand();
    return i < n_cases ? &cases[i] : NULL;
}
