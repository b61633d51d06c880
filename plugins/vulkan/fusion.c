/*
 * fusion.c — THE FUSION TABLE: chains of two nodes computed by one dispatch
 * (one row per chain: the two ops, and the shader and mode that compute
 * both). A chain saves a dispatch, with its fixed cost (on lavapipe every
 * thread woken and waited for), and the second op's read of the first's
 * output.
 *
 * A chain is node i and a later node j, the first within VK_FUSE_WINDOW
 * nodes that reads node i's output, where j is an elementwise op of two
 * operands, one of them exactly node i's output (the same bytes, shape and
 * strides) and the other an F32 tensor repeated over it. The chain's
 * dispatch takes node j's place: j's operands are all computed by then,
 * and node i's work only moves past nodes that neither read nor write its
 * output nor write its source (SwiGLU's up projection sits between the
 * SILU and the MUL). The first op's plan (op_rules) sizes the dispatch
 * (the same workgroups: rms_norm.comp's rows, elementwise.comp's elements);
 * its output is bound to slot VK_PB_FUSED and the other operand to slot 1.
 *
 * The fused shader writes node i's output as well as node j's, so no
 * consumer analysis is needed: a reader of node i's output may sit in this
 * graph, in a later graph of the scheduler's split (another device, a copy)
 * or on the host (a graph output or a debugging read), and only the first
 * of these is visible here. The extra store is one F32 per element.
 *
 * One chain of three, outside the table: ADD -> RMS_NORM -> MUL, a
 * residual sum followed by the next norm and its weight (every layer of a
 * decoder, twice). rms_norm.comp computes the sum, writes it (slot
 * VK_PB_FUSED: a later residual ADD reads it) and normalises and weighs
 * it; its four source slots are then full, so the norm's own output is not
 * stored, and the chain is taken only where nothing can read it: not
 * flagged BP_TENSOR_FLAG_OUTPUT (the application's reads, and the
 * scheduler's for another device or graph) and read by no other node of
 * the graph.
 *
 * And a chain of ADDs summing every slot of one tensor's dimension 1 (a
 * mixture of experts' weighted outputs, k - 1 ADDs for k experts a token):
 * one binary.comp dispatch reads the tensor once and writes the last sum,
 * each partial sum rounded as its ADD rounds it; the partial sums are not
 * stored, under the same conditions as the norm's output above.
 *
 * And ROPE -> SET_ROWS of one token (decode's K into the KV cache): the
 * rotated elements go straight to their cache row, converted to the
 * cache's type; the ROPE's own output is not stored, under the same
 * conditions again.
 */
#include <string.h>

#include "vk_internal.h"

/* How far ahead of a chain's first node its second may be: SwiGLU's MUL is
 * two nodes after the SILU; the bound keeps the search short. */
#define VK_FUSE_WINDOW 8

/* The most elements one chain of a shifted elementwise dispatch may take
 * (see shifted): longer chains would leave few invocations to spread over
 * a GPU's cores or lavapipe's threads. */
#define VK_FUSE_MAX_CHAIN 16u

struct vk_fusion {
    int32_t first, second; /* enum bp_op */
    enum vk_shader shader; /* computes both */
    uint32_t mode;         /* its aux[0] */
    bool chains;           /* silu_mul: may run as shifted chains */
};

static const struct vk_fusion fusions[] = {
    /* the norm's weight */
    { BP_OP_RMS_NORM, BP_OP_MUL, VK_SH_RMS_NORM, VK_ROWS_RMS_NORM_MUL, false },
    /* SwiGLU: silu(gate) * up */
    { BP_OP_SILU, BP_OP_MUL, VK_SH_SILU_MUL, 0, true },
};
enum { N_FUSIONS = sizeof fusions / sizeof fusions[0] };

bool vk_fusion_enabled(const struct vk_plugin *pl)
{
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_FUSION");
    return !env || strcmp(env, "0") != 0;
}

void vk_fuse_warm(struct vk_dev *d, const struct bp_tensor *node)
{
    for (int r = 0; r < N_FUSIONS; r++)
        if ((!node || fusions[r].first == node->op) && vk_fusion_enabled(d->pl)) {
            VkPipeline unused;
            (void)vk_pipeline_get(d, fusions[r].shader, 0, &unused);
        }
}

