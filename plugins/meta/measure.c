/* measure.c — what a meta device would hold on each sub-device, with
 * nothing allocated, for the host's memory plan. The caller's tensors are
 * attached for the while to "dry" meta buffers (buffer.c), which run the
 * very placement a real one runs (the split callback, layouts, slices,
 * sub-buffers sized from them) and tally the sub-buffers instead of
 * allocating them; a graph is planned by the backend's own plan_build.
 * Every tensor is then detached, so the caller's are as they were. */
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

/* A tensor as the caller had it, to put back. */
struct saved {
    struct bp_tensor *t;
    struct bp_buffer *buffer;
    void *data, *extra;
};

/* A graph's own tensor and where the host's graph allocator would put it. */
struct along {
    struct bp_tensor *t;
    size_t size, off;
    int32_t def, last;             /* the node computing it (-1: none), its last reader */
};

struct attachments {
    struct saved *v;
    size_t n, cap;
    size_t next_offset;            /* distinct addresses in the dry buffers */
    struct bp_buffer *dry[2];      /* leaves (not counted), the rest */
    struct along *al;              /* the graph's own tensors, offsets along it */
    size_t n_al;
};

static bool ours(const struct attachments *a, const struct bp_buffer *b)
{
    return b && (b == a->dry[0] || b == a->dry[1]);
}

static bp_status has_memory(const struct bp_tensor *t)
{
    meta_log(BP_LOG_ERROR, "measuring: tensor '%s' already has memory; measure a graph before it is "
             "allocated.", t->name);
    return BP_ERR_INVALID_ARGUMENT;
}

/* Attach t to buf as a real buffer would take it (views to their source's
 * buffer, as the host resolves them), with its source first. */
