/*
 * ops.c — THE OP TABLE of the Vulkan plugin (op_rules, one row per op):
 * which nodes a device computes (the op's shape rules from bp_op_shapes.h,
 * then the types the shader takes) and how each is dispatched. Sources bind
 * in order (src[i] -> binding i), the node itself is binding VK_PB_OUT;
 * every shader lives in shaders/<name>.comp.
 */
#include <math.h>
#include <string.h>

#include "vk_internal.h"

/* MUL_MAT with at most this many columns goes to mul_mat_vec, above to
 * the shared-memory tiles: on a CPU device the mat-vec shader beats those
 * tiles up to M = 16 (1.1-1.3x at M = 16, 0.5-0.7x at M = 32, lavapipe),
 * on a GPU the tiles take over after one column group. A CPU device with
 * mul_mat_cpu uses it instead whenever the node fits it: one column per
 * workgroup (mul_mat_cpu1) up to VK_MMC_ONE_MAX_M columns, eight above. */
#define VK_MMV_MAX_M_CPU 16
#define VK_MMV_MAX_M_GPU 8
#define VK_MMC_ONE_MAX_M 2
/* MUL_MAT_ID's columns per expert, on average, from which mul_mat_cpu_id's
 * eight-column tiles beat one column per workgroup (lavapipe); the GPU
 * tiles take the same (not measured on a GPU). */
#define VK_MMC_ID_GROUP_MIN 4

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }

/* Every type dequant.glsl's wval reads: MUL_MAT and MUL_MAT_ID weights and
 * GET_ROWS tables. */
static bool is_weight_type(int32_t t)
{
    switch (t) {
    case BP_TYPE_F32: case BP_TYPE_F16: case BP_TYPE_BF16:
    case BP_TYPE_Q4_0: case BP_TYPE_Q8_0: case BP_TYPE_Q4_K: case BP_TYPE_Q6_K:
    case BP_TYPE_Q4_1: case BP_TYPE_Q5_0: case BP_TYPE_Q5_1: case BP_TYPE_IQ4_NL:
    case BP_TYPE_Q2_K: case BP_TYPE_Q3_K: case BP_TYPE_Q5_K: case BP_TYPE_IQ4_XS:
        return true;
    default:
        return false;
    }
}

/* Quantized rows are read block by block: packed, whole blocks. */
static bool blocks_packed(const struct bp_tensor *t)
{
    return !bp_type_is_quantized((enum bp_type)t->type) ||
           (t->nb[0] == bp_type_size((enum bp_type)t->type) &&
            t->ne[0] % bp_type_block_size((enum bp_type)t->type) == 0);
}

/* ---- what the shaders take, for nodes whose shapes bp_op_shapes_ok accepted ---- */

static bool weights_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0];
    return is_weight_type(a->type) && blocks_packed(a) &&
           (t->op == BP_OP_GET_ROWS || is_float(t->src[1]->type));
}
static bool two_floats(const struct bp_tensor *t)
{
    return is_float(t->src[0]->type) && is_float(t->src[1]->type);
}
static bool float_src(const struct bp_tensor *t) { return is_float(t->src[0]->type); }
static bool cpy_ok(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    return a->type == b->type ? is_float(a->type) || a->type == BP_TYPE_I32 : two_floats(t);
}
static bool cont_ok(const struct bp_tensor *t)
{
    return is_float(t->src[0]->type) || t->src[0]->type == BP_TYPE_I32;
}
static bool attn_ok(const struct bp_tensor *t)
{
    return two_floats(t) && is_float(t->src[2]->type);
}

/* One row of the op table: the types the shader takes, the shader, its
 * mode word (aux[0]) and how the dispatch is sized. */
struct vk_op_rule {
    bool (*types_ok)(const struct bp_tensor *t);
    enum vk_shader shader;
    uint32_t mode;
    void (*plan)(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p);
};
static const struct vk_op_rule *rule_of(int32_t op);

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
    const struct vk_op_rule *r = rule_of(node->op);
    if (!r || !r->types_ok(node) || !fits_u32(node))
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

/* Workgroups a dispatch may have in one dimension: Vulkan's minimum
 * maxComputeWorkGroupCount, which every device offers. */
#define VK_GRID_MAX 65535u

/* n invocations in workgroups of `local` as an (x, y) grid of at most VK_GRID_MAX columns. */
static void grid(uint64_t n, uint32_t local, uint32_t g[3])
{
    uint64_t groups = (n + local - 1) / local;
    if (groups == 0) groups = 1;
    g[0] = groups > VK_GRID_MAX ? VK_GRID_MAX : (uint32_t)groups;
    g[1] = (uint32_t)((groups + g[0] - 1) / g[0]);
    g[2] = 1;
}

