/*
 * backend.c — a Vulkan execution stream: its own command buffer, fence,
 * descriptor pool and parameter buffer on the device's queue.
 *
 * graph_compute records the whole graph into one command buffer and submits
 * it without waiting; synchronize (and the next submission) waits on the
 * fence. Between dispatches a barrier is placed only where a node reads or
 * writes a byte range that an earlier node since the last barrier wrote (or,
 * for writes, read). Shapes and byte strides of every dispatch go into one
 * 64-word block of a host-visible parameter buffer, indexed by a push
 * constant: five 4-d tensors do not fit the 128 bytes of push constants
 * every device guarantees. Descriptor sets are cached by what they bind
 * (buffer serial, window offset and range; never by VkBuffer handle, which
 * the driver may give to a new buffer once the old one is freed), so a graph
 * computed again allocates nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_DSET_CACHE 256

struct dset_key {
    uint64_t serial;
    VkDeviceSize offset, range;
};

struct dset_entry {
    struct dset_key key[VK_SLOTS];
    VkDescriptorSet set;
};

struct vk_backend {
    struct bp_backend be;
    struct vk_dev *d;
    pthread_mutex_t mu;               /* pending/serials: events wait from other threads */
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    bool pending;
    uint64_t submitted, completed;
    VkDescriptorPool dpool;
    uint32_t dpool_cap;
    struct dset_entry *dsets;
    uint32_t n_dsets;
    VkBuffer pbuf;
    VkDeviceMemory pmem;
    uint32_t *pmap;
    size_t pcap;                       /* parameter blocks */
    struct vk_range *reads, *writes;
    size_t n_reads, n_writes, range_cap;
    struct vk_prof prof;              /* profile.c; timestamps of the pending graph */
    bool fusion;                      /* fusion.c's chains (BACKPLANE_VULKAN_FUSION=0: off) */
};

struct vk_event {
    struct bp_event ev;
    struct vk_backend *be;
    uint64_t serial;
};

static const struct bp_backend_iface vk_backend_iface;

/* ---- waiting ---- */

static bp_status wait_pending(struct vk_backend *b)
{
    const struct vk_fns *f = &b->d->pl->fn;
    pthread_mutex_lock(&b->mu);
    bp_status st = BP_OK;
    if (b->pending) {
        VkResult r = f->vkWaitForFences(b->d->device, 1, &b->fence, VK_TRUE, UINT64_MAX);
        st = vk_status(b->d->pl, r, "waiting for a Vulkan graph");
        if (st == BP_OK) vk_prof_collect(b->d, &b->prof);
        b->prof.n = 0;
        b->pending = false;
        b->completed = b->submitted;
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}

static bp_status be_synchronize(struct bp_backend *be)
{
    return wait_pending(be->context);
}

static bp_status submit(struct vk_backend *b)
{
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    VkResult r = f->vkEndCommandBuffer(b->cmd);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "recording a Vulkan command buffer");
    VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                        .pCommandBuffers = &b->cmd };
    f->vkResetFences(d->device, 1, &b->fence);
    pthread_mutex_lock(&d->queue_mu);
    r = f->vkQueueSubmit(d->queue, 1, &si, b->fence);
    pthread_mutex_unlock(&d->queue_mu);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "submitting to the Vulkan queue");
    pthread_mutex_lock(&b->mu);
    b->pending = true;
    b->submitted++;
    pthread_mutex_unlock(&b->mu);
    return BP_OK;
}

static bp_status begin(struct vk_backend *b)
{
    const struct vk_fns *f = &b->d->pl->fn;
    f->vkResetCommandBuffer(b->cmd, 0);
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    return vk_status(b->d->pl, f->vkBeginCommandBuffer(b->cmd, &bi), "beginning a command buffer");
}

/* ---- transfers ---- */

static bp_status be_set_async(struct bp_backend *be, struct bp_tensor *t, const void *src,
                              size_t offset, size_t size)
{
    /* Ordered after earlier work of this stream; mapped memory makes the
     * copy itself a memcpy. */
    bp_status st = wait_pending(be->context);
    if (st != BP_OK) return st;
    if (!t->buffer || !t->buffer->iface) return BP_ERR_INVALID_ARGUMENT;
    return t->buffer->iface->set_tensor(t->buffer, t, src, offset, size);
}

