/*
 * ops.c — THE OP TABLE of the Vulkan plugin: which nodes a device computes
 * (the same type and shape rules as the CPU reference) and how each is
 * dispatched. Sources bind in order (src[i] -> binding i), the node itself
 * is binding 4; every shader lives in shaders/<name>.comp.
 */
#include <string.h>

#include "vk_internal.h"

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }

static bool shape_ok(const struct bp_tensor *t)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] < 1) return false;
    return true;
}

static bool same_shape(const struct bp_tensor *a, const struct bp_tensor *b)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return true;
}

static bool is_weight_type(int32_t t)
{
    return is_float(t) || t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q4_K ||
           t == BP_TYPE_Q6_K;
}

static bool supports_mul_mat(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    if (!w || !x || t->type != BP_TYPE_F32 || !is_weight_type(w->type) || !is_float(x->type) ||
        !shape_ok(w) || !shape_ok(x))
        return false;
    /* Quantized rows are read block by block. */
    if (bp_type_is_quantized((enum bp_type)w->type) &&
        (w->nb[0] != bp_type_size((enum bp_type)w->type) ||
         w->ne[0] % bp_type_block_size((enum bp_type)w->type) != 0))
        return false;
    return w->ne[0] == x->ne[0] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0 &&
           t->ne[0] == w->ne[1] && t->ne[1] == x->ne[1] && t->ne[2] == x->ne[2] &&
           t->ne[3] == x->ne[3];
}

static bool supports_binary(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (!a || !b || !is_float(a->type) || !is_float(b->type) || t->type != a->type ||
        !same_shape(t, a) || !shape_ok(b))
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
    if (!m) return true;
    return (m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16) && shape_ok(m) &&
           m->ne[0] == x->ne[0] && m->ne[1] >= x->ne[1] && x->ne[2] % m->ne[2] == 0 &&
           x->ne[3] % m->ne[3] == 0;
}

static bool supports_rope(const struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *pos = t->src[1];
    if (!x || !pos || !is_float(x->type) || t->type != x->type || !same_shape(t, x))
        return false;
    if (pos->type != BP_TYPE_I32 || pos->ne[0] != x->ne[2] || pos->ne[1] != 1 ||
        pos->ne[2] != 1 || pos->ne[3] != 1)
        return false;
    const int32_t n_dims = t->op_params[0], mode = t->op_params[1];
    if (mode != BP_ROPE_MODE_NORMAL && mode != BP_ROPE_MODE_NEOX)
        return false;
    return n_dims >= 0 && n_dims % 2 == 0 && n_dims <= x->ne[0];
}

static bool supports_cpy(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (!a || !b || t->type != b->type || !shape_ok(a) || bp_nelements(a) != bp_nelements(t) ||
        bp_nelements(b) != bp_nelements(t))
        return false;
    if (a->type == b->type)
        return is_float(a->type) || a->type == BP_TYPE_I32;
    return is_float(a->type) && is_float(b->type);
}

static bool supports_cont(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0];
    return a && (is_float(a->type) || a->type == BP_TYPE_I32) && t->type == a->type &&
           same_shape(t, a);
}

static bool supports_get_rows(const struct bp_tensor *t)
{
    const struct bp_tensor *tab = t->src[0], *ids = t->src[1];
    if (!tab || !ids || !is_weight_type(tab->type) || ids->type != BP_TYPE_I32 ||
        t->type != BP_TYPE_F32)
        return false;
    if (bp_type_is_quantized((enum bp_type)tab->type) &&
        (tab->nb[0] != bp_type_size((enum bp_type)tab->type) ||
         tab->ne[0] % bp_type_block_size((enum bp_type)tab->type) != 0))
        return false;
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
        k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3] || q->ne[2] % k->ne[2] != 0)
        return false;
    if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3])
        return false;
    if (!m) return true;
    return (m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16) && shape_ok(m) &&
           m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1] && q->ne[2] % m->ne[2] == 0 &&
           q->ne[3] % m->ne[3] == 0;
}

static bool (*const supports[BP_OP_COUNT])(const struct bp_tensor *) = {
    [BP_OP_GET_ROWS] = supports_get_rows, [BP_OP_MUL_MAT] = supports_mul_mat,
    [BP_OP_ADD] = supports_binary, [BP_OP_MUL] = supports_binary,
    [BP_OP_SCALE] = supports_unary, [BP_OP_RMS_NORM] = supports_unary,
    [BP_OP_SOFT_MAX] = supports_soft_max, [BP_OP_ROPE] = supports_rope,
    [BP_OP_SILU] = supports_unary, [BP_OP_GELU] = supports_unary, [BP_OP_CPY] = supports_cpy,
    [BP_OP_CONT] = supports_cont, [BP_OP_SET_ROWS] = supports_set_rows,
    [BP_OP_FLASH_ATTN_EXT] = supports_flash_attn,
};

/* Every offset a shader forms is a 32-bit byte count (buffers are capped
 * below 4 GiB) and every element count fits 32 bits. */
static bool fits_u32(const struct bp_tensor *t)
{
    return bp_nelements(t) < ((int64_t)1 << 32);
}