void vk_grid(uint64_t n, uint32_t local, uint32_t g[3])
{
    grid(n, local, g);
}

/* ---- how each op is dispatched ---- */

static void plan_binary(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = mode;
    grid((uint64_t)bp_nelements(t), 128, p->groups);
}
static void plan_elementwise(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = mode;
    p->aux[1] = t->op == BP_OP_CPY && !bp_shape_same(t, t->src[0]);
    if (t->op == BP_OP_CPY) p->slot[1] = NULL; /* the node itself is the view of src[1] */
    grid((uint64_t)bp_nelements(t), VK_EW_LOCAL, p->groups);
}
static void plan_per_element(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    (void)mode;
    grid((uint64_t)bp_nelements(t), 128, p->groups);
}
static void plan_per_row(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    (void)mode;
    grid((uint64_t)bp_nrows(t), 1, p->groups);
}
/* Row reductions in rms_norm.comp: RMS_NORM or SUM_ROWS (the mode). */
static void plan_rows(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = mode;
    plan_per_row(t, mode, p);
}
static void plan_soft_max(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = t->src[1] != NULL; /* has a mask */
    plan_per_row(t, mode, p);
}
static void plan_get_rows(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->wtype = t->src[0]->type;
    plan_per_element(t, mode, p);
}
static void plan_set_rows(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    (void)mode;
    const struct bp_tensor *v = t->src[1];
    p->slot[0] = NULL; /* the node is the destination view */
    grid((uint64_t)(v->ne[0] * v->ne[2] * v->ne[3]), 128, p->groups);
}
/* Of the first n vk_mm_tiles, the largest that a product of rows x cols
 * fills at least half of in both directions (a larger tile reads each
 * weight for more columns, a smaller one leaves fewer invocations idle and
 * makes more workgroups). */
static const struct vk_mm_tile *pick_tile(int n, int64_t rows, int64_t cols)
{
    int k = n - 1;
    while (k > 0 && (2 * rows <= (int64_t)vk_mm_tiles[k].bn || 2 * cols <= (int64_t)vk_mm_tiles[k].bm))
        k--;
    return &vk_mm_tiles[k > 0 ? k : 0];
}

/* mul_mat_cpu reads X as contiguous F32 words, K in whole steps, and the
 * float weight types as packed elements. */
static bool mm_cpu_fits(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    return x->type == BP_TYPE_F32 && x->nb[0] == 4 && x->nb[1] % 4 == 0 &&
           w->ne[0] % VK_MMC_STEP == 0 &&
           (bp_type_is_quantized((enum bp_type)w->type) ||
            w->nb[0] == (size_t)bp_type_size((enum bp_type)w->type));
}

/* mul_mat_vec_q8 takes one column of contiguous F32 X against rows of a
 * quantized type whose K / 32 blocks fit its shared memory. */
static bool mmq_type(int32_t t)
{
    return bp_type_is_quantized((enum bp_type)t);
}
static bool mmq_fits(const struct bp_tensor *t, uint32_t max_blocks)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    return t->ne[1] == 1 && mmq_type(w->type) &&
           x->type == BP_TYPE_F32 && x->nb[0] == 4 && w->ne[0] % 32 == 0 &&
           w->ne[0] / 32 <= (int64_t)max_blocks;
}

/* With integer dots in use, one column that mmq_fits goes to
 * mul_mat_vec_q8 (VK_MMQ_ROWS rows per workgroup). On a CPU device with
 * mul_mat_cpu, that kernel: VK_MMC_ROWS rows x one column (mul_mat_cpu1)
 * or VK_MMC_COLS columns per workgroup. Otherwise few columns go to
 * mul_mat_vec (VK_MMV_ROWS rows x VK_MMV_COLS columns per workgroup), more
 * to mul_mat_cm's 64 x 64 tiles where cooperative matrices are in use, else
 * to mul_mat.comp's tiles (pick_tile). */
