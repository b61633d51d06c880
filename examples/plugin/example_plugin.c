/*
 * example_plugin.c — a complete backplane backend in one file.
 *
 * Family "example", one device "example0" that computes four ops on the host
 * CPU: ADD, MUL (with the ABI's broadcast: b repeats over a), SCALE and SILU,
 * for contiguous F32 tensors. Every other op is declined in supports_op, so
 * `backplane check --device example0` lists it as unsupported, not failed.
 *
 * Build against the installed SDK only:
 *   cmake:      find_package(backplane CONFIG REQUIRED) + backplane_add_plugin
 *   pkg-config: cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags backplane-plugin)
 * Try it:
 *   BACKPLANE_PLUGIN_PATH=$PWD/libbackplane-example.so backplane devices
 *   BACKPLANE_PLUGIN_PATH=$PWD/libbackplane-example.so backplane check --device example0
 *
 * Everything below is static: the registry, device and buffer type live as
 * long as the plugin (plugins stay resident), so there is nothing to shut down.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_abi.h>

#define EXAMPLE_ALIGNMENT 64

static const struct bp_host_services *host;

/* Every refusal says why, through the host's log. */
#define EXAMPLE_LOG(level, ...)                                       \
    do {                                                              \
        if (BP_IFACE_HAS(host, log) && host->log)                     \
            host->log((level), "example", __VA_ARGS__);               \
    } while (0)

/* ------------------------------------------------------------- buffer */

static void example_buffer_free(struct bp_buffer *buf)
{
    free(buf->context);
    free(buf);
}

static void *example_buffer_get_base(struct bp_buffer *buf)
{
    return buf->context;
}

static bp_status example_buffer_set_tensor(struct bp_buffer *buf, struct bp_tensor *t,
                                           const void *src, size_t offset, size_t size)
{
    (void)buf;
    memcpy((char *)t->data + offset, src, size);
    return BP_OK;
}

static bp_status example_buffer_get_tensor(struct bp_buffer *buf, const struct bp_tensor *t,
                                           void *dst, size_t offset, size_t size)
{
    (void)buf;
    memcpy(dst, (const char *)t->data + offset, size);
    return BP_OK;
}

static bp_status example_buffer_clear(struct bp_buffer *buf, uint8_t value)
{
    memset(buf->context, value, buf->size);
    return BP_OK;
}

static const struct bp_buffer_iface example_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = example_buffer_free,
    .get_base = example_buffer_get_base,
    .set_tensor = example_buffer_set_tensor,
    .get_tensor = example_buffer_get_tensor,
    .clear = example_buffer_clear,
    /* init_tensor and copy_tensor are optional: the host stages copies through RAM. */
};

/* --------------------------------------------------------- buffer type */

static const char *example_buft_get_name(struct bp_buffer_type *buft)
{
    (void)buft;
    return "example-host";
}

static bp_status example_buft_alloc_buffer(struct bp_buffer_type *buft, size_t size,
                                           struct bp_buffer **out)
{
    *out = NULL;
    /* aligned_alloc wants a non-zero multiple of the alignment. */
    size_t padded = (size + EXAMPLE_ALIGNMENT - 1) / EXAMPLE_ALIGNMENT * EXAMPLE_ALIGNMENT;
    if (padded == 0) padded = EXAMPLE_ALIGNMENT;
    if (padded < size) {
        EXAMPLE_LOG(BP_LOG_ERROR, "a buffer of %zu bytes is too large to allocate.", size);
        return BP_ERR_OUT_OF_MEMORY;
    }
    struct bp_buffer *buf = calloc(1, sizeof *buf);
    void *mem = aligned_alloc(EXAMPLE_ALIGNMENT, padded);
    if (!buf || !mem) {
        free(buf);
        free(mem);
        EXAMPLE_LOG(BP_LOG_ERROR, "out of host memory allocating a %zu-byte buffer.", size);
        return BP_ERR_OUT_OF_MEMORY;
    }
    *buf = (struct bp_buffer){
        .iface = &example_buffer_iface,
        .buft = buft,
        .context = mem,
        .size = size,
    };
    *out = buf;
    return BP_OK;
}

