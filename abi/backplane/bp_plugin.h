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
 *   - bp_plugin_min_host_version (optional, 1.1): the oldest host ABI the
 *     plugin works with (BP_PLUGIN_DEFINE_MIN_HOST); an older host refuses it
 *     as ABI_MINOR before calling init.
 *
 * Lifetime: a plugin stays resident once its init succeeded: the host
 * promotes it to RTLD_NODELETE, so its code, its static data and every
 * string or table it returned stay mapped until the process ends, across
 * bp_unload and a later re-load (which calls init again). At process exit
 * (or bp_unload) the host calls the registry's optional `shutdown`, which
 * must join the plugin's threads and free what it owns; a re-load after
 * shutdown must work. A plugin whose init failed is dlclose()d at once, so
 * init must not leave threads running when it fails.
 *
 * Interface tables: each begins with `size`, the sizeof the table as the
 * plugin compiled it. Fields are appended, never reordered or removed. Every
 * table must cover its required fields (marked "Required" below, the floor
 * bp_iface_check.h checks): the host refuses a registry or device that does
 * not, and fails the call that returned a short buffer, buffer type, backend
 * or event table. Other fields are optional: they may be NULL or lie beyond
 * `size`, and the host, the meta plugin and any plugin reading another's
 * table read them only through BP_IFACE_GET (NULL when not covered).
 * All tables and examples use designated initialisers.
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
#define BP_ABI_MINOR 2
#define BP_ABI_VERSION_MAKE(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
#define BP_ABI_VERSION BP_ABI_VERSION_MAKE(BP_ABI_MAJOR, BP_ABI_MINOR)
#define BP_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define BP_ABI_VERSION_MINOR(v) ((uint32_t)(v) & 0xffffu)

/* True when interface table `tbl` (pointer) was built with field `field`. */
#define BP_IFACE_HAS(tbl, field) \
    ((tbl) != NULL && (tbl)->size >= offsetof(__typeof__(*(tbl)), field) + sizeof((tbl)->field))

/* The one way to read an optional field of a table (possibly another
 * plugin's): its value when the table is there and `size` covers it, else
 * NULL. Never reads past `size`. */
#define BP_IFACE_GET(tbl, field) (BP_IFACE_HAS(tbl, field) ? (tbl)->field : NULL)

/* Byte offset of slot n of a table: `size`, then one pointer per field. */
#define BP_IFACE_SLOT(n) ((size_t)(n) * sizeof(void *))

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
    size_t size;               /* sizeof as the caller compiled it; never written by the callee */
    bool async;                /* set/get/copy_tensor_async are real */
    bool host_buffer;          /* get_host_buffer_type returns pinned memory */
    bool events;               /* event_new/record/wait work */
    bool buffer_from_host_ptr; /* reserved: wrap application memory */
};

/* Strings and arrays a plugin returns (names, descriptions, feature lists)
 * are the plugin's: they stay valid and unchanged until its registry's
 * shutdown, and the host never frees them. A name returned for an object
 * (backend, buffer type) lives as long as that object at least. */

/* ---- buffer ---- */

