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

/* Per-op profile: while p is set on backend b, every graph_compute on b
 * adds to it. A graph runs as a sequence of steps (one per node, or a few
 * for a MUL_MAT; MUL_MATs that share an activation run in one step), and
 * the wall time of each step, from the end of the one before to the end of
 * its last task, goes to its node's op, so the ops' times partition the
 * time the threads worked on the graph; graph_ns is the whole call, with
 * the planning before the threads start (graph_ns minus the ops' sum).
 * Costs one clock read per step (a few hundred per graph). ops[o] for o <
 * n_ops, indexed by enum bp_op: nodes computed and their nanoseconds;
 * convert_ns is the part of ops[BP_OP_MUL_MAT].ns spent converting
 * activations to the weights' dot-product type. The caller owns p (and
 * ops), zeroes it and keeps it alive until set_profile(b, NULL) or the
 * backend's free; b must not compute on two threads at once. */
#define BP_CPU_PROC_SET_PROFILE "bp_cpu_set_profile"
struct bp_cpu_op_time {
    uint64_t count, ns;
};
struct bp_cpu_profile {
    uint64_t graphs, graph_ns, convert_ns;
    int n_ops;
    struct bp_cpu_op_time *ops;
};
typedef bp_status (*bp_cpu_set_profile_fn)(struct bp_backend *b, struct bp_cpu_profile *p);

/* Whether MUL_MAT may use the AMX tile kernels (prefill, avx512 variant;
 * on where the CPU and OS have AMX-INT8 unless BACKPLANE_CPU_AMX=0): for
 * measuring them against the VNNI kernels in one process. Process-wide,
 * takes effect from the next graph; call it between computes. on = true
 * where AMX cannot run is BP_ERR_UNSUPPORTED (nothing changes). */
#define BP_CPU_PROC_SET_AMX "bp_cpu_set_amx"
typedef bp_status (*bp_cpu_set_amx_fn)(struct bp_device *dev, bool on);

#endif