static size_t example_buft_get_alignment(struct bp_buffer_type *buft)
{
    (void)buft;
    return EXAMPLE_ALIGNMENT;
}

static bool example_buft_is_host(struct bp_buffer_type *buft)
{
    (void)buft;
    return true;
}

static const struct bp_buffer_type_iface example_buft_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = example_buft_get_name,
    .alloc_buffer = example_buft_alloc_buffer,
    .get_alignment = example_buft_get_alignment,
    .is_host = example_buft_is_host,
};

static struct bp_device example_device;

static struct bp_buffer_type example_buft = {
    .iface = &example_buft_iface,
    .device = &example_device,
};

/* ------------------------------------------------------------- kernels */

/* Pointer to element (i0, i1, i2, i3) of an F32 tensor. */
static float *at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                     i3 * t->nb[3]);
}

static void compute_node(struct bp_tensor *dst)
{
    const struct bp_tensor *a = dst->src[0];
    const struct bp_tensor *b = dst->src[1];
    float scale = 0.0f, bias = 0.0f;
    if (dst->op == BP_OP_SCALE) {
        scale = bp_op_param_f32(dst, 0);
        bias = bp_op_param_f32(dst, 1);
    }
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    float x = *at(a, i0, i1, i2, i3);
                    float *y = at(dst, i0, i1, i2, i3);
                    switch (dst->op) {
                    case BP_OP_ADD:
                        *y = x + *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                        break;
                    case BP_OP_MUL:
                        *y = x * *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                        break;
                    case BP_OP_SCALE:
                        *y = x * scale + bias;
                        break;
                    default: /* BP_OP_SILU: supports_op admits nothing else */
                        *y = x / (1.0f + expf(-x));
                        break;
                    }
                }
}

/* -------------------------------------------------------------- backend */

static const char *example_backend_get_name(struct bp_backend *b)
{
    (void)b;
    return "example0";
}

static void example_backend_free(struct bp_backend *b)
{
    free(b);
}

static bp_status example_backend_synchronize(struct bp_backend *b)
{
    (void)b;
    return BP_OK; /* graph_compute is synchronous */
}

static bool example_supports_op(struct bp_device *dev, const struct bp_tensor *node);

static bp_status example_backend_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *node = g->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op)) continue;
        if (!example_supports_op(b->device, node)) {
            EXAMPLE_LOG(BP_LOG_ERROR, "cannot compute %s for tensor '%s': only contiguous F32 "
                        "ADD, MUL, SCALE and SILU are supported.",
                        bp_op_name((enum bp_op)node->op), node->name);
            return BP_ERR_UNSUPPORTED;
        }
        compute_node(node);
    }
    return BP_OK;
}

static const struct bp_backend_iface example_backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = example_backend_get_name,
    .free = example_backend_free,
    .synchronize = example_backend_synchronize,
    .graph_compute = example_backend_graph_compute,
};

/* --------------------------------------------------------------- device */

static const char *example_device_get_name(struct bp_device *dev)
{
    (void)dev;
    return "example0";
}

static const char *example_device_get_description(struct bp_device *dev)
{
    (void)dev;
    return "Example plugin: F32 ADD, MUL, SCALE, SILU on the host CPU";
}

static enum bp_device_type example_device_get_type(struct bp_device *dev)
{
    (void)dev;
    return BP_DEVICE_TYPE_CPU;
}

static void example_device_get_memory(struct bp_device *dev, size_t *free_bytes, size_t *total)
{
    (void)dev;
    /* Host memory; this example does not track it, so it reports none. */
    *free_bytes = 0;
    *total = 0;
}

