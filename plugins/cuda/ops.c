/*
 * ops.c — THE OP TABLE of the CUDA plugin: which nodes it computes
 * (cuda_supports_node, the same rules as the CPU reference, with MUL_MAT
 * and GET_ROWS on Q4_0/Q8_0/Q4_K/Q6_K) and the launch of each node's
 * kernels.
 *
 * MUL_MAT path choice: M <= CUDA_MMV_MAX_M columns go to the matrix-vector
 * kernels (dp4a on quantized activations for quantized W); larger M to
 * cuBLAS (W dequantized to F16 first when quantized) when libcublas loads,
 * otherwise to the same kernels, which are correct at any M.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "kernels/kernels.h"

#define CUDA_MMV_MAX_M 8

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }
static bool plain_type(int32_t t) { return is_float(t) || t == BP_TYPE_I32; }

static bool same_shape(const struct bp_tensor *a, const struct bp_tensor *b)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

static bool shape_ok(const struct bp_tensor *t)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] < 1) return false;
    return true;
}

static bool supports_mul_mat(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    if (!w || !x || t->type != BP_TYPE_F32 || !is_float(x->type))
        return false;
    if (!is_float(w->type) && !cuda_mul_mat_q_type(w->type))
        return false;
    if (!shape_ok(w) || !shape_ok(x) || t->ne[1] > 65535 || t->ne[2] * t->ne[3] > 65535)
        return false;
    if (cuda_mul_mat_q_type(w->type) && (w->ne[0] % bp_type_block_size((enum bp_type)w->type) != 0 ||
                                         !bp_rows_contiguous(w)))
        return false;
    return w->ne[0] == x->ne[0] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0 &&
           t->ne[0] == w->ne[1] && t->ne[1] == x->ne[1] && t->ne[2] == x->ne[2] &&
           t->ne[3] == x->ne[3];
}

static bool supports_binary(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (!a || !b || !is_float(a->type) || !is_float(b->type) || t->type != a->type)
        return false;
    if (!same_shape(t, a) || !shape_ok(b))
        return false;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (a->ne[i] % b->ne[i] != 0) return false;
    return true;
}

static bool supports_unary(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0];
    return x && is_float(x->type) && t->type == x->type && same_shape(t, x);
}

static bool supports_soft_max(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *m = t->src[1];
    if (!x || !is_float(x->type) || t->type != BP_TYPE_F32 || !same_shape(t, x))
        return false;
    if (!m)
        return true;
    if (m->type != BP_TYPE_F32 && m->type != BP_TYPE_F16)
        return false;
    return shape_ok(m) && m->ne[0] == x->ne[0] && m->ne[1] >= x->ne[1] &&
           x->ne[2] % m->ne[2] == 0 && x->ne[3] % m->ne[3] == 0;
}

static bool supports_rope(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *pos = t->src[1];
    if (!x || !pos || !is_float(x->type) || t->type != x->type || !same_shape(t, x))
        return false;
    if (pos->type != BP_TYPE_I32 || pos->ne[0] != x->ne[2] || pos->ne[1] != 1 ||
        pos->ne[2] != 1 || pos->ne[3] != 1)
        return false;
    const int32_t n_dims = bp_op_param_i32(t, 0), mode = bp_op_param_i32(t, 1);
    if (mode != BP_ROPE_MODE_NORMAL && mode != BP_ROPE_MODE_NEOX)
        return false;
    return n_dims >= 0 && n_dims % 2 == 0 && n_dims <= x->ne[0];
}

static bool supports_cpy(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (!a || !b || t->type != b->type || !shape_ok(a))
        return false;
    if (bp_nelements(a) != bp_nelements(t) || bp_nelements(b) != bp_nelements(t))
        return false;
    if (a->type == b->type)
        return plain_type(a->type);
    return is_float(a->type) && is_float(b->type);
}

static bool supports_cont(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0];
    return a && plain_type(a->type) && t->type == a->type && same_shape(t, a) && shape_ok(a);
}

static bool supports_get_rows(const struct bp_tensor *t)
{
    const struct bp_tensor *tab = t->src[0], *ids = t->src[1];
    if (!tab || !ids || ids->type != BP_TYPE_I32 || t->type != BP_TYPE_F32)
        return false;
    /* Quantized tables (token embeddings of quantized models) are read as
     * rows of whole blocks, as the CPU reference requires. */
    if (cuda_mul_mat_q_type(tab->type)) {
        if (tab->ne[0] % bp_type_block_size((enum bp_type)tab->type) != 0 || !bp_rows_contiguous(tab))
            return false;
    } else if (!is_float(tab->type)) {
        return false;
    }
    return ids->ne[1] == tab->ne[2] && ids->ne[2] == tab->ne[3] && ids->ne[3] == 1 &&
           t->ne[0] == tab->ne[0] && t->ne[1] == ids->ne[0] && t->ne[2] == tab->ne[2] &&
           t->ne[3] == tab->ne[3];
}

static bool supports_set_rows(const struct bp_tensor *t)
{
    const struct bp_tensor *d = t->src[0], *v = t->src[1], *ids = t->src[2];
    if (!d || !v || !ids || !is_float(d->type) || !is_float(v->type) ||
        ids->type != BP_TYPE_I32 || t->type != d->type || !same_shape(t, d))
        return false;
    if (!shape_ok(ids) || ids->ne[3] != 1)
        return false;
    return v->ne[0] == d->ne[0] && v->ne[2] == d->ne[2] && v->ne[3] == d->ne[3] &&
           ids->ne[0] == v->ne[1] && d->ne[2] % ids->ne[1] == 0 && d->ne[3] % ids->ne[2] == 0;
}

