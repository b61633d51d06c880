/*
 * bp_plugin.h — the contract between the backplane host and a backend plugin.
 *
 * A plugin is a shared object named libbackplane-<family>[-<variant>].so.
 * It exports:
 *   - bp_plugin_abi_version (required): the BP_ABI_VERSION it was built with.
 *     The host reads it before anything else and refuses a different major.
 *   - bp_plugin_init (required, "the entry"): given the host-services table,
 *     returns the plugin's registry object.
 *   - bp_plugin_score (optional): for families shipped in several variants
 *     (cpu-scalar, cpu-avx2, ...), how well this build fits the running
 *     machine; 0 means "cannot run here". The host loads only the
 *     best-scoring variant of a family. The score function must run on any
 *     CPU of the architecture: compile it without ISA flags.
 * BP_PLUGIN_DEFINE() below writes the first two in one line.
 *
 * Lifetime: a plugin stays resident once loaded. The host never dlclose()s a
 * plugin whose init succeeded; at process exit (or bp_unload) it calls the
 * registry's optional `shutdown`, which must join the plugin's threads and
 * free what it owns. A plugin whose init failed is dlclose()d at once, so init
 * must not leave threads running when it fails.
 *
 * Interface tables: each begins with `size`, the sizeof the table as the
 * plugin compiled it. Fields are appended, never reordered or removed; the
 * host reads a field only when `size` covers it (BP_IFACE_HAS). Optional
 * fields may be NULL. All tables and examples use designated initialisers.
 *
 * Errors: every fallible function returns a bp_status and, on failure, may
 * log one sentence through the host's log service. No function aborts the
 * process on bad input.
 *
 * Threads: the registry and device functions may be called from any thread.
 * A backend (stream) is used by one thread at a time; two backends of one
 * device must run concurrently and independently.
 */
#ifndef BP_PLUGIN_H
#define BP_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bp_status.h"
#include "bp_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ---- */

#define BP_ABI_MAJOR 1
#define BP_ABI_MINOR 0
#define BP_ABI_VERSION_MAKE(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
#define BP_ABI_VERSION BP_ABI_VERSION_MAKE(BP_ABI_MAJOR, BP_ABI_MINOR)
#define BP_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define BP_ABI_VERSION_MINOR(v) ((uint32_t)(v) & 0xffffu)

/* True when interface table `tbl` (pointer) was built with field `field`. */
#define BP_IFACE_HAS(tbl, field) \
    ((tbl) != NULL && (tbl)->size >= offsetof(__typeof__(*(tbl)), field) + sizeof((tbl)->field))

struct bp_registry;
struct bp_device;
struct bp_buffer_type;
struct bp_buffer;
struct bp_backend;
struct bp_event;

/* ---- log levels (BACKPLANE_LOG) ---- */

enum bp_log_level {
    BP_LOG_DEBUG = 0,
    BP_LOG_INFO  = 1,
    BP_LOG_WARN  = 2,
    BP_LOG_ERROR = 3,
};

/* ---- device types ---- */

enum bp_device_type {
    BP_DEVICE_TYPE_CPU   = 0,
    BP_DEVICE_TYPE_GPU   = 1,  /* discrete GPU, own memory */
    BP_DEVICE_TYPE_IGPU  = 2,  /* integrated GPU sharing host memory */
    BP_DEVICE_TYPE_ACCEL = 3,  /* other accelerator */
    BP_DEVICE_TYPE_META  = 4,  /* a virtual device composed of others */
};

/* What a device can do beyond the required minimum. Filled by get_caps. */
struct bp_device_caps {
    size_t size;               /* sizeof as the caller compiled it */
    bool async;                /* set/get/copy_tensor_async are real */
    bool host_buffer;          /* get_host_buffer_type returns pinned memory */
    bool events;               /* event_new/record/wait work */
    bool buffer_from_host_ptr; /* reserved: wrap application memory */
};

/* ---- buffer ---- */

