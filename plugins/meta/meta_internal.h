/* meta_internal.h — what the files of the meta plugin share. */
#ifndef BP_META_INTERNAL_H
#define BP_META_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>
#include <backplane/bp_meta_abi.h>

#define META_NAME "meta"
#define META_MAX_DEV BP_META_MAX_DEVICES
#define META_MAX_PIECES 256

extern const struct bp_host_services *meta_host;
#define meta_log(level, ...) meta_host->log((level), META_NAME, __VA_ARGS__)

/* ---- device.c ---- */

struct meta_device {
    struct bp_device dev;                /* first: a bp_device* is a meta_device* */
    char name[32];
    char desc[256];
    char spec[256];
    size_t n;
    struct bp_device *sub[META_MAX_DEV];
    float ratio[META_MAX_DEV];
    bp_meta_split_fn split_cb;
    void *split_user;
    struct bp_buffer_type buft;
    /* The buffer types of MUL_MAT weights (bp_weight_buffer_type), one per
     * weight type: each device's slices go to that device's own weight
     * buffer type (the CPU's x8 layout), so a split weight streams through
     * the same kernels as on the device alone. Offered only for the types
     * some sub-device keeps apart (meta_weight_buffer_type). */
    struct bp_buffer_type wbuft[BP_TYPE_COUNT];
    char allreduce[192];                 /* the all-reduce paths, for info */
    /* `backplane info` lines (sub_devices, split_ratios, allreduce): written
     * once while the device is listed, read-only afterwards. */
    char feat_name[3][48];
    char feat_text[3][512];
};

bool meta_is_meta_device(const struct bp_device *dev);
/* The proc bp_weight_buffer_type: md->wbuft[type] when some sub-device
 * keeps MUL_MAT weights of that type in a buffer type of its own, else
 * NULL (the meta device's default buffer type serves). */
struct bp_buffer_type *meta_weight_buffer_type(struct bp_device *dev, enum bp_type type);
/* identity.c: warn when two sub-devices are one physical device; the proc. */
void meta_warn_same_physical(struct bp_device *const *devs, size_t n);
bp_status meta_device_identity(struct bp_device *dev, struct bp_device_identity *out);
bp_status meta_device_create(struct bp_device *const *devs, size_t n, const float *ratios,
                             bp_meta_split_fn cb, void *user, const char *spec,
                             struct meta_device **out);
bp_status meta_device_from_spec(const char *spec, struct bp_device **out);
/* Whether sub-device s can pass ADD node's first operand through as SCALE
 * (x * 1 + 0): the sub-devices that do not add an ADD_ONCE term do that. */
bool meta_sub_passes_through(struct bp_device *s, const struct bp_tensor *node);
bp_status meta_device_new(struct bp_device *const *devs, size_t n, const float *ratios,
                          bp_meta_split_fn cb, void *user, struct bp_device **out);
bp_status meta_set_split_fn(struct bp_device *dev, bp_meta_split_fn cb, void *user);
bp_status meta_device_sub_devices(struct bp_device *dev, struct bp_device **subs, size_t cap, size_t *n);
size_t meta_device_count(void);
struct bp_device *meta_device_at(size_t i);
void meta_devices_free_all(void);
/* The registry's features, three per meta device, NULL-terminated. The
 * table is a snapshot taken when the list last grew and never written
 * again, so it stays valid (unchanged) until shutdown; any thread. */
const struct bp_feature *meta_devices_features(void);
const char *meta_sub_name(struct bp_device *d);

/* ---- sub.c: the sub-devices' tables, checked as the host checks them.
 * Sub-devices passed meta_device_new's device-table check; each function
 * logs one sentence when it refuses. ---- */

/* The sub-device's buffer type, NULL (logged) when its table is short. */
struct bp_buffer_type *meta_sub_buft(struct bp_device *s);
/* Where sub-device s keeps slices of a meta buffer of weight type wtype:
 * its registry's bp_weight_buffer_type for that type when it offers one
 * that passes the table check and s supports, else (and for wtype < 0)
 * meta_sub_buft. */
