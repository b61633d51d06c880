/* derive.c — split states op by op, as a table (op_rules, one row per op):
 * given the layouts of a node's sources, the node's layout (or a refusal
 * naming op and tensor), which PARTIAL inputs must be reduced first, and
 * each device's local view tensors. */
#include <stdio.h>
#include <string.h>

#include "meta_internal.h"

#define MIRRORED BP_META_SPLIT_MIRRORED
#define PARTIAL  BP_META_SPLIT_PARTIAL

/* The axes by what they hold in the decoder's tensors: ne[0] the elements
 * of a row (MUL_MAT's K), ne[1] the rows (tokens, or a weight's outputs),
 * ne[2] the heads, ne[3] the outermost batch. */
#define ROW_AXIS   BP_META_SPLIT_AXIS_0
#define ROWS_AXIS  BP_META_SPLIT_AXIS_1
#define HEADS_AXIS BP_META_SPLIT_AXIS_2
#define BATCH_AXIS BP_META_SPLIT_AXIS_3

/* The axes above the matrix a MUL_MAT multiplies: each of their indices is
 * an independent product. */
static bool is_batch_axis(int32_t state) { return state == HEADS_AXIS || state == BATCH_AXIS; }

static bp_status refuse(const struct bp_tensor *node, const char *why)
{
    meta_log(BP_LOG_ERROR, "the meta device has no split rule for %s node '%s': %s; give its inputs "
             "other split states or compute it on a single device.", bp_op_name((enum bp_op)node->op),
             node->name, why);
    return BP_ERR_UNSUPPORTED;
}

static struct meta_layout *lay(const struct bp_tensor *t)
{
    struct meta_tensor *mt = meta_tensor_of(t);
    return mt ? &mt->layout : NULL;
}

/* Product of ne[0..k). */
static int64_t inner(const struct bp_tensor *t, int k)
{
    int64_t p = 1;
    for (int i = 0; i < k; i++) p *= t->ne[i];
    return p;
}

/* ---- which sources may stay PARTIAL (summed later) rather than be reduced first ---- */

static bool partial_src0(const struct bp_tensor *node, int s, const struct meta_layout *const *eff)
{
    (void)node, (void)eff;
    return s == 0;
}
/* x*k is linear; x*k + b is not (b would be added once per device). */
static bool partial_scale(const struct bp_tensor *node, int s, const struct meta_layout *const *eff)
{
    (void)eff;
    return s == 0 && bp_op_param_f32(node, 1) == 0.0f;
}
static bool partial_add(const struct bp_tensor *node, int s, const struct meta_layout *const *eff)
{
    const struct meta_layout *o = eff[1 - s];
    if (o->state == PARTIAL) return true;
    /* partial + mirrored: the mirrored term is added once, which needs
     * the partial operand to have the result's shape */
    return o->state == MIRRORED && memcmp(node->src[s]->ne, node->ne, sizeof node->ne) == 0;
}
static bool partial_mul(const struct bp_tensor *node, int s, const struct meta_layout *const *eff)
{
    (void)node;
    return eff[1 - s]->state == MIRRORED;
}

/* a / b is linear in a, not in b. */
static bool partial_div(const struct bp_tensor *node, int s, const struct meta_layout *const *eff)
{
    (void)node;
    return s == 0 && eff[1]->state == MIRRORED;
}

/* Move a split along a reshape: the destination axis whose outer boundary
 * matches, with piece lengths rescaled. */
static bp_status reshape_layout(const struct bp_tensor *node, const struct bp_tensor *src,
                                const struct meta_layout *in, struct meta_layout *out)
{
    int a = in->state;
    int64_t outer_s = inner(src, a + 1), inner_s = inner(src, a);
    for (int b = 0; b < BP_MAX_DIMS; b++) {
        if (inner(node, b + 1) != outer_s) continue;
        *out = *in;
        out->state = b;
        if (!meta_layout_rescale(out, inner_s, inner(node, b)))
            return refuse(node, "the reshape cuts through a slice of the split axis");
        return BP_OK;
    }
    return refuse(node, "the split axis does not survive the reshape");
}

