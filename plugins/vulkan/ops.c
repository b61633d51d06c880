/*
 * ops.c — THE OP TABLE of the Vulkan plugin: which nodes a device computes
 * (the op's shape rules from bp_op_shapes.h, then the types the shaders
 * take: types_ok) and how each is dispatched. Sources bind in order (src[i] -> binding i), the node itself
 * is binding 4; every shader lives in shaders/<name>.comp.
 */
#include <string.h>

#include "vk_internal.h"

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }

static bool is_weight_type(int32_t t)
{
    return is_float(t) || t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q4_K ||
           t == BP_TYPE_Q6_K;
}

/* Quantized rows are read block by block: packed, whole blocks. */
static bool blocks_packed(const struct bp_tensor *t)
{
    return !bp_type_is_quantized((enum bp_type)t->type) ||
           (t->nb[0] == bp_type_size((enum bp_type)t->type) &&
            t->ne[0] % bp_type_block_size((enum bp_type)t->type) == 0);
}

/* What the shaders take, for nodes whose shapes bp_op_shapes_ok accepted. */
static bool types_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    switch ((enum bp_op)t->op) {
    case BP_OP_GET_ROWS:
    case BP_OP_MUL_MAT:
        return is_weight_type(a->type) && blocks_packed(a) &&
               (t->op == BP_OP_GET_ROWS || is_float(b->type));
    case BP_OP_ADD: case BP_OP_MUL: case BP_OP_SET_ROWS:
        return is_float(a->type) && is_float(b->type);
    case BP_OP_SCALE: case BP_OP_RMS_NORM: case BP_OP_SILU: case BP_OP_GELU:
    case BP_OP_SOFT_MAX: case BP_OP_ROPE:
        return is_float(a->type);
    case BP_OP_CPY:
        return a->type == b->type ? is_float(a->type) || a->type == BP_TYPE_I32
                                  : is_float(a->type) && is_float(b->type);
    case BP_OP_CONT:
        return is_float(a->type) || a->type == BP_TYPE_I32;
    case BP_OP_FLASH_ATTN_EXT:
        return is_float(a->type) && is_float(b->type) && is_float(t->src[2]->type);
    default:
        return false;
    }
}

/* Every offset a shader forms is a 32-bit byte count (buffers are capped
 * below 4 GiB) and every element count fits 32 bits. */
static bool fits_u32(const struct bp_tensor *t)
{
    return bp_nelements(t) < ((int64_t)1 << 32);
}

bool vk_supports_node(struct vk_dev *d, const struct bp_tensor *node)
{
    if (!bp_op_shapes_ok(node))
        return false;
    if (bp_op_is_view((enum bp_op)node->op))
        return true;
    if (!types_ok(node) || !fits_u32(node))
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
        p->aux[1] = t->op == BP_OP_CPY && !bp_shape_same(t, t->src[0]);
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