static bp_status be_get_async(struct bp_backend *be, const struct bp_tensor *t, void *dst,
                              size_t offset, size_t size)
{
    bp_status st = wait_pending(be->context);
    if (st != BP_OK) return st;
    if (!t->buffer || !t->buffer->iface) return BP_ERR_INVALID_ARGUMENT;
    return t->buffer->iface->get_tensor(t->buffer, (struct bp_tensor *)t, dst, offset, size);
}

/* A device-side copy between packed tensors of one device, queued on the
 * destination stream; anything else is declined (the host stages it). */
static bp_status be_copy_async(struct bp_backend *src_be, struct bp_backend *dst_be,
                               const struct bp_tensor *src, struct bp_tensor *dst)
{
    if (!src_be || !dst_be || src_be->iface != &vk_backend_iface ||
        dst_be->iface != &vk_backend_iface)
        return BP_ERR_UNSUPPORTED;
    struct vk_backend *sb = src_be->context, *db = dst_be->context;
    VkBuffer sbuf, dbuf;
    size_t soff, doff;
    if (sb->d != db->d || !vk_tensor_loc(db->d, src, &sbuf, &soff, NULL) ||
        !vk_tensor_loc(db->d, dst, &dbuf, &doff, NULL) || !bp_is_contiguous(src) ||
        !bp_is_contiguous(dst) || bp_nbytes(src) != bp_nbytes(dst))
        return BP_ERR_UNSUPPORTED;
    bp_status st = wait_pending(sb);
    if (st == BP_OK) st = wait_pending(db);
    if (st == BP_OK) st = begin(db);
    if (st != BP_OK) return st;
    VkBufferCopy region = { .srcOffset = soff, .dstOffset = doff, .size = bp_nbytes(src) };
    if (region.size > 0)
        db->d->pl->fn.vkCmdCopyBuffer(db->cmd, sbuf, dbuf, 1, &region);
    return submit(db);
}

/* ---- graph compute ---- */

static bool overlaps(const struct vk_range *list, size_t n, const struct vk_range *r)
{
    for (size_t i = 0; i < n; i++)
        if (vk_ranges_meet(&list[i], r)) return true;
    return false;
}

static bp_status ensure_ranges(struct vk_backend *b, size_t n)
{
    if (n <= b->range_cap) return BP_OK;
    struct vk_range *r = realloc(b->reads, n * sizeof *r);
    if (r) b->reads = r;
    struct vk_range *w = r ? realloc(b->writes, n * sizeof *w) : NULL;
    if (w) b->writes = w;
    if (!r || !w) {
        vk_log(b->d->pl, BP_LOG_ERROR, "could not allocate hazard tracking for a graph; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    b->range_cap = n;
    return BP_OK;
}

/* Room for n parameter blocks in host-visible coherent memory. */
static bp_status ensure_params(struct vk_backend *b, size_t n)
{
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    if (n <= b->pcap) return BP_OK;
    size_t cap = b->pcap ? b->pcap : 64;
    while (cap < n) cap *= 2;
    if (b->pbuf) {
        f->vkUnmapMemory(d->device, b->pmem);
        f->vkDestroyBuffer(d->device, b->pbuf, NULL);
        f->vkFreeMemory(d->device, b->pmem, NULL);
        b->pbuf = VK_NULL_HANDLE;
        b->pmem = VK_NULL_HANDLE;
        b->pcap = 0;
    }
    /* Cached descriptor sets name the old parameter buffer. */
    if (b->dpool) f->vkResetDescriptorPool(d->device, b->dpool, 0);
    b->n_dsets = 0;
    VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = cap * VK_PARAM_WORDS * 4,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
    VkResult r = f->vkCreateBuffer(d->device, &bci, NULL, &b->pbuf);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "creating the parameter buffer");
    VkMemoryRequirements req;
    f->vkGetBufferMemoryRequirements(d->device, b->pbuf, &req);
    int mt = vk_find_memory(d, req.memoryTypeBits,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (mt < 0) {
        vk_log(d->pl, BP_LOG_ERROR, "%s has no host-visible coherent memory for shader parameters.",
               d->name);
        return BP_ERR_UNSUPPORTED;
    }
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt };
    void *map = NULL;
    r = f->vkAllocateMemory(d->device, &ai, NULL, &b->pmem);
    if (r == VK_SUCCESS) r = f->vkBindBufferMemory(d->device, b->pbuf, b->pmem, 0);
    if (r == VK_SUCCESS) r = f->vkMapMemory(d->device, b->pmem, 0, VK_WHOLE_SIZE, 0, &map);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "allocating the parameter buffer");
    b->pmap = map;
    b->pcap = cap;
    return BP_OK;
}