/* Where t's bytes are. */
static bool span_of(const struct vk_dev *d, const struct bp_tensor *t, struct vk_range *s)
{
    size_t off;
    if (!vk_tensor_loc(d, t, &s->buf, &off, NULL)) return false;
    s->lo = off;
    s->hi = off + bp_nbytes(t);
    return true;
}

static bool same_layout(const struct bp_tensor *a, const struct bp_tensor *b)
{
    return a->type == b->type && memcmp(a->ne, b->ne, sizeof a->ne) == 0 &&
           memcmp(a->nb, b->nb, sizeof a->nb) == 0;
}

/* The same bytes read the same way: b is a (or a view of it that changes
 * nothing). */
static bool same_tensor(const struct vk_dev *d, const struct bp_tensor *a,
                        const struct bp_tensor *b)
{
    struct vk_range x, y;
    if (a == b) return true;
    return same_layout(a, b) && span_of(d, a, &x) && span_of(d, b, &y) && x.buf == y.buf &&
           x.lo == y.lo;
}

static bool disjoint(const struct vk_dev *d, const struct bp_tensor *a, const struct bp_tensor *b)
{
    struct vk_range x, y;
    return span_of(d, a, &x) && span_of(d, b, &y) && !vk_ranges_meet(&x, &y);
}

/* Two tensors one fused dispatch touches, at least one of them written:
 * apart, or the same elements in the same places, so that each element is
 * read and written by one invocation in program order (as the shaders'
 * in-place cases already are). Separate dispatches had a barrier between
 * them; one dispatch has none. */
static bool no_race(const struct vk_dev *d, const struct bp_tensor *a, const struct bp_tensor *b)
{
    return same_tensor(d, a, b) || disjoint(d, a, b);
}

/* The graph allocator may give the second node's output b bytes of the
 * first node's source x, which the first node was the last to read (SwiGLU:
 * the MUL's output over the gate). Two dispatches are safe; one is safe when
 * b and x are packed F32 of one shape whose bytes are shifted by s
 * elements, run as s chains of at most VK_FUSE_MAX_CHAIN elements
 * (elementwise.comp, aux[2] and aux[3]). The chain stride and direction,
 * or false. */
static bool shifted(const struct vk_dev *d, const struct bp_tensor *b, const struct bp_tensor *x,
                    uint32_t *stride, bool *down)
{
    struct vk_range bs, xs;
    if (x->type != BP_TYPE_F32 || b->type != BP_TYPE_F32 || !bp_is_contiguous(x) ||
        !bp_is_contiguous(b) || memcmp(x->ne, b->ne, sizeof x->ne) != 0 || !span_of(d, b, &bs) ||
        !span_of(d, x, &xs) || bs.buf != xs.buf)
        return false;
    const size_t shift = bs.lo > xs.lo ? bs.lo - xs.lo : xs.lo - bs.lo;
    if (shift % 4 != 0 || (uint64_t)bp_nelements(b) > (uint64_t)VK_FUSE_MAX_CHAIN * (shift / 4))
        return false;
    *stride = (uint32_t)(shift / 4);
    *down = bs.lo > xs.lo; /* b[e] over x[e + s]: the later element goes first */
    return true;
}

/* Whether node k reads bytes of s (through a source) or writes some. */
static bool reads_span(const struct vk_dev *d, const struct bp_tensor *k, const struct vk_range *s)
{
    for (int i = 0; i < BP_MAX_SRC; i++) {
        struct vk_range t;
        if (k->src[i] && span_of(d, k->src[i], &t) && vk_ranges_meet(&t, s))
            return true;
    }
    return false;
}
static bool writes_span(const struct vk_dev *d, const struct bp_tensor *k, const struct vk_range *s)
{
    struct vk_range t;
    return span_of(d, k, &t) && vk_ranges_meet(&t, s);
}