struct bp_buffer_iface {
    size_t size;
    /* Free the buffer and everything it holds. */
    void (*free_buffer)(struct bp_buffer *buf);
    /* Base address in the buffer's address space (may be a device address or
     * an opaque non-NULL cookie); tensor->data = base + offset. */
    void *(*get_base)(struct bp_buffer *buf);
    /* Optional: called when a tensor is placed in the buffer (views too). */
    bp_status (*init_tensor)(struct bp_buffer *buf, struct bp_tensor *t);
    /* Copy size bytes from host memory to the tensor's bytes [offset, offset+size). */
    bp_status (*set_tensor)(struct bp_buffer *buf, struct bp_tensor *t, const void *src,
                            size_t offset, size_t size);
    /* Copy the tensor's bytes [offset, offset+size) to host memory. */
    bp_status (*get_tensor)(struct bp_buffer *buf, const struct bp_tensor *t, void *dst,
                            size_t offset, size_t size);
    /* Optional: copy src (in any buffer) into dst (in this buffer); return
     * BP_ERR_UNSUPPORTED when it cannot and the host will stage through RAM. */
    bp_status (*copy_tensor)(struct bp_buffer *buf, const struct bp_tensor *src,
                             struct bp_tensor *dst);
    /* Fill the whole buffer with a byte value. */
    bp_status (*clear)(struct bp_buffer *buf, uint8_t value);
};

struct bp_buffer {
    const struct bp_buffer_iface *iface;
    struct bp_buffer_type *buft;
    void  *context;            /* the plugin's */
    size_t size;               /* bytes */
};

/* ---- buffer type ---- */

struct bp_buffer_type_iface {
    size_t size;
    const char *(*get_name)(struct bp_buffer_type *buft);
    /* Allocate a buffer of at least size bytes (size 0 is allowed). */
    bp_status (*alloc_buffer)(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out);
    /* Alignment of tensor offsets in bytes (a power of two). */
    size_t (*get_alignment)(struct bp_buffer_type *buft);
    /* Optional: largest single buffer; NULL means unlimited. */
    size_t (*get_max_size)(struct bp_buffer_type *buft);
    /* Optional: bytes a tensor needs in this buffer type; NULL means bp_nbytes. */
    size_t (*get_alloc_size)(struct bp_buffer_type *buft, const struct bp_tensor *t);
    /* True when tensor->data is a host address the CPU may dereference. */
    bool (*is_host)(struct bp_buffer_type *buft);
};

struct bp_buffer_type {
    const struct bp_buffer_type_iface *iface;
    struct bp_device *device;
    void *context;
};

/* ---- event ---- */

struct bp_event_iface {
    size_t size;
    void (*free)(struct bp_event *ev);
    /* Block until the work recorded before the event has finished. */
    bp_status (*synchronize)(struct bp_event *ev);
};

struct bp_event {
    const struct bp_event_iface *iface;
    struct bp_device *device;
    void *context;
};

/* ---- backend: an execution stream on one device ---- */

struct bp_backend_iface {
    size_t size;
    const char *(*get_name)(struct bp_backend *b);
    void (*free)(struct bp_backend *b);
    /* Optional async transfers, ordered on this stream; NULL means the host
     * uses the buffer's synchronous set/get after synchronize. */
    bp_status (*set_tensor_async)(struct bp_backend *b, struct bp_tensor *t, const void *src,
                                  size_t offset, size_t size);
    bp_status (*get_tensor_async)(struct bp_backend *b, const struct bp_tensor *t, void *dst,
                                  size_t offset, size_t size);
    /* Optional: copy between tensors; return BP_ERR_UNSUPPORTED to decline. */
    bp_status (*copy_tensor_async)(struct bp_backend *src_b, struct bp_backend *dst_b,
                                   const struct bp_tensor *src, struct bp_tensor *dst);
    /* Wait for everything queued on this stream. */
    bp_status (*synchronize)(struct bp_backend *b);
    /* Compute every node of the graph, in order. May return before the work
     * finishes on async devices; synchronize waits. A node the device cannot
     * compute gives BP_ERR_UNSUPPORTED and a log line naming op and tensor. */
    bp_status (*graph_compute)(struct bp_backend *b, struct bp_graph *g);
    /* Optional events. */
    bp_status (*event_record)(struct bp_backend *b, struct bp_event *ev);
    bp_status (*event_wait)(struct bp_backend *b, struct bp_event *ev);
};

struct bp_backend {
    const struct bp_backend_iface *iface;
    struct bp_device *device;
    void *context;
};