/* Room for n more descriptor sets; resets the pool (and the cache) when full.
 * Only called between command buffers, after the last one finished. */
static bp_status ensure_dsets(struct vk_backend *b, uint32_t n)
{
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    if (b->dpool && b->n_dsets + n <= b->dpool_cap) return BP_OK;
    if (b->dpool && n <= b->dpool_cap) {
        f->vkResetDescriptorPool(d->device, b->dpool, 0);
        b->n_dsets = 0;
        return BP_OK;
    }
    uint32_t cap = n > VK_DSET_CACHE ? n : VK_DSET_CACHE;
    struct dset_entry *e = realloc(b->dsets, cap * sizeof *e);
    if (!e) {
        vk_log(d->pl, BP_LOG_ERROR, "could not allocate the descriptor cache; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    b->dsets = e;
    if (b->dpool) f->vkDestroyDescriptorPool(d->device, b->dpool, NULL);
    b->dpool = VK_NULL_HANDLE;
    b->n_dsets = 0;
    VkDescriptorPoolSize ps = { .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                .descriptorCount = cap * (VK_SLOTS + 1) };
    VkDescriptorPoolCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = cap, .poolSizeCount = 1, .pPoolSizes = &ps };
    VkResult r = f->vkCreateDescriptorPool(d->device, &pci, NULL, &b->dpool);
    if (r != VK_SUCCESS) {
        b->dpool = VK_NULL_HANDLE;
        return vk_status(d->pl, r, "creating a descriptor pool");
    }
    b->dpool_cap = cap;
    return BP_OK;
}

static bp_status get_dset(struct vk_backend *b, const struct vk_binding bind[VK_SLOTS],
                          VkDescriptorSet *out)
{
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    struct dset_key key[VK_SLOTS];
    memset(key, 0, sizeof key);
    for (int s = 0; s < VK_SLOTS; s++)
        key[s] = (struct dset_key){ bind[s].serial, bind[s].offset, bind[s].range };
    for (uint32_t i = 0; i < b->n_dsets; i++)
        if (memcmp(b->dsets[i].key, key, sizeof key) == 0) {
            *out = b->dsets[i].set;
            return BP_OK;
        }
    VkDescriptorSetAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = b->dpool, .descriptorSetCount = 1,
                                       .pSetLayouts = &d->dsl };
    VkDescriptorSet set;
    VkResult r = f->vkAllocateDescriptorSets(d->device, &ai, &set);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "allocating a descriptor set");
    VkDescriptorBufferInfo bi[VK_SLOTS + 1];
    VkWriteDescriptorSet w[VK_SLOTS + 1];
    for (uint32_t i = 0; i < VK_SLOTS + 1; i++) {
        bi[i] = i < VK_SLOTS ? (VkDescriptorBufferInfo){ .buffer = bind[i].buf,
                                                         .offset = bind[i].offset,
                                                         .range = bind[i].range }
                             : (VkDescriptorBufferInfo){ .buffer = b->pbuf, .offset = 0,
                                                         .range = VK_WHOLE_SIZE };
        w[i] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set, .dstBinding = i, .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &bi[i] };
    }
    f->vkUpdateDescriptorSets(d->device, VK_SLOTS + 1, w, 0, NULL);
    memcpy(b->dsets[b->n_dsets].key, key, sizeof key);
    b->dsets[b->n_dsets++].set = set;
    *out = set;
    return BP_OK;
}

static void put_tensor(uint32_t *blk, int slot, const struct bp_tensor *t, size_t off)
{
    uint32_t *p = blk + (size_t)slot * VK_PB_SLOT;
    p[VK_PB_OFF] = (uint32_t)off;
    for (int i = 0; i < 4; i++) {
        p[VK_PB_NE + i] = (uint32_t)t->ne[i];
        p[VK_PB_NB + i] = (uint32_t)t->nb[i];
    }
    p[VK_PB_TYPE] = (uint32_t)t->type;
}