static void plan_mul_mat(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    (void)mode;
    p->wtype = t->src[0]->type;
    if (p->int_dot && mmq_fits(t, p->mmq_max_blocks)) {
        p->shader = VK_SH_MUL_MAT_VEC_Q8;
        grid((uint64_t)((t->ne[0] + VK_MMQ_ROWS - 1) / VK_MMQ_ROWS) * (uint64_t)(t->ne[2] * t->ne[3]),
             1, p->groups);
    } else if (p->mm_cpu && mm_cpu_fits(t)) {
        const bool one = t->ne[1] <= VK_MMC_ONE_MAX_M;
        p->shader = one ? VK_SH_MUL_MAT_CPU1 : VK_SH_MUL_MAT_CPU;
        p->groups[0] = (uint32_t)((t->ne[0] + VK_MMC_ROWS - 1) / VK_MMC_ROWS);
        p->groups[1] = (uint32_t)(one ? t->ne[1] : (t->ne[1] + VK_MMC_COLS - 1) / VK_MMC_COLS);
        p->groups[2] = (uint32_t)(t->ne[2] * t->ne[3]);
    } else if (t->ne[1] <= p->mmv_max_m || t->ne[0] * t->ne[1] < 64) {
        p->shader = VK_SH_MUL_MAT_VEC;
        grid((uint64_t)((t->ne[0] + VK_MMV_ROWS - 1) / VK_MMV_ROWS) *
                 (uint64_t)((t->ne[1] + VK_MMV_COLS - 1) / VK_MMV_COLS) *
                 (uint64_t)(t->ne[2] * t->ne[3]), 1, p->groups);
    } else if (p->coopmat) {
        p->shader = VK_SH_MUL_MAT_CM; /* 64 x 64 tiles */
        p->groups[0] = (uint32_t)((t->ne[0] + 63) / 64);
        p->groups[1] = (uint32_t)((t->ne[1] + 63) / 64);
        p->groups[2] = (uint32_t)(t->ne[2] * t->ne[3]);
    } else {
        const struct vk_mm_tile *tile = pick_tile(p->mm_tiles, t->ne[0], t->ne[1]);
        p->shader = tile->sh;
        p->groups[0] = (uint32_t)((t->ne[0] + tile->bn - 1) / tile->bn);
        p->groups[1] = (uint32_t)((t->ne[1] + tile->bm - 1) / tile->bm);
        p->groups[2] = (uint32_t)(t->ne[2] * t->ne[3]);
    }
}

/* mul_mat_cpu's MUL_MAT_ID builds read X as contiguous F32 words, as
 * mm_cpu_fits, and W's experts as whole rows of packed elements. */
static bool mmid_cpu_fits(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    return x->type == BP_TYPE_F32 && x->nb[0] == 4 && x->nb[1] % 4 == 0 && x->nb[2] % 4 == 0 &&
           w->ne[0] % VK_MMC_STEP == 0 && w->ne[3] == 1 && x->ne[3] == 1 &&
           (bp_type_is_quantized((enum bp_type)w->type) ||
            w->nb[0] == (size_t)bp_type_size((enum bp_type)w->type));
}

/* MUL_MAT_ID, U slots of T tokens over E experts; where the U T columns
 * average at least VK_MMC_ID_GROUP_MIN per expert they are grouped by
 * expert, so each weight is read once per several columns. On a CPU device
 * with mul_mat_cpu: grouped, mul_mat_cpu_id (a workgroup per VK_MMC_ROWS
 * rows and expert, eight columns at a time, plus one expert-sized slice
 * for ids out of range), else mul_mat_cpu1_id, one column per workgroup.
 * Elsewhere: grouped, mul_mat.comp's BP_MM_ID tiles (pick_tile with the
 * average columns per expert; workgroups (tile rows, Y, E + 1), Y enough
 * for the average expert's columns), else mul_mat_vec_id, VK_MMV_ROWS rows
 * of one (slot, token) per workgroup. Every kernel reads the expert from
 * the ids (slot 2) in the shader, so experts no token picks are never
 * read. */
static void plan_mul_mat_id(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    (void)mode;
    p->wtype = t->src[0]->type;
    const uint64_t cols = (uint64_t)(t->ne[1] * t->ne[2]), experts = (uint64_t)t->src[0]->ne[2];
    const uint32_t row_groups = (uint32_t)((t->ne[0] + VK_MMC_ROWS - 1) / VK_MMC_ROWS);
    const bool grouped = cols >= VK_MMC_ID_GROUP_MIN * experts;
    if (p->mm_cpu && mmid_cpu_fits(t) && grouped) {
        p->shader = VK_SH_MUL_MAT_CPU_ID;
        p->groups[0] = row_groups;
        p->groups[1] = 1;
        p->groups[2] = (uint32_t)experts + 1;
    } else if (p->mm_cpu && mmid_cpu_fits(t)) {
        p->shader = VK_SH_MUL_MAT_CPU1_ID; /* column y + Y z */
        p->groups[0] = row_groups;
        p->groups[1] = (uint32_t)(cols < VK_GRID_MAX ? cols : VK_GRID_MAX);
        p->groups[2] = (uint32_t)((cols + VK_GRID_MAX - 1) / VK_GRID_MAX);
    } else if (!p->mm_cpu && grouped) {
        const uint64_t avg = cols / experts;
        const struct vk_mm_tile *tile = pick_tile(p->mm_tiles_id, t->ne[0], (int64_t)avg);
        const uint64_t y = (avg + tile->bm - 1) / tile->bm;
        p->shader = tile->sh_id;
        p->groups[0] = (uint32_t)((t->ne[0] + tile->bn - 1) / tile->bn);
        p->groups[1] = (uint32_t)(y < VK_GRID_MAX ? y : VK_GRID_MAX);
        p->groups[2] = (uint32_t)experts + 1;
    } else {
        grid((uint64_t)((t->ne[0] + VK_MMV_ROWS - 1) / VK_MMV_ROWS) * cols, 1, p->groups);
    }
}
/* ROPE_EXT: the parts of bp_ops.h's formula that do not depend on the
 * position or the pair, worked out in double as the cpu reference does, so
 * that YaRN's floor and ceil fall the same way on both. */