/* How a VIEW of a split source reads it. Every view dimension walks one
 * source dimension with a whole-index step (a view may cut a dimension into
 * several, as [D*H, n] viewed as [D, H, n] does). The view dimensions on the
 * split axis are one outer dimension, which carries the split, and inner
 * ones that stay inside one of its indices (a head); so a fused QKV output
 * split by segments can be viewed as Q, K or V when every slice boundary in
 * the viewed range falls on an index of the outer dimension. */
struct view_map {
    int a;                         /* the source's split axis */
    int vd;                        /* the view dimension that carries the split */
    int64_t unit;                  /* axis elements per index of vd */
    int64_t lo, hi;                /* axis range the view covers, in elements */
    int src_dim[BP_MAX_DIMS];      /* source dimension of each view dimension, -1: size 1 */
    int64_t step[BP_MAX_DIMS];     /* source elements per view index */
    int64_t coord[BP_MAX_DIMS];    /* source coordinates of the first element */
};

static bp_status view_map_build(const struct bp_tensor *node, const struct bp_tensor *src,
                                const struct meta_layout *in, struct view_map *vm)
{
    const int a = in->state;
    const int64_t bs = bp_type_block_size((enum bp_type)src->type);
    if (!bp_is_contiguous(src)) return refuse(node, "it views a split tensor that is not contiguous");
    size_t r = node->view_offs - (src->view_src ? src->view_offs : 0);
    for (int j = BP_MAX_DIMS - 1; j >= 0; j--) {
        size_t idx = r / src->nb[j];
        r -= idx * src->nb[j];
        vm->coord[j] = (int64_t)idx * (j == 0 ? bs : 1);
    }
    if (r != 0) return refuse(node, "its offset falls inside an element of the split tensor");
    int64_t reach[BP_MAX_DIMS] = {0}; /* furthest coordinate each source dim is read at */
    vm->a = a;
    vm->vd = -1;
    vm->unit = 0;
    int64_t span = 1;
    for (int i = 0; i < BP_MAX_DIMS; i++) {
        vm->src_dim[i] = -1;
        vm->step[i] = 0;
        if (node->ne[i] == 1) continue;
        int j = -1;
        for (int k = 0; k < BP_MAX_DIMS; k++)
            if (src->ne[k] > 1 && src->nb[k] <= node->nb[i]) j = k;
        if (j < 0 || node->nb[i] % src->nb[j] != 0)
            return refuse(node, "a view dimension's stride is not a whole step of one dimension of the split tensor");
        int64_t mul = (int64_t)(node->nb[i] / src->nb[j]);
        if (j == 0 && bs > 1 && !(i == 0 && mul == 1))
            return refuse(node, "it re-strides the blocks of a quantized split tensor");
        vm->src_dim[i] = j;
        vm->step[i] = (i == 0 && j == 0) ? 1 : mul * (j == 0 ? bs : 1);
        reach[j] += (node->ne[i] - 1) * vm->step[i];
        if (j == a && (vm->vd < 0 || vm->step[i] > vm->unit)) {
            if (vm->vd >= 0) span += (node->ne[vm->vd] - 1) * vm->unit;
            vm->vd = i;
            vm->unit = vm->step[i];
        } else if (j == a) {
            span += (node->ne[i] - 1) * vm->step[i];
        }
    }
    for (int j = 0; j < BP_MAX_DIMS; j++)
        if (vm->coord[j] + reach[j] >= (src->ne[j] > 0 ? src->ne[j] : 1) && reach[j] > 0)
            return refuse(node, "the view runs past the end of a dimension of the split tensor");
    if (vm->vd < 0)
        return refuse(node, "the view takes a single index of the split axis, which lives on one device");
    if (span > vm->unit)
        return refuse(node, "its inner dimensions on the split axis overlap the split one");
    vm->lo = vm->coord[a];
    vm->hi = vm->lo + node->ne[vm->vd] * vm->unit;
    return BP_OK;
}

/* The view's layout: the source's pieces clipped to the viewed range, in
 * indices of the view's split dimension. */
