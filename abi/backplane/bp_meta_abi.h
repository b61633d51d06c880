/*
 * bp_meta_abi.h — what the host and the meta plugin share about tensor
 * parallelism: split states, the application's split-state callback, and the
 * proc-address names the meta registry offers.
 *
 * A meta device spreads each tensor over N sub-devices. A tensor's split
 * state says how: AXIS_k (dimension k is cut into slices, one or more per
 * device), MIRRORED (a full copy on every device) or PARTIAL (every device
 * holds a partial sum; the value is their sum).
 *
 * Segments: a split axis may be a concatenation of independently split
 * parts. A fused QKV weight whose axis holds n_q query rows then n_kv key
 * rows then n_kv value rows is {{n_q, 1, g_q}, {n_kv, 2, g_kv}}: each segment
 * (ne elements, repeated `repeat` times) is divided over the devices on its
 * own, so every device gets matching slices of Q, K and V.
 *
 * ABI: enum values are frozen; struct layouts are fixed for major 1.
 */
#ifndef BP_META_ABI_H
#define BP_META_ABI_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "bp_status.h"
#include "bp_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_device;
struct bp_backend;
struct bp_buffer;

enum bp_meta_split_state {
    BP_META_SPLIT_AXIS_0   = 0,
    BP_META_SPLIT_AXIS_1   = 1,
    BP_META_SPLIT_AXIS_2   = 2,
    BP_META_SPLIT_AXIS_3   = 3,
    BP_META_SPLIT_MIRRORED = 4,
    BP_META_SPLIT_PARTIAL  = 5,
};
static_assert(BP_META_SPLIT_AXIS_0 == 0 && BP_META_SPLIT_AXIS_3 == 3 &&
              BP_META_SPLIT_MIRRORED == 4 && BP_META_SPLIT_PARTIAL == 5,
              "bp_meta_split_state values are frozen");

#define BP_META_MAX_SEGMENTS 8
#define BP_META_MAX_DEVICES  16

struct bp_meta_segment {
    int64_t ne;           /* elements of the axis in one copy of the segment */
    int64_t repeat;       /* copies laid out one after another (>= 1) */
    int64_t granularity;  /* slice boundaries are multiples of this; 0: the split's */
};

struct bp_meta_split {
    int32_t state;        /* enum bp_meta_split_state */
    int32_t n_segments;   /* 0: the whole axis is one segment */
    struct bp_meta_segment seg[BP_META_MAX_SEGMENTS];
    int64_t granularity;  /* elements (whole heads, tiles); 0 or 1: any. On axis 0
                           * the type's block size always applies as well. */
    int32_t rotation;     /* usually the layer index: moves which devices take
                           * the remainder, so no device always gets the extra */
    int32_t reserved;
};
static_assert(sizeof(struct bp_meta_segment) == 24, "bp_meta_segment layout is frozen");
static_assert(offsetof(struct bp_meta_split, granularity) == 8 + 24 * BP_META_MAX_SEGMENTS,
              "bp_meta_split layout is frozen");

/* The application's split-state callback, asked once per leaf tensor (weights,
 * KV caches, inputs) when it is placed in a meta buffer. Fill *out and return
 * 1, or return 0 for MIRRORED. Called from the allocating thread. */
/* Why the state travels application -> meta -> application at placement
 * (meta/buffer.c calls the callback, often the host's bp_meta_rules_split_fn
 * in split_rules.c): the rule belongs to the model (tensor names and
 * hyper-parameters that only the application knows), the placement belongs
 * to the plugin (which buffer, which sub-device, what slice), and the
 * tensor is complete only when it is placed. A callback asked at that
 * moment lets each side keep its own fact; a table pushed in advance would
 * make the plugin parse model names, and a state set per tensor afterwards
 * would need a second pass over every buffer. The plugin calls only the
 * function pointer it was given, so it never links against the host. */
typedef int (*bp_meta_split_fn)(void *user, const struct bp_tensor *t, struct bp_meta_split *out);

/* Traffic and structure counters of a meta backend (cumulative). */
struct bp_meta_stats {
    size_t   size;            /* sizeof as the caller compiled it */
    uint64_t graphs;          /* graph_compute calls */
    uint64_t cuts;            /* segments run, summed over graphs */
    uint64_t reductions;      /* all-reduces performed */
    uint64_t merged;          /* reductions saved by delaying or merging cuts */
    uint64_t bytes_reduced;   /* bytes of the reduced tensors (one copy each) */
    uint64_t comm_calls;      /* reductions handed to the registry's comm_allreduce_tensor */
    uint64_t comm_declined;   /* of those, declined (BP_ERR_UNSUPPORTED) and done by the butterfly */
    /* (1.1) BACKPLANE_META_ALLREDUCE=auto: size classes this backend
     * measured, and all-reduces whose class's choice was already made
     * (by this backend or another over the same sub-devices). */
    uint64_t allreduce_measured;
    uint64_t allreduce_cached;
    uint64_t scratch_bytes;   /* (1.1) the butterfly's scratch held now on each sub-device */
};
static_assert(offsetof(struct bp_meta_stats, comm_declined) ==
                  offsetof(struct bp_meta_stats, graphs) + 6 * sizeof(uint64_t),
              "bp_meta_stats layout is frozen");
