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

#endif
