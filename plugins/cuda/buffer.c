/*
 * buffer.c — the two buffer types of each CUDA device: device memory
 * ("CUDA0") and pinned host memory ("CUDA0_Host") for fast staging.
 *
 * Synchronous set/get/copy use cudaMemcpy on the legacy default stream,
 * which orders them after the work queued on every backend stream (those
 * are created blocking), so no explicit synchronize is needed around them.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

struct cuda_buffer {
    struct bp_buffer buf;
    struct cuda_device *cd;
    void *data;
    bool host;
};

static struct cuda_plugin *pl_of(struct bp_buffer *b)
{
    return ((struct cuda_buffer *)b->context)->cd->pl;
}

static void buf_free(struct bp_buffer *b)
{
    if (!b)
        return;
    struct cuda_buffer *cb = b->context;
    if (cb->data) {
        (void)cudaSetDevice(cb->cd->id);
        cudaError_t e = cb->host ? cudaFreeHost(cb->data) : cudaFree(cb->data);
        if (e != cudaSuccess)
            cuda_check(cb->cd->pl, e, "freeing a buffer");
    }
    free(cb);
}

static void *buf_get_base(struct bp_buffer *b)
{
    struct cuda_buffer *cb = b->context;
    /* A zero-size buffer still needs a non-NULL base. */
    return cb->data ? cb->data : (void *)(uintptr_t)CUDA_BUFFER_ALIGNMENT;
}

static bp_status check_range(struct bp_buffer *b, const struct bp_tensor *t, size_t offset,
                             size_t size, const char *what)
{
    size_t n = bp_nbytes(t);
    if (!t->data || offset > n || size > n - offset) {
        cuda_log(pl_of(b), BP_LOG_ERROR,
                 "%s of tensor '%s': bytes [%zu, %zu) are outside its %zu bytes of storage%s.",
                 what, t->name, offset, offset + size, n, t->data ? "" : " (it has no data yet)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

static bp_status buf_set_tensor(struct bp_buffer *b, struct bp_tensor *t, const void *src,
                                size_t offset, size_t size)
{
    bp_status st = check_range(b, t, offset, size, "set");
    if (st != BP_OK || size == 0)
        return st;
    struct cuda_buffer *cb = b->context;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemcpy((char *)t->data + offset, src, size, cudaMemcpyDefault),
                      "copying a tensor to the device");
}

static bp_status buf_get_tensor(struct bp_buffer *b, const struct bp_tensor *t, void *dst,
                                size_t offset, size_t size)
{
    bp_status st = check_range(b, t, offset, size, "get");
    if (st != BP_OK || size == 0)
        return st;
    struct cuda_buffer *cb = b->context;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemcpy(dst, (const char *)t->data + offset, size, cudaMemcpyDefault),
                      "copying a tensor from the device");
}

struct cuda_device *cuda_tensor_device(const struct bp_tensor *t)
{
    const struct bp_buffer *b = t ? t->buffer : NULL;
    if (!b || !b->buft || b->buft->iface != &cuda_buffer_type_iface)
        return NULL;
    return b->buft->context;
}

bool cuda_tensor_is_host(const struct bp_tensor *t)
{
    const struct bp_buffer_type *bt = t && t->buffer ? t->buffer->buft : NULL;
    return bt && bt->iface && BP_IFACE_HAS(bt->iface, is_host) && bt->iface->is_host &&
           bt->iface->is_host((struct bp_buffer_type *)bt);
}

bp_status cuda_enable_peer(const struct cuda_plugin *pl, int from, int to)
{
    if (from == to)
        return BP_OK;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) {
        (void)cudaGetLastError();
        return BP_ERR_UNSUPPORTED; /* copies still work, staged by the driver */
    }
    (void)cudaSetDevice(from);
    cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        return BP_OK;
    }
    return cuda_check(pl, e, "enabling peer access");
}