struct bp_buffer_type *meta_sub_buft_for(struct bp_device *s, int wtype);
/* is_host of a sub-device buffer type; false when it has none. */
bool meta_sub_buft_is_host(struct bp_buffer_type *bt);
/* A buffer of the sub-device's buffer type whose table passed the check. */
bp_status meta_sub_alloc(struct bp_device *s, size_t bytes, struct bp_buffer **out);
/* The same in meta_sub_buft_for(s, wtype). */
bp_status meta_sub_alloc_for(struct bp_device *s, int wtype, size_t bytes, struct bp_buffer **out);
/* clear, or the same bytes through set_tensor when the buffer has no clear. */
bp_status meta_sub_clear(struct bp_buffer *b, uint8_t value);
void meta_sub_free_buffer(struct bp_buffer *b);
/* A backend of the sub-device whose table passed the check. */
bp_status meta_sub_backend_init(struct bp_device *s, const char *params, struct bp_backend **out);
/* synchronize, or BP_OK when the backend has none (its work is done). */
bp_status meta_sub_synchronize(struct bp_backend *b);

/* ---- layout.c: split states and slice placement ---- */

struct meta_piece {
    int64_t len;   /* elements along the split axis */
    int32_t dev;
};

/* A tensor's split, resolved for a device count: the pieces along the split
 * axis in global order; a device's local axis is its pieces in that order. */
struct meta_layout {
    int32_t state;                       /* enum bp_meta_split_state */
    int32_t n_pieces;
    struct meta_piece piece[META_MAX_PIECES];
    int64_t local_ne[META_MAX_DEV];      /* axis extent per device */
};

bp_status meta_layout_place(const struct bp_meta_split *split, const struct bp_tensor *t,
                            size_t n_dev, const float *ratio, struct meta_layout *out);
void meta_layout_simple(struct meta_layout *l, int32_t state);
void meta_layout_finish(struct meta_layout *l, size_t n_dev);
bool meta_layout_same(const struct meta_layout *a, const struct meta_layout *b);
bool meta_layout_is_axis(const struct meta_layout *l);
/* Scale every piece length by mul/div (exactly); false if not exact. */
bool meta_layout_rescale(struct meta_layout *l, int64_t mul, int64_t div);
const char *meta_state_name(int32_t state);

/* ---- buffer.c ---- */

/* The meta plugin's record of a tensor in a meta buffer (tensor->extra). */
struct meta_tensor {
    uint64_t serial;                     /* unique per record, never reused: plan cache key */
    struct meta_layout layout;
    bool placed;                         /* layout known (leaf or derived) */
    bool leaf;                           /* a non-view leaf: data the application owns */
    bool needs_reduce;                   /* a PARTIAL leaf written since its last reduction */
    size_t offset;                       /* in the meta buffer's address space */
    size_t bytes;                        /* the meta tensor's bytes there */
    struct bp_tensor whole;              /* the meta tensor's shape (raw byte access) */
    /* storage of each device's slice: its own bytes, sized from the layout */
    void *mem[META_MAX_DEV];
    size_t mem_cap[META_MAX_DEV];
    struct bp_buffer *mem_buf[META_MAX_DEV]; /* the sub-buffer mem[d] lies in */
    bool pending[META_MAX_DEV];          /* needs storage: given out by meta_buffer_materialize */
    /* slice d is zeroed when the graph starts (a source's slice is empty),
     * not when the node's turn comes: it cannot share bytes with tensors
     * the graph computes before it (meta_buffer_materialize) */
    bool zeroed_early[META_MAX_DEV];
    struct bp_tensor local[META_MAX_DEV];
    /* a binary op whose mirrored operand must be cut to the split operand's
     * slices: which source (-1: none) and each device's view of it */
    int32_t slice_src;
    struct bp_tensor slice[META_MAX_DEV];
};

/* A sub-buffer of one device; a meta buffer holds one or more per device,
 * sized by what its tensors' slices take there, not by the meta size. */
struct meta_arena {
    struct bp_buffer *buf;
    char *base;
    size_t used, cap;
};

struct meta_buffer {
    struct meta_device *md;
    int wtype;                           /* the weights' type in a wbuft buffer; -1: md->buft */
    struct meta_arena *arenas[META_MAX_DEV];
    size_t n_arenas[META_MAX_DEV], cap_arenas[META_MAX_DEV];
    /* The arena (index into arenas[d], -1: none yet) that holds the slices
     * of computed tensors at their meta offsets (meta_buffer_materialize). */
    ptrdiff_t mapped[META_MAX_DEV];
    size_t align[META_MAX_DEV];
    size_t n_pending;
    uint8_t clear_value;                 /* what raw reads show between tensors */
    /* A measuring buffer (measure.c): sub-buffers are tallied, never
     * allocated, and slices get addresses that are never dereferenced. */
    bool dry;
    /* tensor records, freed with the buffer */
    struct meta_tensor **recs;
    size_t n_recs, cap_recs;
    pthread_mutex_t lock;
};