/* The memory a leaf-or-view tensor finally aliases is a leaf: its values are
 * known before the graph runs. */
static bool is_input(const struct bp_tensor *t)
{
    while (t && bp_op_is_view((enum bp_op)t->op) && t->op != BP_OP_NONE)
        t = t->view_src ? t->view_src : t->src[0];
    return t && t->op == BP_OP_NONE;
}

/* Ids that are inputs are checked here, so that a bad id fails the graph
 * with a sentence (the shaders only skip it). */
static bp_status check_ids(struct vk_backend *b, const struct bp_tensor *node,
                           const struct bp_tensor *ids, int64_t n_rows)
{
    if (!is_input(ids)) return BP_OK;
    const struct vk_buffer *vb;
    VkBuffer buf;
    size_t off, n = bp_nbytes(ids);
    if (n == 0 || !vk_tensor_loc(b->d, ids, &buf, &off, &vb)) return BP_OK;
    char *tmp = malloc(n);
    if (!tmp) {
        vk_log(b->d->pl, BP_LOG_ERROR, "could not allocate %zu bytes to check ids; free memory.", n);
        return BP_ERR_OUT_OF_MEMORY;
    }
    bp_status st = vk_buffer_read(b->d, vb, off, tmp, n);
    for (int64_t i3 = 0; st == BP_OK && i3 < ids->ne[3]; i3++)
        for (int64_t i2 = 0; st == BP_OK && i2 < ids->ne[2]; i2++)
            for (int64_t i1 = 0; st == BP_OK && i1 < ids->ne[1]; i1++)
                for (int64_t i0 = 0; st == BP_OK && i0 < ids->ne[0]; i0++) {
                    int32_t id;
                    memcpy(&id, tmp + i0 * ids->nb[0] + i1 * ids->nb[1] + i2 * ids->nb[2] +
                                    i3 * ids->nb[3], 4);
                    if (id < 0 || id >= n_rows) {
                        vk_log(b->d->pl, BP_LOG_ERROR,
                               "%s '%s': id %" PRId32 " of ids '%s' is outside [0, %" PRId64
                               "); fix the ids.", bp_op_name((enum bp_op)node->op),
                               vk_tname(node), id, vk_tname(ids), n_rows);
                        st = BP_ERR_INVALID_ARGUMENT;
                    }
                }
    free(tmp);
    return st;
}

/* Every tensor a node touches must be in memory of this device. */
static bp_status check_node(struct vk_backend *b, const struct bp_tensor *node, int32_t i)
{
    struct vk_dev *d = b->d;
    if (!node) {
        vk_log(d->pl, BP_LOG_ERROR, "graph node %" PRId32 " is NULL; rebuild the graph.", i);
        return BP_ERR_INVALID_ARGUMENT;
    }
    /* A tensor too large for one binding gets its own sentence. */
    for (int s = 0; s <= BP_MAX_SRC && !bp_op_is_view((enum bp_op)node->op); s++) {
        const struct bp_tensor *t = s < BP_MAX_SRC ? node->src[s] : node;
        if (t && bp_nbytes(t) > d->max_range) {
            vk_log(d->pl, BP_LOG_ERROR,
                   "%s node '%s': tensor '%s' has %zu bytes, more than the %zu bytes one storage "
                   "binding of %s can address (maxStorageBufferRange); split it into smaller "
                   "tensors or compute this op on another device.",
                   bp_op_name((enum bp_op)node->op), vk_tname(node), vk_tname(t), bp_nbytes(t),
                   d->max_range, d->name);
            return BP_ERR_UNSUPPORTED;
        }
    }
    if (!vk_supports_node(d, node)) {
        vk_log(d->pl, BP_LOG_ERROR, "%s cannot compute %s node '%s' (%s); check supports_op and "
               "place it on another device.", d->name, bp_op_name((enum bp_op)node->op),
               vk_tname(node), bp_type_name((enum bp_type)node->type));
        return BP_ERR_UNSUPPORTED;
    }
    if (bp_op_is_view((enum bp_op)node->op) || bp_nelements(node) == 0)
        return BP_OK;
    struct vk_binding bind;
    for (int s = -1; s < BP_MAX_SRC; s++) {
        const struct bp_tensor *t = s < 0 ? node : node->src[s];
        if (!t || bp_nelements(t) == 0) continue;
        bp_status st = vk_tensor_bind(d, t, &bind);
        if (st == BP_ERR_INVALID_ARGUMENT)
            vk_log(d->pl, BP_LOG_ERROR, "%s node '%s': tensor '%s' is not in a %s buffer; allocate "
                   "it in %s's buffer type.", bp_op_name((enum bp_op)node->op), vk_tname(node),
                   vk_tname(t), d->name, d->name);
        if (st != BP_OK) return st;
    }
    return BP_OK;
}

