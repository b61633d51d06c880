/*
 * bp_cpu.h — optional features of the cpu plugin by proc-address name
 * (bp_device_proc_address(dev, name)), beside the generic BP_PROC_* ones.
 */
#ifndef BP_CPU_H
#define BP_CPU_H

#include <backplane/bp_abi.h>

/* Cancellation: cb(data) runs on one compute thread after every node of
 * every graph computed by backend b (once after a group of MUL_MATs that
 * share their activation and run as one step); when it returns anything
 * but BP_OK the graph stops there and graph_compute returns that status.
 * Outputs of later nodes are then unspecified; the backend stays usable.
 * cb NULL removes the callback. */
#define BP_CPU_PROC_SET_ABORT_CALLBACK "bp_cpu_set_abort_callback"
typedef bp_status (*bp_cpu_abort_fn)(void *data);
typedef bp_status (*bp_cpu_set_abort_callback_fn)(struct bp_backend *b, bp_cpu_abort_fn cb,
                                                  void *data);

/* Weights in the CPU's own layout: the "CPU_REPACK" buffer type of device
 * dev (also returned by the generic BP_PROC_WEIGHT_BUFFER_TYPE proc). Q4_0,
 * Q8_0 and Q4_K tensors of at least 8 rows allocated in it are stored
 * with the blocks of 8 rows interleaved (converted in bp_tensor_set and back
 * in bp_tensor_get, any byte range), which MUL_MAT reads several times
 * faster; any other op refuses them (supports_op is false), so put only
 * MUL_MAT weights there. Other tensors in it are stored as usual. The
 * buffer is not host memory: raw buffer reads see the device layout. */
#define BP_CPU_PROC_REPACK_BUFFER_TYPE "bp_cpu_repack_buffer_type"
typedef struct bp_buffer_type *(*bp_cpu_repack_buffer_type_fn)(struct bp_device *dev);

/* Per-op profile: the generic BP_PROC_SET_PROFILE (bp_profile.h) under
 * its 1.0 name. The old type names are the new types (one layout), so code
 * and binaries built against them keep working. */
#define BP_CPU_PROC_SET_PROFILE "bp_cpu_set_profile"
#define bp_cpu_op_time bp_profile_op
#define bp_cpu_profile bp_profile
typedef bp_set_profile_fn bp_cpu_set_profile_fn;

/* (1.1) Graph plans of backend b: the backend plans a graph once (which
 * kernel per node, MUL_MAT groups, task splits, work-buffer size) and reuses
 * the plan while every node and source keeps its address, type, op, shape,
 * strides, op parameters, data address and weight layout and the thread
 * count is the same; made counts plans made, reused the calls that reused
 * one, make_ns and lookup_ns the time spent making them and comparing keys,
 * cached the plans held now (at most 8; freed with the backend). Fills the
 * first out->size bytes (set size = sizeof *out); b not a cpu backend or
 * size too small for `size` itself is BP_ERR_INVALID_ARGUMENT. Not
 * thread-safe against a computing b. */
#define BP_CPU_PROC_PLAN_STATS "bp_cpu_plan_stats"
struct bp_cpu_plan_stats {
    size_t size;
    uint64_t made, reused;
    uint64_t make_ns, lookup_ns;
    int32_t cached;
    /* (1.1) MUL_MATs in the plans made that read the activation
     * rows an earlier step of their graph converted, instead of converting
     * them again (a layer's Q, K and V when they cannot share a step). */
    uint64_t converts_shared;
    /* (1.1) MUL_MATs in the plans made that compute in an earlier
     * one's chunk step (plan.h): a layer's K and V beside Q, up beside
     * gate, when the graph keeps their outputs apart. */
    uint64_t mul_mats_joined;
};
typedef bp_status (*bp_cpu_plan_stats_fn)(struct bp_backend *b, struct bp_cpu_plan_stats *out);

/* Whether MUL_MAT may use the AMX tile kernels (prefill, avx512 variant;
 * on where the CPU and OS have AMX-INT8 unless BACKPLANE_CPU_AMX=0): for
 * measuring them against the VNNI kernels in one process. Process-wide,
 * takes effect from the next graph; call it between computes. on = true
 * where AMX cannot run is BP_ERR_UNSUPPORTED (nothing changes). */
#define BP_CPU_PROC_SET_AMX "bp_cpu_set_amx"
typedef bp_status (*bp_cpu_set_amx_fn)(struct bp_device *dev, bool on);

#endif