static_assert(offsetof(struct bp_meta_stats, allreduce_cached) ==
                  offsetof(struct bp_meta_stats, graphs) + 8 * sizeof(uint64_t),
              "bp_meta_stats layout is frozen");

/* (1.1) The message-size classes of the all-reduce choice: 4 KB, 64 KB,
 * 1 MB and 16 MB (class k is 4096 << 4k bytes); a message belongs to the
 * class nearest on a log scale. `backplane check --comm` measures these. */
#define BP_META_ALLREDUCE_CLASSES 4
static inline size_t bp_meta_allreduce_class_bytes(int k) { return (size_t)4096 << (4 * k); }
static inline int bp_meta_allreduce_class_of(size_t bytes)
{
    int k = 0;
    while (k + 1 < BP_META_ALLREDUCE_CLASSES && bytes >= 4 * bp_meta_allreduce_class_bytes(k)) k++;
    return k;
}

#define BP_META_ALLREDUCE_PATH_LEN 32

/* (1.1) One all-reduce path measured by bp_meta_allreduce_probe. */
struct bp_meta_allreduce_probe {
    char path[BP_META_ALLREDUCE_PATH_LEN]; /* "butterfly", "comm", "comm:<registry's name>" */
    int32_t status;       /* BP_OK: measured; BP_ERR_UNSUPPORTED: declined; else failed */
    int32_t wrong;        /* 1: some device's sum differed from the host's */
    double seconds;       /* median over the rounds of one all-reduce (status BP_OK) */
    double max_abs_err;   /* largest difference from the host's sum */
};
static_assert(sizeof(struct bp_meta_allreduce_probe) == BP_META_ALLREDUCE_PATH_LEN + 24,
              "bp_meta_allreduce_probe layout is frozen");

/* ---- proc-address names on the "meta" registry ---- */

/* A meta device from a spec: "meta:cpu*4", "meta:cpu,vulkan0" (the "meta:"
 * prefix is optional). The device belongs to the plugin. */
#define BP_PROC_META_DEVICE_FROM_SPEC "bp_meta_device_from_spec"
typedef bp_status (*bp_meta_device_from_spec_fn)(const char *spec, struct bp_device **out);

/* A meta device over devs[0..n) (the same device may repeat); ratios NULL
 * for BACKPLANE_META_SPLIT or even; split_cb may be NULL (all leaves
 * MIRRORED). A meta device among devs is refused with BP_ERR_INVALID_ARGUMENT. */
#define BP_PROC_META_DEVICE_NEW "bp_meta_device_new"
typedef bp_status (*bp_meta_device_new_fn)(struct bp_device *const *devs, size_t n,
                                           const float *ratios, bp_meta_split_fn split_cb,
                                           void *user, struct bp_device **out);

/* Replace the split-state callback of a meta device (for devices made from a
 * spec). Affects tensors placed afterwards. */
#define BP_PROC_META_SET_SPLIT_FN "bp_meta_set_split_fn"
typedef bp_status (*bp_meta_set_split_fn_fn)(struct bp_device *meta, bp_meta_split_fn split_cb,
                                             void *user);

/* The split state of a tensor in a meta buffer (as placed or last derived)
 * and, when local_ne is not NULL, the extent of the split axis on each
 * sub-device (BP_META_MAX_DEVICES entries; all 0 for MIRRORED and PARTIAL). */
#define BP_PROC_META_TENSOR_SPLIT "bp_meta_tensor_split"
typedef bp_status (*bp_meta_tensor_split_fn)(const struct bp_tensor *t, int32_t *state,
                                             int64_t *local_ne);

/* Counters of a meta backend. */
#define BP_PROC_META_GET_STATS "bp_meta_get_stats"
typedef bp_status (*bp_meta_get_stats_fn)(struct bp_backend *b, struct bp_meta_stats *out);

/* Bytes each sub-device holds for a meta buffer (BP_META_MAX_DEVICES
 * entries, 0 past the device count): the sum of its slices there, so a
 * weight split 4 ways takes about a quarter of its size on each device. */
