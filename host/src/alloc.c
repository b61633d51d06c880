/* alloc.c — placing a context's tensors in one buffer: aligned offsets,
 * optional guard bytes around each tensor, then views resolved. */
#include <stdio.h>

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
        t->data = base + off;
        t->buffer = buf;
        bp_status (*init_tensor)(struct bp_buffer *, struct bp_tensor *) = BP_IFACE_GET(buf->iface, init_tensor);
        if (init_tensor) {
            st = init_tensor(buf, t);
            if (st != BP_OK) {
                char lb[BP_MAX_NAME + 8];
                bp__fail(st, "%s: buffer %s could not set up tensor %s (%s); see the log for the plugin's reason.",
                         what, bp__buffer_name(buf), bp__tensor_label(t, lb, sizeof lb), bp_status_name(st));
            }
        }
    }
    if (st == BP_OK) st = resolve_views(ctx);
    if (st != BP_OK) {
        unplace(ctx, buf);
        bp_buffer_free(buf);
        return st;
    }
    *out = buf;
    return BP_OK;
}