static void plan_rope(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = mode;
    if (mode == VK_ROPE_EXT) {
        const double n_dims = bp_op_param_i32(t, 0), base = bp_op_param_f32(t, 2);
        const double fs = bp_op_param_f32(t, 3), ext_factor = bp_op_param_f32(t, 5);
        double mscale = bp_op_param_f32(t, 6);
        float lo = 0.0f, hi = 0.0f;
        if (ext_factor != 0.0) {
            const double n_ctx = bp_op_param_i32(t, 4), pi2 = 2.0 * 3.14159265358979323846;
            const double c_fast = n_dims * log(n_ctx / (pi2 * bp_op_param_f32(t, 7))) / (2.0 * log(base));
            const double c_slow = n_dims * log(n_ctx / (pi2 * bp_op_param_f32(t, 8))) / (2.0 * log(base));
            lo = (float)fmax(0.0, floor(c_fast));
            hi = (float)fmin(n_dims - 1.0, ceil(c_slow));
            mscale *= 1.0 + 0.1 * log(1.0 / fs);
        }
        const float ms = (float)mscale;
        p->aux[1] = t->src[2] != NULL;
        memcpy(&p->aux[2], &lo, 4);
        memcpy(&p->aux[3], &hi, 4);
        memcpy(&p->aux[4], &ms, 4);
    }
    grid((uint64_t)bp_nelements(t), 128, p->groups);
}
/* A workgroup per query row: on a CPU device with mul_mat_cpu's subgroups
 * one subgroup (flash_attn_cpu.comp) for heads up to VK_FAC_MAX_D and K, V
 * of one type, else 64
 * invocations (flash_attn.comp); heads above VK_FA_MAX_D an invocation per
 * output element (flash_attn_wide.comp). */
static void plan_flash_attn(const struct bp_tensor *t, uint32_t mode, struct vk_dispatch *p)
{
    p->aux[0] = t->src[3] != NULL; /* has a mask */
    p->aux[1] = mode;
    const struct bp_tensor *k = t->src[1], *v = t->src[2];
    if (p->mm_cpu && k->type == v->type && t->src[0]->ne[0] <= VK_FAC_MAX_D &&
        v->ne[0] <= VK_FAC_MAX_D) {
        p->shader = VK_SH_FLASH_ATTN_CPU;
        p->wtype = k->type; /* the shader's K and V type (specialisation) */
        grid((uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]), 1, p->groups);
    } else if (t->src[0]->ne[0] <= VK_FA_MAX_D && t->src[2]->ne[0] <= VK_FA_MAX_D) {
        grid((uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]), 1, p->groups);
    } else {
        p->shader = VK_SH_FLASH_ATTN_WIDE;
        grid((uint64_t)bp_nelements(t), 64, p->groups);
    }
}