bool vk_supports_node(struct vk_dev *d, const struct bp_tensor *node)
{
    if (!node || node->op < 0 || node->op >= BP_OP_COUNT)
        return false;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (node->ne[i] < 0) return false;
    if (bp_op_is_view((enum bp_op)node->op))
        return true;
    if (!supports[node->op] || !supports[node->op](node) || !fits_u32(node))
        return false;
    for (int s = 0; s < BP_MAX_SRC; s++)
        if (node->src[s] && !fits_u32(node->src[s])) return false;
    /* Each tensor is bound through one descriptor of at most max_range
     * bytes. Declining is all supports_op can say, so the reason goes to the
     * log, once per device (schedulers ask for every node of every graph). */
    for (int s = 0; s <= BP_MAX_SRC; s++) {
        const struct bp_tensor *t = s < BP_MAX_SRC ? node->src[s] : node;
        if (!t || bp_nbytes(t) <= d->max_range) continue;
        if (__atomic_exchange_n(&d->range_warned, 1, __ATOMIC_RELAXED) == 0)
            vk_log(d->pl, BP_LOG_WARN,
                   "%s declines %s '%s': tensor '%s' has %zu bytes, more than the %zu bytes one "
                   "storage binding can address (maxStorageBufferRange); split it into smaller "
                   "tensors or compute this op on another device.", d->name,
                   bp_op_name((enum bp_op)node->op), vk_tname(node), vk_tname(t), bp_nbytes(t),
                   d->max_range);
        return false;
    }
    return true;
}

/* n invocations in workgroups of `local` as an (x, y) grid of at most 65535 columns. */
static void grid(uint64_t n, uint32_t local, uint32_t g[3])
{
    uint64_t groups = (n + local - 1) / local;
    if (groups == 0) groups = 1;
    g[0] = groups > 65535 ? 65535 : (uint32_t)groups;
    g[1] = (uint32_t)((groups + g[0] - 1) / g[0]);
    g[2] = 1;
}

void vk_plan_node(const struct vk_dev *d, const struct bp_tensor *t, struct vk_dispatch *p)
{
    (void)d;
    memset(p, 0, sizeof *p);
    for (int s = 0; s < VK_SLOTS - 1; s++)
        p->slot[s] = t->src[s];
    const uint64_t n = (uint64_t)bp_nelements(t);
    switch (t->op) {
    case BP_OP_ADD:
    case BP_OP_MUL:
        p->shader = VK_SH_BINARY;
        p->aux[0] = t->op == BP_OP_MUL;
        grid(n, 128, p->groups);
        break;
    case BP_OP_SCALE: case BP_OP_SILU: case BP_OP_GELU: case BP_OP_CONT: case BP_OP_CPY:
        p->shader = VK_SH_ELEMENTWISE;
        p->aux[0] = t->op == BP_OP_SCALE ? 1 : t->op == BP_OP_SILU ? 2 : t->op == BP_OP_GELU ? 3 : 0;
        p->aux[1] = t->op == BP_OP_CPY && !same_shape(t, t->src[0]);
        if (t->op == BP_OP_CPY) p->slot[1] = NULL; /* the node itself is the view of src[1] */
        grid(n, 128, p->groups);
        break;
    case BP_OP_RMS_NORM:
        p->shader = VK_SH_RMS_NORM;
        grid((uint64_t)bp_nrows(t), 1, p->groups);
        break;
    case BP_OP_SOFT_MAX:
        p->shader = VK_SH_SOFT_MAX;
        p->aux[0] = t->src[1] != NULL;
        grid((uint64_t)bp_nrows(t), 1, p->groups);
        break;
    case BP_OP_ROPE:
        p->shader = VK_SH_ROPE;
        grid(n, 128, p->groups);
        break;
    case BP_OP_GET_ROWS:
        p->shader = VK_SH_GET_ROWS;
        p->wtype = t->src[0]->type;
        grid(n, 128, p->groups);
        break;
    case BP_OP_SET_ROWS: {
        const struct bp_tensor *v = t->src[1];
        p->shader = VK_SH_SET_ROWS;
        p->slot[0] = NULL; /* the node is the destination view */
        grid((uint64_t)(v->ne[0] * v->ne[2] * v->ne[3]), 128, p->groups);
        break;
    }
    case BP_OP_MUL_MAT: {
        p->wtype = t->src[0]->type;
        /* Matrix-vector products (M = 1) and tiny outputs: one workgroup
         * per output, splitting K. Otherwise 16x16 output tiles. */
        if (t->ne[1] == 1 || t->ne[0] * t->ne[1] < 64) {
            p->shader = VK_SH_MUL_MAT_VEC;
            grid(n, 1, p->groups);
        } else {
            p->shader = VK_SH_MUL_MAT;
            p->groups[0] = (uint32_t)((t->ne[0] + 15) / 16);
            p->groups[1] = (uint32_t)((t->ne[1] + 15) / 16);
            p->groups[2] = (uint32_t)(t->ne[2] * t->ne[3]);
        }
        break;
    }
    case BP_OP_FLASH_ATTN_EXT:
        p->shader = VK_SH_FLASH_ATTN;
        p->aux[0] = t->src[3] != NULL;
        grid(n, 64, p->groups);
        break;
    default:
        break;
    }
}