/* Packed tensors of equal size only; anything else the host stages. */
static bp_status buf_copy_tensor(struct bp_buffer *b, const struct bp_tensor *src, struct bp_tensor *dst)
{
    struct cuda_buffer *cb = b->context;
    size_t n = bp_nbytes(dst);
    if (!src->data || !dst->data || !bp_is_contiguous(src) || !bp_is_contiguous(dst) ||
        bp_nbytes(src) != n)
        return BP_ERR_UNSUPPORTED;
    struct cuda_device *sd = cuda_tensor_device(src);
    if (!sd && !cuda_tensor_is_host(src))
        return BP_ERR_UNSUPPORTED;
    if (n == 0)
        return BP_OK;
    if (sd && sd->id != cb->cd->id && !cb->host) {
        (void)cuda_enable_peer(cb->cd->pl, cb->cd->id, sd->id);
        (void)cudaSetDevice(cb->cd->id);
        return cuda_check(cb->cd->pl, cudaMemcpyPeer(dst->data, cb->cd->id, src->data, sd->id, n),
                          "copying a tensor between CUDA devices");
    }
    (void)cudaSetDevice(sd ? sd->id : cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemcpy(dst->data, src->data, n, cudaMemcpyDefault),
                      "copying a tensor");
}

static bp_status buf_clear(struct bp_buffer *b, uint8_t value)
{
    struct cuda_buffer *cb = b->context;
    if (!cb->data)
        return BP_OK;
    if (cb->host) {
        memset(cb->data, value, b->size);
        return BP_OK;
    }
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemset(cb->data, value, b->size), "clearing a buffer");
}

static const struct bp_buffer_iface cuda_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_get_base,
    .init_tensor = NULL,
    .set_tensor = buf_set_tensor,
    .get_tensor = buf_get_tensor,
    .copy_tensor = buf_copy_tensor,
    .clear = buf_clear,
};

/* ---- buffer types ---- */

static const char *buft_get_name(struct bp_buffer_type *bt)
{
    struct cuda_device *cd = bt->context;
    return bt->iface == &cuda_host_buffer_type_iface ? cd->host_buft_name : cd->buft_name;
}

static bp_status alloc_common(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out, bool host)
{
    struct cuda_device *cd = bt->context;
    if (!out) {
        cuda_log(cd->pl, BP_LOG_ERROR, "alloc_buffer on %s was given no place for the buffer (out is "
                 "NULL).", cd->name);
        return BP_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    struct cuda_buffer *cb = calloc(1, sizeof *cb);
    if (!cb) {
        cuda_log(cd->pl, BP_LOG_ERROR, "could not allocate a buffer record; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    cb->cd = cd;
    cb->host = host;
    if (size > 0) {
        (void)cudaSetDevice(cd->id);
        cudaError_t e = host ? cudaMallocHost(&cb->data, size) : cudaMalloc(&cb->data, size);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            cuda_log(cd->pl, BP_LOG_ERROR, "%s could not allocate %zu bytes of %s memory: %s; use a "
                     "smaller model or free memory.", cd->name, size, host ? "pinned host" : "device",
                     cudaGetErrorString(e));
            free(cb);
            return BP_ERR_OUT_OF_MEMORY;
        }
    }
    cb->buf = (struct bp_buffer){ .iface = &cuda_buffer_iface, .buft = bt, .context = cb, .size = size };
    *out = &cb->buf;
    return BP_OK;
}

static bp_status buft_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
    return alloc_common(bt, size, out, false);
}

static bp_status host_buft_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
    return alloc_common(bt, size, out, true);
}

static size_t buft_get_alignment(struct bp_buffer_type *bt) { (void)bt; return CUDA_BUFFER_ALIGNMENT; }

static size_t buft_get_max_size(struct bp_buffer_type *bt)
{
    return ((struct cuda_device *)bt->context)->total_mem;
}

static bool buft_is_host(struct bp_buffer_type *bt) { (void)bt; return false; }
static bool host_buft_is_host(struct bp_buffer_type *bt) { (void)bt; return true; }

const struct bp_buffer_type_iface cuda_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_get_alignment,
    .get_max_size = buft_get_max_size,
    .get_alloc_size = NULL,
    .is_host = buft_is_host,
};

const struct bp_buffer_type_iface cuda_host_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = host_buft_alloc,
    .get_alignment = buft_get_alignment,
    .get_max_size = NULL,
    .get_alloc_size = NULL,
    .is_host = host_buft_is_host,
};