/* ---- device ---- */

struct bp_device_iface {
    size_t size;
    /* Short unique name: "cpu", "vulkan0", "cuda1". */
    const char *(*get_name)(struct bp_device *dev);
    /* Human description: the CPU or GPU model. */
    const char *(*get_description)(struct bp_device *dev);
    enum bp_device_type (*get_type)(struct bp_device *dev);
    void (*get_memory)(struct bp_device *dev, size_t *free, size_t *total);
    void (*get_caps)(struct bp_device *dev, struct bp_device_caps *caps);
    /* Create a stream. params: NULL or "key=value;..." (plugin-defined). */
    bp_status (*init_backend)(struct bp_device *dev, const char *params, struct bp_backend **out);
    struct bp_buffer_type *(*get_buffer_type)(struct bp_device *dev);
    /* Optional: pinned host memory for fast staging. */
    struct bp_buffer_type *(*get_host_buffer_type)(struct bp_device *dev);
    /* True when graph_compute can compute this node (its op, types, shapes). */
    bool (*supports_op)(struct bp_device *dev, const struct bp_tensor *node);
    /* True when this device's backends can read tensors in buffers of buft. */
    bool (*supports_buft)(struct bp_device *dev, struct bp_buffer_type *buft);
    /* Optional events. */
    bp_status (*event_new)(struct bp_device *dev, struct bp_event **out);
};

struct bp_device {
    const struct bp_device_iface *iface;
    struct bp_registry *reg;
    void *context;
};

/* ---- registry: the plugin's root object ---- */

struct bp_registry_iface {
    size_t size;
    /* The family name ("cpu"); must match the file name's family. */
    const char *(*get_name)(struct bp_registry *reg);
    size_t (*get_device_count)(struct bp_registry *reg);
    struct bp_device *(*get_device)(struct bp_registry *reg, size_t index);
    /* Optional features by name (BP_PROC_*); NULL means "not supported". */
    void *(*get_proc_address)(struct bp_registry *reg, const char *name);
    /* Optional: join threads and free everything; the registry is dead after. */
    void (*shutdown)(struct bp_registry *reg);
};

struct bp_registry {
    const struct bp_registry_iface *iface;
    uint32_t abi_version;      /* BP_ABI_VERSION the plugin was built with */
    const char *variant;       /* "avx2", "scalar" or NULL */
    void *context;
};

/* ---- host services: everything a plugin may ask of the host ---- */

struct bp_host_services {
    size_t   size;
    uint32_t abi_version;      /* the host's BP_ABI_VERSION */
    /* Log one sentence at a level; `who` is the plugin family. printf format. */
    void (*log)(enum bp_log_level level, const char *who, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* getenv that returns NULL in setuid programs; use it for BACKPLANE_* knobs. */
    const char *(*get_env)(const char *name);
    /* Devices of all plugins loaded so far (for composing plugins like meta). */
    size_t (*device_count)(void);
    struct bp_device *(*device_get)(size_t index);
    struct bp_device *(*device_by_name)(const char *name);
    /* Further services by name, Redis-module style; NULL when absent. */
    void *(*get_proc_address)(const char *name);
};

/* The checks every plugin's init makes first, against a host it cannot
 * trust to be ours: out is writable (*out = NULL from here on), the host
 * table is there and long enough to carry `log`, and the host speaks this
 * plugin's ABI major (a mismatch is logged as one sentence). Returns BP_OK
 * or the status init should return. */
static inline bp_status bp_plugin_check_host(const struct bp_host_services *host,
                                             const char *family, struct bp_registry **out)
{
    if (!out)
        return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!BP_IFACE_HAS(host, log))
        return BP_ERR_INVALID_ARGUMENT;
    if (BP_ABI_VERSION_MAJOR(host->abi_version) != BP_ABI_MAJOR) {
        if (host->log)
            host->log(BP_LOG_ERROR, family,
                      "host ABI major %u differs from the plugin's %u; rebuild the plugin.",
                      (unsigned)BP_ABI_VERSION_MAJOR(host->abi_version), (unsigned)BP_ABI_MAJOR);
        return BP_ERR_ABI;
    }
    return BP_OK;
}

