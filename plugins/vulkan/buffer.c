/*
 * buffer.c — the "Vulkan<N>" buffer type: one VkBuffer in device-local
 * memory per backplane buffer, up to maxMemoryAllocationSize; each tensor is
 * bound through its own window when the buffer exceeds maxStorageBufferRange
 * (vk_tensor_bind). Where that memory is also host-visible and
 * coherent (lavapipe, integrated GPUs, resizable BAR) it stays mapped and
 * set/get are plain memcpy; otherwise they go through a host-visible staging
 * buffer and a copy on the device's queue.
 *
 * get_base returns the mapped pointer when there is one, else an opaque
 * address no one dereferences (is_host is false either way: the CPU plugin
 * must not read these tensors directly).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_BUFFER_ALIGNMENT 64

static void buf_free(struct bp_buffer *b)
{
    if (!b)
        return;
    struct vk_buffer *vb = b->context;
    struct vk_dev *d = vb->d;
    const struct vk_fns *f = &d->pl->fn;
    if (vb->mapped) f->vkUnmapMemory(d->device, vb->memory);
    f->vkDestroyBuffer(d->device, vb->buffer, NULL);
    f->vkFreeMemory(d->device, vb->memory, NULL);
    pthread_mutex_lock(&d->pl->live_mu);
    d->allocated -= b->size;
    pthread_mutex_unlock(&d->pl->live_mu);
    free(vb);
}

static void *buf_get_base(struct bp_buffer *b)
{
    return ((struct vk_buffer *)b->context)->base;
}

bool vk_tensor_loc(const struct vk_dev *d, const struct bp_tensor *t, VkBuffer *buf, size_t *off,
                   const struct vk_buffer **vbp)
{
    const struct bp_buffer *b = t->buffer;
    if (!b && t->view_src) b = t->view_src->buffer;
    if (!b || !b->buft || b->buft->iface != &vk_buffer_type_iface || b->buft->context != d ||
        !t->data)
        return false;
    const struct vk_buffer *vb = b->context;
    size_t o = (size_t)((const char *)t->data - vb->base);
    if ((const char *)t->data < vb->base || o > b->size)
        return false;
    *buf = vb->buffer;
    *off = o;
    if (vbp) *vbp = vb;
    return true;
}

bp_status vk_tensor_bind(const struct vk_dev *d, const struct bp_tensor *t, struct vk_binding *out)
{
    const struct vk_buffer *vb;
    VkBuffer buf;
    size_t off;
    /* The caller names the node in its sentence (backend.c, check_node). */
    if (!vk_tensor_loc(d, t, &buf, &off, &vb)) return BP_ERR_INVALID_ARGUMENT;
    const size_t n = bp_nbytes(t);
    *out = (struct vk_binding){ .serial = vb->serial, .buf = buf, .abs = off };
    if (vb->alloc <= d->max_range) {
        out->offset = 0;
        out->range = VK_WHOLE_SIZE;
        out->rel = (uint32_t)off;
        return BP_OK;
    }
    const size_t base = off & ~(d->bind_align - 1);
    if (off - base > d->max_range || n > d->max_range - (off - base)) {
        vk_log(d->pl, BP_LOG_ERROR,
               "tensor '%s' spans %zu bytes (from byte %zu of its buffer), more than the %zu bytes "
               "one storage binding of %s can address (maxStorageBufferRange); split it into "
               "smaller tensors or compute this op on another device.", vk_tname(t), n, off,
               d->max_range, d->name);
        return BP_ERR_UNSUPPORTED;
    }
    out->offset = base;
    out->range = vb->alloc - base < d->max_range ? vb->alloc - base : d->max_range;
    out->rel = (uint32_t)(off - base);
    return BP_OK;
}

/* A staging buffer of size bytes, host-visible and coherent, mapped. */
static bp_status staging_new(struct vk_dev *d, size_t size, VkBuffer *buf, VkDeviceMemory *mem,
                             void **map)
{
    const struct vk_fns *f = &d->pl->fn;
    VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                               .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
    VkResult r = f->vkCreateBuffer(d->device, &bci, NULL, buf);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "creating a staging buffer");
    VkMemoryRequirements req;
    f->vkGetBufferMemoryRequirements(d->device, *buf, &req);
    int mt = vk_find_memory(d, req.memoryTypeBits,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (mt < 0) {
        f->vkDestroyBuffer(d->device, *buf, NULL);
        vk_log(d->pl, BP_LOG_ERROR, "%s has no host-visible coherent memory for staging.", d->name);
        return BP_ERR_UNSUPPORTED;
    }
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt };
    r = f->vkAllocateMemory(d->device, &ai, NULL, mem);
    if (r == VK_SUCCESS && (r = f->vkBindBufferMemory(d->device, *buf, *mem, 0)) == VK_SUCCESS)
        r = f->vkMapMemory(d->device, *mem, 0, VK_WHOLE_SIZE, 0, map);
    if (r != VK_SUCCESS) {
        f->vkDestroyBuffer(d->device, *buf, NULL);
        f->vkFreeMemory(d->device, *mem, NULL);
        return vk_status(d->pl, r, "allocating a staging buffer");
    }
    return BP_OK;
}