static bp_status view_layout(const struct bp_tensor *node, const struct bp_tensor *src,
                             const struct meta_layout *in, struct meta_layout *out, struct view_map *vm)
{
    bp_status st = view_map_build(node, src, in, vm);
    if (st != BP_OK) return st;
    const int64_t end = src->ne[vm->a];
    out->state = vm->vd;
    out->n_pieces = 0;
    int64_t g = 0;
    for (int32_t p = 0; p < in->n_pieces; p++) {
        int64_t g0 = g, g1 = g + in->piece[p].len;
        g = g1;
        int64_t x0 = g0 > vm->lo ? g0 : vm->lo, x1 = g1 < vm->hi ? g1 : vm->hi;
        if (x1 <= x0) continue;
        if ((x0 - vm->lo) % vm->unit != 0 || ((x1 - vm->lo) % vm->unit != 0 && x1 != end)) {
            char why[384];
            snprintf(why, sizeof why, "a slice boundary of '%s' (axis %d, element %lld) falls inside one "
                     "index of the view's split dimension (%lld elements); split the source in whole units "
                     "of %lld", src->name, vm->a, (long long)((x0 - vm->lo) % vm->unit ? x0 : x1),
                     (long long)vm->unit, (long long)vm->unit);
            return refuse(node, why);
        }
        int64_t k0 = (x0 - vm->lo) / vm->unit, k1 = (x1 - vm->lo + vm->unit - 1) / vm->unit;
        out->piece[out->n_pieces++] = (struct meta_piece){k1 - k0, in->piece[p].dev};
    }
    meta_layout_finish(out, META_MAX_DEV);
    return BP_OK;
}

/* A device's slice is one run of the axis when it holds a single piece:
 * then a mirrored operand can be cut to it by a view. */
static bool one_piece_per_device(const struct meta_layout *l)
{
    bool seen[META_MAX_DEV] = {false};
    for (int32_t p = 0; p < l->n_pieces; p++) {
        if (seen[l->piece[p].dev]) return false;
        seen[l->piece[p].dev] = true;
    }
    return true;
}

/* ---- the node's layout from its sources' (after PARTIAL inputs were reduced) ---- */

struct derive {
    struct bp_tensor *node;
    const struct bp_tensor *a, *b;           /* src[0], src[1] */
    const struct meta_layout *const *eff;    /* each source's effective layout */
    const struct meta_layout *A, *B;         /* eff[0], eff[1] */
    bool am, bm;                             /* A, B mirrored */
    struct meta_layout *out;
    enum meta_node_kind *kind;
};

static bp_status copy_a(struct derive *x)
{
    *x->out = *x->A;
    return BP_OK;
}

static bp_status derive_get_rows(struct derive *x)
{
    if (!x->bm) return refuse(x->node, "the row ids are split");
    if (x->am || x->A->state == ROW_AXIS) return copy_a(x);
    return refuse(x->node, "the table is split along its rows");
}

/* The four quadrants of a tensor-parallel product W (A) times X (B). */
static bp_status derive_mul_mat(struct derive *x)
{
    const struct meta_layout *A = x->A, *B = x->B;
    if (x->am && x->bm) return copy_a(x);
    if (A->state == ROWS_AXIS && x->bm) { /* column-parallel: W's outputs become the result's rows */
        *x->out = *A;
        x->out->state = ROW_AXIS;
        return BP_OK;
    }
    if (A->state == ROW_AXIS && meta_layout_same(A, B)) { /* row-parallel: partial sums */
        meta_layout_simple(x->out, PARTIAL);
        return BP_OK;
    }
    if (x->am && (B->state == ROWS_AXIS || (is_batch_axis(B->state) && x->a->ne[B->state] == 1))) {
        *x->out = *B; /* split input, W broadcast over it */
        return BP_OK;
    }
    if (is_batch_axis(A->state) && meta_layout_same(A, B) && x->a->ne[A->state] == x->b->ne[A->state])
        return copy_a(x);
    return refuse(x->node, "its weight and input split states are not one of the four quadrants "
                           "(mirrored, column-parallel, row-parallel with matching slices, split input)");
}

