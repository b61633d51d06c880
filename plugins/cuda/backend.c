/*
 * backend.c — a CUDA execution stream: async transfers, copies between
 * CUDA devices, events, and graph_compute (checks every node first, then
 * launches each node's kernels on the stream and returns without waiting).
 *
 * GET_ROWS and SET_ROWS read ids on the device; a bad id is recorded in a
 * device flag by the kernel, so a graph holding either op waits for its
 * stream at the end and fails with the sentence the CPU plugin would give.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

static const struct bp_backend_iface cuda_backend_iface;

bool cuda_is_our_backend(const struct bp_backend *b)
{
    return b && b->iface == &cuda_backend_iface;
}

static const char *be_get_name(struct bp_backend *b)
{
    return ((struct cuda_backend *)b->context)->cd->name;
}

static void be_free(struct bp_backend *b)
{
    if (!b)
        return;
    struct cuda_backend *cb = b->context;
    (void)cudaSetDevice(cb->cd->id);
    (void)cudaStreamSynchronize(cb->stream);
    (void)cudaStreamDestroy(cb->stream);
    if (cb->scratch) (void)cudaFree(cb->scratch);
    if (cb->err_flag) (void)cudaFree(cb->err_flag);
    if (cb->err_host) (void)cudaFreeHost(cb->err_host);
    (void)cudaGetLastError();
    free(cb);
}

bp_status cuda_backend_scratch(struct cuda_backend *cb, size_t bytes, void **out)
{
    if (bytes <= cb->scratch_size && cb->scratch) {
        *out = cb->scratch;
        return BP_OK;
    }
    /* Work queued before may still read the old scratch. */
    (void)cudaStreamSynchronize(cb->stream);
    if (cb->scratch) (void)cudaFree(cb->scratch);
    cb->scratch = NULL;
    cb->scratch_size = 0;
    size_t want = bytes + bytes / 4 + 256;
    cudaError_t e = cudaMalloc(&cb->scratch, want);
    if (e != cudaSuccess) {
        cb->scratch = NULL;
        (void)cudaGetLastError();
        cuda_log(cb->cd->pl, BP_LOG_ERROR, "%s could not allocate %zu bytes of scratch: %s; free "
                 "device memory.", cb->cd->name, want, cudaGetErrorString(e));
        return BP_ERR_OUT_OF_MEMORY;
    }
    cb->scratch_size = want;
    *out = cb->scratch;
    return BP_OK;
}

static bp_status check_range(const struct cuda_backend *cb, const struct bp_tensor *t, size_t offset,
                             size_t size, const char *what)
{
    size_t n = bp_nbytes(t);
    if (!t->data || offset > n || size > n - offset) {
        cuda_log(cb->cd->pl, BP_LOG_ERROR,
                 "%s of tensor '%s': bytes [%zu, %zu) are outside its %zu bytes of storage.", what,
                 t->name, offset, offset + size, n);
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

static bp_status be_set_async(struct bp_backend *b, struct bp_tensor *t, const void *src,
                              size_t offset, size_t size)
{
    struct cuda_backend *cb = b->context;
    bp_status st = check_range(cb, t, offset, size, "async set");
    if (st != BP_OK || size == 0)
        return st;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemcpyAsync((char *)t->data + offset, src, size,
                                                  cudaMemcpyDefault, cb->stream),
                      "queueing a copy to the device");
}

static bp_status be_get_async(struct bp_backend *b, const struct bp_tensor *t, void *dst,
                              size_t offset, size_t size)
{
    struct cuda_backend *cb = b->context;
    bp_status st = check_range(cb, t, offset, size, "async get");
    if (st != BP_OK || size == 0)
        return st;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaMemcpyAsync(dst, (const char *)t->data + offset, size,
                                                  cudaMemcpyDefault, cb->stream),
                      "queueing a copy from the device");
}

/* Both ends on CUDA backends: the copy runs on dst's stream after src's
 * queued work, and src's stream waits for the copy before reusing src. */
