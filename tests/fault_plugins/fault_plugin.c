/*
 * fault_plugin.c — one source for every fault-injection plugin of the loader
 * tests; compile definitions pick the fault:
 *   FAULT_FAMILY "name"   registry name (the file name decides the family)
 *   FAULT_DEVICE "name"   the one device's name
 *   FAULT_DEVICE_TYPE     enum bp_device_type (default CPU)
 *   FAULT_ABI_MAJOR n     report ABI n.0 instead of the host's
 *   FAULT_NO_INIT         export no bp_plugin_init
 *   FAULT_INIT_FAIL       init logs a message and returns BP_ERR_DEVICE_LOST
 *   FAULT_CRASH           init dereferences NULL
 *   FAULT_HANG            init sleeps for a minute
 *   FAULT_SCORE n         export bp_plugin_score returning n
 *   FAULT_NEEDS_HELPER    call into libbp_fault_helper.so (shipped elsewhere)
 *   FAULT_META            export bp_meta_device_from_spec like the meta plugin
 *   FAULT_UUID_BYTE n     report an identity: a UUID of 16 bytes n, plus
 *   FAULT_PCI "bus id"    its PCI address and
 *   FAULT_SOFTWARE        the software-implementation flag
 * Without a fault it is a small, well-formed plugin: one device with a
 * host-memory buffer type.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/bp_abi.h>

#ifndef FAULT_DEVICE_TYPE
#define FAULT_DEVICE_TYPE BP_DEVICE_TYPE_CPU
#endif
#ifndef FAULT_DESCRIPTION
#define FAULT_DESCRIPTION "fault-injection test plugin"
#endif

#ifdef FAULT_NEEDS_HELPER
int bp_fault_helper(void);
#endif

static const struct bp_host_services *host;
static int init_count;
static char last_spec[256];

/* ---- buffer: plain host memory ---- */

static void buf_free(struct bp_buffer *b)
{
    free(b->context);
    free(b);
}

static void *buf_base(struct bp_buffer *b)
{
    return b->context;
}

static bp_status buf_set(struct bp_buffer *b, struct bp_tensor *t, const void *src, size_t off,
                         size_t size)
{
    (void)b;
    memcpy((char *)t->data + off, src, size);
    return BP_OK;
}

static bp_status buf_get(struct bp_buffer *b, const struct bp_tensor *t, void *dst, size_t off,
                         size_t size)
{
    (void)b;
    memcpy(dst, (const char *)t->data + off, size);
    return BP_OK;
}

static bp_status buf_clear(struct bp_buffer *b, uint8_t v)
{
    memset(b->context, v, b->size);
    return BP_OK;
}

static const struct bp_buffer_iface buf_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_base,
    .set_tensor = buf_set,
    .get_tensor = buf_get,
    .clear = buf_clear,
};

static const char *buft_name(struct bp_buffer_type *bt)
{
    (void)bt;
    return FAULT_DEVICE "_host";
}

static bp_status buft_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
    struct bp_buffer *b = calloc(1, sizeof *b);
    void *mem = calloc(1, size ? size : 1);
    if (!b || !mem) {
        free(b);
        free(mem);
        return BP_ERR_OUT_OF_MEMORY;
    }
    *b = (struct bp_buffer){.iface = &buf_iface, .buft = bt, .context = mem, .size = size};
    *out = b;
    return BP_OK;
}

static size_t buft_alignment(struct bp_buffer_type *bt)
{
    (void)bt;
    return 32;
}

static bool buft_is_host(struct bp_buffer_type *bt)
{
    (void)bt;
    return true;
}

static const struct bp_buffer_type_iface buft_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_alignment,
    .is_host = buft_is_host,
};

/* ---- device ---- */

static struct bp_device device;
static struct bp_buffer_type buft = {.iface = &buft_iface, .device = &device};

static const char *dev_name(struct bp_device *d)
{
    (void)d;
    return FAULT_DEVICE;
}

static const char *dev_description(struct bp_device *d)
{
    (void)d;
    return FAULT_DESCRIPTION;
}

static enum bp_device_type dev_type(struct bp_device *d)
{
    (void)d;
    return FAULT_DEVICE_TYPE;
}

static void dev_memory(struct bp_device *d, size_t *free_b, size_t *total)
{
    (void)d;
    *free_b = 1000;
    *total = 2000;
}

static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    caps->host_buffer = true;
}

static bp_status dev_init_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)d;
    (void)params;
    (void)out;
    return BP_ERR_UNSUPPORTED;
}

static struct bp_buffer_type *dev_buft(struct bp_device *d)
{
    (void)d;
    return &buft;
}