static bp_status derive_add_mul(struct derive *x)
{
    struct bp_tensor *node = x->node;
    const struct meta_layout *A = x->A, *B = x->B;
    if (A->state == PARTIAL || B->state == PARTIAL) {
        meta_layout_simple(x->out, PARTIAL);
        if (A->state != PARTIAL || B->state != PARTIAL)
            *x->kind = node->op == BP_OP_ADD ? META_NODE_ADD_ONCE : META_NODE_COMPUTE;
        return BP_OK;
    }
    if (meta_layout_same(A, B)) return copy_a(x);
    if (meta_layout_is_axis(A) && x->bm && x->b->ne[A->state] == 1) return copy_a(x);
    for (int s = 0; s < 2; s++) {
        /* split op mirrored (either order): each device reads its slice
         * of the mirrored operand, which spans the whole axis */
        const struct meta_layout *S = s ? B : A, *M = s ? A : B;
        const struct bp_tensor *m = node->src[1 - s];
        if (!meta_layout_is_axis(S) || M->state != MIRRORED || m->ne[S->state] != node->ne[S->state] ||
            node->src[s]->ne[S->state] != node->ne[S->state])
            continue;
        if (!one_piece_per_device(S))
            return refuse(node, "its mirrored operand would have to be cut into several pieces per device "
                                "(a segmented split); split that operand the same way instead");
        if (S->state == ROW_AXIS && bp_type_block_size((enum bp_type)m->type) > 1)
            return refuse(node, "its mirrored operand is quantized and would have to be cut inside its rows");
        *x->out = *S;
        meta_tensor_of(node)->slice_src = 1 - s;
        return BP_OK;
    }
    return refuse(node, "its operands are split differently and neither can be cut to the other's slices");
}

/* MUL_MAT_ID: each expert is cut like a dense FFN's projection (the ids,
 * which name whole experts, stay whole on every device): the stacked
 * weights split by output rows (axis 1) give a result split by rows of each
 * slot's output (axis 0); split by input (axis 0) with the activation cut
 * the same way, partial sums. */
static bp_status derive_mul_mat_id(struct derive *x)
{
    const struct meta_layout *A = x->A, *B = x->B;
    if (x->eff[2]->state != MIRRORED) return refuse(x->node, "its expert ids are split");
    if (x->am && x->bm) return copy_a(x);
    if (A->state == ROWS_AXIS && x->bm) {
        *x->out = *A;
        x->out->state = ROW_AXIS;
        return BP_OK;
    }
    if (A->state == ROW_AXIS && meta_layout_same(A, B)) {
        meta_layout_simple(x->out, PARTIAL);
        return BP_OK;
    }
    return refuse(x->node, "the experts must be mirrored, split by their output rows (axis 1) with "
                           "the input mirrored, or split by their input (axis 0) as the input is");
}

/* TOP_K and SUM_ROWS read whole rows. */
static bp_status derive_whole_rows(struct derive *x)
{
    if (x->A->state == ROW_AXIS) return refuse(x->node, "it reads whole rows but dim 0 is split");
    return copy_a(x);
}

static bp_status derive_rms_norm(struct derive *x)
{
    if (x->A->state == ROW_AXIS) return refuse(x->node, "it normalises whole rows but dim 0 is split");
    return copy_a(x);
}

static bp_status derive_soft_max(struct derive *x)
{
    const struct meta_layout *A = x->A;
    const struct bp_tensor *mask = x->b;
    if (A->state == ROW_AXIS) return refuse(x->node, "it normalises whole rows but dim 0 is split");
    if (mask && !x->bm) return refuse(x->node, "its mask is split");
    if (mask && meta_layout_is_axis(A) && mask->ne[A->state] != 1 && A->state != ROWS_AXIS)
        return refuse(x->node, "its mask would have to be sliced");
    if (mask && A->state == ROWS_AXIS) return refuse(x->node, "its mask rows would have to be sliced");
    return copy_a(x);
}

static bp_status derive_rope(struct derive *x)
{
    if (x->A->state == ROW_AXIS) return refuse(x->node, "it rotates within a head but dim 0 is split");
    if (!x->bm) return refuse(x->node, "its positions are split");
    return copy_a(x);
}

/* ROPE_EXT is ROPE with a third source, the frequency factors, which every
 * device reads whole (one per rotated pair of every head). */
static bp_status derive_rope_ext(struct derive *x)
{
    if (x->eff[2]->state != MIRRORED) return refuse(x->node, "its frequency factors are split");
    return derive_rope(x);
}

static bp_status derive_cpy(struct derive *x)
{
    if (!meta_layout_same(x->A, x->B) || memcmp(x->a->ne, x->b->ne, sizeof x->a->ne) != 0)
        return refuse(x->node, "source and destination are split differently");
    *x->out = *x->B;
    return BP_OK;
}

