/* alloc.c — placing a context's tensors in one buffer: aligned offsets,
 * optional guard bytes around each tensor, then views resolved; or, along a
 * graph, with the bytes of a tensor reused once its last reader has run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

struct layout {
    size_t align;
    size_t guard;   /* rounded up to align */
    size_t cur;     /* end of what is placed so far */
};

static bool needs_memory(const struct bp_tensor *t)
{
    return !t->view_src && !t->buffer;
}

static bool round_up(size_t v, size_t align, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(v, align - 1, &r)) return false;
    *out = r & ~(align - 1);
    return true;
}

static bp_status layout_begin(struct bp_buffer_type *buft, const struct bp_alloc_options *opts,
                              struct layout *l, const char *what)
{
    if (!buft || !buft->iface)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the buffer type is NULL; get one from bp_device_buffer_type.", what);
    size_t align = 1;
    size_t (*alignment)(struct bp_buffer_type *) = BP_IFACE_GET(buft->iface, get_alignment);
    if (alignment) align = alignment(buft);
    if (align == 0 || (align & (align - 1)) != 0)
        return bp__fail(BP_ERR_PLUGIN, "%s: buffer type %s reports alignment %zu, which is not a power of two; "
                        "its plugin is broken.", what, bp__buft_name(buft), align);
    l->align = align;
    l->cur = 0;
    l->guard = 0;
    size_t guard = BP__OPT(opts, guard_bytes, 0);
    if (!round_up(guard, align, &l->guard))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: guard_bytes %zu is too large.", what, guard);
    return BP_OK;
}

static size_t tensor_alloc_size(struct bp_buffer_type *buft, const struct bp_tensor *t)
{
    size_t n = bp_nbytes(t);
    size_t (*alloc_size)(struct bp_buffer_type *, const struct bp_tensor *) =
        BP_IFACE_GET(buft->iface, get_alloc_size);
    if (alloc_size) {
        size_t a = alloc_size(buft, t);
        if (a > n) n = a; /* a plugin may pad, never shrink */
    }
    return n;
}

/* Reserve room for one tensor; false when the total overflows. */
static bool layout_place(struct layout *l, size_t size, size_t *offset)
{
    size_t padded, off, end;
    if (!round_up(size, l->align, &padded) || __builtin_add_overflow(l->cur, l->guard, &off) ||
        __builtin_add_overflow(off, padded, &end) || __builtin_add_overflow(end, l->guard, &end))
        return false;
    *offset = off;
    l->cur = end;
    return true;
}

/* Walk the tensors that need memory; *n_placed counts them. */
static bp_status layout_all(struct bp_context *ctx, struct bp_buffer_type *buft, struct layout *l,
                            size_t *n_placed, const char *what)
{
    *n_placed = 0;
    for (size_t i = 0; i < bp_context_tensor_count(ctx); i++) {
        struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (!needs_memory(t)) continue;
        size_t off;
        if (!layout_place(l, tensor_alloc_size(buft, t), &off))
            return bp__fail(BP_ERR_OUT_OF_MEMORY, "%s: the tensors of this context need more bytes than "
                            "fit in size_t; split them over several contexts.", what);
        (*n_placed)++;
    }
    return BP_OK;
}

size_t bp_context_alloc_size(struct bp_context *ctx, struct bp_buffer_type *buft,
                             const struct bp_alloc_options *opts)
{
    struct layout l;
    size_t n;
    if (!ctx) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_context_alloc_size: the context is NULL.");
        return 0;
    }
    if (layout_begin(buft, opts, &l, "bp_context_alloc_size") != BP_OK) return 0;
    if (layout_all(ctx, buft, &l, &n, "bp_context_alloc_size") != BP_OK) return 0;
    return l.cur;
}

/* Undo a partial placement: every tensor of ctx that points into buf. */
static void unplace(struct bp_context *ctx, struct bp_buffer *buf)
{
    for (size_t i = 0; i < bp_context_tensor_count(ctx); i++) {
        struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (t->buffer == buf) {
            t->data = NULL;
            t->buffer = NULL;
            t->extra = NULL;
        }
    }
}

static bp_status resolve_views(struct bp_context *ctx)
{
    for (size_t i = 0; i < bp_context_tensor_count(ctx); i++) {
        bp_status st = bp__view_resolve(bp_context_tensor(ctx, i));
        if (st != BP_OK) return st;
    }
    return BP_OK;
}