/* One dispatch as planned in p, its output `node` (the last node of a fused
 * chain). */
static bp_status record_node(struct vk_backend *b, const struct vk_dispatch *p,
                             const struct bp_tensor *node, uint32_t blk_index)
{
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    const struct bp_tensor *params = p->first ? p->first : node;
    uint32_t *blk = b->pmap + (size_t)blk_index * VK_PARAM_WORDS;
    memset(blk, 0, VK_PARAM_WORDS * 4);
    struct vk_binding bind[VK_SLOTS];
    struct vk_range reads[VK_SLOTS], wr[2];
    size_t n_reads = 0, n_wr = 0;
    for (int s = 0; s < VK_SLOTS; s++) {
        const struct bp_tensor *t = s < VK_SLOTS - 1 ? p->slot[s] : node;
        bind[s] = (struct vk_binding){ .serial = 0, .buf = d->dummy, .offset = 0,
                                       .range = VK_WHOLE_SIZE };
        if (!t) continue;
        if (bp_nelements(t) > 0) {
            bp_status st = vk_tensor_bind(d, t, &bind[s]);
            if (st != BP_OK) return st;
        }
        put_tensor(blk, s, t, bind[s].rel);
        struct vk_range r = { bind[s].buf, bind[s].abs, bind[s].abs + bp_nbytes(t) };
        if (s == VK_PB_OUT || (p->writes_fused && s == VK_PB_FUSED)) wr[n_wr++] = r;
        else reads[n_reads++] = r;
    }
    static_assert(sizeof node->op_params >= VK_PB_N_OPP * 4, "op_params fill the block's region");
    memcpy(blk + VK_PB_OPP, params->op_params, VK_PB_N_OPP * 4);
    memcpy(blk + VK_PB_AUX, p->aux, sizeof p->aux);

    bool hazard = false;
    for (size_t i = 0; i < n_wr && !hazard; i++)
        hazard = overlaps(b->writes, b->n_writes, &wr[i]) || overlaps(b->reads, b->n_reads, &wr[i]);
    for (size_t i = 0; i < n_reads && !hazard; i++)
        hazard = overlaps(b->writes, b->n_writes, &reads[i]);
    if (hazard) {
        VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
                               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT };
        f->vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        b->n_reads = b->n_writes = 0;
    }
    for (size_t i = 0; i < n_reads; i++) b->reads[b->n_reads++] = reads[i];
    for (size_t i = 0; i < n_wr; i++) b->writes[b->n_writes++] = wr[i];

    VkPipeline pipe;
    bp_status st = vk_pipeline_get(d, p->shader, p->wtype, &pipe);
    VkDescriptorSet set;
    if (st == BP_OK) st = get_dset(b, bind, &set);
    if (st != BP_OK) return st;
    uint32_t base = blk_index * VK_PARAM_WORDS;
    f->vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    f->vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &set, 0, NULL);
    f->vkCmdPushConstants(b->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &base);
    f->vkCmdDispatch(b->cmd, p->groups[0], p->groups[1], p->groups[2]);
    /* A fused chain's time goes to the op whose shader runs it (p->first). */
    vk_prof_mark(d, &b->prof, b->cmd, blk_index,
                 (struct vk_prof_tag){ .op = params->op, .shader = (int32_t)p->shader,
                                       .wtype = p->wtype,
                                       .fused = p->first ? node->op : BP_OP_NONE,
                                       .lead = p->lead });
    return BP_OK;
}