extern const struct bp_buffer_type_iface meta_buft_iface;
bool meta_buft_is_meta(const struct bp_buffer_type *buft);
struct meta_tensor *meta_tensor_of(const struct bp_tensor *t);
/* Local tensor of t on device d with its layout applied (contiguous local
 * strides for non-views). With own_storage the slice gets its own bytes on
 * device d (given out now if already reserved, else at the next
 * meta_buffer_materialize); without, data is left for the caller. */
/* Slice l becomes a copy of the whole tensor t (name, type, op, params) but
 * keeps its own src links and is no view and has no extra yet. */
void meta_local_copy(struct bp_tensor *l, const struct bp_tensor *t);
void meta_local_fill(struct meta_buffer *mb, const struct bp_tensor *t, struct meta_tensor *mt,
                     size_t d, bool own_storage);
/* Give every slice waiting for storage its bytes: one new sub-buffer per
 * device, sized to the sum of that device's waiting slices. */
bp_status meta_buffer_materialize(struct meta_buffer *mb);
/* Bytes held on each device by the buffer's sub-buffers. */
bp_status meta_buffer_device_bytes(struct bp_buffer *buf, size_t *bytes);
/* A buffer of md's buffer type that only measures (meta_buffer.dry). */
bp_status meta_buffer_new_dry(struct meta_device *md, struct bp_buffer **out);
bp_status meta_tensor_split_query(const struct bp_tensor *t, int32_t *state, int64_t *local_ne);
/* BP_PROC_META_TENSOR_GET_COPY: device d's own copy of a mirrored tensor. */
bp_status meta_tensor_get_copy(const struct bp_tensor *t, size_t d, void *dst, size_t offset, size_t size);
/* Byte copy between tensors of possibly different devices (same shape,
 * contiguous). */
bp_status meta_copy_tensor(const struct bp_tensor *src, struct bp_tensor *dst);

/* ---- derive.c: split states op by op ---- */

/* What a derived node needs on each device beyond its local tensor. */
enum meta_node_kind {
    META_NODE_COMPUTE = 0,   /* run the local node */
    META_NODE_VIEW,          /* no kernel */
    META_NODE_ADD_ONCE,      /* ADD of a mirrored term to a PARTIAL: devices > first copy */
};
/* Derive node's layout from its sources' (already derived) layouts. On
 * failure logs op and tensor and returns BP_ERR_UNSUPPORTED. *reduce_src
 * gets a bitmask of sources that must be all-reduced first (PARTIAL inputs
 * of ops that do not commute with the sum). */
bp_status meta_derive(struct bp_tensor *node, size_t n_dev, enum meta_node_kind *kind,
                      unsigned *reduce_src);
/* Device d's view of node's mirrored source slice_src cut to the slice the
 * node's layout gives d (after meta_derive chose to slice it). */
void meta_derive_local_slice(struct bp_tensor *node, size_t d);
/* Local shape/strides/data of a view node on device d from its source's local. */
bp_status meta_derive_local_view(struct bp_tensor *node, size_t d);

/* ---- allreduce*.c: closing a cut ---- */

struct meta_backend;
/* Every device's copy of PARTIAL tensor t becomes the sum, by the path
 * BACKPLANE_META_ALLREDUCE selects (allreduce_auto.c for auto). */
bp_status meta_allreduce(struct meta_backend *mb, struct bp_tensor *t);
/* One all-reduce of loc[0..n) by path p (synchronized); a comm path that
 * declines returns BP_ERR_UNSUPPORTED. */
bp_status meta_allreduce_by(struct meta_backend *be, size_t p, struct bp_tensor **loc);

#define META_AR_MAX_PATHS 8
#define META_AR_AUTO (-1)

/* One all-reduce path of a backend: a registry communicator, or (comm NULL)
 * the butterfly. */
struct meta_ar_path {
    char name[BP_META_ALLREDUCE_PATH_LEN];
    void *comm;
    bp_comm_allreduce_tensor_fn allreduce;
    bp_comm_free_fn free;
};

/* allreduce_paths.c: the paths of be (registry paths, then the butterfly)
 * and BACKPLANE_META_ALLREDUCE; logs one sentence on a bad value. */