/* Points t at data inside buf and lets the plugin set it up. */
static bp_status bind_tensor(struct bp_buffer *buf, struct bp_tensor *t, void *data, const char *what)
{
    t->data = data;
    t->buffer = buf;
    bp_status (*init_tensor)(struct bp_buffer *, struct bp_tensor *) = BP_IFACE_GET(buf->iface, init_tensor);
    if (!init_tensor) return BP_OK;
    bp_status st = init_tensor(buf, t);
    if (st != BP_OK) {
        char lb[BP_MAX_NAME + 8];
        bp__fail(st, "%s: buffer %s could not set up tensor %s (%s); see the log for the plugin's reason.", what,
                 bp__buffer_name(buf), bp__tensor_label(t, lb, sizeof lb), bp_status_name(st));
    }
    return st;
}

/* After binding with status st: resolves the views, or on any failure
 * undoes the placement and frees *buf (leaving it NULL). */
static bp_status finish_binding(struct bp_context *ctx, struct bp_buffer **buf, bp_status st)
{
    if (st == BP_OK) st = resolve_views(ctx);
    if (st != BP_OK) {
        unplace(ctx, *buf);
        bp_buffer_free(*buf);
        *buf = NULL;
    }
    return st;
}

bp_status bp_context_alloc_tensors(struct bp_context *ctx, struct bp_buffer_type *buft,
                                   const struct bp_alloc_options *opts, struct bp_buffer **out)
{
    const char *what = "bp_context_alloc_tensors";
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL; pass the address of a buffer pointer.", what);
    *out = NULL;
    if (!ctx) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the context is NULL.", what);
    struct layout l;
    size_t n_placed;
    bp_status st = layout_begin(buft, opts, &l, what);
    if (st == BP_OK) st = layout_all(ctx, buft, &l, &n_placed, what);
    if (st != BP_OK) return st;
    if (n_placed == 0) return resolve_views(ctx);

    struct bp_buffer *buf = NULL;
    st = bp_buffer_alloc(buft, l.cur, &buf);
    if (st != BP_OK) return st;
    char *base = buf->iface->get_base(buf);
    l.cur = 0;
    for (size_t i = 0; i < bp_context_tensor_count(ctx) && st == BP_OK; i++) {
        struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (!needs_memory(t)) continue;
        size_t off = 0;
        layout_place(&l, tensor_alloc_size(buft, t), &off); /* cannot overflow: it did not above */
        st = bind_tensor(buf, t, base + off, what);
    }
    st = finish_binding(ctx, &buf, st);
    *out = buf;
    return st;
}

/* ------------------------------------------------ reuse along a graph */

/* A tensor of the context that needs memory: when it is written (the index
 * of the node that computes it, -1 for one that no node computes) and the
 * last node that reads it (INT32_MAX: never freed). */
struct galloc_item {
    struct bp_tensor *t;
    size_t size, off;
    int32_t def, last;
};

struct galloc_block {
    size_t off, size;
};

/* Pointer -> item index, open addressing over a power-of-two table. */
struct galloc_map {
    struct bp_tensor **keys;
    int32_t *vals;
    size_t mask;
};

static size_t galloc_hash(const struct bp_tensor *t, size_t mask)
{
    return (size_t)(((uintptr_t)t >> 4) * 0x9e3779b97f4a7c15ull) & mask;
}

static void galloc_map_put(struct galloc_map *m, struct bp_tensor *t, int32_t v)
{
    size_t h = galloc_hash(t, m->mask);
    while (m->keys[h]) h = (h + 1) & m->mask;
    m->keys[h] = t;
    m->vals[h] = v;
}

/* The item whose memory t uses (itself or, for a view, its source), or -1. */
static int32_t galloc_map_owner(const struct galloc_map *m, const struct bp_tensor *t)
{
    if (t && t->view_src) t = t->view_src;
    if (!t) return -1;
    for (size_t h = galloc_hash(t, m->mask); m->keys[h]; h = (h + 1) & m->mask)
        if (m->keys[h] == t) return m->vals[h];
    return -1;
}