static bp_status be_graph_compute(struct bp_backend *be, struct bp_graph *g)
{
    struct vk_backend *b = be->context;
    struct vk_dev *d = b->d;
    if (!g || g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes)) {
        vk_log(d->pl, BP_LOG_ERROR, "graph_compute was given no graph or a graph without nodes.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    const uint64_t t_call = vk_now_ns();
    uint32_t n_work = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        bp_status st = check_node(b, g->nodes[i], i);
        if (st != BP_OK) return st;
        if (!bp_op_is_view((enum bp_op)g->nodes[i]->op) && bp_nelements(g->nodes[i]) > 0) n_work++;
    }
    /* One command buffer in flight per stream: the parameter blocks and
     * descriptor sets of the previous graph are reused from here on. */
    bp_status st = wait_pending(b);
    for (int32_t i = 0; st == BP_OK && i < g->n_nodes; i++) {
        const struct bp_tensor *n = g->nodes[i];
        if (n->op == BP_OP_GET_ROWS) st = check_ids(b, n, n->src[1], n->src[0]->ne[1]);
        if (n->op == BP_OP_SET_ROWS) st = check_ids(b, n, n->src[2], n->src[0]->ne[1]);
        if (n->op == BP_OP_MUL_MAT_ID) st = check_ids(b, n, n->src[2], n->src[0]->ne[2]);
    }
    if (st == BP_OK) st = ensure_params(b, n_work);
    if (st == BP_OK) st = ensure_dsets(b, n_work);
    if (st == BP_OK) st = ensure_ranges(b, (size_t)n_work * VK_SLOTS + 1);
    if (st != BP_OK || n_work == 0) return st;
    if ((st = begin(b)) != BP_OK) return st;
    if (vk_prof_wanted(d, &b->prof)) st = vk_prof_start(d, &b->prof, b->cmd, n_work);
    b->n_reads = b->n_writes = 0;
    uint32_t k = 0;
    /* A fused chain waits for its last node (fusion.c); one at a time. */
    struct vk_dispatch chain;
    int32_t chain_at = -1, skip[2] = { 0, -1 }; /* nodes the pending chain computes */
    for (int32_t i = 0; i < g->n_nodes && st == BP_OK; i++) {
        const struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op) || bp_nelements(n) == 0 ||
            (i >= skip[0] && i <= skip[1]))
            continue;
        if (i == chain_at) {
            chain_at = -1;
            st = record_node(b, &chain, n, k++);
            continue;
        }
        if (b->fusion && chain_at < 0 && (chain_at = vk_fuse_plan(d, g, i, &chain, skip)) >= 0)
            continue;
        struct vk_dispatch p;
        vk_plan_node(d, n, &p);
        st = record_node(b, &p, n, k++);
    }
    if (st != BP_OK) {
        d->pl->fn.vkEndCommandBuffer(b->cmd);
        b->prof.n = 0;
        return st;
    }
    /* Fused chains took fewer dispatches than n_work: only the marks
     * recorded are read back. */
    if (b->prof.n > k) b->prof.n = k;
    b->prof.record_ns = vk_now_ns() - t_call;
    st = submit(b);
    if (st != BP_OK) b->prof.n = 0;
    return st;
}

/* ---- events: a point in a stream's submissions ---- */

static bp_status ev_synchronize(struct bp_event *ev)
{
    struct vk_event *e = ev->context;
    if (!e->be) return BP_OK;
    pthread_mutex_lock(&e->be->mu);
    bool done = e->be->completed >= e->serial;
    pthread_mutex_unlock(&e->be->mu);
    return done ? BP_OK : wait_pending(e->be);
}

static void ev_free(struct bp_event *ev)
{
    free(ev ? ev->context : NULL);
}

static const struct bp_event_iface vk_event_iface = {
    .size = sizeof(struct bp_event_iface),
    .free = ev_free,
    .synchronize = ev_synchronize,
};