/* Copy between a staging buffer and [off, off+size) of vb, and wait. */
static bp_status staged_copy(struct vk_dev *d, const struct vk_buffer *vb, size_t off, size_t size,
                             VkBuffer stage, bool to_device)
{
    const struct vk_fns *f = &d->pl->fn;
    pthread_mutex_lock(&d->xfer_mu);
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    f->vkBeginCommandBuffer(d->xfer_cmd, &bi);
    VkBufferCopy region = { .srcOffset = to_device ? 0 : off, .dstOffset = to_device ? off : 0,
                            .size = size };
    f->vkCmdCopyBuffer(d->xfer_cmd, to_device ? stage : vb->buffer, to_device ? vb->buffer : stage,
                       1, &region);
    f->vkEndCommandBuffer(d->xfer_cmd);
    bp_status st = vk_submit_wait(d, d->xfer_cmd, d->xfer_fence);
    pthread_mutex_unlock(&d->xfer_mu);
    return st;
}

bp_status vk_buffer_write(struct vk_dev *d, const struct vk_buffer *vb, size_t off, const void *src,
                          size_t size)
{
    if (size == 0) return BP_OK;
    if (vb->mapped) {
        memcpy((char *)vb->mapped + off, src, size);
        return BP_OK;
    }
    VkBuffer sb;
    VkDeviceMemory sm;
    void *map;
    bp_status st = staging_new(d, size, &sb, &sm, &map);
    if (st != BP_OK) return st;
    memcpy(map, src, size);
    st = staged_copy(d, vb, off, size, sb, true);
    d->pl->fn.vkDestroyBuffer(d->device, sb, NULL);
    d->pl->fn.vkFreeMemory(d->device, sm, NULL);
    return st;
}

bp_status vk_buffer_read(struct vk_dev *d, const struct vk_buffer *vb, size_t off, void *dst,
                         size_t size)
{
    if (size == 0) return BP_OK;
    if (vb->mapped) {
        memcpy(dst, (const char *)vb->mapped + off, size);
        return BP_OK;
    }
    VkBuffer sb;
    VkDeviceMemory sm;
    void *map;
    bp_status st = staging_new(d, size, &sb, &sm, &map);
    if (st != BP_OK) return st;
    st = staged_copy(d, vb, off, size, sb, false);
    if (st == BP_OK) memcpy(dst, map, size);
    d->pl->fn.vkDestroyBuffer(d->device, sb, NULL);
    d->pl->fn.vkFreeMemory(d->device, sm, NULL);
    return st;
}