static void example_device_get_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    (void)dev;
    /* Write only the fields the caller's struct has (it may be older than ours). */
    if (BP_IFACE_HAS(caps, async)) caps->async = false;
    if (BP_IFACE_HAS(caps, host_buffer)) caps->host_buffer = false;
    if (BP_IFACE_HAS(caps, events)) caps->events = false;
    if (BP_IFACE_HAS(caps, buffer_from_host_ptr)) caps->buffer_from_host_ptr = false;
}

static bp_status example_device_init_backend(struct bp_device *dev, const char *params,
                                             struct bp_backend **out)
{
    (void)params;
    *out = NULL;
    struct bp_backend *b = calloc(1, sizeof *b);
    if (!b) {
        EXAMPLE_LOG(BP_LOG_ERROR, "out of host memory creating a backend.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    *b = (struct bp_backend){
        .iface = &example_backend_iface,
        .device = dev,
    };
    *out = b;
    return BP_OK;
}

static struct bp_buffer_type *example_device_get_buffer_type(struct bp_device *dev)
{
    (void)dev;
    return &example_buft;
}

static bool is_f32_contiguous(const struct bp_tensor *t)
{
    return t != NULL && t->type == BP_TYPE_F32 && bp_is_contiguous(t);
}

/* Exactly what compute_node implements; the host never sends anything else.
 * bp_op_shapes_ok (bp_op_shapes.h) answers whether the node is well formed
 * for its op; what is left is this device's own limits. */
static bool example_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    (void)dev;
    if (!bp_op_shapes_ok(node)) return false;
    if (bp_op_is_view((enum bp_op)node->op)) return true;
    if (!is_f32_contiguous(node) || !is_f32_contiguous(node->src[0])) return false;

    switch (node->op) {
    case BP_OP_ADD:
    case BP_OP_MUL:
        return is_f32_contiguous(node->src[1]);
    case BP_OP_SCALE:
    case BP_OP_SILU:
        return true;
    default:
        return false;
    }
}

static bool example_device_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    (void)dev;
    /* Any host-memory buffer is readable by these kernels. */
    return buft == &example_buft ||
           (buft && BP_IFACE_HAS(buft->iface, is_host) && buft->iface->is_host &&
            buft->iface->is_host(buft));
}

static const struct bp_device_iface example_device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = example_device_get_name,
    .get_description = example_device_get_description,
    .get_type = example_device_get_type,
    .get_memory = example_device_get_memory,
    .get_caps = example_device_get_caps,
    .init_backend = example_device_init_backend,
    .get_buffer_type = example_device_get_buffer_type,
    .supports_op = example_supports_op,
    .supports_buft = example_device_supports_buft,
};

/* ------------------------------------------------------------- registry */

static const char *example_reg_get_name(struct bp_registry *reg)
{
    (void)reg;
    return "example"; /* must match the file name: libbackplane-example.so */
}

static size_t example_reg_get_device_count(struct bp_registry *reg)
{
    (void)reg;
    return 1;
}

static struct bp_device *example_reg_get_device(struct bp_registry *reg, size_t index)
{
    (void)reg;
    return index == 0 ? &example_device : NULL;
}

static void *example_reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    (void)name;
    return NULL; /* no optional features */
}

static const struct bp_registry_iface example_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = example_reg_get_name,
    .get_device_count = example_reg_get_device_count,
    .get_device = example_reg_get_device,
    .get_proc_address = example_reg_get_proc_address,
};

static struct bp_registry example_registry = {
    .iface = &example_registry_iface,
    .abi_version = BP_ABI_VERSION,
};

static struct bp_device example_device = {
    .iface = &example_device_iface,
    .reg = &example_registry,
};

/* ---------------------------------------------------------------- entry */

static bp_status example_init(const struct bp_host_services *services, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(services, "example", out);
    if (st != BP_OK)
        return st;
    host = services;
    *out = &example_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(example_init)