bp_status vk_event_new(struct bp_device *dev, struct bp_event **out)
{
    if (!out) return BP_ERR_INVALID_ARGUMENT;
    struct vk_event *e = calloc(1, sizeof *e);
    if (!e) {
        vk_log(vk_dev_of(dev)->pl, BP_LOG_ERROR, "could not allocate an event; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    e->ev = (struct bp_event){ .iface = &vk_event_iface, .device = dev, .context = e };
    *out = &e->ev;
    return BP_OK;
}

static bp_status be_event_record(struct bp_backend *be, struct bp_event *ev)
{
    if (!ev || ev->iface != &vk_event_iface) return BP_ERR_INVALID_ARGUMENT;
    struct vk_event *e = ev->context;
    struct vk_backend *b = be->context;
    pthread_mutex_lock(&b->mu);
    e->be = b;
    e->serial = b->submitted;
    pthread_mutex_unlock(&b->mu);
    return BP_OK;
}

/* Work queued on be after this call starts after the event's work: the one
 * queue of a device runs submissions in order, and an event of another
 * stream is waited for on the host. */
static bp_status be_event_wait(struct bp_backend *be, struct bp_event *ev)
{
    (void)be;
    if (!ev || ev->iface != &vk_event_iface) return BP_ERR_INVALID_ARGUMENT;
    return ev_synchronize(ev);
}

/* ---- profile ---- */

bp_status vk_backend_set_profile(struct bp_backend *be, struct bp_profile *p)
{
    if (!be || be->iface != &vk_backend_iface) return BP_ERR_INVALID_ARGUMENT;
    struct vk_backend *b = be->context;
    if (p && p->n_ops > 0 && !p->ops) {
        vk_log(b->d->pl, BP_LOG_ERROR, "set_profile: the profile counts %d ops but has no ops "
               "array; pass one or set n_ops to 0.", p->n_ops);
        return BP_ERR_INVALID_ARGUMENT;
    }
    bp_status st = wait_pending(b);
    b->prof.abi = p;
    return st;
}

/* ---- lifetime ---- */

static const char *be_get_name(struct bp_backend *be)
{
    return ((struct vk_backend *)be->context)->d->name;
}

static void be_free(struct bp_backend *be)
{
    if (!be) return;
    struct vk_backend *b = be->context;
    struct vk_dev *d = b->d;
    const struct vk_fns *f = &d->pl->fn;
    wait_pending(b);
    vk_prof_free(d, &b->prof);
    if (b->pbuf) {
        f->vkUnmapMemory(d->device, b->pmem);
        f->vkDestroyBuffer(d->device, b->pbuf, NULL);
        f->vkFreeMemory(d->device, b->pmem, NULL);
    }
    if (b->dpool) f->vkDestroyDescriptorPool(d->device, b->dpool, NULL);
    if (b->fence) f->vkDestroyFence(d->device, b->fence, NULL);
    if (b->pool) f->vkDestroyCommandPool(d->device, b->pool, NULL);
    pthread_mutex_destroy(&b->mu);
    free(b->dsets);
    free(b->reads);
    free(b->writes);
    free(b);
}

static const struct bp_backend_iface vk_backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = be_get_name,
    .free = be_free,
    .set_tensor_async = be_set_async,
    .get_tensor_async = be_get_async,
    .copy_tensor_async = be_copy_async,
    .synchronize = be_synchronize,
    .graph_compute = be_graph_compute,
    .event_record = be_event_record,
    .event_wait = be_event_wait,
};

bp_status vk_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out)
{
    struct vk_dev *d = vk_dev_of(dev);
    const struct vk_fns *f = &d->pl->fn;
    if (!out) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (params && *params)
        vk_log(d->pl, BP_LOG_WARN, "the vulkan backend takes no parameters; '%s' is ignored.", params);
    struct vk_backend *b = calloc(1, sizeof *b);
    if (!b) {
        vk_log(d->pl, BP_LOG_ERROR, "could not allocate a vulkan backend; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    b->d = d;
    pthread_mutex_init(&b->mu, NULL);
    b->be = (struct bp_backend){ .iface = &vk_backend_iface, .device = dev, .context = b };
    vk_prof_init(d, &b->prof);
    b->fusion = vk_fusion_enabled(d->pl);
    VkCommandPoolCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = d->queue_family };
    VkResult r = f->vkCreateCommandPool(d->device, &pci, NULL, &b->pool);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = b->pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1 };
        r = f->vkAllocateCommandBuffers(d->device, &ai, &b->cmd);
    }
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    if (r == VK_SUCCESS) r = f->vkCreateFence(d->device, &fci, NULL, &b->fence);
    if (r != VK_SUCCESS) {
        bp_status st = vk_status(d->pl, r, "creating a vulkan backend");
        be_free(&b->be);
        return st;
    }
    *out = &b->be;
    return BP_OK;
}
