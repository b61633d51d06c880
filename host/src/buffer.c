/* buffer.c — buffers: allocation, release and raw byte access, each plugin
 * call wrapped with a status and a sentence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

const char *bp__buft_name(struct bp_buffer_type *buft)
{
    const char *(*fn)(struct bp_buffer_type *) = buft ? BP_IFACE_GET(buft->iface, get_name) : NULL;
    const char *name = fn ? fn(buft) : NULL;
    return name ? name : "(unnamed buffer type)";
}

const char *bp__buffer_name(struct bp_buffer *buf)
{
    return buf ? bp__buft_name(buf->buft) : "(null)";
}

bp_status bp_buffer_alloc(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out)
{
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_buffer_alloc: out is NULL; pass the address of a buffer pointer.");
    *out = NULL;
    if (!buft)
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "bp_buffer_alloc: the buffer type is NULL; get one from bp_device_buffer_type.");
    char why[160];
    struct bp_iface_problem p = bp_buffer_type_iface_check(buft->iface);
    if (p.field) {
        bp__log(BP_LOG_ERROR, "backplane", "a buffer type of device '%s' (plugin %s) has a table that %s; "
                "nothing is allocated (fix the plugin: bp_plugin.h marks the required fields).",
                bp_device_name(buft->device), bp__device_family(buft->device),
                bp_iface_problem_text(p, why, sizeof why));
        return bp__fail(BP_ERR_PLUGIN, "bp_buffer_alloc: the buffer type's table is broken (its %s); see the log.",
                        p.field);
    }
    size_t (*max_fn)(struct bp_buffer_type *) = BP_IFACE_GET(buft->iface, get_max_size);
    size_t max = max_fn ? max_fn(buft) : 0;
    char want[32], most[32];
    if (max && size > max)
        return bp__fail(BP_ERR_OUT_OF_MEMORY,
                        "buffer type %s allows at most %s per buffer but %s were asked for; split the tensors over several contexts.",
                        bp__buft_name(buft), bp_format_bytes(max, most, sizeof most),
                        bp_format_bytes(size, want, sizeof want));
    struct bp_buffer *buf = NULL;
    bp_status st = buft->iface->alloc_buffer(buft, size, &buf);
    if (st != BP_OK || !buf) {
        if (st == BP_OK) st = BP_ERR_PLUGIN;
        return bp__fail(st, "buffer type %s could not allocate %s (%s); free memory on the device or use a smaller model.",
                        bp__buft_name(buft), bp_format_bytes(size, want, sizeof want), bp_status_name(st));
    }
    /* Made at run time, so checked here, once: later calls trust it. */
    p = bp_buffer_iface_check(buf->iface);
    if (p.field) {
        /* Without free_buffer we cannot even give it back: leak rather than crash. */
        void (*free_fn)(struct bp_buffer *) = buf->iface && buf->iface->size <= BP_IFACE_MAX_SIZE
                                                  ? BP_IFACE_GET(buf->iface, free_buffer) : NULL;
        if (free_fn) free_fn(buf);
        return bp__refuse_made("buffer type", bp__buft_name(buft), bp__device_family(buft->device), "buffer", p);
    }
    if (!buf->buft) buf->buft = buft;
    *out = buf;
    return BP_OK;
}

void bp_buffer_free(struct bp_buffer *buf)
{
    void (*free_fn)(struct bp_buffer *) = buf ? BP_IFACE_GET(buf->iface, free_buffer) : NULL;
    if (free_fn) free_fn(buf);
}

size_t bp_buffer_size(const struct bp_buffer *buf)
{
    return buf ? buf->size : 0;
}

/* A 1-D I32 tensor spanning the whole buffer from its base. Plugins address
 * bytes as t->data + offset, so raw access is a tensor access at `offset`.
 * It is never passed to init_tensor and has no extra. */
static void whole_buffer_tensor(struct bp_buffer *buf, struct bp_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->type = BP_TYPE_I32;
    t->ne[0] = (int64_t)((buf->size + 3) / 4);
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    t->nb[0] = 4;
    t->nb[1] = t->nb[2] = t->nb[3] = (size_t)t->ne[0] * 4;
    t->data = buf->iface->get_base(buf);
    t->buffer = buf;
    snprintf(t->name, sizeof t->name, "(raw buffer bytes)");
}

/* Without the optional clear, the same bytes go through set_tensor, which
 * every buffer has, a chunk at a time. */
