/* sub.c — the one door to the sub-devices' buffer-type, buffer and backend
 * tables, which belong to other vendors' plugins. Meta holds them to the same
 * rules as the host (bp_iface_check.h): each table is checked against its
 * required-field floor when meta first receives it, and every optional field
 * is read through BP_IFACE_GET, with a fallback or a logged refusal. */
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

/* Log one sentence for a table below its floor; returns BP_ERR_PLUGIN. */
static bp_status refuse_table(struct bp_device *s, const char *what, struct bp_iface_problem p)
{
    char why[160];
    const char *(*reg_name)(struct bp_registry *) = s->reg ? BP_IFACE_GET(s->reg->iface, get_name) : NULL;
    const char *family = reg_name ? reg_name(s->reg) : NULL;
    meta_log(BP_LOG_ERROR, "sub-device %s (plugin %s) returned a %s that %s; the meta device cannot use it "
             "(fix that plugin).", meta_sub_name(s), family ? family : "?", what,
             bp_iface_problem_text(p, why, sizeof why));
    return BP_ERR_PLUGIN;
}

struct bp_buffer_type *meta_sub_buft(struct bp_device *s)
{
    struct bp_buffer_type *bt = s->iface->get_buffer_type(s);
    struct bp_iface_problem p = bp_buffer_type_iface_check(bt ? bt->iface : NULL);
    if (!bt || p.field) {
        if (bt)
            refuse_table(s, "buffer type table", p);
        else
            meta_log(BP_LOG_ERROR, "sub-device %s has no buffer type (get_buffer_type returned NULL).",
                     meta_sub_name(s));
        return NULL;
    }
    return bt;
}

struct bp_buffer_type *meta_sub_buft_for(struct bp_device *s, int wtype)
{
    if (wtype < 0 || wtype >= BP_TYPE_COUNT) return meta_sub_buft(s);
    struct bp_registry *r = s->reg;
    void *(*proc)(struct bp_registry *, const char *) =
        r && r->iface ? BP_IFACE_GET(r->iface, get_proc_address) : NULL;
    void *p = proc ? proc(r, BP_PROC_WEIGHT_BUFFER_TYPE) : NULL;
    if (!p) return meta_sub_buft(s);
    bp_weight_buffer_type_fn fn;
    memcpy(&fn, &p, sizeof fn);
    struct bp_buffer_type *bt = fn(s, (enum bp_type)wtype);
    if (!bt) return meta_sub_buft(s);
    struct bp_iface_problem pr = bp_buffer_type_iface_check(bt->iface);
    bool (*supports)(struct bp_device *, struct bp_buffer_type *) = BP_IFACE_GET(s->iface, supports_buft);
    if (pr.field) {
        refuse_table(s, "weight buffer type table", pr);
        return meta_sub_buft(s);
    }
    /* The host takes a weight buffer type its own device refuses as a bug
     * and falls back the same way (bp_device_weight_buffer_type). */
    if (supports && !supports(s, bt)) return meta_sub_buft(s);
    return bt;
}

bool meta_sub_buft_is_host(struct bp_buffer_type *bt)
{
    bool (*is_host)(struct bp_buffer_type *) = bt ? BP_IFACE_GET(bt->iface, is_host) : NULL;
    return is_host && is_host(bt);
}

bp_status meta_sub_alloc(struct bp_device *s, size_t bytes, struct bp_buffer **out)
{
    return meta_sub_alloc_for(s, -1, bytes, out);
}

bp_status meta_sub_alloc_for(struct bp_device *s, int wtype, size_t bytes, struct bp_buffer **out)
{
    *out = NULL;
    struct bp_buffer_type *bt = meta_sub_buft_for(s, wtype);
    if (!bt) return BP_ERR_PLUGIN;
    struct bp_buffer *b = NULL;
    bp_status st = bt->iface->alloc_buffer(bt, bytes, &b);
    if (st != BP_OK || !b) return st != BP_OK ? st : BP_ERR_PLUGIN;
    struct bp_iface_problem p = bp_buffer_iface_check(b->iface);
    if (p.field) {
        /* Give it back only when the table reaches free_buffer. */
        void (*free_fn)(struct bp_buffer *) = b->iface && b->iface->size <= BP_IFACE_MAX_SIZE
                                                  ? BP_IFACE_GET(b->iface, free_buffer) : NULL;
        if (free_fn) free_fn(b);
        return refuse_table(s, "buffer table", p);
    }
    if (!b->buft) b->buft = bt;
    *out = b;
    return BP_OK;
}

/* Without the optional clear, the bytes are written through set_tensor,
 * which every buffer has, a chunk at a time. */
bp_status meta_sub_clear(struct bp_buffer *b, uint8_t value)
{
    bp_status (*clear)(struct bp_buffer *, uint8_t) = BP_IFACE_GET(b->iface, clear);
    if (clear) return clear(b, value);
    enum { CHUNK = 1 << 16 };
    size_t chunk = b->size < CHUNK ? b->size : CHUNK;
    if (chunk == 0) return BP_OK;
    unsigned char *fill = malloc(chunk);
    if (!fill) return BP_ERR_OUT_OF_MEMORY;
    memset(fill, value, chunk);
    struct bp_tensor t;
    memset(&t, 0, sizeof t);
    t.type = BP_TYPE_I32;
    t.ne[0] = (int64_t)((b->size + 3) / 4);
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    t.nb[0] = 4;
    t.nb[1] = t.nb[2] = t.nb[3] = (size_t)t.ne[0] * 4;
    t.data = b->iface->get_base(b);
    t.buffer = b;
    bp_status st = BP_OK;
    for (size_t off = 0; off < b->size && st == BP_OK; off += chunk) {
        size_t n = b->size - off < chunk ? b->size - off : chunk;
        st = b->iface->set_tensor(b, &t, fill, off, n);
    }
    free(fill);
    return st;
}

void meta_sub_free_buffer(struct bp_buffer *b)
{
    if (b) b->iface->free_buffer(b);
}

bp_status meta_sub_backend_init(struct bp_device *s, const char *params, struct bp_backend **out)
{
    *out = NULL;
    struct bp_backend *b = NULL;
    bp_status st = s->iface->init_backend(s, params, &b);
    if (st != BP_OK || !b) return st != BP_OK ? st : BP_ERR_PLUGIN;
    struct bp_iface_problem p = bp_backend_iface_check(b->iface);
    if (p.field) {
        void (*free_fn)(struct bp_backend *) = b->iface && b->iface->size <= BP_IFACE_MAX_SIZE
                                                   ? BP_IFACE_GET(b->iface, free) : NULL;
        if (free_fn) free_fn(b);
        return refuse_table(s, "backend table", p);
    }
    if (!b->device) b->device = s;
    *out = b;
    return BP_OK;
}

bp_status meta_sub_synchronize(struct bp_backend *b)
{
    bp_status (*sync)(struct bp_backend *) = BP_IFACE_GET(b->iface, synchronize);
    return sync ? sync(b) : BP_OK;
}
