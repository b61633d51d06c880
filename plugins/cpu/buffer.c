/*
 * buffer.c — the "CPU" buffer type: host memory, 64-byte aligned (a cache
 * line, and the widest vector load a later fast variant will use); and
 * "CPU_REPACK", the same memory with weights stored in the x8 layout
 * (kernels/repack.h, converted in set/get: repack_io.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

struct cpu_buffer {
    struct bp_buffer buf;
    struct cpu_live live;
    struct cpu_plugin *pl;
    void *data;
};

static struct cpu_buffer *cpu_buffer_of_live(struct cpu_live *l)
{
    return (struct cpu_buffer *)((char *)l - offsetof(struct cpu_buffer, live));
}

static void buf_free(struct bp_buffer *b)
{
    if (!b)
        return;
    struct cpu_buffer *cb = b->context;
    cpu_live_remove(cb->pl, &cb->live);
    free(cb->data);
    free(cb);
}

static void *buf_get_base(struct bp_buffer *b)
{
    return ((struct cpu_buffer *)b->context)->data;
}

/* The byte range [offset, offset + size) of t must lie in its storage. */
static bp_status check_range(const struct cpu_buffer *cb, const struct bp_tensor *t, size_t offset,
                             size_t size, const char *what)
{
    size_t n = bp_nbytes(t);
    if (!t->data || offset > n || size > n - offset) {
        cpu_log(cb->pl, BP_LOG_ERROR,
                "%s of tensor '%s': bytes [%zu, %zu) are outside its %zu bytes of storage%s.", what,
                t->name, offset, offset + size, n, t->data ? "" : " (it has no data yet)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

static bp_status buf_set_tensor(struct bp_buffer *b, struct bp_tensor *t, const void *src,
                                size_t offset, size_t size)
{
    bp_status st = check_range(b->context, t, offset, size, "set");
    if (st == BP_OK && size > 0)
        memcpy((char *)t->data + offset, src, size);
    return st;
}

static bp_status repack_set_tensor(struct bp_buffer *b, struct bp_tensor *t, const void *src,
                                   size_t offset, size_t size)
{
    bp_status st = check_range(b->context, t, offset, size, "set");
    if (st == BP_OK && size > 0)
        st = cpu_repack_io(((struct cpu_buffer *)b->context)->pl, t, (void *)src, offset, size, true);
    return st;
}

static bp_status repack_get_tensor(struct bp_buffer *b, const struct bp_tensor *t, void *dst,
                                   size_t offset, size_t size)
{
    bp_status st = check_range(b->context, t, offset, size, "get");
    if (st == BP_OK && size > 0)
        st = cpu_repack_io(((struct cpu_buffer *)b->context)->pl, (struct bp_tensor *)t, dst,
                           offset, size, false);
    return st;
}

/* The host stages every copy into or out of a repack buffer through get
 * and set, which convert. */
static bp_status repack_copy_tensor(struct bp_buffer *b, const struct bp_tensor *src,
                                    struct bp_tensor *dst)
{
    (void)b;
    (void)src;
    (void)dst;
    return BP_ERR_UNSUPPORTED;
}

static bp_status buf_get_tensor(struct bp_buffer *b, const struct bp_tensor *t, void *dst,
                                size_t offset, size_t size)
{
    bp_status st = check_range(b->context, t, offset, size, "get");
    if (st == BP_OK && size > 0)
        memcpy(dst, (const char *)t->data + offset, size);
    return st;
}

static bool is_host_tensor(const struct bp_tensor *t)
{
    const struct bp_buffer_type *bt = t->buffer ? t->buffer->buft : NULL;
    return bt && bt->iface && BP_IFACE_HAS(bt->iface, is_host) && bt->iface->is_host &&
           bt->iface->is_host((struct bp_buffer_type *)bt);
}

/* Direct copy only between packed tensors of equal size in host memory;
 * anything else the host stages through RAM. */
static bp_status buf_copy_tensor(struct bp_buffer *b, const struct bp_tensor *src, struct bp_tensor *dst)
{
    (void)b;
    if (!src->data || !dst->data || !is_host_tensor(src) || !bp_is_contiguous(src) ||
        !bp_is_contiguous(dst) || bp_nbytes(src) != bp_nbytes(dst))
        return BP_ERR_UNSUPPORTED;
    memmove(dst->data, src->data, bp_nbytes(src));
    return BP_OK;
}

static bp_status buf_clear(struct bp_buffer *b, uint8_t value)
{
    struct cpu_buffer *cb = b->context;
    memset(cb->data, value, b->size);
    return BP_OK;
}

static const struct bp_buffer_iface cpu_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_get_base,
    .init_tensor = NULL,
    .set_tensor = buf_set_tensor,
    .get_tensor = buf_get_tensor,
    .copy_tensor = buf_copy_tensor,
    .clear = buf_clear,
};

static const struct bp_buffer_iface cpu_repack_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_get_base,
    .init_tensor = NULL,
    .set_tensor = repack_set_tensor,
    .get_tensor = repack_get_tensor,
    .copy_tensor = repack_copy_tensor,
    .clear = buf_clear, /* the x8 layout only moves bytes: a fill is a fill */
};

static const char *buft_get_name(struct bp_buffer_type *buft)
{
    return buft->iface == &cpu_repack_buffer_type_iface ? "CPU_REPACK" : "CPU";
}

static bp_status buft_alloc_buffer(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out)
{
    struct cpu_plugin *pl = buft->context;
    if (!out)
        return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    struct cpu_buffer *cb = calloc(1, sizeof *cb);
    /* size 0 still gets a distinct non-NULL base */
    void *data = cb ? cpu_host_alloc(pl, size) : NULL;
    if (!data) {
        free(cb);
        cpu_log(pl, BP_LOG_ERROR,
                "could not allocate %zu bytes of host memory for a CPU buffer; free memory or "
                "use smaller tensors.", size);
        return BP_ERR_OUT_OF_MEMORY;
    }
    cb->pl = pl;
    cb->data = data;
    cb->buf = (struct bp_buffer){ .iface = buft->iface == &cpu_repack_buffer_type_iface
                                              ? &cpu_repack_buffer_iface : &cpu_buffer_iface,
                                  .buft = buft, .context = cb, .size = size };
    cpu_live_add(pl, &cb->live, &pl->live_buffers);
    *out = &cb->buf;
    return BP_OK;
}

static size_t buft_get_alignment(struct bp_buffer_type *buft)
{
    (void)buft;
    return CPU_BUFFER_ALIGNMENT;
}

static bool buft_is_host(struct bp_buffer_type *buft)
{
    (void)buft;
    return true;
}

const struct bp_buffer_type_iface cpu_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = buft_alloc_buffer,
    .get_alignment = buft_get_alignment,
    .get_max_size = NULL,
    .get_alloc_size = NULL,
    .is_host = buft_is_host,
};

/* Not host memory as far as the host can tell: tensor bytes are not in the
 * plain layout, so every access must go through get/set. */
static bool repack_buft_is_host(struct bp_buffer_type *buft)
{
    (void)buft;
    return false;
}

const struct bp_buffer_type_iface cpu_repack_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = buft_alloc_buffer,
    .get_alignment = buft_get_alignment,
    .get_max_size = NULL,
    .get_alloc_size = NULL,
    .is_host = repack_buft_is_host,
};

void cpu_buffers_free_all(struct cpu_plugin *pl)
{
    while (pl->live_buffers.next != &pl->live_buffers)
        buf_free(&cpu_buffer_of_live(pl->live_buffers.next)->buf);
}
