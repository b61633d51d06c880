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
 *   FAULT_META            compose like the meta plugin: export bp_plugin_composes
 *                         and parse "<family>:..." specs (BP_PROC_DEVICE_FROM_SPEC)
 *   FAULT_UUID_BYTE n     report an identity: a UUID of 16 bytes n, plus
 *   FAULT_PCI "bus id"    its PCI address and
 *   FAULT_SOFTWARE        the software-implementation flag
 * Interface tables (ABI 1.1 floors, bp_iface_check.h):
 *   FAULT_<T>_SIZE n      the size the T table declares (REGISTRY, DEVICE,
 *                         BUFT, BUFFER, BACKEND); default its sizeof
 *   FAULT_GUARD_PAGE      every table is copied so that it ends where a
 *                         PROT_NONE page begins: a read past size faults
 *   FAULT_NULL_OPTIONAL   every optional field NULL
 *   FAULT_NULL_GRAPH_COMPUTE  the backend's required graph_compute NULL
 *   FAULT_STATIC_BUFFERS  buffers come from a static pool (a host that cannot
 *                         free a refused buffer leaks nothing)
 *   FAULT_ABI_1_0         built as a 1.0 plugin: 1.0 table sizes, ABI 1.0
 * Versions and names:
 *   FAULT_ABI_MINOR n     report ABI 1.n
 *   FAULT_MIN_HOST n      export bp_plugin_min_host_version = 1.n
 *   FAULT_REGISTRY_ABI v  the registry's abi_version (default the symbol's)
 *   FAULT_N_DEVICES n     n devices, all named FAULT_DEVICE (default 1)
 * Without a fault it is a small, well-formed plugin: one device with a
 * host-memory buffer type and a backend that computes F32 ADD.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <backplane/bp_abi.h>

#ifdef FAULT_ABI_1_0
#define FAULT_ABI_MINOR 0
#define FAULT_REGISTRY_SIZE BP_REGISTRY_IFACE_SIZE_1_0
#define FAULT_DEVICE_SIZE BP_DEVICE_IFACE_SIZE_1_0
#define FAULT_BUFT_SIZE BP_BUFFER_TYPE_IFACE_SIZE_1_0
#define FAULT_BUFFER_SIZE BP_BUFFER_IFACE_SIZE_1_0
#define FAULT_BACKEND_SIZE BP_BACKEND_IFACE_SIZE_1_0
#endif
#ifndef FAULT_REGISTRY_SIZE
#define FAULT_REGISTRY_SIZE sizeof(struct bp_registry_iface)
#endif
#ifndef FAULT_DEVICE_SIZE
#define FAULT_DEVICE_SIZE sizeof(struct bp_device_iface)
#endif
#ifndef FAULT_BUFT_SIZE
#define FAULT_BUFT_SIZE sizeof(struct bp_buffer_type_iface)
#endif
#ifndef FAULT_BUFFER_SIZE
#define FAULT_BUFFER_SIZE sizeof(struct bp_buffer_iface)
#endif
#ifndef FAULT_BACKEND_SIZE
#define FAULT_BACKEND_SIZE sizeof(struct bp_backend_iface)
#endif
#ifdef FAULT_ABI_MINOR
#define FAULT_ABI_VERSION BP_ABI_VERSION_MAKE(BP_ABI_MAJOR, FAULT_ABI_MINOR)
#else
#define FAULT_ABI_VERSION BP_ABI_VERSION
#endif
#ifndef FAULT_REGISTRY_ABI
#define FAULT_REGISTRY_ABI FAULT_ABI_VERSION
#endif
#ifndef FAULT_N_DEVICES
#define FAULT_N_DEVICES 1
#endif
/* OPT(f): an optional field, NULL under FAULT_NULL_OPTIONAL. */
#ifdef FAULT_NULL_OPTIONAL
#define OPT(f) (0 ? (f) : NULL) /* still a use of f: no unused warning */
#else
#define OPT(f) f
#endif

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

#ifdef FAULT_STATIC_BUFFERS
static struct bp_buffer pool_buf[4];
static _Alignas(64) unsigned char pool_mem[4][1 << 16];
static size_t pool_used;
#endif