static bp_status derive_set_rows(struct derive *x)
{
    if (x->eff[2]->state != MIRRORED) return refuse(x->node, "its row ids are split");
    if (x->A->state == ROWS_AXIS) return refuse(x->node, "the destination is split along its rows");
    if (!meta_layout_same(x->A, x->B)) return refuse(x->node, "destination and values are split differently");
    return copy_a(x);
}

/* Attention splits by heads: q, k and v on HEADS_AXIS, and each device's
 * query heads are the ones its key/value heads serve (grouped-query). */
static bp_status derive_flash_attn(struct derive *x)
{
    const struct meta_layout *A = x->A, *K = x->eff[1], *V = x->eff[2];
    if (x->eff[3]->state != MIRRORED) return refuse(x->node, "its mask is split");
    if (x->am && K->state == MIRRORED && V->state == MIRRORED) {
        meta_layout_simple(x->out, MIRRORED);
        return BP_OK;
    }
    if (A->state != HEADS_AXIS || K->state != HEADS_AXIS || !meta_layout_same(K, V) ||
        A->n_pieces != K->n_pieces)
        return refuse(x->node, "q, k and v must all be split by heads (axis 2)");
    int64_t g = x->a->ne[HEADS_AXIS] / x->node->src[1]->ne[HEADS_AXIS];
    for (int32_t p = 0; p < A->n_pieces; p++)
        if (A->piece[p].dev != K->piece[p].dev || A->piece[p].len != K->piece[p].len * g)
            return refuse(x->node, "the query heads of a device do not match its key/value heads");
    *x->out = *A;
    x->out->state = ROWS_AXIS; /* the result is [D, H, n]: heads are its rows */
    return BP_OK;
}

static bp_status derive_reshape(struct derive *x)
{
    if (!meta_layout_is_axis(x->A)) return copy_a(x);
    return reshape_layout(x->node, x->a, x->A, x->out);
}

static bp_status derive_permute(struct derive *x)
{
    const struct meta_layout *A = x->A;
    *x->out = *A;
    if (!meta_layout_is_axis(A)) return BP_OK;
    if (x->node->op == BP_OP_PERMUTE)
        x->out->state = bp_op_param_i32(x->node, A->state);
    else if (A->state == ROW_AXIS || A->state == ROWS_AXIS) /* TRANSPOSE swaps the two */
        x->out->state = A->state == ROW_AXIS ? ROWS_AXIS : ROW_AXIS;
    return BP_OK;
}

static bp_status derive_view(struct derive *x)
{
    if (!meta_layout_is_axis(x->A)) return copy_a(x);
    struct view_map vm;
    return view_layout(x->node, x->a, x->A, x->out, &vm);
}

struct local;
static bp_status local_reshape(const struct local *c);
static bp_status local_permute(const struct local *c);
static bp_status local_view(const struct local *c);

/* THE SPLIT RULES: one row per op the meta device computes. derive gives
 * the node's layout; partial says which sources may stay PARTIAL (NULL:
 * none); local builds a view node's per-device view tensor. */
struct meta_op_rule {
    bp_status (*derive)(struct derive *x);
    bool (*partial)(const struct bp_tensor *node, int s, const struct meta_layout *const *eff);
    bp_status (*local)(const struct local *c);
};