struct bp_buffer_iface {
    size_t size;
    /* Required. Free the buffer and everything it holds. */
    void (*free_buffer)(struct bp_buffer *buf);
    /* Required. Base address in the buffer's address space (may be a device
     * address or an opaque non-NULL cookie); tensor->data = base + offset. */
    void *(*get_base)(struct bp_buffer *buf);
    /* Optional: called when a tensor is placed in the buffer (views too). */
    bp_status (*init_tensor)(struct bp_buffer *buf, struct bp_tensor *t);
    /* Required. Copy size bytes from host memory to the tensor's bytes [offset, offset+size). */
    bp_status (*set_tensor)(struct bp_buffer *buf, struct bp_tensor *t, const void *src,
                            size_t offset, size_t size);
    /* Required. Copy the tensor's bytes [offset, offset+size) to host memory. */
    bp_status (*get_tensor)(struct bp_buffer *buf, const struct bp_tensor *t, void *dst,
                            size_t offset, size_t size);
    /* Optional: copy src (in any buffer) into dst (in this buffer); return
     * BP_ERR_UNSUPPORTED when it cannot and the host will stage through RAM. */
    bp_status (*copy_tensor)(struct bp_buffer *buf, const struct bp_tensor *src,
                             struct bp_tensor *dst);
    /* Optional: fill the whole buffer with a byte value; NULL makes
     * bp_buffer_clear answer BP_ERR_UNSUPPORTED (meta writes zeros instead). */
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
    /* Required. */
    const char *(*get_name)(struct bp_buffer_type *buft);
    /* Required. Allocate a buffer of at least size bytes (size 0 is allowed). */
    bp_status (*alloc_buffer)(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out);
    /* Required. Alignment of tensor offsets in bytes (a power of two). */
    size_t (*get_alignment)(struct bp_buffer_type *buft);
    /* Optional: largest single buffer; NULL means unlimited. */
    size_t (*get_max_size)(struct bp_buffer_type *buft);
    /* Optional: bytes a tensor needs in this buffer type; NULL means bp_nbytes. */
    size_t (*get_alloc_size)(struct bp_buffer_type *buft, const struct bp_tensor *t);
    /* Optional: true when tensor->data is a host address the CPU may
     * dereference; NULL means false. */
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
    /* Required. */
    void (*free)(struct bp_event *ev);
    /* Required. Block until the work recorded before the event has finished. */
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
    /* Optional: NULL shows the device's name. */
    const char *(*get_name)(struct bp_backend *b);
    /* Required. */
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
    /* Optional: wait for everything queued on this stream; NULL means
     * graph_compute and the transfers finish before they return. */
    bp_status (*synchronize)(struct bp_backend *b);
    /* Required. Compute every node of the graph, in order. May return before
     * the work finishes on async devices; synchronize waits. A node the
     * device cannot compute gives BP_ERR_UNSUPPORTED and a log line naming op
     * and tensor. */
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
    /* Required. Short name, unique among all loaded devices and starting with
     * the plugin's family: "cpu", "vulkan0", "cuda1" (see the README). */
    const char *(*get_name)(struct bp_device *dev);
    /* Optional: human description, the CPU or GPU model; NULL shows "". */
    const char *(*get_description)(struct bp_device *dev);
    /* Required. */
    enum bp_device_type (*get_type)(struct bp_device *dev);
    /* Optional: NULL reports 0 and 0. */
    void (*get_memory)(struct bp_device *dev, size_t *free, size_t *total);
    /* Optional: NULL means no caps. Write only the fields caps->size covers
     * (BP_IFACE_HAS(caps, field)) and never caps->size itself. */
    void (*get_caps)(struct bp_device *dev, struct bp_device_caps *caps);
    /* Required. Create a stream. params: NULL or "key=value;..." (plugin-defined). */
    bp_status (*init_backend)(struct bp_device *dev, const char *params, struct bp_backend **out);
    /* Required. */
    struct bp_buffer_type *(*get_buffer_type)(struct bp_device *dev);
    /* Optional: pinned host memory for fast staging. */
    struct bp_buffer_type *(*get_host_buffer_type)(struct bp_device *dev);
    /* Required. True when graph_compute can compute this node (its op, types, shapes). */
    bool (*supports_op)(struct bp_device *dev, const struct bp_tensor *node);
    /* Optional: true when this device's backends can read tensors in buffers
     * of buft; NULL means only buffer types whose `device` is this device. */
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
    /* Required. The family name ("cpu"); must match the file name's family. */
    const char *(*get_name)(struct bp_registry *reg);
    /* Required. */
    size_t (*get_device_count)(struct bp_registry *reg);
    /* Required. Devices live until shutdown. */
    struct bp_device *(*get_device)(struct bp_registry *reg, size_t index);
    /* Optional features by name (BP_PROC_*); NULL means "not supported". */
    void *(*get_proc_address)(struct bp_registry *reg, const char *name);
    /* Optional: join threads and free everything; the registry is dead after. */
    void (*shutdown)(struct bp_registry *reg);
};

struct bp_registry {
    const struct bp_registry_iface *iface;
    uint32_t abi_version;      /* BP_ABI_VERSION the plugin was built with; must equal
                                * what bp_plugin_abi_version returns */
    const char *variant;       /* "avx2", "scalar" or NULL */
    void *context;
};

/* An accidental reorder or insertion fails the build: the last field of
 * every table stays in its slot (size is slot 0). */
static_assert(offsetof(struct bp_buffer_iface, clear) == BP_IFACE_SLOT(7),
              "bp_buffer_iface layout is frozen");
static_assert(offsetof(struct bp_buffer_type_iface, is_host) == BP_IFACE_SLOT(6),
              "bp_buffer_type_iface layout is frozen");
static_assert(offsetof(struct bp_event_iface, synchronize) == BP_IFACE_SLOT(2),
              "bp_event_iface layout is frozen");
static_assert(offsetof(struct bp_backend_iface, event_wait) == BP_IFACE_SLOT(9),
              "bp_backend_iface layout is frozen");
static_assert(offsetof(struct bp_device_iface, event_new) == BP_IFACE_SLOT(11),
              "bp_device_iface layout is frozen");
static_assert(offsetof(struct bp_registry_iface, shutdown) == BP_IFACE_SLOT(5),
              "bp_registry_iface layout is frozen");