static int32_t plan_pair(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                         struct vk_dispatch *p)
{
    const struct bp_tensor *a = g->nodes[i], *x = a->src[0];
    bool starts = false;
    for (int r = 0; r < N_FUSIONS; r++) starts |= fusions[r].first == a->op;
    struct vk_range as, xs;
    if (!starts || !x || !span_of(d, a, &as) || !span_of(d, x, &xs)) return -1;
    int32_t j = i + 1;
    for (; j < g->n_nodes && j <= i + VK_FUSE_WINDOW; j++) {
        const struct bp_tensor *k = g->nodes[j];
        if (bp_op_is_view((enum bp_op)k->op)) continue;
        if (reads_span(d, k, &as)) break;
        if (writes_span(d, k, &as) || writes_span(d, k, &xs)) return -1;
    }
    if (j >= g->n_nodes || j > i + VK_FUSE_WINDOW) return -1;
    const struct bp_tensor *b = g->nodes[j];
    const struct vk_fusion *row = NULL;
    for (int r = 0; r < N_FUSIONS && !row; r++)
        if (fusions[r].first == a->op && fusions[r].second == b->op) row = &fusions[r];
    if (!row || !b->src[0] || !b->src[1]) return -1;
    const bool a0 = same_tensor(d, b->src[0], a), a1 = same_tensor(d, b->src[1], a);
    if (a0 == a1) return -1; /* a is not an operand, or both */
    const struct bp_tensor *w = a0 ? b->src[1] : b->src[0];
    /* The shaders keep a's values in F32 between the two ops, as a's F32
     * output does; w is read while a is written, so it must not be a. */
    if (a->type != BP_TYPE_F32 || b->type != BP_TYPE_F32 || w->type != BP_TYPE_F32 ||
        memcmp(a->ne, b->ne, sizeof a->ne) != 0 || bp_nelements(a) == 0 || !disjoint(d, w, a) ||
        !no_race(d, b, a))
        return -1;
    uint32_t stride = 0;
    bool down = false;
    if (!no_race(d, b, x) && !(row->chains && shifted(d, b, x, &stride, &down))) return -1;
    vk_plan_node(d, a, p);
    p->shader = row->shader;
    p->aux[0] = row->mode;
    p->slot[1] = w;
    p->slot[VK_PB_FUSED] = a;
    p->first = a;
    p->writes_fused = true;
    if (stride) {
        p->aux[2] = stride;
        p->aux[3] = down;
        vk_grid(stride, VK_EW_LOCAL, p->groups);
    }
    return j;
}

/* Whether t is n or a view of it (through any chain of views). */
static bool views_of(const struct bp_tensor *t, const struct bp_tensor *n)
{
    for (; t; t = t->view_src)
        if (t == n) return true;
    return false;
}

/* Whether any node after `after` other than `skip` reads n's output. By
 * tensor, not by bytes: the graph allocator hands n's bytes to later
 * tensors once n is dead. */
static bool read_later(const struct bp_graph *g, int32_t after, int32_t skip,
                       const struct bp_tensor *n)
{
    for (int32_t k = after + 1; k < g->n_nodes; k++) {
        const struct bp_tensor *kn = g->nodes[k];
        if (k == skip || bp_op_is_view((enum bp_op)kn->op)) continue;
        for (int s = 0; s < BP_MAX_SRC; s++)
            if (kn->src[s] && views_of(kn->src[s], n)) return true;
    }
    return false;
}

/* ADD -> RMS_NORM -> MUL (a residual sum, then the next norm and its
 * weight): one dispatch of rms_norm.comp that also writes the sum. Taken
 * only where the norm's output is not a graph output
 * (BP_TENSOR_FLAG_OUTPUT, which the scheduler also sets on what another
 * device reads) and no other node reads it: the dispatch has no slot left
 * to store it. The ADD's operands are F32 of its own shape. */