static bp_status be_copy_async(struct bp_backend *src_b, struct bp_backend *dst_b,
                               const struct bp_tensor *src, struct bp_tensor *dst)
{
    if (!cuda_is_our_backend(src_b) || !cuda_is_our_backend(dst_b))
        return BP_ERR_UNSUPPORTED;
    struct cuda_backend *sb = src_b->context, *db = dst_b->context;
    struct cuda_device *sd = cuda_tensor_device(src), *dd = cuda_tensor_device(dst);
    size_t n = bp_nbytes(dst);
    if (!sd || !dd || !bp_is_contiguous(src) || !bp_is_contiguous(dst) || bp_nbytes(src) != n)
        return BP_ERR_UNSUPPORTED;
    if (n == 0)
        return BP_OK;
    const struct cuda_plugin *pl = db->cd->pl;
    (void)cuda_enable_peer(pl, dd->id, sd->id);
    cudaEvent_t ready, done;
    (void)cudaSetDevice(sb->cd->id);
    bp_status st = cuda_check(pl, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "creating an event");
    if (st != BP_OK)
        return st;
    (void)cudaEventRecord(ready, sb->stream);
    (void)cudaSetDevice(db->cd->id);
    st = cuda_check(pl, cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "creating an event");
    if (st != BP_OK) {
        (void)cudaEventDestroy(ready);
        return st;
    }
    (void)cudaStreamWaitEvent(db->stream, ready, 0);
    st = cuda_check(pl, cudaMemcpyPeerAsync(dst->data, dd->id, src->data, sd->id, n, db->stream),
                    "queueing a copy between CUDA devices");
    (void)cudaEventRecord(done, db->stream);
    (void)cudaSetDevice(sb->cd->id);
    (void)cudaStreamWaitEvent(sb->stream, done, 0);
    (void)cudaEventDestroy(ready); /* destruction is deferred until the event completes */
    (void)cudaEventDestroy(done);
    return st;
}

static bp_status be_synchronize(struct bp_backend *b)
{
    struct cuda_backend *cb = b->context;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaStreamSynchronize(cb->stream), "waiting for the stream");
}

static bp_status check_node_data(const struct cuda_backend *cb, const struct bp_tensor *node)
{
    const char *nn = node->name[0] ? node->name : "(unnamed)";
    if (bp_nelements(node) > 0 && !node->data) {
        cuda_log(cb->cd->pl, BP_LOG_ERROR, "%s node '%s' has no memory; allocate it before computing.",
                 bp_op_name((enum bp_op)node->op), nn);
        return BP_ERR_INVALID_ARGUMENT;
    }
    for (int s = 0; s < BP_MAX_SRC; s++) {
        const struct bp_tensor *src = node->src[s];
        if (!src || bp_nelements(src) == 0)
            continue;
        if (!src->data) {
            cuda_log(cb->cd->pl, BP_LOG_ERROR,
                     "source %d '%s' of %s node '%s' has no memory; allocate it before computing.",
                     s, src->name, bp_op_name((enum bp_op)node->op), nn);
            return BP_ERR_INVALID_ARGUMENT;
        }
        struct cuda_device *sd = cuda_tensor_device(src);
        if (src->buffer && !cuda_tensor_is_host(src) && (!sd || sd->id != cb->cd->id)) {
            cuda_log(cb->cd->pl, BP_LOG_ERROR,
                     "source %d '%s' of %s node '%s' is not in %s memory; copy it there first.",
                     s, src->name, bp_op_name((enum bp_op)node->op), nn, cb->cd->name);
            return BP_ERR_INVALID_ARGUMENT;
        }
    }
    return BP_OK;
}

static bp_status be_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    struct cuda_backend *cb = b->context;
    const struct cuda_plugin *pl = cb->cd->pl;
    if (!g || g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes)) {
        cuda_log(pl, BP_LOG_ERROR, "graph_compute was given no graph or a graph without nodes.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    bool has_ids = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (!node) {
            cuda_log(pl, BP_LOG_ERROR, "graph node %" PRId32 " is NULL; rebuild the graph.", i);
            return BP_ERR_INVALID_ARGUMENT;
        }
        if (!cuda_supports_node(cb->cd, node)) {
            cuda_log(pl, BP_LOG_ERROR, "%s cannot compute %s node '%s' (%s); check supports_op and "
                     "place it on another device.", cb->cd->name, bp_op_name((enum bp_op)node->op),
                     node->name[0] ? node->name : "(unnamed)", bp_type_name((enum bp_type)node->type));
            return BP_ERR_UNSUPPORTED;
        }
        if (bp_op_is_view((enum bp_op)node->op))
            continue;
        bp_status st = check_node_data(cb, node);
        if (st != BP_OK)
            return st;
        has_ids |= node->op == BP_OP_GET_ROWS || node->op == BP_OP_SET_ROWS ||
                   node->op == BP_OP_MUL_MAT_ID;
    }
    (void)cudaSetDevice(cb->cd->id);
    if (has_ids)
        (void)cudaMemsetAsync(cb->err_flag, 0, 3 * sizeof(int), cb->stream);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *node = g->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op) || bp_nelements(node) == 0)
            continue;
        bp_status st = cuda_compute_node(cb, node, i);
        if (st != BP_OK)
            return st;
    }
    if (!has_ids)
        return BP_OK;
    (void)cudaMemcpyAsync(cb->err_host, cb->err_flag, 3 * sizeof(int), cudaMemcpyDeviceToHost, cb->stream);
    bp_status st = cuda_check(pl, cudaStreamSynchronize(cb->stream), "running the graph");
    if (st != BP_OK || cb->err_host[0] == 0)
        return st;
    const struct bp_tensor *node = g->nodes[cb->err_host[0] - 1];
    const bool get = node->op == BP_OP_GET_ROWS, mmid = node->op == BP_OP_MUL_MAT_ID;
    const struct bp_tensor *ids = get ? node->src[1] : node->src[2];
    cuda_log(pl, BP_LOG_ERROR, "%s '%s': id %d at position %d of ids '%s' is outside [0, %" PRId64
             ") of %s '%s'; fix the ids.", bp_op_name((enum bp_op)node->op),
             node->name[0] ? node->name : "(unnamed)", cb->err_host[1], cb->err_host[2], ids->name,
             mmid ? node->src[0]->ne[2] : node->src[0]->ne[1],
             get ? "table" : mmid ? "experts" : "destination", node->src[0]->name);
    return BP_ERR_INVALID_ARGUMENT;
}

