/*
 * example_plugin.c — a complete backplane backend in one file.
 *
 * Family "example", one device "example0" that computes three ops on the
 * host CPU for F32 tensors of any strides: ADD and MUL (with the ABI's
 * broadcast: b repeats over a) and MUL_MAT (W broadcast over x's batch
 * dims). Every other op is declined in supports_op, so
 * `backplane check --device example0` lists it as unsupported, not failed.
 *
 * The host writes the rest (ABI 1.1, bp_host_helpers.h): the device's buffer
 * type is the host's ready host-memory one, and kernels read and write
 * elements through the host's strided accessor. Both come by name through
 * host->get_proc_address, so the plugin never links libbackplane.
 *
 * Build against the installed SDK only:
 *   cmake:      find_package(backplane CONFIG REQUIRED) + backplane_add_plugin
 *   pkg-config: cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags backplane-plugin)
 * Try it:
 *   BACKPLANE_PLUGIN_PATH=$PWD/libbackplane-example.so backplane devices
 *   BACKPLANE_PLUGIN_PATH=$PWD/libbackplane-example.so backplane check --device example0
 *
 * The registry, device and buffer type are static: they live as long as the
 * plugin (plugins stay resident), so there is nothing to shut down.
 */
#include <stdlib.h>

#include <backplane/bp_abi.h>

static const struct bp_host_services *host;
static struct bp_host_helpers H; /* the host's buffer type and element accessor */
static struct bp_buffer_type example_buft;
static struct bp_registry example_registry;

/* ------------------------------------------------------------- kernels */

/* dst[n, m, i2, i3] = sum_k W[k, n, i2 / r2, i3 / r3] * X[k, m, i2, i3], where
 * r = X's batch dims over W's (bp_ops.h: W is broadcast). */
static float mul_mat_element(const struct bp_tensor *w, const struct bp_tensor *x, int64_t n,
                             int64_t m, int64_t i2, int64_t i3)
{
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    double sum = 0.0;
    for (int64_t k = 0; k < x->ne[0]; k++)
        sum += (double)H.get(w, k, n, i2 / r2, i3 / r3) * H.get(x, k, m, i2, i3);
    return (float)sum;
}

/* Element (i0..i3) of dst's result. The accessor takes indices modulo each
 * dimension, which is exactly the broadcast of ADD and MUL (b repeats over a). */
static float node_element(const struct bp_tensor *dst, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const struct bp_tensor *a = dst->src[0], *b = dst->src[1];
    switch (dst->op) {
    case BP_OP_ADD: return H.get(a, i0, i1, i2, i3) + H.get(b, i0, i1, i2, i3);
    case BP_OP_MUL: return H.get(a, i0, i1, i2, i3) * H.get(b, i0, i1, i2, i3);
    default: return mul_mat_element(a, b, i0, i1, i2, i3); /* supports_op admits only MUL_MAT */
    }
}

static void compute_node(struct bp_tensor *dst)
{
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++)
                    H.set(dst, i0, i1, i2, i3, node_element(dst, i0, i1, i2, i3));
}

/* Exactly what compute_node implements. bp_op_shapes_ok (bp_op_shapes.h)
 * answers whether the node is well formed for its op; the rest is this
 * device's own limit: F32 everywhere. */
static bool example_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    (void)dev;
    if (!bp_op_shapes_ok(node)) return false;
    if (bp_op_is_view((enum bp_op)node->op)) return true;
    return (node->op == BP_OP_ADD || node->op == BP_OP_MUL || node->op == BP_OP_MUL_MAT) &&
           node->type == BP_TYPE_F32 && node->src[0]->type == BP_TYPE_F32 && node->src[1]->type == BP_TYPE_F32;
}

/* -------------------------------------------------------------- backend */

static const char *backend_name(struct bp_backend *b) { (void)b; return "example0"; }
static void backend_free(struct bp_backend *b) { free(b); }
static bp_status backend_synchronize(struct bp_backend *b) { (void)b; return BP_OK; }

static bp_status backend_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *node = g->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op)) continue;
        if (!example_supports_op(b->device, node)) {
            host->log(BP_LOG_ERROR, "example", "cannot compute %s for tensor '%s': only F32 ADD, "
                      "MUL and MUL_MAT are supported.", bp_op_name((enum bp_op)node->op), node->name);
            return BP_ERR_UNSUPPORTED;
        }
        compute_node(node);
    }
    return BP_OK;
}

static const struct bp_backend_iface backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = backend_name,
    .free = backend_free,
    .synchronize = backend_synchronize, /* graph_compute is synchronous */
    .graph_compute = backend_graph_compute,
};

/* --------------------------------------------------------------- device */

static const char *dev_name(struct bp_device *d) { (void)d; return "example0"; }
static const char *dev_description(struct bp_device *d) { (void)d; return "Example: F32 ADD, MUL, MUL_MAT on the host CPU"; }
static enum bp_device_type dev_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_CPU; }
static struct bp_buffer_type *dev_buffer_type(struct bp_device *d) { (void)d; return &example_buft; }

/* Host memory this example does not track: it reports none. */
static void dev_memory(struct bp_device *d, size_t *free_b, size_t *total) { (void)d; *free_b = *total = 0; }

/* No optional capability. Write only the fields the caller's struct has. */
static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    if (BP_IFACE_HAS(caps, async)) caps->async = false;
    if (BP_IFACE_HAS(caps, host_buffer)) caps->host_buffer = false;
    if (BP_IFACE_HAS(caps, events)) caps->events = false;
    if (BP_IFACE_HAS(caps, buffer_from_host_ptr)) caps->buffer_from_host_ptr = false;
}

static bp_status dev_init_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)params;
    *out = calloc(1, sizeof **out);
    if (*out) **out = (struct bp_backend){.iface = &backend_iface, .device = d};
    return *out ? BP_OK : BP_ERR_OUT_OF_MEMORY;
}

/* Its own buffers (the host stages tensors from elsewhere). Any is_host
 * buffer type would do as well: the kernels read plain host memory. */
static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *buft) { (void)d; return buft == &example_buft; }

static const struct bp_device_iface device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_description,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_init_backend,
    .get_buffer_type = dev_buffer_type,
    .supports_op = example_supports_op,
    .supports_buft = dev_supports_buft,
};

static struct bp_device example_device = {.iface = &device_iface, .reg = &example_registry};

/* ------------------------------------------------------------- registry */

/* The family name must match the file name: libbackplane-example.so. */
static const char *reg_name(struct bp_registry *r) { (void)r; return "example"; }
static size_t reg_device_count(struct bp_registry *r) { (void)r; return 1; }
static struct bp_device *reg_device(struct bp_registry *r, size_t i) { (void)r; return i == 0 ? &example_device : NULL; }

static const struct bp_registry_iface registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_name,
    .get_device_count = reg_device_count,
    .get_device = reg_device,
    /* get_proc_address and shutdown are optional: no features, nothing to free. */
};

static struct bp_registry example_registry = {.iface = &registry_iface, .abi_version = BP_ABI_VERSION};

/* ---------------------------------------------------------------- entry */

static bp_status example_init(const struct bp_host_services *services, struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(services, "example", out);
    if (st == BP_OK && !bp_host_helpers_get(services, "example", &H)) st = BP_ERR_ABI;
    if (st == BP_OK) st = H.buffer_type_init(&example_buft, &example_device);
    if (st != BP_OK) return st;
    host = services;
    *out = &example_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(example_init)
