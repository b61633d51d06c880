/* checkplug.c — registry, device and backend for the check test plugins; their
 * memory is the host's buffer type (bp_host_helpers.h). */
#include <stdlib.h>
#include <string.h>

#include "checkplug.h"

static const struct bp_host_services *host_services;

/* ---- backend: computes synchronously on the calling thread ---- */

static const char *be_name(struct bp_backend *b) { (void)b; return checkplug.family; }
static void be_free(struct bp_backend *b) { free(b); }
static bp_status be_sync(struct bp_backend *b) { (void)b; return BP_OK; }

static bp_status be_compute(struct bp_backend *b, struct bp_graph *g)
{
    (void)b;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        if (!checkplug.supports(n)) {
            host_services->log(BP_LOG_ERROR, checkplug.family, "cannot compute %s of tensor '%s'.",
                               bp_op_name((enum bp_op)n->op), n->name);
            return BP_ERR_UNSUPPORTED;
        }
        bp_status s = checkplug.compute(n);
        if (s != BP_OK) return s;
    }
    return BP_OK;
}

static const struct bp_backend_iface backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = be_name,
    .free = be_free,
    .synchronize = be_sync,
    .graph_compute = be_compute,
};

/* ---- device and registry ---- */

static struct bp_registry registry;
static struct bp_device device;
static struct bp_buffer_type buffer_type;

static const char *dev_name(struct bp_device *d) { (void)d; return checkplug.family; }
static const char *dev_desc(struct bp_device *d) { (void)d; return checkplug.description; }
static enum bp_device_type dev_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_ACCEL; }

static void dev_memory(struct bp_device *d, size_t *free_b, size_t *total)
{
    (void)d;
    *free_b = (size_t)1 << 30;
    *total = (size_t)1 << 30;
}

static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    size_t size = caps->size;
    memset(caps, 0, size < sizeof *caps ? size : sizeof *caps);
    caps->size = size;
}

static bp_status dev_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)params;
    struct bp_backend *b = calloc(1, sizeof *b);
    if (!b) return BP_ERR_OUT_OF_MEMORY;
    *b = (struct bp_backend){.iface = &backend_iface, .device = d};
    *out = b;
    return BP_OK;
}

static struct bp_buffer_type *dev_buft(struct bp_device *d) { (void)d; return &buffer_type; }

static bool dev_supports_op(struct bp_device *d, const struct bp_tensor *node)
{
    (void)d;
    return bp_op_is_view((enum bp_op)node->op) || checkplug.supports(node);
}

static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *buft)
{
    (void)d;
    return buft == &buffer_type;
}

static const struct bp_device_iface device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_desc,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_backend,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
};

static const char *reg_name(struct bp_registry *r) { (void)r; return checkplug.family; }
static size_t reg_count(struct bp_registry *r) { (void)r; return 1; }

static struct bp_device *reg_device(struct bp_registry *r, size_t i)
{
    (void)r;
    return i == 0 ? &device : NULL;
}

static const struct bp_registry_iface registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_name,
    .get_device_count = reg_count,
    .get_device = reg_device,
};

bp_status checkplug_init(const struct bp_host_services *host, struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(host, checkplug.family, out);
    if (st != BP_OK) return st;
    host_services = host;
    struct bp_host_helpers h;
    if (!bp_host_helpers_get(host, checkplug.family, &h)) return BP_ERR_ABI;
    registry = (struct bp_registry){.iface = &registry_iface, .abi_version = BP_ABI_VERSION};
    device = (struct bp_device){.iface = &device_iface, .reg = &registry};
    /* Plain host memory: the host's buffer type, not a copy of it. */
    st = h.buffer_type_init(&buffer_type, &device);
    if (st != BP_OK) return st;
    *out = &registry;
    return BP_OK;
}

/* ---- element access ---- */

void *checkplug_at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] +
           (size_t)i3 * t->nb[3];
}

float checkplug_get(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    float v;
    memcpy(&v, checkplug_at(t, i0, i1, i2, i3), sizeof v);
    return v;
}