static_assert(offsetof(struct bp_device_caps, buffer_from_host_ptr) == sizeof(size_t) + 3,
              "bp_device_caps layout is frozen");
static_assert(offsetof(struct bp_registry, context) == 3 * sizeof(void *),
              "bp_registry layout is frozen");

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
static_assert(offsetof(struct bp_host_services, get_proc_address) == BP_IFACE_SLOT(7),
              "bp_host_services layout is frozen");

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

/* bp_plugin_check_host, then (1.1) the host's minor: a plugin that needs
 * host features of ABI `1.<min_minor>` refuses an older host with one
 * sentence (BP_ERR_ABI). Hosts of 1.1 and later already refuse such a
 * plugin before init when it exports BP_PLUGIN_DEFINE_MIN_HOST; this check
 * covers 1.0 hosts, which do not read that symbol. */
static inline bp_status bp_plugin_check_host_version(const struct bp_host_services *host,
                                                     const char *family, uint32_t min_minor,
                                                     struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(host, family, out);
    if (st != BP_OK) return st;
    if (BP_ABI_VERSION_MINOR(host->abi_version) < min_minor) {
        host->log(BP_LOG_ERROR, family,
                  "host ABI %u.%u is older than the %u.%u this plugin needs; upgrade backplane.",
                  (unsigned)BP_ABI_VERSION_MAJOR(host->abi_version),
                  (unsigned)BP_ABI_VERSION_MINOR(host->abi_version), (unsigned)BP_ABI_MAJOR,
                  (unsigned)min_minor);
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

/* Optional (1.1): the oldest host ABI version the plugin works with, e.g.
 * BP_PLUGIN_DEFINE_MIN_HOST(1) for "needs a 1.1 host". A host older than that
 * refuses the plugin as ABI_MINOR (both versions in the reason) without
 * calling init. Without it the plugin loads in every 1.x host. */
#define BP_PLUGIN_MIN_HOST_SYMBOL "bp_plugin_min_host_version"
typedef uint32_t (*bp_plugin_min_host_version_fn)(void);
#define BP_PLUGIN_DEFINE_MIN_HOST(min_minor)                                  \
    BP_PLUGIN_EXPORT uint32_t bp_plugin_min_host_version(void)                \
    {                                                                         \
        return BP_ABI_VERSION_MAKE(BP_ABI_MAJOR, min_minor);                  \
    }

/* Optional (1.1): the plugin composes other plugins' devices (meta). Without
 * an explicit BACKPLANE_BACKENDS order the host initialises such a family
 * after every other one, so that its init sees every real device; an
 * explicit order is kept as given. The host asks this of any plugin, so it
 * never needs to know a composing family by name. */
#define BP_PLUGIN_COMPOSES_SYMBOL "bp_plugin_composes"
typedef int (*bp_plugin_composes_fn)(void);
#define BP_PLUGIN_DEFINE_COMPOSES() \
    BP_PLUGIN_EXPORT int bp_plugin_composes(void) { return 1; }

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

/* (1.1) A registry that offers more than one all-reduce path (NCCL and an
 * internal kernel, say) names them so a caller can measure each: writes up
 * to cap names (the plugin's static strings, at most 23 characters of
 * [a-z0-9_-]) and returns how many it offers; names[0] is bp_comm_init's
 * path. Any thread. */
#define BP_PROC_COMM_PATHS "bp_comm_paths"
typedef size_t (*bp_comm_paths_fn)(const char **names, size_t cap);

/* (1.1) bp_comm_init on one path that bp_comm_paths named; the
 * communicator goes to the same bp_comm_allreduce_tensor and bp_comm_free.
 * BP_ERR_NOT_FOUND for a name not offered, BP_ERR_UNSUPPORTED to decline
 * (the path cannot serve these backends). */
#define BP_PROC_COMM_INIT_PATH "bp_comm_init_path"
typedef bp_status (*bp_comm_init_path_fn)(struct bp_backend *const *backends, size_t n,
                                          const char *path, void **out_comm);

/* (1.1) A device from a spec "<family>:<rest>" that this registry parses
 * (meta: "meta:cpu*2", "meta:cpu,vulkan0"). The host routes a
 * BACKPLANE_DEVICES entry or bp_device_by_name name that begins with the
 * registry's family and is no listed device here. *out belongs to the
 * plugin; thread-safe; an unknown spec is BP_ERR_NOT_FOUND or
 * BP_ERR_INVALID_ARGUMENT, logged by the plugin. */
#define BP_PROC_DEVICE_FROM_SPEC "bp_device_from_spec"
typedef bp_status (*bp_device_from_spec_fn)(const char *spec, struct bp_device **out);

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

/* The required-field floor of every table (uses the definitions above). */
#include "bp_iface_check.h"

#endif /* BP_PLUGIN_H */
