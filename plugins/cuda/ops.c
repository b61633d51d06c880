/*
 * ops.c — THE OP TABLE of the CUDA plugin (op_rules, one row per op): which
 * nodes it computes (cuda_supports_node: the op's shape rules from
 * bp_op_shapes.h, then the types the kernels take, with MUL_MAT and
 * GET_ROWS on every quantized weight type: cuda_mul_mat_q_type) and the
 * launch of each node's kernels.
 *
 * MUL_MAT path choice: M <= CUDA_MMV_MAX_M columns go to the matrix-vector
 * kernels (dp4a on quantized activations for quantized W); larger M to
 * cuBLAS (W dequantized to F16 first when quantized) when libcublas loads,
 * otherwise to the same kernels, which are correct at any M.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "kernels/kernels.h"

#define CUDA_MMV_MAX_M 8

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }
static bool plain_type(int32_t t) { return is_float(t) || t == BP_TYPE_I32; }

/* Quantized weights and tables are read as rows of whole blocks, as the
 * CPU reference requires. */
static bool weights_ok(const struct bp_tensor *t)
{
    if (!cuda_mul_mat_q_type(t->type))
        return is_float(t->type);
    return t->ne[0] % bp_type_block_size((enum bp_type)t->type) == 0 && bp_rows_contiguous(t);
}

/* ---- what the kernels take, for nodes whose shapes bp_op_shapes_ok
 * accepted; the size limits are those of the launch grids ---- */

static bool mul_mat_ok(const struct bp_tensor *t)
{
    return weights_ok(t->src[0]) && is_float(t->src[1]->type) && t->ne[1] <= 65535 &&
           t->ne[2] * t->ne[3] <= 65535;
}
static bool get_rows_ok(const struct bp_tensor *t) { return weights_ok(t->src[0]); }
/* MUL_MAT_ID: the slots and tokens are the launch grid's y and z. */
static bool mul_mat_id_ok(const struct bp_tensor *t)
{
    return weights_ok(t->src[0]) && t->ne[1] <= 65535 && t->ne[2] <= 65535;
}
/* Rows are the launch grid's x. */
static bool f32_rows_ok(const struct bp_tensor *t)
{
    return t->src[0]->type == BP_TYPE_F32 && bp_nrows(t) <= 2147483647;
}
static bool two_floats(const struct bp_tensor *t)
{
    return is_float(t->src[0]->type) && is_float(t->src[1]->type);
}
static bool float_src(const struct bp_tensor *t) { return is_float(t->src[0]->type); }
static bool cpy_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    return a->type == b->type ? plain_type(a->type) : two_floats(t);
}
static bool cont_ok(const struct bp_tensor *t)
{
    return plain_type(t->src[0]->type) && bp_shape_positive(t->src[0]);
}
static bool attn_ok(const struct bp_tensor *t)
{
    return two_floats(t) && is_float(t->src[2]->type) &&
           t->src[2]->ne[0] <= 512; /* one block holds a row of V */
}

/* One row of the op table: the types the kernels take and the launch.
 * A launch returns 0, a cudaError_t, or -1 for a failure already logged. */
struct cuda_op_rule {
    bool (*types_ok)(const struct bp_tensor *t);
    int (*launch)(struct cuda_backend *cb, struct bp_tensor *t, int node_index);
};
static const struct cuda_op_rule *rule_of(int32_t op);

bool cuda_supports_node(const struct cuda_device *cd, const struct bp_tensor *node)
{
    (void)cd;
    if (!bp_op_shapes_ok(node))
        return false;
    const struct cuda_op_rule *r = rule_of(node->op);
    return bp_op_is_view((enum bp_op)node->op) || (r && r->types_ok(node));
}

/* ---- compute ---- */

static struct cuda_tview tv(const struct bp_tensor *t)
{
    struct cuda_tview v;
    memset(&v, 0, sizeof v);
    if (!t)
        return v;
    v.data = t->data;
    v.type = t->type;
    for (int i = 0; i < 4; i++) {
        v.ne[i] = t->ne[i];
        v.nb[i] = t->nb[i];
    }
    return v;
}