static const struct meta_op_rule op_rules[BP_OP_COUNT] = {
    [BP_OP_GET_ROWS] = { derive_get_rows, NULL, NULL },
    [BP_OP_MUL_MAT] = { derive_mul_mat, NULL, NULL },
    [BP_OP_ADD] = { derive_add_mul, partial_add, NULL },
    [BP_OP_MUL] = { derive_add_mul, partial_mul, NULL },
    [BP_OP_SCALE] = { copy_a, partial_scale, NULL },
    [BP_OP_RMS_NORM] = { derive_rms_norm, NULL, NULL },
    [BP_OP_SOFT_MAX] = { derive_soft_max, NULL, NULL },
    [BP_OP_ROPE] = { derive_rope, NULL, NULL },
    [BP_OP_SILU] = { copy_a, NULL, NULL },
    [BP_OP_GELU] = { copy_a, NULL, NULL },
    [BP_OP_CPY] = { derive_cpy, NULL, NULL },
    [BP_OP_CONT] = { copy_a, partial_src0, NULL },
    [BP_OP_RESHAPE] = { derive_reshape, partial_src0, local_reshape },
    [BP_OP_VIEW] = { derive_view, partial_src0, local_view },
    [BP_OP_PERMUTE] = { derive_permute, partial_src0, local_permute },
    [BP_OP_TRANSPOSE] = { derive_permute, partial_src0, local_permute },
    [BP_OP_SET_ROWS] = { derive_set_rows, NULL, NULL },
    [BP_OP_FLASH_ATTN_EXT] = { derive_flash_attn, NULL, NULL },
    [BP_OP_SQR] = { copy_a, NULL, NULL },
    [BP_OP_ROPE_EXT] = { derive_rope_ext, NULL, NULL },
    [BP_OP_TANH] = { copy_a, NULL, NULL },
    [BP_OP_FLASH_ATTN_SOFTCAP] = { derive_flash_attn, NULL, NULL },
    [BP_OP_MUL_MAT_ID] = { derive_mul_mat_id, NULL, NULL },
    [BP_OP_TOP_K] = { derive_whole_rows, NULL, NULL },
    [BP_OP_SUM_ROWS] = { derive_whole_rows, NULL, NULL },
    [BP_OP_DIV] = { derive_add_mul, partial_div, NULL },
    [BP_OP_CLAMP] = { copy_a, NULL, NULL },
};

static const struct meta_op_rule *rule_of(int32_t op)
{
    return (uint32_t)op < BP_OP_COUNT && op_rules[op].derive ? &op_rules[op] : NULL;
}

bp_status meta_derive(struct bp_tensor *node, size_t n_dev, enum meta_node_kind *kind, unsigned *reduce_src)
{
    (void)n_dev;
    *kind = bp_op_is_view((enum bp_op)node->op) ? META_NODE_VIEW : META_NODE_COMPUTE;
    *reduce_src = 0;
    struct meta_layout *out = lay(node);
    if (!out) return refuse(node, "it is not in a meta buffer");
    meta_tensor_of(node)->slice_src = -1;
    if (node->op == BP_OP_NONE) return refuse(node, "a leaf reached derivation");
    const struct meta_op_rule *rule = rule_of(node->op);
    if (!rule) return refuse(node, "no rule is written for this op");
    const struct meta_layout *eff[BP_MAX_SRC] = {0};
    static const struct meta_layout mirrored = {.state = MIRRORED};
    for (int s = 0; s < BP_MAX_SRC; s++) {
        if (!node->src[s]) { eff[s] = &mirrored; continue; }
        eff[s] = lay(node->src[s]);
        if (!eff[s]) return refuse(node, "one of its inputs is not in a meta buffer");
    }
    for (int s = 0; s < BP_MAX_SRC; s++) {
        if (node->src[s] && eff[s]->state == PARTIAL && !(rule->partial && rule->partial(node, s, eff))) {
            *reduce_src |= 1u << s;
            eff[s] = &mirrored;
        }
    }
    struct derive x = { .node = node, .a = node->src[0], .b = node->src[1], .eff = eff,
                        .A = eff[0], .B = eff[1], .am = eff[0]->state == MIRRORED,
                        .bm = eff[1]->state == MIRRORED, .out = out, .kind = kind };
    return rule->derive(&x);
}

/* ---- local view tensors ---- */

void meta_derive_local_slice(struct bp_tensor *node, size_t d)
{
    struct meta_tensor *mt = meta_tensor_of(node);
    const struct bp_tensor *m = node->src[mt->slice_src];
    const struct bp_tensor *lm = &meta_tensor_of(m)->local[d];
    const struct meta_layout *L = &mt->layout;
    int a = L->state;
    int64_t start = 0, g = 0;
    for (int32_t p = 0; p < L->n_pieces; p++) {
        if (L->piece[p].dev == (int32_t)d) start = g;
        g += L->piece[p].len;
    }
    struct bp_tensor *v = &mt->slice[d];
    *v = *lm;
    memset(v->src, 0, sizeof v->src);
    v->op = BP_OP_NONE;
    v->view_src = NULL;
    v->view_offs = 0;
    v->extra = NULL;
    v->ne[a] = L->local_ne[d];
    v->data = lm->data ? (char *)lm->data + (size_t)start * lm->nb[a] : NULL;
}

