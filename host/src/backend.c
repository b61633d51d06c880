/* backend.c — backends (execution streams): creation, graph compute with
 * the host's checks in front of the plugin, synchronize, thread count. */
#include <stdio.h>

#include "tensor_internal.h"

static const char *dev_name(struct bp_device *dev)
{
    const char *n = bp_device_name(dev);
    return *n ? n : "(unnamed device)";
}

/* A backend handed back by bp_backend_init: its table was checked there. */
static bool backend_ok(const struct bp_backend *b)
{
    return b && b->iface && b->device;
}

bp_status bp_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out)
{
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_init: out is NULL; pass the address of a backend pointer.");
    *out = NULL;
    bp_status (*init)(struct bp_device *, const char *, struct bp_backend **) =
        dev ? BP_IFACE_GET(dev->iface, init_backend) : NULL;
    if (!init)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_init: the device is NULL or cannot make backends; "
                        "get one from bp_device_by_name or bp_device_get.");
    struct bp_backend *b = NULL;
    bp_status st = init(dev, params, &b);
    if (st != BP_OK || !b) {
        if (st == BP_OK) st = BP_ERR_PLUGIN;
        return bp__fail(st, "device %s could not start a backend (%s)%s%s; see the log for the plugin's reason.",
                        dev_name(dev), bp_status_name(st), params ? " with params " : "", params ? params : "");
    }
    /* Made at run time, so checked here, once: later calls trust it. */
    struct bp_iface_problem p = bp_backend_iface_check(b->iface);
    if (p.field) {
        /* Give it back only when the table reaches free; otherwise it leaks. */
        void (*free_fn)(struct bp_backend *) = b->iface && b->iface->size <= BP_IFACE_MAX_SIZE
                                                   ? BP_IFACE_GET(b->iface, free) : NULL;
        if (free_fn) free_fn(b);
        return bp__refuse_made("device", dev_name(dev), bp__device_family(dev), "backend", p);
    }
    if (!b->device) b->device = dev;
    *out = b;
    return BP_OK;
}

void bp_backend_free(struct bp_backend *b)
{
    void (*free_fn)(struct bp_backend *) = b ? BP_IFACE_GET(b->iface, free) : NULL;
    if (free_fn) free_fn(b);
}

bp_status bp_backend_synchronize(struct bp_backend *b)
{
    if (!backend_ok(b)) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_synchronize: the backend is NULL.");
    bp_status (*sync)(struct bp_backend *) = BP_IFACE_GET(b->iface, synchronize);
    if (!sync) return BP_OK; /* nothing is queued */
    bp_status st = sync(b);
    if (st != BP_OK)
        return bp__fail(st, "%s: synchronize failed (%s); see the log for the plugin's reason.",
                        dev_name(b->device), bp_status_name(st));
    return BP_OK;
}

bp_status bp_backend_set_n_threads(struct bp_backend *b, int n_threads)
{
    if (!backend_ok(b)) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_set_n_threads: the backend is NULL.");
    if (n_threads < 1)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_set_n_threads: %d threads asked for; pass 1 or more.",
                        n_threads);
    bp_set_n_threads_fn fn = (bp_set_n_threads_fn)bp_device_proc_address(b->device, BP_PROC_SET_N_THREADS);
    if (!fn)
        return bp__fail(BP_ERR_UNSUPPORTED, "%s does not let the thread count be set (no %s).",
                        dev_name(b->device), BP_PROC_SET_N_THREADS);
    bp_status st = fn(b, n_threads);
    if (st != BP_OK)
        return bp__fail(st, "%s refused %d threads (%s).", dev_name(b->device), n_threads, bp_status_name(st));
    return BP_OK;
}

/* Can this device's backends read memory of this buffer's type? */
static bp_status check_buffer(struct bp_device *dev, const struct bp_tensor *t)
{
    struct bp_buffer_type *buft = t->buffer->buft;
    if (!buft || bp__device_supports_buft(dev, buft)) return BP_OK;
    char d[BP_MAX_NAME + 96];
    return bp__fail(BP_ERR_UNSUPPORTED, "%s cannot read tensor %s in a buffer of type %s; allocate it in "
                    "this device's buffer type (bp_device_buffer_type).",
                    dev_name(dev), bp__tensor_describe(t, d, sizeof d), bp__buft_name(buft));
}

static bp_status check_tensor(struct bp_device *dev, struct bp_tensor *t, const struct bp_tensor *user)
{
    char d[BP_MAX_NAME + 96], u[BP_MAX_NAME + 8];
    bp_status st = bp__view_resolve(t);
    if (st != BP_OK) return st;
    if (!bp__tensor_allocated(t)) {
        if (t == user)
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "cannot compute: tensor %s (%s) has no memory; allocate "
                            "its context with bp_context_alloc_tensors first.",
                            bp__tensor_describe(t, d, sizeof d), bp_op_name((enum bp_op)t->op));
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "cannot compute %s %s: its input %s has no memory; allocate "
                        "its context with bp_context_alloc_tensors first.",
                        bp_op_name((enum bp_op)user->op), bp__tensor_label(user, u, sizeof u),
                        bp__tensor_describe(t, d, sizeof d));
    }
    return check_buffer(dev, t);
}

bp_status bp_backend_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    if (!backend_ok(b)) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_graph_compute: the backend is NULL.");
    if (!g || (g->n_nodes > 0 && !g->nodes) || g->n_nodes < 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_graph_compute: the graph is NULL or malformed; "
                        "make it with bp_graph_new and bp_graph_build.");
    struct bp_device *dev = b->device;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *node = g->nodes[i];
        if (!node)
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_backend_graph_compute: node %d of the graph is NULL.", (int)i);
        bp_status st = check_tensor(dev, node, node);
        for (int s = 0; s < BP_MAX_SRC && st == BP_OK; s++)
            if (node->src[s]) st = check_tensor(dev, node->src[s], node);
        if (st != BP_OK) return st;
        /* Views run no kernel: no device needs to claim them. */
        if (bp_op_is_view((enum bp_op)node->op)) continue;
        if (!bp_device_supports_op(dev, node)) {
            char l[BP_MAX_NAME + 8];
            return bp__fail(BP_ERR_UNSUPPORTED, "%s cannot compute %s %s (%s): the device declines it; run it on "
                            "another device (`backplane info %s` lists what it supports).",
                            dev_name(dev), bp_op_name((enum bp_op)node->op), bp__tensor_label(node, l, sizeof l),
                            bp_type_name((enum bp_type)node->type), dev_name(dev));
        }
    }
    bp_status st = b->iface->graph_compute(b, g);
    if (st != BP_OK)
        return bp__fail(st, "%s failed to compute the graph (%s); see the log above for the node and the reason.",
                        dev_name(dev), bp_status_name(st));
    return BP_OK;
}