static int32_t plan_add_norm(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                             struct vk_dispatch *p, int32_t skip[2])
{
    const struct bp_tensor *a = g->nodes[i], *x = a->src[0], *y = a->src[1];
    struct vk_range as, xs, ys;
    if (a->op != BP_OP_ADD || !x || !y || a->type != BP_TYPE_F32 || x->type != BP_TYPE_F32 ||
        y->type != BP_TYPE_F32 || memcmp(x->ne, a->ne, sizeof a->ne) != 0 ||
        memcmp(y->ne, a->ne, sizeof a->ne) != 0 || !span_of(d, a, &as) || !span_of(d, x, &xs) ||
        !span_of(d, y, &ys))
        return -1;
    int32_t j = i + 1;
    for (; j < g->n_nodes && j <= i + VK_FUSE_WINDOW; j++) {
        const struct bp_tensor *k = g->nodes[j];
        if (bp_op_is_view((enum bp_op)k->op)) continue;
        if (reads_span(d, k, &as)) break;
        if (writes_span(d, k, &as) || writes_span(d, k, &xs) || writes_span(d, k, &ys)) return -1;
    }
    if (j >= g->n_nodes || j > i + VK_FUSE_WINDOW) return -1;
    const struct bp_tensor *n = g->nodes[j];
    struct vk_dispatch pair;
    if (n->op != BP_OP_RMS_NORM || !same_tensor(d, n->src[0], a) || (n->flags & BP_TENSOR_FLAG_OUTPUT))
        return -1;
    const int32_t m = plan_pair(d, g, j, &pair);
    if (m < 0 || pair.aux[0] != VK_ROWS_RMS_NORM_MUL) return -1;
    /* The sum moves from node i to node m: nothing between may touch it or
     * write its operands (plan_pair checked the nodes after j). */
    for (int32_t k = j + 1; k < m; k++) {
        const struct bp_tensor *kn = g->nodes[k];
        if (bp_op_is_view((enum bp_op)kn->op)) continue;
        if (reads_span(d, kn, &as) || writes_span(d, kn, &as) || writes_span(d, kn, &xs) ||
            writes_span(d, kn, &ys))
            return -1;
    }
    const struct bp_tensor *b = g->nodes[m], *w = pair.slot[1];
    if (read_later(g, j, m, n) || reads_span(d, b, &as) ||
        !disjoint(d, w, a) || !no_race(d, b, w) || !no_race(d, b, a) || !no_race(d, b, x) ||
        !no_race(d, b, y) ||
        !no_race(d, a, x) || !no_race(d, a, y))
        return -1;
    *p = pair;
    p->aux[0] = VK_ROWS_ADD_RMS_NORM_MUL;
    p->slot[0] = x;
    p->slot[3] = y;
    p->slot[VK_PB_FUSED] = a;
    p->lead = BP_OP_ADD;
    skip[0] = skip[1] = j;
    return m;
}

/* v is slot j of e's dimension 1: e's dimensions 0, 2 and 3 at e's strides. */
static bool is_slot(const struct bp_tensor *v, const struct bp_tensor *e, int64_t j)
{
    return v && v->view_src == e && v->view_offs == (size_t)j * e->nb[1] && v->type == e->type &&
           v->ne[0] == e->ne[0] && v->ne[1] == e->ne[2] && v->ne[2] == e->ne[3] && v->ne[3] == 1 &&
           v->nb[0] == e->nb[0] && v->nb[1] == e->nb[2] && v->nb[2] == e->nb[3];
}

/* A chain of ADDs summing every slot of a tensor's dimension 1 in order,
 * ((e[:, 0] + e[:, 1]) + e[:, 2]) + ...: a mixture of experts' weighted
 * outputs, k - 1 ADDs for k experts a token. One dispatch of binary.comp
 * reads e once and writes the last sum; the partial sums are not stored,
 * so each must be unflagged and read by the next ADD alone. Every node
 * between the first ADD and the last is one of the chain. */
static int32_t plan_add_slots(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                              struct vk_dispatch *p, int32_t skip[2])
{
    const struct bp_tensor *a = g->nodes[i];
    if (a->op != BP_OP_ADD || !a->src[0] || !a->src[1]) return -1;
    const struct bp_tensor *e = a->src[0]->view_src;
    if (!e || e->type != BP_TYPE_F32 || a->type != BP_TYPE_F32 || e->ne[1] < 3 ||
        !is_slot(a->src[0], e, 0) || !is_slot(a->src[1], e, 1))
        return -1;
    const struct bp_tensor *prev = a;
    int32_t last = i, k = i + 1;
    for (int64_t j = 2; j < e->ne[1]; j++) {
        while (k < g->n_nodes && bp_op_is_view((enum bp_op)g->nodes[k]->op)) k++;
        if (k >= g->n_nodes) return -1;
        const struct bp_tensor *n = g->nodes[k];
        if (n->op != BP_OP_ADD || n->type != BP_TYPE_F32 || n->src[0] != prev ||
            !is_slot(n->src[1], e, j) || (prev->flags & BP_TENSOR_FLAG_OUTPUT) ||
            read_later(g, last, k, prev))
            return -1;
        prev = n;
        last = k++;
    }
    if (!disjoint(d, prev, e)) return -1;
    vk_plan_node(d, prev, p);
    p->aux[0] = VK_BINARY_ADD_SLOTS;
    p->aux[1] = (uint32_t)e->ne[1];
    p->slot[0] = e;
    p->slot[1] = NULL;
    p->lead = BP_OP_ADD;
    skip[0] = i + 1;
    skip[1] = last - 1;
    return last;
}