/* What a view node's per-device view is built from. */
struct local {
    struct bp_tensor *node;
    size_t d;
    const struct meta_layout *lay;  /* the node's layout */
    const struct bp_tensor *src;    /* the viewed source */
    const struct meta_layout *in;   /* its layout */
    const struct bp_tensor *ls;     /* its local tensor on device d */
    struct bp_tensor *l;            /* the local view being built */
};

static bp_status local_reshape(const struct local *c)
{
    struct bp_tensor *l = c->l;
    if (meta_layout_is_axis(c->in)) l->ne[c->lay->state] = c->lay->local_ne[c->d];
    enum bp_type ty = (enum bp_type)l->type;
    l->nb[0] = bp_type_size(ty);
    l->nb[1] = l->nb[0] * (size_t)(l->ne[0] / bp_type_block_size(ty));
    for (int i = 2; i < BP_MAX_DIMS; i++) l->nb[i] = l->nb[i - 1] * (size_t)l->ne[i - 1];
    l->data = c->ls->data;
    return BP_OK;
}

static bp_status local_permute(const struct local *c)
{
    int ax[4] = {1, 0, 2, 3};
    if (c->node->op == BP_OP_PERMUTE)
        for (int i = 0; i < 4; i++) ax[i] = bp_op_param_i32(c->node, i);
    for (int i = 0; i < 4; i++) {
        c->l->ne[ax[i]] = c->ls->ne[i];
        c->l->nb[ax[i]] = c->ls->nb[i];
    }
    c->l->data = c->ls->data;
    return BP_OK;
}

static bp_status local_view(const struct local *c)
{
    struct bp_tensor *l = c->l, *node = c->node;
    const struct bp_tensor *src = c->src, *ls = c->ls;
    const struct meta_layout *in = c->in;
    const size_t d = c->d;
    if (!meta_layout_is_axis(in)) {
        size_t rel = node->view_offs - (src->view_src ? src->view_offs : 0);
        l->data = ls->data ? (char *)ls->data + rel : NULL;
        return BP_OK;
    }
    struct meta_layout tmp;
    struct view_map vm;
    bp_status st = view_layout(node, src, in, &tmp, &vm);
    if (st != BP_OK) return st;
    /* the device's local index of its first viewed element on the axis */
    int64_t gpos = 0, lpos = 0, lstart = 0;
    bool found = false;
    for (int32_t p = 0; p < in->n_pieces && !found; p++) {
        int64_t g0 = gpos, g1 = gpos + in->piece[p].len;
        gpos = g1;
        if (in->piece[p].dev != (int32_t)d) continue;
        if (g1 > vm.lo && g0 < vm.hi) {
            lstart = lpos + (vm.lo > g0 ? vm.lo - g0 : 0);
            found = true;
        }
        lpos += in->piece[p].len;
    }
    const int64_t bs = bp_type_block_size((enum bp_type)src->type);
    for (int i = 0; i < BP_MAX_DIMS; i++) {
        int j = vm.src_dim[i];
        if (j < 0) continue;
        l->nb[i] = (i == 0 && j == 0) ? ls->nb[0] : ls->nb[j] * (size_t)(vm.step[i] / (j == 0 ? bs : 1));
    }
    l->ne[vm.vd] = tmp.local_ne[d];
    size_t off = 0;
    for (int j = 0; j < BP_MAX_DIMS; j++) {
        int64_t c0 = j == vm.a ? (found ? lstart : 0) : vm.coord[j];
        off += (size_t)(j == 0 ? c0 / bs : c0) * ls->nb[j];
    }
    l->data = ls->data ? (char *)ls->data + off : NULL;
    return BP_OK;
}

bp_status meta_derive_local_view(struct bp_tensor *node, size_t d)
{
    const struct meta_op_rule *rule = rule_of(node->op);
    if (!rule || !rule->local) return BP_ERR_INTERNAL;
    struct meta_tensor *mt = meta_tensor_of(node);
    const struct bp_tensor *src = node->src[0];
    struct meta_tensor *ms = meta_tensor_of(src);
    const struct bp_tensor *ls = &ms->local[d];
    struct bp_tensor *l = &mt->local[d];
    meta_local_copy(l, node);
    l->buffer = ls->buffer;
    const struct local c = { .node = node, .d = d, .lay = &mt->layout, .src = src,
                             .in = &ms->layout, .ls = ls, .l = l };
    return rule->local(&c);
}