static bp_status clear_by_writes(struct bp_buffer *buf, uint8_t value)
{
    enum { CHUNK = 1 << 16 };
    size_t chunk = buf->size < CHUNK ? buf->size : CHUNK;
    if (chunk == 0) return BP_OK;
    unsigned char *fill = malloc(chunk);
    if (!fill) return BP_ERR_OUT_OF_MEMORY;
    memset(fill, value, chunk);
    struct bp_tensor t;
    whole_buffer_tensor(buf, &t);
    bp_status st = BP_OK;
    for (size_t off = 0; off < buf->size && st == BP_OK; off += chunk)
        st = buf->iface->set_tensor(buf, &t, fill, off, buf->size - off < chunk ? buf->size - off : chunk);
    free(fill);
    return st;
}

bp_status bp_buffer_clear(struct bp_buffer *buf, uint8_t value)
{
    if (!buf || !buf->iface) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_buffer_clear: the buffer is NULL.");
    bp_status (*clear)(struct bp_buffer *, uint8_t) = BP_IFACE_GET(buf->iface, clear);
    bp_status st = clear ? clear(buf, value) : clear_by_writes(buf, value);
    if (st != BP_OK)
        return bp__fail(st, "buffer %s failed to clear (%s); see the log for the plugin's reason.",
                        bp__buffer_name(buf), bp_status_name(st));
    return BP_OK;
}

static bp_status check_raw(const char *what, struct bp_buffer *buf, const void *host, size_t offset,
                           size_t size)
{
    if (!buf || !BP_IFACE_GET(buf->iface, get_base))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the buffer is NULL or has no get_base.", what);
    if (!host && size) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the host pointer is NULL.", what);
    if (offset > buf->size || size > buf->size - offset)
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "%s: bytes [%zu, %zu + %zu) are outside buffer %s of %zu bytes; pass a range inside it.",
                        what, offset, offset, size, bp__buffer_name(buf), buf->size);
    return BP_OK;
}

bp_status bp__refuse_made(const char *maker, const char *name, const char *family, const char *kind,
                          struct bp_iface_problem p)
{
    char why[160];
    bp__log(BP_LOG_ERROR, "backplane", "%s %s (plugin %s) returned a %s whose table %s; the %s is refused "
            "(fix the plugin: bp_plugin.h marks the required fields).", maker, name, family, kind,
            bp_iface_problem_text(p, why, sizeof why), kind);
    return bp__fail(BP_ERR_PLUGIN, "%s %s returned a broken %s (its %s); see the log.", maker, name, kind, p.field);
}

bp_status bp__buffer_io(const char *what, struct bp_buffer *buf, const struct bp_tensor *t, void *data,
                        size_t offset, size_t size, bool write)
{
    const bool has = write ? BP_IFACE_GET(buf->iface, set_tensor) != NULL
                           : BP_IFACE_GET(buf->iface, get_tensor) != NULL;
    if (!has)
        return bp__fail(BP_ERR_UNSUPPORTED, "%s: buffer %s has no %s; its plugin is incomplete.", what,
                        bp__buffer_name(buf), write ? "set_tensor" : "get_tensor");
    struct bp_tensor whole;
    if (!t) whole_buffer_tensor(buf, &whole);
    /* set_tensor's t is not const; every caller's tensor is writable. */
    struct bp_tensor *on = t ? (struct bp_tensor *)t : &whole;
    bp_status st = write ? buf->iface->set_tensor(buf, on, data, offset, size)
                         : buf->iface->get_tensor(buf, on, data, offset, size);
    if (st == BP_OK) return BP_OK;
    const char *verb = write ? "write" : "read";
    if (!t)
        return bp__fail(st, "%s: buffer %s failed to %s %zu bytes at %zu (%s).", what, bp__buffer_name(buf), verb,
                        size, offset, bp_status_name(st));
    char l[BP_MAX_NAME + 8];
    return bp__fail(st, "%s: buffer %s failed to %s %zu bytes of tensor %s (%s); see the log for the plugin's reason.",
                    what, bp__buffer_name(buf), verb, size, bp__tensor_label(t, l, sizeof l), bp_status_name(st));
}

bp_status bp_buffer_read(struct bp_buffer *buf, size_t offset, void *dst, size_t size)
{
    bp_status st = check_raw("bp_buffer_read", buf, dst, offset, size);
    if (st != BP_OK || size == 0) return st;
    return bp__buffer_io("bp_buffer_read", buf, NULL, dst, offset, size, false);
}

bp_status bp_buffer_write(struct bp_buffer *buf, size_t offset, const void *src, size_t size)
{
    bp_status st = check_raw("bp_buffer_write", buf, src, offset, size);
    if (st != BP_OK || size == 0) return st;
    /* The plugin only reads src: the cast is for the one helper of both directions. */
    return bp__buffer_io("bp_buffer_write", buf, NULL, (void *)src, offset, size, true);
}