static bp_status attach(struct attachments *a, struct bp_buffer *buf, struct bp_tensor *t, int depth)
{
    if (ours(a, t->buffer)) return BP_OK;
    if (t->buffer) return has_memory(t);
    if (t->view_src && depth < 8) {
        bp_status st = attach(a, buf, t->view_src, depth + 1);
        if (st != BP_OK) return st;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        struct saved *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            meta_log(BP_LOG_ERROR, "out of host memory measuring tensor '%s'.", t->name);
            return BP_ERR_OUT_OF_MEMORY;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = (struct saved){t, t->buffer, t->data, t->extra};
    if (t->view_src) {
        t->buffer = t->view_src->buffer;
        t->data = (char *)t->view_src->data + t->view_offs;
    } else {
        size_t i = 0;
        while (i < a->n_al && a->al[i].t != t) i++;
        t->buffer = buf;
        if (i < a->n_al) {
            t->data = (char *)buf->iface->get_base(buf) + a->al[i].off;
        } else {
            t->data = (char *)buf->iface->get_base(buf) + a->next_offset;
            a->next_offset += (bp_nbytes(t) + 63) / 64 * 64 + 64;
        }
    }
    t->extra = NULL;
    return t->buffer->iface->init_tensor(t->buffer, t);
}

static void detach_all(struct attachments *a)
{
    while (a->n) {
        struct saved *s = &a->v[--a->n];
        s->t->buffer = s->buffer;
        s->t->data = s->data;
        s->t->extra = s->extra;
    }
    free(a->v);
    free(a->al);
    for (int i = 0; i < 2; i++)
        if (a->dry[i]) a->dry[i]->iface->free_buffer(a->dry[i]);
}

static bp_status start(struct bp_device *meta, const char *what, struct attachments *a)
{
    memset(a, 0, sizeof *a);
    if (!meta_is_meta_device(meta)) {
        meta_log(BP_LOG_ERROR, "%s: device '%s' is not a meta device.", what,
                 meta && meta->iface ? meta->iface->get_name(meta) : "(null)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct meta_device *md = (struct meta_device *)meta;
    bp_status st = BP_OK;
    for (int i = 0; i < 2 && st == BP_OK; i++) st = meta_buffer_new_dry(md, &a->dry[i]);
    return st;
}

/* The owner of t's memory: t, or the tensor its views lead to. */
static struct bp_tensor *owner_of(struct bp_tensor *t)
{
    for (int depth = 0; t && t->view_src && depth < 8; depth++) t = t->view_src;
    return t;
}

/* a->al for g: every tensor without memory whose bytes g's nodes write or
 * read, at the offset the host's graph allocator gives it in the meta
 * buffer (bp_context_alloc_graph, bp_sched along the graph): ones no node
 * computes and outputs for good, first; each other from the node that
 * computes it until its last reader has run, in the smallest free block
 * that holds it. The slices of computed tensors lie at those offsets on
 * every device (buffer.c, meta_buffer_materialize), so the bytes measured
 * are the ones a real run allocates. The first offset past them is where
 * the rest go (a->next_offset). */
static bp_status plan_along(struct attachments *a, const struct bp_graph *g, struct bp_buffer_type *buft)
{
    size_t cap = 0;
    const size_t align = buft->iface->get_alignment(buft) ? buft->iface->get_alignment(buft) : 64;
    size_t (*alloc_size)(struct bp_buffer_type *, const struct bp_tensor *) =
        BP_IFACE_GET(buft->iface, get_alloc_size);
    for (int32_t k = 0; k < g->n_nodes; k++)
        for (int s = 0; s <= BP_MAX_SRC; s++) {
            struct bp_tensor *t = owner_of(s < BP_MAX_SRC ? g->nodes[k]->src[s] : g->nodes[k]);
            if (!t || t->buffer) continue;
            size_t i = 0;
            while (i < a->n_al && a->al[i].t != t) i++;
            if (i == a->n_al) {
                if (a->n_al == cap) {
                    cap = cap ? 2 * cap : 256;
                    struct along *v = realloc(a->al, cap * sizeof *v);
                    if (!v) {
                        meta_log(BP_LOG_ERROR, "out of host memory measuring a %d-node graph.", (int)g->n_nodes);
                        return BP_ERR_OUT_OF_MEMORY;
                    }
                    a->al = v;
                }
                size_t size = bp_nbytes(t), as = alloc_size ? alloc_size(buft, t) : 0;
                if (as > size) size = as;
                a->al[a->n_al++] = (struct along){ t, (size + align - 1) / align * align, 0, -1, -1 };
            }
            struct along *e = &a->al[i];
            if (s == BP_MAX_SRC && e->def < 0 && !g->nodes[k]->view_src) e->def = e->last = k;
            if (s < BP_MAX_SRC && e->last < k) e->last = k;
            if (s == BP_MAX_SRC && (g->nodes[k]->flags & BP_TENSOR_FLAG_OUTPUT)) e->last = INT32_MAX;
        }
    /* Free blocks as (offset, size) in offset order; end is the arena's top. */
    struct { size_t off, size; } *fb = calloc(a->n_al + 1, sizeof *fb);
    if (!fb && a->n_al) {
        meta_log(BP_LOG_ERROR, "out of host memory measuring a %d-node graph.", (int)g->n_nodes);
        return BP_ERR_OUT_OF_MEMORY;
    }
    size_t end = 0, n_free = 0, peak = 0;
    for (size_t i = 0; i < a->n_al; i++)
        if (a->al[i].def < 0 || a->al[i].last == INT32_MAX) {
            a->al[i].off = end;
            end += a->al[i].size;
        }
    peak = end;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        for (size_t i = 0; i < a->n_al; i++) {
            struct along *e = &a->al[i];
            if (e->def != k || e->last == INT32_MAX) continue;
            size_t best = n_free;
            for (size_t f = 0; f < n_free; f++)
                if (fb[f].size >= e->size && (best == n_free || fb[f].size < fb[best].size)) best = f;
            if (best == n_free) {
                e->off = end;
                end += e->size;
            } else {
                e->off = fb[best].off;
                fb[best].off += e->size;
                fb[best].size -= e->size;
            }
            if (end > peak) peak = end;
        }
        for (size_t i = 0; i < a->n_al; i++) {
            struct along *e = &a->al[i];
            if (e->def < 0 || e->def > k || e->last != k) continue;
            e->last = -1;   /* freed once */
            size_t f = 0;
            while (f < n_free && fb[f].off < e->off) f++;
            memmove(&fb[f + 1], &fb[f], (n_free - f) * sizeof *fb);
            fb[f].off = e->off;
            fb[f].size = e->size;
            n_free++;
            if (f + 1 < n_free && fb[f].off + fb[f].size == fb[f + 1].off) {
                fb[f].size += fb[f + 1].size;
                memmove(&fb[f + 1], &fb[f + 2], (n_free - f - 2) * sizeof *fb);
                n_free--;
            }
            if (f > 0 && fb[f - 1].off + fb[f - 1].size == fb[f].off) {
                fb[f - 1].size += fb[f].size;
                memmove(&fb[f], &fb[f + 1], (n_free - f - 1) * sizeof *fb);
                n_free--;
                f--;
            }
            if (fb[f].off + fb[f].size == end) {
                end = fb[f].off;
                n_free--;
            }
        }
    }
    free(fb);
    a->next_offset = peak;
    return BP_OK;
}

static bp_status attach_leaves(struct attachments *a, struct bp_tensor *const *ts, size_t n)
{
    bp_status st = BP_OK;
    for (size_t i = 0; i < n && st == BP_OK; i++) {
        if (!ts[i]) continue;
        if (ts[i]->buffer || ts[i]->view_src) return has_memory(ts[i]);
        st = attach(a, a->dry[0], ts[i], 0);
    }
    return st;
}

bp_status meta_measure_tensors(struct bp_device *meta, struct bp_tensor *const *tensors, size_t n, size_t *bytes)
{
    struct attachments a;
    bp_status st = start(meta, "bp_meta_measure_tensors", &a);
    if (st == BP_OK && (!bytes || (n && !tensors))) {
        meta_log(BP_LOG_ERROR, "bp_meta_measure_tensors needs the tensors and bytes.");
        st = BP_ERR_INVALID_ARGUMENT;
    }
    if (st == BP_OK) st = attach_leaves(&a, tensors, n);
    if (st == BP_OK) st = meta_buffer_device_bytes(a.dry[0], bytes);
    detach_all(&a);
    return st;
}

bp_status meta_measure_graph(struct bp_device *meta, struct bp_graph *g, struct bp_tensor *const *leaves,
                             size_t n_leaves, size_t *bytes, size_t *scratch)
{
    struct attachments a;
    bp_status st = start(meta, "bp_meta_measure_graph", &a);
    if (st == BP_OK && (!g || !bytes || !scratch || (n_leaves && !leaves))) {
        meta_log(BP_LOG_ERROR, "bp_meta_measure_graph needs a graph, bytes and scratch.");
        st = BP_ERR_INVALID_ARGUMENT;
    }
    if (st == BP_OK) st = attach_leaves(&a, leaves, n_leaves);
    if (st == BP_OK) st = plan_along(&a, g, a.dry[1]->buft);
    /* The graph's own tensors in the order a scheduler places them: each
     * node's sources, then the node. */
    for (int32_t i = 0; st == BP_OK && i < g->n_nodes; i++)
        for (int s = 0; s <= BP_MAX_SRC && st == BP_OK; s++) {
            struct bp_tensor *t = s < BP_MAX_SRC ? g->nodes[i]->src[s] : g->nodes[i];
            if (t) st = attach(&a, a.dry[1], t, 0);
        }
    size_t reduce = 0;
    if (st == BP_OK) st = meta_plan_measure((struct meta_device *)meta, g, &reduce);
    if (st == BP_OK) st = meta_buffer_device_bytes(a.dry[1], bytes);
    if (st == BP_OK) {
        const size_t n = ((struct meta_device *)meta)->n;
        for (size_t d = 0; d < META_MAX_DEV; d++) scratch[d] = d < n && n > 1 ? reduce : 0;
    }
    detach_all(&a);
    return st;
}