bp_status meta_ar_paths_open(struct meta_backend *be);
void meta_ar_paths_close(struct meta_backend *be);
/* "comm, butterfly": the paths md's sub-devices offer, for the feature line. */
void meta_ar_describe(struct meta_device *md, char *buf, size_t cap);

/* allreduce_probe.c: BP_PROC_META_ALLREDUCE_PROBE. */
bp_status meta_ar_probe(struct bp_backend *b, size_t bytes, int32_t rounds,
                        struct bp_meta_allreduce_probe *out, size_t cap, size_t *n);
bp_status meta_ar_probe_be(struct meta_backend *be, size_t bytes, int32_t rounds,
                           struct bp_meta_allreduce_probe *out, size_t cap, size_t *n);

/* allreduce_auto.c: the process's choices per device set and size class. */
struct meta_ar_set;
/* The path auto takes for a message of `bytes` on be (measured on first
 * use per device set and class); -1 when not measured and !measure_now.
 * count: an all-reduce (counted in the stats), not a question. */
int meta_ar_auto_path(struct meta_backend *be, size_t bytes, bool measure_now, bool count);
bp_status meta_ar_choice(struct bp_backend *b, size_t bytes, int32_t measure, char *path, size_t cap);
void meta_ar_sets_free_all(void);

/* ---- backend.c ---- */

struct meta_worker {
    pthread_t thread;
    struct meta_backend *be;
    size_t index;
    _Atomic bool busy;                   /* its jobs have computed (backend.c) */
};

struct meta_plan;

struct meta_backend {
    struct bp_backend backend;
    struct meta_device *md;
    size_t n;
    struct bp_backend *sub[META_MAX_DEV];
    /* workers: one per sub-device, each runs its sub-graph */
    struct meta_worker worker[META_MAX_DEV];
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    /* Written under lock, read without it too while a thread spins before
     * it sleeps (backend.c, spin_until_changed). */
    _Atomic uint64_t generation;
    _Atomic size_t n_done;
    _Atomic bool quit;
    bool poll_allowed;                   /* no more hand-off threads than CPUs */
    bool main_busy;                      /* the calling thread's jobs have computed */
    uint32_t main_computed;              /* how many of them, up to META_SPIN_JOBS */
    _Atomic bool polling;                /* every thread's have: hand-offs poll (backend.c) */
    struct bp_graph *job[META_MAX_DEV];
    bp_status job_status[META_MAX_DEV];
    /* butterfly scratch per device */
    struct bp_buffer *scratch[META_MAX_DEV];
    size_t scratch_size;
    /* all-reduce paths: the registry's, then the butterfly (last) */
    struct meta_ar_path paths[META_AR_MAX_PATHS];
    size_t n_paths;
    int fixed_path;                      /* META_AR_AUTO, or BACKPLANE_META_ALLREDUCE's path */
    struct meta_ar_set *ar_set;          /* auto: the choices shared by this device set */
    int class_path[BP_META_ALLREDUCE_CLASSES]; /* auto: resolved choice per class, -1 unknown */
    struct bp_meta_stats stats;
    struct meta_plan *plans;            /* bounded cache */
    size_t n_plans;
};

/* Run g_i on sub-backend i for every i concurrently; NULL entries skip. */
bp_status meta_run_parallel(struct meta_backend *be, struct bp_graph **graphs);
bp_status meta_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out);
bool meta_is_meta_backend(const struct bp_backend *b);
bp_status meta_get_stats(struct bp_backend *b, struct bp_meta_stats *out);
/* Build g's plan over md as graph_compute would (deriving every split and
 * giving every slice its bytes, in g's buffers), free it, and raise
 * *reduce_max to the bytes the butterfly's scratch would need for it. */
bp_status meta_plan_measure(struct meta_device *md, struct bp_graph *g, size_t *reduce_max);

/* ---- measure.c: BP_PROC_META_MEASURE_TENSORS / _GRAPH ---- */

bp_status meta_measure_tensors(struct bp_device *meta, struct bp_tensor *const *tensors, size_t n, size_t *bytes);
bp_status meta_measure_graph(struct bp_device *meta, struct bp_graph *g, struct bp_tensor *const *leaves,
                             size_t n_leaves, size_t *bytes, size_t *scratch);

#endif /* BP_META_INTERNAL_H */