/* ---- plugin entry points ---- */

#define BP_PLUGIN_ABI_VERSION_SYMBOL "bp_plugin_abi_version"
#define BP_PLUGIN_INIT_SYMBOL        "bp_plugin_init"
#define BP_PLUGIN_SCORE_SYMBOL       "bp_plugin_score"

typedef uint32_t (*bp_plugin_abi_version_fn)(void);
/* On failure return a status and log why; *out stays NULL. */
typedef bp_status (*bp_plugin_init_fn)(const struct bp_host_services *host,
                                       struct bp_registry **out);
/* 0: cannot run here; otherwise higher is better. Must not use ISA extensions. */
typedef int (*bp_plugin_score_fn)(void);

#if defined(_WIN32)
#define BP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* One line of boilerplate: BP_PLUGIN_DEFINE(my_init) exports the ABI version
 * and the entry, calling `bp_status my_init(const struct bp_host_services *,
 * struct bp_registry **)`. */
#define BP_PLUGIN_DEFINE(init_fn)                                                        \
    BP_PLUGIN_EXPORT uint32_t bp_plugin_abi_version(void) { return BP_ABI_VERSION; }     \
    BP_PLUGIN_EXPORT bp_status bp_plugin_init(const struct bp_host_services *host,        \
                                              struct bp_registry **out)                   \
    {                                                                                    \
        return init_fn(host, out);                                                       \
    }

/* BP_PLUGIN_DEFINE_SCORE(my_score) exports the variant score `int my_score(void)`. */
#define BP_PLUGIN_DEFINE_SCORE(score_fn) \
    BP_PLUGIN_EXPORT int bp_plugin_score(void) { return score_fn(); }

/* ---- optional features: proc-address names, typedefs and contracts ----
 * A name is an ABI symbol: when a signature changes the name gets a _v2
 * suffix and the old name keeps its old meaning. */

/* Collective communication over backends of this registry's devices (one
 * backend per participant, the same device may appear twice). Returns
 * BP_ERR_UNSUPPORTED to decline (the caller then uses its own path). */
#define BP_PROC_COMM_INIT "bp_comm_init"
typedef bp_status (*bp_comm_init_fn)(struct bp_backend *const *backends, size_t n,
                                     void **out_comm);

/* In-place sum: tensors[i] lives on backends[i] of comm_init; same shape and
 * type; afterwards every tensor holds the elementwise sum. Asynchronous on
 * the backends' streams. */
#define BP_PROC_COMM_ALLREDUCE_TENSOR "bp_comm_allreduce_tensor"
typedef bp_status (*bp_comm_allreduce_tensor_fn)(void *comm, struct bp_tensor *const *tensors,
                                                 size_t n);

/* Release a communicator from comm_init (NULL is a no-op). */
#define BP_PROC_COMM_FREE "bp_comm_free"
typedef void (*bp_comm_free_fn)(void *comm);

/* Set the number of worker threads a backend of this registry uses (>= 1). */
#define BP_PROC_SET_N_THREADS "bp_set_n_threads"
typedef bp_status (*bp_set_n_threads_fn)(struct bp_backend *b, int n_threads);

/* Name/value pairs describing build and run-time features ("AVX2" = "1"),
 * terminated by an entry with name NULL. Owned by the plugin. */
struct bp_feature {
    const char *name;
    const char *value;
};
#define BP_PROC_GET_FEATURES "bp_get_features"
typedef const struct bp_feature *(*bp_get_features_fn)(struct bp_registry *reg);

/* A buffer type for tensors used only as MUL_MAT weights (src[0]) of this
 * type on this device, or NULL: use the device's default buffer type.
 * Tensors in it may be stored in a layout of the device's own (converted in
 * set/get) and may be refused by every other op, so a tensor that is also
 * read otherwise (a tied embedding table read by GET_ROWS) stays in the
 * default buffer type. The device must support the buffer type. */
#define BP_PROC_WEIGHT_BUFFER_TYPE "bp_weight_buffer_type"
typedef struct bp_buffer_type *(*bp_weight_buffer_type_fn)(struct bp_device *dev,
                                                            enum bp_type type);

#ifdef __cplusplus
}
#endif
#endif /* BP_PLUGIN_H */