/* ROPE -> SET_ROWS of one row (decode's K into the KV cache): the rotated
 * elements go straight to the cache row, converted to its type, and the
 * ROPE's output is not stored (rope.comp's slots are full where frequency
 * factors are used), so it must be unflagged and read by nothing but the
 * SET_ROWS, through a packed reshape of it. One row only: SET_ROWS with
 * repeated ids keeps the last row, which parallel stores would not. */
static int32_t plan_rope_store(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                               struct vk_dispatch *p)
{
    const struct bp_tensor *r = g->nodes[i], *x = r->src[0];
    if ((r->op != BP_OP_ROPE && r->op != BP_OP_ROPE_EXT) || !x || r->type != BP_TYPE_F32 ||
        !bp_is_contiguous(r) || memcmp(r->ne, x->ne, sizeof r->ne) != 0 ||
        (r->flags & BP_TENSOR_FLAG_OUTPUT))
        return -1;
    struct vk_range rs;
    if (!span_of(d, r, &rs)) return -1;
    int32_t j = i + 1;
    for (; j < g->n_nodes && j <= i + VK_FUSE_WINDOW; j++) {
        const struct bp_tensor *k = g->nodes[j];
        if (bp_op_is_view((enum bp_op)k->op)) continue;
        if (reads_span(d, k, &rs)) break;
        for (int s = 0; s < BP_MAX_SRC; s++) {
            struct vk_range ss;
            if (r->src[s] && span_of(d, r->src[s], &ss) && writes_span(d, k, &ss)) return -1;
        }
    }
    if (j >= g->n_nodes || j > i + VK_FUSE_WINDOW) return -1;
    const struct bp_tensor *st = g->nodes[j], *v = st->src[1], *ids = st->src[2];
    if (st->op != BP_OP_SET_ROWS || !v || !ids || !views_of(v, r) || v->view_offs != 0 ||
        v->type != BP_TYPE_F32 || bp_nelements(v) != bp_nelements(r) || v->ne[1] != 1 ||
        read_later(g, i, j, r))
        return -1;
    /* The row as SET_ROWS reads it: r reshaped to one packed row, or r's
     * [D, heads, 1 token] with dimensions 1 and 2 swapped (rows per head,
     * the KV cache's layout), each head its own plane. */
    uint32_t how;
    if (bp_is_contiguous(v) && v->ne[2] == 1 && v->ne[3] == 1 && st->ne[0] == v->ne[0])
        how = VK_ROPE_STORE_ROW;
    else if (r->ne[2] == 1 && r->ne[3] == 1 && v->ne[0] == r->ne[0] && v->ne[2] == r->ne[1] &&
             v->ne[3] == 1 && v->nb[0] == r->nb[0] && v->nb[2] == r->nb[1] &&
             st->ne[0] == r->ne[0] && st->ne[2] == r->ne[1])
        how = VK_ROPE_STORE_HEADS;
    else
        return -1;
    for (int s = 0; s < BP_MAX_SRC; s++)
        if (r->src[s] && !disjoint(d, st, r->src[s])) return -1;
    if (!disjoint(d, st, ids)) return -1;
    vk_plan_node(d, r, p);
    p->aux[5] = how;
    p->slot[3] = ids;
    p->first = r;
    return j;
}

int32_t vk_fuse_plan(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                     struct vk_dispatch *p, int32_t skip[2])
{
    skip[0] = 0;
    skip[1] = -1;
    int32_t m = plan_add_norm(d, g, i, p, skip);
    if (m < 0) m = plan_add_slots(d, g, i, p, skip);
    if (m < 0) m = plan_rope_store(d, g, i, p);
    return m >= 0 ? m : plan_pair(d, g, i, p);
}
