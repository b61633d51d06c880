/*
 * host_helpers.c — the boilerplate a host-memory plugin would otherwise copy
 * (bp_host_helpers.h): a buffer type of aligned host memory that a plugin
 * binds to its own device, and an element accessor for F32/F16/BF16 views.
 * Offered to plugins by name in host_services.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_helpers.h"

#define WHO "host-memory"

/* ---- the buffer: context is the memory itself ---- */

static void hb_free(struct bp_buffer *buf)
{
    if (!buf) return;
    free(buf->context);
    free(buf);
}

static void *hb_get_base(struct bp_buffer *buf)
{
    return buf->context;
}

/* [offset, offset + size) lies in the tensor's bytes, which lie in buf. */
static bool hb_in_range(struct bp_buffer *buf, const struct bp_tensor *t, size_t offset, size_t size)
{
    const size_t n = bp_nbytes(t);
    const char *base = buf->context, *p = t->data;
    return p && p >= base && (size_t)(p - base) <= buf->size &&
           n <= buf->size - (size_t)(p - base) && offset <= n && size <= n - offset;
}

static bp_status hb_range_ok(struct bp_buffer *buf, const struct bp_tensor *t, size_t offset,
                             size_t size, const char *what)
{
    if (hb_in_range(buf, t, offset, size)) return BP_OK;
    bp__log(BP_LOG_ERROR, WHO,
            "%s of tensor '%s': bytes [%zu, %zu) lie outside its %zu bytes in this %zu-byte "
            "buffer%s; allocate the tensor first and keep the range within bp_nbytes.",
            what, t->name, offset, offset + size, bp_nbytes(t), buf->size,
            t->data ? "" : " (it has no data)");
    return BP_ERR_INVALID_ARGUMENT;
}

static bp_status hb_set(struct bp_buffer *buf, struct bp_tensor *t, const void *src,
                        size_t offset, size_t size)
{
    bp_status st = hb_range_ok(buf, t, offset, size, "set");
    if (st == BP_OK && size) memcpy((char *)t->data + offset, src, size);
    return st;
}

static bp_status hb_get(struct bp_buffer *buf, const struct bp_tensor *t, void *dst,
                        size_t offset, size_t size)
{
    bp_status st = hb_range_ok(buf, t, offset, size, "get");
    if (st == BP_OK && size) memcpy(dst, (const char *)t->data + offset, size);
    return st;
}

static bool tensor_in_host_memory(const struct bp_tensor *t)
{
    struct bp_buffer_type *bt = t->buffer ? t->buffer->buft : NULL;
    return t->data && bt && BP_IFACE_HAS(bt->iface, is_host) && bt->iface->is_host &&
           bt->iface->is_host(bt);
}

/* Direct only between packed tensors of one size, the source in host
 * memory; anything else is declined and the host stages it. */
static bp_status hb_copy(struct bp_buffer *buf, const struct bp_tensor *src, struct bp_tensor *dst)
{
    if (!tensor_in_host_memory(src) || !bp_is_contiguous(src) || !bp_is_contiguous(dst) ||
        bp_nbytes(src) != bp_nbytes(dst) || !hb_in_range(buf, dst, 0, bp_nbytes(dst)))
        return BP_ERR_UNSUPPORTED;
    memmove(dst->data, src->data, bp_nbytes(src));
    return BP_OK;
}

static bp_status hb_clear(struct bp_buffer *buf, uint8_t value)
{
    memset(buf->context, value, buf->size);
    return BP_OK;
}

static const struct bp_buffer_iface host_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = hb_free,
    .get_base = hb_get_base,
    .set_tensor = hb_set,
    .get_tensor = hb_get,
    .copy_tensor = hb_copy,
    .clear = hb_clear,
};

/* ---- the buffer type ---- */

static const char *hbt_get_name(struct bp_buffer_type *buft)
{
    (void)buft;
    return WHO;
}