/* Supports ADD only, so tests can tell supports_op is forwarded. */
static bool dev_supports_op(struct bp_device *d, const struct bp_tensor *node)
{
    (void)d;
    return node->op == BP_OP_ADD;
}

static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *bt)
{
    (void)d;
    return bt == &buft;
}

static const struct bp_device_iface dev_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_description,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_init_backend,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
};

/* ---- registry ---- */

static const char *reg_name(struct bp_registry *r)
{
    (void)r;
    return FAULT_FAMILY;
}

static size_t reg_count(struct bp_registry *r)
{
    (void)r;
    return 1;
}

static struct bp_device *reg_get(struct bp_registry *r, size_t i)
{
    (void)r;
    return i == 0 ? &device : NULL;
}

static int fault_init_count(void)
{
    return init_count;
}

static const char *fault_last_spec(void)
{
    return last_spec;
}

static const struct bp_host_services *fault_host_services(void)
{
    return host;
}

#ifdef FAULT_META
static bp_status meta_from_spec(const char *spec, struct bp_device **out)
{
    strncpy(last_spec, spec, sizeof last_spec - 1);
    if (strncmp(spec, "meta:", 5) != 0) return BP_ERR_INVALID_ARGUMENT;
    *out = &device;
    return BP_OK;
}
#endif

#ifdef FAULT_UUID_BYTE
#ifndef FAULT_PCI
#define FAULT_PCI ""
#endif
static bp_status fault_identity(struct bp_device *d, struct bp_device_identity *out)
{
    if (d != &device || !out) return BP_ERR_INVALID_ARGUMENT;
    out->has_uuid = true;
    memset(out->uuid, FAULT_UUID_BYTE, sizeof out->uuid);
    strncpy(out->pci_bus_id, FAULT_PCI, sizeof out->pci_bus_id - 1);
#ifdef FAULT_SOFTWARE
    out->software = true;
#endif
    out->cpu_package = out->numa_node = -1;
    return BP_OK;
}
#endif

static void *reg_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    if (!strcmp(name, "bp_fault_init_count")) return (void *)fault_init_count;
    if (!strcmp(name, "bp_fault_last_spec")) return (void *)fault_last_spec;
    if (!strcmp(name, "bp_fault_host_services")) return (void *)fault_host_services;
#ifdef FAULT_META
    if (!strcmp(name, "bp_meta_device_from_spec")) return (void *)meta_from_spec;
#endif
#ifdef FAULT_UUID_BYTE
    if (!strcmp(name, BP_PROC_DEVICE_IDENTITY)) return (void *)fault_identity;
#endif
    return NULL;
}

static void reg_shutdown(struct bp_registry *r)
{
    (void)r;
    init_count = 0;
}

static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_name,
    .get_device_count = reg_count,
    .get_device = reg_get,
    .get_proc_address = reg_proc,
    .shutdown = reg_shutdown,
};

static struct bp_registry registry = {.iface = &reg_iface, .abi_version = BP_ABI_VERSION};

static bp_status fault_init(const struct bp_host_services *h, struct bp_registry **out)
{
    host = h;
#if defined(FAULT_INIT_FAIL)
    host->log(BP_LOG_ERROR, FAULT_FAMILY, "the fake device is unplugged");
    return BP_ERR_DEVICE_LOST;
#elif defined(FAULT_CRASH)
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
    raise(SIGSEGV); /* in case the store was not fatal */
#elif defined(FAULT_HANG)
    sleep(60);
#endif
#ifdef FAULT_NEEDS_HELPER
    if (bp_fault_helper() != 42) return BP_ERR_INTERNAL;
#endif
    init_count++;
    device = (struct bp_device){.iface = &dev_iface, .reg = &registry};
    *out = &registry;
    return BP_OK;
}

#ifdef FAULT_SCORE
static int fault_score(void)
{
    return FAULT_SCORE;
}
BP_PLUGIN_DEFINE_SCORE(fault_score)
#endif

#if defined(FAULT_ABI_MAJOR)
BP_PLUGIN_EXPORT uint32_t bp_plugin_abi_version(void)
{
    return BP_ABI_VERSION_MAKE(FAULT_ABI_MAJOR, 0);
}
BP_PLUGIN_EXPORT bp_status bp_plugin_init(const struct bp_host_services *h,
                                          struct bp_registry **out)
{
    return fault_init(h, out);
}
#elif defined(FAULT_NO_INIT)
BP_PLUGIN_EXPORT uint32_t bp_plugin_abi_version(void)
{
    return BP_ABI_VERSION;
}
/* Referenced so the unused init is not a warning. */
BP_PLUGIN_EXPORT void *bp_fault_keep(void)
{
    return (void *)fault_init;
}
#else
BP_PLUGIN_DEFINE(fault_init)
#endif