/* The smallest free block that holds size (split), else the end of the arena. */
static size_t galloc_take(struct galloc_block *fb, size_t *n_free, size_t *end, size_t size)
{
    size_t best = *n_free;
    for (size_t i = 0; i < *n_free; i++)
        if (fb[i].size >= size && (best == *n_free || fb[i].size < fb[best].size)) best = i;
    if (best == *n_free) {
        size_t off = *end;
        *end += size;
        return off;
    }
    size_t off = fb[best].off;
    fb[best].off += size;
    fb[best].size -= size;
    if (fb[best].size == 0) {
        memmove(&fb[best], &fb[best + 1], (*n_free - best - 1) * sizeof *fb);
        (*n_free)--;
    }
    return off;
}

/* Give [off, off + size) back, merged with its neighbours; blocks stay in
 * offset order, and a block that reaches the arena's end shrinks it. */
static void galloc_give(struct galloc_block *fb, size_t *n_free, size_t *end, size_t off, size_t size)
{
    size_t i = 0;
    while (i < *n_free && fb[i].off < off) i++;
    memmove(&fb[i + 1], &fb[i], (*n_free - i) * sizeof *fb);
    fb[i] = (struct galloc_block){ off, size };
    (*n_free)++;
    if (i + 1 < *n_free && fb[i].off + fb[i].size == fb[i + 1].off) {
        fb[i].size += fb[i + 1].size;
        memmove(&fb[i + 1], &fb[i + 2], (*n_free - i - 2) * sizeof *fb);
        (*n_free)--;
    }
    if (i > 0 && fb[i - 1].off + fb[i - 1].size == fb[i].off) {
        fb[i - 1].size += fb[i].size;
        memmove(&fb[i], &fb[i + 1], (*n_free - i - 1) * sizeof *fb);
        (*n_free)--;
        i--;
    }
    if (fb[i].off + fb[i].size == *end) {
        *end = fb[i].off;
        (*n_free)--;
    }
}

/* Offsets for every item: the ones no node computes, and outputs, first and
 * for good; the others from the node that computes them to the last node
 * that reads them. Returns the arena's size. */
static size_t galloc_plan(struct galloc_item *it, size_t n, const struct bp_graph *g,
                          const struct galloc_map *map, struct galloc_block *fb)
{
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const struct bp_tensor *node = g->nodes[k];
        const int32_t o = galloc_map_owner(map, node);
        if (o >= 0 && !node->view_src && it[o].def < 0) it[o].def = it[o].last = k;
        if (o >= 0 && (node->flags & BP_TENSOR_FLAG_OUTPUT)) it[o].last = INT32_MAX;
        for (int s = 0; s < BP_MAX_SRC; s++) {
            const int32_t so = galloc_map_owner(map, node->src[s]);
            if (so >= 0 && it[so].last < k) it[so].last = k;
        }
    }
    size_t end = 0, n_free = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].def < 0 || it[i].last == INT32_MAX) {
            it[i].off = end;
            end += it[i].size;
        }
    /* The nodes in order: place what node k computes, then free what only
     * node k still read (after placing: a node never writes over its sources). */
    size_t peak = end;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const int32_t o = galloc_map_owner(map, g->nodes[k]);
        if (o >= 0 && it[o].def == k && it[o].last != INT32_MAX) {
            it[o].off = galloc_take(fb, &n_free, &end, it[o].size);
            if (end > peak) peak = end;
        }
        for (int s = 0; s <= BP_MAX_SRC; s++) {
            const struct bp_tensor *src = s < BP_MAX_SRC ? g->nodes[k]->src[s] : g->nodes[k];
            const int32_t so = galloc_map_owner(map, src);
            if (so >= 0 && it[so].def >= 0 && it[so].def <= k && it[so].last == k) {
                it[so].last = -1; /* freed once, however many sources name it */
                galloc_give(fb, &n_free, &end, it[so].off, it[so].size);
            }
        }
    }
    return peak;
}

/* Offsets along g for it[0..n) (t and size set): the arena's size in
 * *total. Shared by galloc_layout and the scheduler (bp__graph_offsets). */
static bp_status galloc_items(struct galloc_item *it, size_t n, const struct bp_graph *g, const char *what,
                              size_t *total)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    struct galloc_block *fb = calloc(n + 1, sizeof *fb);
    struct galloc_map map = { calloc(cap, sizeof *map.keys), calloc(cap, sizeof *map.vals), cap - 1 };
    bp_status st = BP_OK;
    if (!fb || !map.keys || !map.vals) {
        st = bp__fail(BP_ERR_OUT_OF_MEMORY, "%s: out of memory planning %zu tensors.", what, n);
    } else {
        for (size_t k = 0; k < n; k++) {
            it[k].def = it[k].last = -1;
            galloc_map_put(&map, it[k].t, (int32_t)k);
        }
        *total = galloc_plan(it, n, g, &map, fb);
    }
    free(fb);
    free(map.keys);
    free(map.vals);
    return st;
}