static bp_status hbt_alloc(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out)
{
    if (!out) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    /* aligned_alloc wants a non-zero multiple of the alignment. */
    const size_t a = BP_HOST_BUFFER_ALIGNMENT;
    if (size > SIZE_MAX - a) {
        bp__log(BP_LOG_ERROR, WHO, "a buffer of %zu bytes cannot be allocated; ask for less.", size);
        return BP_ERR_OUT_OF_MEMORY;
    }
    const size_t padded = size ? (size + a - 1) / a * a : a;
    struct bp_buffer *buf = calloc(1, sizeof *buf);
    void *mem = aligned_alloc(a, padded);
    if (!buf || !mem) {
        free(buf);
        free(mem);
        bp__log(BP_LOG_ERROR, WHO, "out of host memory allocating a %zu-byte buffer; free memory "
                "or use smaller tensors.", size);
        return BP_ERR_OUT_OF_MEMORY;
    }
    *buf = (struct bp_buffer){.iface = &host_buffer_iface, .buft = buft, .context = mem, .size = size};
    *out = buf;
    return BP_OK;
}

static size_t hbt_get_alignment(struct bp_buffer_type *buft)
{
    (void)buft;
    return BP_HOST_BUFFER_ALIGNMENT;
}

static bool hbt_is_host(struct bp_buffer_type *buft)
{
    (void)buft;
    return true;
}

static const struct bp_buffer_type_iface host_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = hbt_get_name,
    .alloc_buffer = hbt_alloc,
    .get_alignment = hbt_get_alignment,
    .is_host = hbt_is_host,
};

bp_status bp__host_buffer_type_init(struct bp_buffer_type *buft, struct bp_device *dev)
{
    if (!buft || !dev) {
        bp__log(BP_LOG_ERROR, WHO, "bp_host_buffer_type_init: the %s is NULL; pass the plugin's "
                "buffer type storage and its device.", buft ? "device" : "buffer type");
        return BP_ERR_INVALID_ARGUMENT;
    }
    *buft = (struct bp_buffer_type){.iface = &host_buffer_type_iface, .device = dev};
    return BP_OK;
}

/* ---- the element accessor ---- */

/* Address of element (i0..i3), each index taken modulo its dimension; NULL
 * for a type the accessor does not read or an empty dimension. */
static char *element_at(const struct bp_tensor *t, const int64_t idx[4])
{
    if (!t || !t->data ||
        (t->type != BP_TYPE_F32 && t->type != BP_TYPE_F16 && t->type != BP_TYPE_BF16))
        return NULL;
    char *p = t->data;
    for (int d = 0; d < BP_MAX_DIMS; d++) {
        if (t->ne[d] <= 0) return NULL;
        int64_t i = idx[d] % t->ne[d];
        if (i < 0) i += t->ne[d];
        p += (size_t)i * t->nb[d];
    }
    return p;
}

float bp__element_get_f32(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const int64_t idx[4] = {i0, i1, i2, i3};
    const char *p = element_at(t, idx);
    float f;
    uint16_t h;
    if (!p) return NAN;
    switch (t->type) {
    case BP_TYPE_F32: memcpy(&f, p, sizeof f); return f;
    case BP_TYPE_F16: memcpy(&h, p, sizeof h); return bp_f16_to_f32(h);
    default: memcpy(&h, p, sizeof h); return bp_bf16_to_f32(h); /* BF16: element_at admits no other */
    }
}

void bp__element_set_f32(struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v)
{
    const int64_t idx[4] = {i0, i1, i2, i3};
    char *p = element_at(t, idx);
    uint16_t h;
    if (!p) return;
    switch (t->type) {
    case BP_TYPE_F32: memcpy(p, &v, sizeof v); return;
    case BP_TYPE_F16: h = bp_f32_to_f16(v); memcpy(p, &h, sizeof h); return;
    default: h = bp_f32_to_bf16(v); memcpy(p, &h, sizeof h); return;
    }
}