/* The byte range [offset, offset + size) of t must lie in its storage. */
static bp_status check_range(struct vk_buffer *vb, const struct bp_tensor *t, size_t offset,
                             size_t size, const char *what, size_t *abs_off)
{
    size_t n = bp_nbytes(t), toff;
    VkBuffer dummy;
    if (!vk_tensor_loc(vb->d, t, &dummy, &toff, NULL) || offset > n || size > n - offset ||
        toff + offset + size > vb->buf.size) {
        vk_log(vb->d->pl, BP_LOG_ERROR,
               "%s of tensor '%s': bytes [%zu, %zu) are outside its %zu bytes of storage in a %s "
               "buffer%s.", what, vk_tname(t), offset, offset + size, n, vb->d->name,
               t->data ? "" : " (it has no data yet)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    *abs_off = toff + offset;
    return BP_OK;
}

static bp_status buf_set_tensor(struct bp_buffer *b, struct bp_tensor *t, const void *src,
                                size_t offset, size_t size)
{
    struct vk_buffer *vb = b->context;
    size_t off;
    bp_status st = check_range(vb, t, offset, size, "set", &off);
    return st == BP_OK ? vk_buffer_write(vb->d, vb, off, src, size) : st;
}

static bp_status buf_get_tensor(struct bp_buffer *b, const struct bp_tensor *t, void *dst,
                                size_t offset, size_t size)
{
    struct vk_buffer *vb = b->context;
    size_t off;
    bp_status st = check_range(vb, t, offset, size, "get", &off);
    return st == BP_OK ? vk_buffer_read(vb->d, vb, off, dst, size) : st;
}

static bp_status buf_clear(struct bp_buffer *b, uint8_t value)
{
    struct vk_buffer *vb = b->context;
    struct vk_dev *d = vb->d;
    if (vb->mapped) {
        memset(vb->mapped, value, b->size);
        return BP_OK;
    }
    const struct vk_fns *f = &d->pl->fn;
    pthread_mutex_lock(&d->xfer_mu);
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    f->vkBeginCommandBuffer(d->xfer_cmd, &bi);
    f->vkCmdFillBuffer(d->xfer_cmd, vb->buffer, 0, VK_WHOLE_SIZE, value * 0x01010101u);
    f->vkEndCommandBuffer(d->xfer_cmd);
    bp_status st = vk_submit_wait(d, d->xfer_cmd, d->xfer_fence);
    pthread_mutex_unlock(&d->xfer_mu);
    return st;
}

static const struct bp_buffer_iface vk_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_get_base,
    .init_tensor = NULL,
    .set_tensor = buf_set_tensor,
    .get_tensor = buf_get_tensor,
    .copy_tensor = NULL,
    .clear = buf_clear,
};

/* ---- buffer type ---- */

static const char *buft_get_name(struct bp_buffer_type *buft)
{
    return ((struct vk_dev *)buft->context)->name;
}

static bp_status buft_alloc_buffer(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out)
{
    struct vk_dev *d = buft->context;
    const struct vk_fns *f = &d->pl->fn;
    if (!out) {
        vk_log(d->pl, BP_LOG_ERROR, "alloc_buffer on %s was given no place for the buffer (out is NULL).",
               d->name);
        return BP_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (size > d->max_alloc) {
        vk_log(d->pl, BP_LOG_ERROR,
               "a buffer of %zu bytes exceeds the %zu bytes one %s buffer can hold "
               "(maxMemoryAllocationSize); split the tensors over several buffers.", size,
               d->max_alloc, d->name);
        return BP_ERR_OUT_OF_MEMORY;
    }
    /* Size 0 still gets real storage: Vulkan has no empty buffers. Round to
     * whole words, as the shaders address 32-bit words. */
    size_t alloc = (size + 15) & ~(size_t)15;
    if (alloc == 0) alloc = 16;
    struct vk_buffer *vb = calloc(1, sizeof *vb);
    if (!vb) {
        vk_log(d->pl, BP_LOG_ERROR, "could not allocate a buffer descriptor; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    vb->d = d;
    VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = alloc,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
    VkResult r = f->vkCreateBuffer(d->device, &bci, NULL, &vb->buffer);
    if (r != VK_SUCCESS) {
        free(vb);
        return vk_status(d->pl, r, "creating a Vulkan buffer");
    }
    VkMemoryRequirements req;
    f->vkGetBufferMemoryRequirements(d->device, vb->buffer, &req);
    const VkMemoryPropertyFlags direct = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int mt = vk_find_memory(d, req.memoryTypeBits, direct);
    bool mappable = mt >= 0;
    if (mt < 0) mt = vk_find_memory(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (mt < 0) mt = vk_find_memory(d, req.memoryTypeBits, 0);
    if (mt < 0) {
        f->vkDestroyBuffer(d->device, vb->buffer, NULL);
        free(vb);
        vk_log(d->pl, BP_LOG_ERROR, "%s offers no memory type a storage buffer can use; the "
               "driver is broken, use another device.", d->name);
        return BP_ERR_UNSUPPORTED;
    }
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt };
    r = f->vkAllocateMemory(d->device, &ai, NULL, &vb->memory);
    if (r == VK_SUCCESS)
        r = f->vkBindBufferMemory(d->device, vb->buffer, vb->memory, 0);
    if (r == VK_SUCCESS && mappable)
        r = f->vkMapMemory(d->device, vb->memory, 0, VK_WHOLE_SIZE, 0, &vb->mapped);
    if (r != VK_SUCCESS) {
        f->vkDestroyBuffer(d->device, vb->buffer, NULL);
        if (vb->memory) f->vkFreeMemory(d->device, vb->memory, NULL);
        free(vb);
        char what[96];
        snprintf(what, sizeof what, "allocating %zu bytes on %s", size, d->name);
        return vk_status(d->pl, r, what);
    }
    pthread_mutex_lock(&d->pl->live_mu);
    uint64_t id = ++d->pl->next_buffer_id;
    d->allocated += size;
    pthread_mutex_unlock(&d->pl->live_mu);
    vb->serial = id;
    vb->alloc = alloc;
    /* A distinct 1 TiB window per buffer keeps opaque addresses unique. */
    vb->base = vb->mapped ? vb->mapped : (char *)(uintptr_t)((id + 1) << 40);
    vb->buf = (struct bp_buffer){ .iface = &vk_buffer_iface, .buft = buft, .context = vb,
                                  .size = size };
    *out = &vb->buf;
    return BP_OK;
}

/* Tensors start where a descriptor window may start. */
static size_t buft_get_alignment(struct bp_buffer_type *buft)
{
    const struct vk_dev *d = buft->context;
    return d->bind_align > VK_BUFFER_ALIGNMENT ? d->bind_align : VK_BUFFER_ALIGNMENT;
}

static size_t buft_get_max_size(struct bp_buffer_type *buft)
{
    return ((struct vk_dev *)buft->context)->max_alloc;
}

static bool buft_is_host(struct bp_buffer_type *buft)
{
    (void)buft;
    return false;
}

const struct bp_buffer_type_iface vk_buffer_type_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = buft_alloc_buffer,
    .get_alignment = buft_get_alignment,
    .get_max_size = buft_get_max_size,
    .get_alloc_size = NULL,
    .is_host = buft_is_host,
};