/* THE OP TABLE: one row per op a shader computes (views need no row). */
static const struct vk_op_rule op_rules[BP_OP_COUNT] = {
    [BP_OP_GET_ROWS] = { weights_ok, VK_SH_GET_ROWS, 0, plan_get_rows },
    [BP_OP_MUL_MAT] = { weights_ok, VK_SH_MUL_MAT, 0, plan_mul_mat },
    [BP_OP_ADD] = { two_floats, VK_SH_BINARY, VK_BINARY_ADD, plan_binary },
    [BP_OP_MUL] = { two_floats, VK_SH_BINARY, VK_BINARY_MUL, plan_binary },
    [BP_OP_SCALE] = { float_src, VK_SH_ELEMENTWISE, VK_EW_SCALE, plan_elementwise },
    [BP_OP_RMS_NORM] = { float_src, VK_SH_RMS_NORM, VK_ROWS_RMS_NORM, plan_rows },
    [BP_OP_SOFT_MAX] = { float_src, VK_SH_SOFT_MAX, 0, plan_soft_max },
    [BP_OP_ROPE] = { float_src, VK_SH_ROPE, VK_ROPE_PLAIN, plan_rope },
    [BP_OP_ROPE_EXT] = { float_src, VK_SH_ROPE, VK_ROPE_EXT, plan_rope },
    [BP_OP_SILU] = { float_src, VK_SH_ELEMENTWISE, VK_EW_SILU, plan_elementwise },
    [BP_OP_GELU] = { float_src, VK_SH_ELEMENTWISE, VK_EW_GELU, plan_elementwise },
    [BP_OP_CPY] = { cpy_ok, VK_SH_ELEMENTWISE, VK_EW_COPY, plan_elementwise },
    [BP_OP_CONT] = { cont_ok, VK_SH_ELEMENTWISE, VK_EW_COPY, plan_elementwise },
    [BP_OP_SET_ROWS] = { two_floats, VK_SH_SET_ROWS, 0, plan_set_rows },
    [BP_OP_FLASH_ATTN_EXT] = { attn_ok, VK_SH_FLASH_ATTN, 0, plan_flash_attn },
    [BP_OP_SQR] = { float_src, VK_SH_ELEMENTWISE, VK_EW_SQR, plan_elementwise },
    [BP_OP_TANH] = { float_src, VK_SH_ELEMENTWISE, VK_EW_TANH, plan_elementwise },
    [BP_OP_FLASH_ATTN_SOFTCAP] = { attn_ok, VK_SH_FLASH_ATTN, VK_ATTN_SOFTCAP, plan_flash_attn },
    [BP_OP_MUL_MAT_ID] = { weights_ok, VK_SH_MUL_MAT_VEC_ID, 0, plan_mul_mat_id },
    [BP_OP_TOP_K] = { float_src, VK_SH_TOP_K, 0, plan_per_row },
    [BP_OP_SUM_ROWS] = { float_src, VK_SH_RMS_NORM, VK_ROWS_SUM, plan_rows },
    [BP_OP_DIV] = { two_floats, VK_SH_BINARY, VK_BINARY_DIV, plan_binary },
    [BP_OP_CLAMP] = { float_src, VK_SH_ELEMENTWISE, VK_EW_CLAMP, plan_elementwise },
};

static const struct vk_op_rule *rule_of(int32_t op)
{
    return (uint32_t)op < BP_OP_COUNT && op_rules[op].types_ok ? &op_rules[op] : NULL;
}

void vk_plan_node(const struct vk_dev *d, const struct bp_tensor *t, struct vk_dispatch *p)
{
    memset(p, 0, sizeof *p);
    for (int s = 0; s < VK_SLOTS - 1; s++)
        p->slot[s] = t->src[s];
    const struct vk_op_rule *r = rule_of(t->op);
    if (!r) return;
    p->shader = r->shader;
    p->mmv_max_m = d->software ? VK_MMV_MAX_M_CPU : VK_MMV_MAX_M_GPU;
    p->mm_cpu = d->mm_cpu;
    p->mm_tiles = d->mm_tiles;
    p->mm_tiles_id = d->mm_tiles_id;
    p->int_dot = d->use_int_dot;
    p->mmq_max_blocks = d->mmq_max_blocks;
    p->coopmat = d->use_coopmat;
    r->plan(t, r->mode, p);
    if (d->subgroup_arith && p->shader == VK_SH_MUL_MAT_VEC) p->shader = VK_SH_MUL_MAT_VEC_SG;
    if (d->subgroup_arith && p->shader == VK_SH_MUL_MAT_VEC_ID) p->shader = VK_SH_MUL_MAT_VEC_ID_SG;
}

int vk_node_shaders(const struct vk_dev *d, const struct bp_tensor *t, enum vk_shader sh[2],
                    int *wtype)
{
    struct vk_dispatch p;
    vk_plan_node(d, t, &p);
    *wtype = p.wtype;
    sh[0] = p.shader;
    if (t->op != BP_OP_MUL_MAT && t->op != BP_OP_MUL_MAT_ID) return 1;
    /* The same product at the other end of the column counts: decode's one
     * column (token) if this is a prefill, a prefill's if this is decode. */
    struct bp_tensor other = *t;
    const int cols = t->op == BP_OP_MUL_MAT ? 1 : 2;
    other.ne[cols] = t->ne[cols] == 1 ? 512 : 1;
    vk_plan_node(d, &other, &p);
    sh[1] = p.shader;
    return sh[1] == sh[0] ? 1 : 2;
}