/* A packed view of `type` over ne of t, at p. */
static struct cuda_tview packed(void *p, int type, const int64_t ne[4])
{
    struct cuda_tview v;
    memset(&v, 0, sizeof v);
    v.data = p;
    v.type = type;
    size_t es = bp_type_size((enum bp_type)type);
    for (int i = 0; i < 4; i++) {
        v.ne[i] = ne[i];
        v.nb[i] = i == 0 ? es : v.nb[i - 1] * (size_t)ne[i - 1];
    }
    return v;
}

static int mul_mat_cublas(struct cuda_backend *cb, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    const bool quant = cuda_mul_mat_q_type(w->type);
    const int gtype = quant ? BP_TYPE_F16 : w->type;
    const size_t es = bp_type_size((enum bp_type)gtype);
    /* X converted to W's (or F16) type, packed; then one dequantized W slice. */
    size_t xbytes = (size_t)bp_nelements(x) * es;
    size_t wbytes = quant ? (size_t)(K * N) * 2 : 0;
    xbytes = (xbytes + 255) / 256 * 256;
    void *scratch;
    if (cuda_backend_scratch(cb, xbytes + wbytes, &scratch) != BP_OK)
        return -1;
    char *xs = scratch, *ws = (char *)scratch + xbytes;
    int e = cuda_launch_dup(packed(xs, gtype, x->ne), tv(x), cb->stream);
    if (e) return e;
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            const void *wp;
            long long ldw;
            if (quant) {
                e = cuda_launch_dequant_f16(tv(w), i2 / r2, i3 / r3, ws, cb->stream);
                if (e) return e;
                wp = ws;
                ldw = K;
            } else {
                wp = (const char *)w->data + (size_t)(i2 / r2) * w->nb[2] + (size_t)(i3 / r3) * w->nb[3];
                ldw = (long long)(w->nb[1] / es);
            }
            const char *xp = xs + (size_t)((i2 + x->ne[2] * i3) * K * M) * es;
            float *cp = (float *)((char *)t->data + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3]);
            if (cuda_cublas_gemm(cb, gtype, (int)N, (int)M, (int)K, wp, ldw, xp, K, cp,
                                 (long long)(t->nb[1] / 4)) != BP_OK)
                return -1;
        }
    return 0;
}

static bool cublas_fits(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0];
    const size_t es = bp_type_size((enum bp_type)w->type);
    if (t->nb[0] != 4 || t->nb[1] % 4 != 0 || t->ne[0] > 2147483647 || w->ne[0] > 2147483647)
        return false;
    if (cuda_mul_mat_q_type(w->type))
        return true;
    return w->nb[0] == es && w->nb[1] % es == 0;
}

static int mul_mat(struct cuda_backend *cb, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    if (t->ne[1] > CUDA_MMV_MAX_M && cublas_fits(t) && cuda_cublas_available(cb->cd->pl))
        return mul_mat_cublas(cb, t);
    if (!cuda_mul_mat_q_type(w->type)) {
        const struct cuda_mmid none = { .ids = tv(NULL), .err = NULL, .node = 0 };
        return cuda_launch_mul_mat_generic(tv(t), tv(w), tv(x), none, cb->stream);
    }
    void *xq;
    size_t need = (size_t)(bp_nelements(x) / 32) * sizeof(struct cuda_block_q8_1);
    if (cuda_backend_scratch(cb, need, &xq) != BP_OK)
        return -1;
    int e = cuda_launch_quantize_q8_1(tv(x), xq, cb->stream);
    return e ? e : cuda_launch_mul_mat_q(tv(t), tv(w), xq, cb->stream);
}