static bp_status be_event_record(struct bp_backend *b, struct bp_event *ev)
{
    struct cuda_backend *cb = b->context;
    struct cuda_event *ce = ev ? ev->context : NULL;
    if (!ce || ce->device_id != cb->cd->id)
        return BP_ERR_INVALID_ARGUMENT;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaEventRecord(ce->event, cb->stream), "recording an event");
}

static bp_status be_event_wait(struct bp_backend *b, struct bp_event *ev)
{
    struct cuda_backend *cb = b->context;
    struct cuda_event *ce = ev ? ev->context : NULL;
    if (!ce)
        return BP_ERR_INVALID_ARGUMENT;
    (void)cudaSetDevice(cb->cd->id);
    return cuda_check(cb->cd->pl, cudaStreamWaitEvent(cb->stream, ce->event, 0), "waiting for an event");
}

static const struct bp_backend_iface cuda_backend_iface = {
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

bp_status cuda_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out)
{
    if (!out)
        return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    struct cuda_device *cd = cuda_device_of(dev);
    if (params && *params)
        cuda_log(cd->pl, BP_LOG_WARN, "backend parameters '%s' are not used by %s; ignoring them.",
                 params, cd->name);
    struct cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        cuda_log(cd->pl, BP_LOG_ERROR, "could not allocate a backend record; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    cb->cd = cd;
    (void)cudaSetDevice(cd->id);
    bp_status st = cuda_check(cd->pl, cudaStreamCreate(&cb->stream), "creating a stream");
    if (st == BP_OK)
        st = cuda_check(cd->pl, cudaMalloc((void **)&cb->err_flag, 3 * sizeof(int)), "allocating the id flag");
    if (st == BP_OK)
        st = cuda_check(cd->pl, cudaMallocHost((void **)&cb->err_host, 3 * sizeof(int)), "allocating the id flag");
    cb->be = (struct bp_backend){ .iface = &cuda_backend_iface, .device = dev, .context = cb };
    if (st != BP_OK) {
        be_free(&cb->be);
        return st;
    }
    *out = &cb->be;
    return BP_OK;
}

/* ---- events ---- */

static void ev_free(struct bp_event *ev)
{
    if (!ev)
        return;
    struct cuda_event *ce = ev->context;
    (void)cudaSetDevice(ce->device_id);
    (void)cudaEventDestroy(ce->event);
    free(ce);
}

static bp_status ev_synchronize(struct bp_event *ev)
{
    struct cuda_event *ce = ev->context;
    return cuda_check(cuda_device_of(ev->device)->pl, cudaEventSynchronize(ce->event),
                      "waiting for an event");
}

static const struct bp_event_iface cuda_event_iface = {
    .size = sizeof(struct bp_event_iface),
    .free = ev_free,
    .synchronize = ev_synchronize,
};

bp_status cuda_event_new(struct bp_device *dev, struct bp_event **out)
{
    if (!out)
        return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    struct cuda_device *cd = cuda_device_of(dev);
    struct cuda_event *ce = calloc(1, sizeof *ce);
    if (!ce)
        return BP_ERR_OUT_OF_MEMORY;
    (void)cudaSetDevice(cd->id);
    bp_status st = cuda_check(cd->pl, cudaEventCreateWithFlags(&ce->event, cudaEventDisableTiming),
                              "creating an event");
    if (st != BP_OK) {
        free(ce);
        return st;
    }
    ce->device_id = cd->id;
    ce->ev = (struct bp_event){ .iface = &cuda_event_iface, .device = dev, .context = ce };
    *out = &ce->ev;
    return BP_OK;
}