#define BP_PROC_META_BUFFER_DEVICE_BYTES "bp_meta_buffer_device_bytes"
typedef bp_status (*bp_meta_buffer_device_bytes_fn)(struct bp_buffer *buf, size_t *bytes);

/* (1.1) The sub-devices of a meta device, in split order: *n gets their
 * count and subs[0..min(cap, *n)) the devices (owned by their plugins).
 * BP_ERR_INVALID_ARGUMENT when meta is not a meta device. */
#define BP_PROC_META_DEVICE_SUB_DEVICES "bp_meta_device_sub_devices"
typedef bp_status (*bp_meta_device_sub_devices_fn)(struct bp_device *meta, struct bp_device **subs,
                                                   size_t cap, size_t *n);

/* (1.1) Reads size bytes at offset of sub-device `device`'s own copy of a
 * MIRRORED tensor t (or of a view of one), where an ordinary read returns
 * sub-device 0's: every device computes a mirrored node itself, so this is
 * how a caller (`backplane check`) proves each copy right. Any other split
 * state is BP_ERR_INVALID_ARGUMENT: its bytes are not a copy of t. */
#define BP_PROC_META_TENSOR_GET_COPY "bp_meta_tensor_get_copy"
typedef bp_status (*bp_meta_tensor_get_copy_fn)(const struct bp_tensor *t, size_t device, void *dst,
                                                size_t offset, size_t size);

/* (1.1) Measures every all-reduce path of meta backend b (the registry's
 * paths, then the butterfly) on `bytes` of F32 per sub-device, `rounds`
 * rounds alternating the paths; integer-valued inputs make every sum exact,
 * each checked against the host's. Fills out[0..min(cap, *n)); *n gets the
 * path count (0 with one sub-device: nothing to reduce). Calling thread;
 * not concurrently with graph_compute on b. */
#define BP_PROC_META_ALLREDUCE_PROBE "bp_meta_allreduce_probe"
typedef bp_status (*bp_meta_allreduce_probe_fn)(struct bp_backend *b, size_t bytes, int32_t rounds,
                                                struct bp_meta_allreduce_probe *out, size_t cap,
                                                size_t *n);

/* (1.1) The path b's all-reduce of a `bytes` message takes, into path[cap]:
 * under BACKPLANE_META_ALLREDUCE=auto the size class's choice (measured now
 * when `measure` and its sub-devices have no choice yet in this process,
 * else "not measured yet"), otherwise the fixed path. Calling thread; not
 * concurrently with graph_compute on b. */
#define BP_PROC_META_ALLREDUCE_CHOICE "bp_meta_allreduce_choice"
typedef bp_status (*bp_meta_allreduce_choice_fn)(struct bp_backend *b, size_t bytes, int32_t measure,
                                                 char *path, size_t cap);
/* (1.1) The bytes each sub-device would hold (BP_META_MAX_DEVICES entries,
 * 0 past the device count) if tensors[0..n), leaves without memory, were
 * placed together in one buffer of meta's buffer type: split by the
 * device's split callback as bp_context_alloc_tensors would, nothing
 * allocated. The tensors are left as they were. BP_ERR_INVALID_ARGUMENT for a
 * tensor that has memory or a device that is not a meta device. Caller's thread. */
#define BP_PROC_META_MEASURE_TENSORS "bp_meta_measure_tensors"
typedef bp_status (*bp_meta_measure_tensors_fn)(struct bp_device *meta, struct bp_tensor *const *tensors,
                                                size_t n, size_t *bytes);

/* (1.1) What computing g on meta would hold on each sub-device, nothing
 * allocated: bytes[d] for g's tensors without memory that are not among
 * leaves[0..n_leaves) (its inputs and intermediates, placed in one buffer as a
 * scheduler places them, each slice sized by the split its op derives), and
 * scratch[d] for the all-reduce scratch the graph needs when the butterfly
 * reduces (an upper bound where a comm path takes the sums). leaves (weights,
 * caches, also without memory) are placed as by bp_meta_measure_tensors and
 * not counted. Both arrays have BP_META_MAX_DEVICES entries. g and its
 * tensors are left as they were. Errors as graph_compute's derivation
 * (BP_ERR_UNSUPPORTED naming the op), BP_ERR_INVALID_ARGUMENT for a tensor
 * with memory. Caller's thread; not concurrently with a compute of g. */
#define BP_PROC_META_MEASURE_GRAPH "bp_meta_measure_graph"
typedef bp_status (*bp_meta_measure_graph_fn)(struct bp_device *meta, struct bp_graph *g,
                                              struct bp_tensor *const *leaves, size_t n_leaves,
                                              size_t *bytes, size_t *scratch);

#ifdef __cplusplus
}
#endif
#endif /* BP_META_ABI_H */