static bool supports_flash_attn(const struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    if (!q || !k || !v || t->type != BP_TYPE_F32 || !is_float(q->type) || !is_float(k->type) ||
        !is_float(v->type))
        return false;
    if (!shape_ok(k) || q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] ||
        k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3] || q->ne[2] % k->ne[2] != 0 || v->ne[0] > 512)
        return false;
    if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3])
        return false;
    if (!m)
        return true;
    return (m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16) && shape_ok(m) &&
           m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1] && q->ne[2] % m->ne[2] == 0 &&
           q->ne[3] % m->ne[3] == 0;
}

bool cuda_supports_node(const struct cuda_device *cd, const struct bp_tensor *node)
{
    (void)cd;
    if (!node || node->op < 0 || node->op >= BP_OP_COUNT)
        return false;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (node->ne[i] < 0) return false;
    switch ((enum bp_op)node->op) {
    case BP_OP_NONE: case BP_OP_RESHAPE: case BP_OP_VIEW: case BP_OP_PERMUTE: case BP_OP_TRANSPOSE:
        return true;
    case BP_OP_GET_ROWS: return supports_get_rows(node);
    case BP_OP_MUL_MAT: return supports_mul_mat(node);
    case BP_OP_ADD: case BP_OP_MUL: return supports_binary(node);
    case BP_OP_SCALE: case BP_OP_SILU: case BP_OP_GELU: case BP_OP_RMS_NORM: return supports_unary(node);
    case BP_OP_SOFT_MAX: return supports_soft_max(node);
    case BP_OP_ROPE: return supports_rope(node);
    case BP_OP_CPY: return supports_cpy(node);
    case BP_OP_CONT: return supports_cont(node);
    case BP_OP_SET_ROWS: return supports_set_rows(node);
    case BP_OP_FLASH_ATTN_EXT: return supports_flash_attn(node);
    default: return false;
    }
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
    if (!cuda_mul_mat_q_type(w->type))
        return cuda_launch_mul_mat_generic(tv(t), tv(w), tv(x), cb->stream);
    void *xq;
    size_t need = (size_t)(bp_nelements(x) / 32) * sizeof(struct cuda_block_q8_1);
    if (cuda_backend_scratch(cb, need, &xq) != BP_OK)
        return -1;
    int e = cuda_launch_quantize_q8_1(tv(x), xq, cb->stream);
    return e ? e : cuda_launch_mul_mat_q(tv(t), tv(w), xq, cb->stream);
}

bp_status cuda_compute_node(struct cuda_backend *cb, struct bp_tensor *t, int node_index)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    cudaStream_t s = cb->stream;
    int e = 0;
    switch ((enum bp_op)t->op) {
    case BP_OP_GET_ROWS:
        e = cuda_launch_get_rows(tv(t), tv(t->src[0]), tv(t->src[1]), cb->err_flag, node_index, s);
        break;
    case BP_OP_MUL_MAT: e = mul_mat(cb, t); break;
    case BP_OP_ADD: e = cuda_launch_binary(tv(t), tv(t->src[0]), tv(t->src[1]), 0, s); break;
    case BP_OP_MUL: e = cuda_launch_binary(tv(t), tv(t->src[0]), tv(t->src[1]), 1, s); break;
    case BP_OP_SCALE:
        e = cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_SCALE, bp_op_param_f32(t, 0),
                              bp_op_param_f32(t, 1), s);
        break;
    case BP_OP_SILU: e = cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_SILU, 0, 0, s); break;
    case BP_OP_GELU: e = cuda_launch_unary(tv(t), tv(t->src[0]), CUDA_UNARY_GELU, 0, 0, s); break;
    case BP_OP_RMS_NORM: e = cuda_launch_rms_norm(tv(t), tv(t->src[0]), bp_op_param_f32(t, 0), s); break;
    case BP_OP_SOFT_MAX:
        e = cuda_launch_soft_max(tv(t), tv(t->src[0]), tv(t->src[1]), bp_op_param_f32(t, 0), s);
        break;
    case BP_OP_ROPE:
        e = cuda_launch_rope(tv(t), tv(t->src[0]), tv(t->src[1]), bp_op_param_i32(t, 0),
                             bp_op_param_i32(t, 1) == BP_ROPE_MODE_NEOX, bp_op_param_f32(t, 2),
                             bp_op_param_f32(t, 3), s);
        break;
    case BP_OP_CPY: case BP_OP_CONT: e = cuda_launch_dup(tv(t), tv(t->src[0]), s); break;
    case BP_OP_SET_ROWS:
        /* t is a view of src0; rows not named by ids keep src0's values. */
        e = cuda_launch_set_rows(tv(t), tv(t->src[1]), tv(t->src[2]), cb->err_flag, node_index, s);
        break;
    case BP_OP_FLASH_ATTN_EXT:
        e = cuda_launch_flash_attn(tv(t), tv(t->src[0]), tv(t->src[1]), tv(t->src[2]),
                                   tv(t->src[3]), bp_op_param_f32(t, 0), s);
        break;
    default:
        return BP_OK; /* views */
    }
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