static int launch_get_rows(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    return cuda_launch_get_rows(tv(t), tv(t->src[0]), tv(t->src[1]), cb->err_flag, node_index,
                                cb->stream);
}
static int launch_mul_mat(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return mul_mat(cb, t);
}
static int launch_add(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_binary(tv(t), tv(t->src[0]), tv(t->src[1]), CUDA_BINARY_ADD, cb->stream);
}
static int launch_mul(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_binary(tv(t), tv(t->src[0]), tv(t->src[1]), CUDA_BINARY_MUL, cb->stream);
}
static int launch_div(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_binary(tv(t), tv(t->src[0]), tv(t->src[1]), CUDA_BINARY_DIV, cb->stream);
}
static int launch_clamp(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_CLAMP, bp_op_param_f32(t, 0),
                             bp_op_param_f32(t, 1), cb->stream);
}
static int launch_sum_rows(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_sum_rows(tv(t), tv(t->src[0]), cb->stream);
}
static int launch_top_k(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_top_k(tv(t), tv(t->src[0]), cb->stream);
}
/* MUL_MAT_ID: the matrix-vector kernels of MUL_MAT with the routing (ids)
 * read per (slot, token); quantized W on q8_1 activations. */
static int launch_mul_mat_id(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    struct cuda_mmid id = { .ids = tv(t->src[2]), .err = cb->err_flag, .node = node_index };
    if (!cuda_mul_mat_q_type(w->type))
        return cuda_launch_mul_mat_generic(tv(t), tv(w), tv(x), id, cb->stream);
    void *xq;
    size_t need = (size_t)(bp_nelements(x) / 32) * sizeof(struct cuda_block_q8_1);
    if (cuda_backend_scratch(cb, need, &xq) != BP_OK)
        return -1;
    int e = cuda_launch_quantize_q8_1(tv(x), xq, cb->stream);
    return e ? e : cuda_launch_mul_mat_id_q(tv(t), tv(w), xq, x->ne[1], id, cb->stream);
}
static int launch_scale(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_SCALE, bp_op_param_f32(t, 0),
                             bp_op_param_f32(t, 1), cb->stream);
}
static int launch_silu(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_SILU, 0, 0, cb->stream);
}
static int launch_gelu(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_GELU, 0, 0, cb->stream);
}
static int launch_sqr(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_SQR, 0, 0, cb->stream);
}
static int launch_tanh(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_TANH, 0, 0, cb->stream);
}
static int launch_rms_norm(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_rms_norm(tv(t), tv(t->src[0]), bp_op_param_f32(t, 0), cb->stream);
}
static int launch_soft_max(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_soft_max(tv(t), tv(t->src[0]), tv(t->src[1]), bp_op_param_f32(t, 0),
                                cb->stream);
}
/* ROPE, and ROPE_EXT with the parts of bp_ops.h's formula that depend on
 * neither the position nor the pair worked out here in double, as the cpu
 * reference does, so that YaRN's floor and ceil fall the same way. */
static int launch_rope(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    const int n_dims = bp_op_param_i32(t, 0);
    const float base = bp_op_param_f32(t, 2), fs = bp_op_param_f32(t, 3);
    struct cuda_rope_ext ext = { .ext_factor = 0.0f, .corr_lo = 0.0f, .corr_hi = 0.0f, .mscale = 1.0f };
    const struct bp_tensor *ff = NULL;
    if (t->op == BP_OP_ROPE_EXT) {
        ff = t->src[2];
        ext.ext_factor = bp_op_param_f32(t, 5);
        double mscale = bp_op_param_f32(t, 6);
        if (ext.ext_factor != 0.0f) {
            const double n_ctx = bp_op_param_i32(t, 4), two_pi = 2.0 * 3.14159265358979323846;
            const double lb2 = 2.0 * log((double)base);
            const double c_fast = n_dims * log(n_ctx / (two_pi * bp_op_param_f32(t, 7))) / lb2;
            const double c_slow = n_dims * log(n_ctx / (two_pi * bp_op_param_f32(t, 8))) / lb2;
            ext.corr_lo = (float)fmax(0.0, floor(c_fast));
            ext.corr_hi = (float)fmin((double)n_dims - 1.0, ceil(c_slow));
            mscale *= 1.0 + 0.1 * log(1.0 / fs);
        }
        ext.mscale = (float)mscale;
    }
    return cuda_launch_rope(tv(t), tv(t->src[0]), tv(t->src[1]), tv(ff), n_dims,
                            bp_op_param_i32(t, 1) == BP_ROPE_MODE_NEOX, base, fs, ext, cb->stream);
}
static int launch_dup(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    return cuda_launch_dup(tv(t), tv(t->src[0]), cb->stream);
}
/* t is a view of src0; rows not named by ids keep src0's values. */
static int launch_set_rows(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    return cuda_launch_set_rows(tv(t), tv(t->src[1]), tv(t->src[2]), cb->err_flag, node_index,
                                cb->stream);
}
static int launch_flash_attn(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    (void)node_index;
    const float softcap = t->op == BP_OP_FLASH_ATTN_SOFTCAP ? bp_op_param_f32(t, 1) : 0.0f;
    return cuda_launch_flash_attn(tv(t), tv(t->src[0]), tv(t->src[1]), tv(t->src[2]),
                                  tv(t->src[3]), bp_op_param_f32(t, 0), softcap, cb->stream);
}