static void buf_free(struct bp_buffer *b)
{
#ifdef FAULT_STATIC_BUFFERS
    (void)b;
#else
    free(b->context);
    free(b);
#endif
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

static struct bp_buffer_iface buf_iface = {
    .size = FAULT_BUFFER_SIZE,
    .free_buffer = buf_free,
    .get_base = buf_base,
    .set_tensor = buf_set,
    .get_tensor = buf_get,
    .clear = OPT(buf_clear),
};
/* The tables as the host sees them: these, or their guard-page copies. */
static const struct bp_buffer_iface *buf_iface_p = &buf_iface;

static const char *buft_name(struct bp_buffer_type *bt)
{
    (void)bt;
    return FAULT_DEVICE "_host";
}

static bp_status buft_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
#ifdef FAULT_STATIC_BUFFERS
    if (size > sizeof pool_mem[0]) return BP_ERR_OUT_OF_MEMORY;
    struct bp_buffer *b = &pool_buf[pool_used % 4];
    void *mem = pool_mem[pool_used++ % 4];
#else
    struct bp_buffer *b = calloc(1, sizeof *b);
    void *mem = calloc(1, size ? size : 1);
    if (!b || !mem) {
        free(b);
        free(mem);
        return BP_ERR_OUT_OF_MEMORY;
    }
#endif
    *b = (struct bp_buffer){.iface = buf_iface_p, .buft = bt, .context = mem, .size = size};
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

static struct bp_buffer_type_iface buft_iface = {
    .size = FAULT_BUFT_SIZE,
    .get_name = buft_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_alignment,
    .is_host = OPT(buft_is_host),
};

/* ---- backend: F32 ADD (src1 broadcast over src0), on the calling thread ---- */

static float *at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (float *)((char *)t->data + i0 * (int64_t)t->nb[0] + i1 * (int64_t)t->nb[1] +
                     i2 * (int64_t)t->nb[2] + i3 * (int64_t)t->nb[3]);
}

static bool add_ok(const struct bp_tensor *n)
{
    return n->op == BP_OP_ADD && bp_op_shapes_ok(n) && n->type == BP_TYPE_F32 &&
           n->src[0]->type == BP_TYPE_F32 && n->src[1]->type == BP_TYPE_F32;
}

static bp_status add(struct bp_tensor *n)
{
    const struct bp_tensor *a = n->src[0], *b = n->src[1];
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++)
                    *at(n, i0, i1, i2, i3) =
                        *at(a, i0, i1, i2, i3) +
                        *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
    return BP_OK;
}

static const char *be_name(struct bp_backend *b)
{
    (void)b;
    return FAULT_DEVICE "_stream";
}

static void be_free(struct bp_backend *b)
{
    (void)b;
}

static bp_status be_compute(struct bp_backend *b, struct bp_graph *g)
{
    (void)b;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        if (!add_ok(n)) {
            host->log(BP_LOG_ERROR, FAULT_FAMILY, "cannot compute %s node %s.", bp_op_name((enum bp_op)n->op), n->name);
            return BP_ERR_UNSUPPORTED;
        }
        add(n);
    }
    return BP_OK;
}

static bp_status be_sync(struct bp_backend *b)
{
    (void)b;
    return BP_OK;
}

static struct bp_backend_iface be_iface = {
    .size = FAULT_BACKEND_SIZE,
    .get_name = OPT(be_name),
    .free = be_free,
    .synchronize = OPT(be_sync),
#ifdef FAULT_NULL_GRAPH_COMPUTE
    .graph_compute = 0 ? be_compute : NULL,
#else
    .graph_compute = be_compute,
#endif
};
static const struct bp_backend_iface *be_iface_p = &be_iface;

/* ---- device ---- */

static struct bp_device device[FAULT_N_DEVICES];
static struct bp_buffer_type buft = {.iface = &buft_iface, .device = &device[0]};
static struct bp_backend backend = {.iface = &be_iface, .device = &device[0]};

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
    /* One stream, shared: it keeps no state between calls. */
    backend.iface = be_iface_p;
    *out = &backend;
    return BP_OK;
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
    return node->op == BP_OP_ADD && (!node->src[0] || add_ok(node));
}