bp_status bp__graph_offsets(struct bp_tensor *const *ts, const size_t *sizes, size_t n, const struct bp_graph *g,
                            size_t *offs, size_t *total)
{
    *total = 0;
    if (n == 0) return BP_OK;
    struct galloc_item *it = calloc(n, sizeof *it);
    if (!it) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory planning %zu tensors along a graph.", n);
    for (size_t i = 0; i < n; i++) it[i] = (struct galloc_item){ .t = ts[i], .size = sizes[i] };
    bp_status st = galloc_items(it, n, g, "planning a graph's memory", total);
    for (size_t i = 0; i < n && st == BP_OK; i++) offs[i] = it[i].off;
    free(it);
    return st;
}

/* The items of ctx that need memory, their offsets along g and the arena's
 * size (galloc_plan); *n_out is 0 when none needs memory. The caller frees
 * *it_out. */
static bp_status galloc_layout(struct bp_context *ctx, const struct bp_graph *g, struct bp_buffer_type *buft,
                               const char *what, struct galloc_item **it_out, size_t *n_out,
                               size_t *total, size_t *align)
{
    *it_out = NULL;
    *n_out = 0;
    *total = 0;
    if (!ctx || !g || (g->n_nodes > 0 && !g->nodes))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the context or the graph is NULL.", what);
    struct layout l;
    bp_status st = layout_begin(buft, NULL, &l, what);
    if (st != BP_OK) return st;
    *align = l.align;
    size_t n = 0;
    const size_t count = bp_context_tensor_count(ctx);
    for (size_t i = 0; i < count; i++) n += needs_memory(bp_context_tensor(ctx, i));
    if (n == 0) return BP_OK;
    struct galloc_item *it = calloc(n, sizeof *it);
    if (!it) return bp__fail(BP_ERR_OUT_OF_MEMORY, "%s: out of memory planning %zu tensors.", what, n);
    size_t k = 0;
    for (size_t i = 0; i < count && st == BP_OK; i++) {
        struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (!needs_memory(t)) continue;
        size_t size = 0;
        if (!round_up(tensor_alloc_size(buft, t), l.align, &size))
            st = bp__fail(BP_ERR_OUT_OF_MEMORY, "%s: a tensor of this context needs more bytes than fit in "
                          "size_t.", what);
        it[k++] = (struct galloc_item){ .t = t, .size = size };
    }
    if (st == BP_OK) st = galloc_items(it, n, g, what, total);
    if (st != BP_OK) {
        free(it);
        return st;
    }
    *n_out = n;
    *it_out = it;
    return BP_OK;
}

size_t bp_context_alloc_graph_size(struct bp_context *ctx, const struct bp_graph *g,
                                   struct bp_buffer_type *buft)
{
    struct galloc_item *it;
    size_t n, total, align = 1;
    bp_status st = galloc_layout(ctx, g, buft, "bp_context_alloc_graph_size", &it, &n, &total, &align);
    free(it);
    if (st != BP_OK || n == 0) return 0;
    return total ? total : align;
}

bp_status bp_context_alloc_graph(struct bp_context *ctx, const struct bp_graph *g,
                                 struct bp_buffer_type *buft, struct bp_buffer **out)
{
    const char *what = "bp_context_alloc_graph";
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: out is NULL; pass the address of a buffer pointer.", what);
    *out = NULL;
    struct galloc_item *it;
    size_t n, total, align = 1;
    bp_status st = galloc_layout(ctx, g, buft, what, &it, &n, &total, &align);
    if (st != BP_OK) return st;
    if (n == 0) return resolve_views(ctx);
    struct bp_buffer *buf = NULL;
    if ((st = bp_buffer_alloc(buft, total ? total : align, &buf)) != BP_OK) goto out;
    char *base = buf->iface->get_base(buf);
    for (size_t i = 0; i < n && st == BP_OK; i++) st = bind_tensor(buf, it[i].t, base + it[i].off, what);
    st = finish_binding(ctx, &buf, st);
out:
    free(it);
    *out = buf;
    return st;
}