/* THE OP TABLE: one row per op a kernel computes (views need no row). */
static const struct cuda_op_rule op_rules[BP_OP_COUNT] = {
    [BP_OP_GET_ROWS] = { get_rows_ok, launch_get_rows },
    [BP_OP_MUL_MAT] = { mul_mat_ok, launch_mul_mat },
    [BP_OP_ADD] = { two_floats, launch_add },
    [BP_OP_MUL] = { two_floats, launch_mul },
    [BP_OP_SCALE] = { float_src, launch_scale },
    [BP_OP_RMS_NORM] = { float_src, launch_rms_norm },
    [BP_OP_SOFT_MAX] = { float_src, launch_soft_max },
    [BP_OP_ROPE] = { float_src, launch_rope },
    [BP_OP_SILU] = { float_src, launch_silu },
    [BP_OP_GELU] = { float_src, launch_gelu },
    [BP_OP_CPY] = { cpy_ok, launch_dup },
    [BP_OP_CONT] = { cont_ok, launch_dup },
    [BP_OP_SET_ROWS] = { two_floats, launch_set_rows },
    [BP_OP_FLASH_ATTN_EXT] = { attn_ok, launch_flash_attn },
    [BP_OP_SQR] = { float_src, launch_sqr },
    [BP_OP_ROPE_EXT] = { float_src, launch_rope },
    [BP_OP_TANH] = { float_src, launch_tanh },
    [BP_OP_FLASH_ATTN_SOFTCAP] = { attn_ok, launch_flash_attn },
    [BP_OP_MUL_MAT_ID] = { mul_mat_id_ok, launch_mul_mat_id },
    [BP_OP_TOP_K] = { f32_rows_ok, launch_top_k },
    [BP_OP_SUM_ROWS] = { f32_rows_ok, launch_sum_rows },
    [BP_OP_DIV] = { two_floats, launch_div },
    [BP_OP_CLAMP] = { float_src, launch_clamp },
};

static const struct cuda_op_rule *rule_of(int32_t op)
{
    return (uint32_t)op < BP_OP_COUNT && op_rules[op].types_ok ? &op_rules[op] : NULL;
}

bp_status cuda_compute_node(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    const struct cuda_op_rule *r = rule_of(t->op);
    if (!r)
        return BP_OK; /* views */
    int e = r->launch(cb, t, node_index);
    if (e < 0)
        return BP_ERR_OUT_OF_MEMORY; /* scratch or cuBLAS, already logged */
    if (e) {
        char what[160];
        snprintf(what, sizeof what, "launching %s for node '%s'", bp_op_name((enum bp_op)t->op),
                 t->name[0] ? t->name : "(unnamed)");
        return cuda_check(pl, (cudaError_t)e, what);
    }
    return BP_OK;
}