static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *bt)
{
    (void)d;
    return bt == &buft;
}

static struct bp_device_iface dev_iface = {
    .size = FAULT_DEVICE_SIZE,
    .get_name = dev_name,
    .get_description = OPT(dev_description),
    .get_type = dev_type,
    .get_memory = OPT(dev_memory),
    .get_caps = OPT(dev_caps),
    .init_backend = dev_init_backend,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = OPT(dev_supports_buft),
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
    return FAULT_N_DEVICES;
}

static struct bp_device *reg_get(struct bp_registry *r, size_t i)
{
    (void)r;
    return i < FAULT_N_DEVICES ? &device[i] : NULL;
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
    if (strncmp(spec, FAULT_FAMILY ":", strlen(FAULT_FAMILY ":")) != 0)
        return BP_ERR_INVALID_ARGUMENT;
    *out = &device[0];
    return BP_OK;
}
#endif

#ifdef FAULT_UUID_BYTE
#ifndef FAULT_PCI
#define FAULT_PCI ""
#endif
static bp_status fault_identity(struct bp_device *d, struct bp_device_identity *out)
{
    if (d != &device[0] || !out) return BP_ERR_INVALID_ARGUMENT;
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
    if (!strcmp(name, BP_PROC_DEVICE_FROM_SPEC)) return (void *)meta_from_spec;
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

static struct bp_registry_iface reg_iface = {
    .size = FAULT_REGISTRY_SIZE,
    .get_name = reg_name,
    .get_device_count = reg_count,
    .get_device = reg_get,
    .get_proc_address = OPT(reg_proc),
    .shutdown = OPT(reg_shutdown),
};

static struct bp_registry registry = {.iface = &reg_iface, .abi_version = FAULT_REGISTRY_ABI};
static const struct bp_registry_iface *reg_iface_p = &reg_iface;
static const struct bp_device_iface *dev_iface_p = &dev_iface;

/* A copy of the first `size` bytes of table that ends exactly where a
 * PROT_NONE page begins (made once; the pages stay mapped). */
#ifdef FAULT_GUARD_PAGE
static const void *guarded(const void *table, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *copy = m + page - size;
    memcpy(copy, table, size);
    if (mprotect(m + page, page, PROT_NONE) != 0 || mprotect(m, page, PROT_READ) != 0) return NULL;
    return copy;
}
#endif

static bool place_tables(void)
{
#ifdef FAULT_GUARD_PAGE
    static bool placed;
    if (placed) return true;
    reg_iface_p = guarded(&reg_iface, FAULT_REGISTRY_SIZE);
    dev_iface_p = guarded(&dev_iface, FAULT_DEVICE_SIZE);
    buft.iface = guarded(&buft_iface, FAULT_BUFT_SIZE);
    buf_iface_p = guarded(&buf_iface, FAULT_BUFFER_SIZE);
    be_iface_p = guarded(&be_iface, FAULT_BACKEND_SIZE);
    placed = reg_iface_p && dev_iface_p && buft.iface && buf_iface_p && be_iface_p;
    return placed;
#else
    return true;
#endif
}

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
    if (!place_tables()) return BP_ERR_OUT_OF_MEMORY;
    init_count++;
    registry.iface = reg_iface_p;
    for (size_t i = 0; i < FAULT_N_DEVICES; i++)
        device[i] = (struct bp_device){.iface = dev_iface_p, .reg = &registry};
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

#ifdef FAULT_MIN_HOST
BP_PLUGIN_DEFINE_MIN_HOST(FAULT_MIN_HOST)
#endif

#ifdef FAULT_META
BP_PLUGIN_DEFINE_COMPOSES()
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
#elif defined(FAULT_ABI_MINOR)
BP_PLUGIN_EXPORT uint32_t bp_plugin_abi_version(void)
{
    return FAULT_ABI_VERSION;
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
