/*
 * bp_profile.h — a backend's per-op profile, by proc-address name
 * (bp_device_proc_address(dev, BP_PROC_SET_PROFILE)); a device whose
 * registry does not answer the name is not profiled.
 */
#ifndef BP_PROFILE_H
#define BP_PROFILE_H

#include <stdint.h>

#include "bp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_backend;

/* (1.1) While p is set on backend b, every graph_compute on b adds to it.
 * The backend runs a graph as a sequence of steps (for the cpu plugin one
 * per node, or a few for a MUL_MAT; MUL_MATs that share an activation run
 * in one step), and the wall time of each step, from the end of the one
 * before to the end of its last task, goes to its node's op, so the ops'
 * times partition the time the threads worked on the graph; graph_ns is the
 * whole call, with the planning before the threads start (graph_ns minus
 * the ops' sum). ops[o] for o < n_ops, indexed by enum bp_op: nodes
 * computed and their nanoseconds; convert_ns is the part of
 * ops[BP_OP_MUL_MAT].ns spent converting activations to the weights'
 * dot-product type. The caller owns p (and ops), zeroes it and keeps it
 * alive until set_profile(b, NULL) or the backend's free; b must not
 * compute on two threads at once. n_ops > 0 with ops NULL is
 * BP_ERR_INVALID_ARGUMENT. The cpu plugin answers the same function under
 * its 1.0 name "bp_cpu_set_profile" (bp_cpu.h). */
#define BP_PROC_SET_PROFILE "bp_set_profile"
struct bp_profile_op {
    uint64_t count, ns;
};
struct bp_profile {
    uint64_t graphs, graph_ns, convert_ns;
    int n_ops;
    struct bp_profile_op *ops;
};
typedef bp_status (*bp_set_profile_fn)(struct bp_backend *b, struct bp_profile *p);

#ifdef __cplusplus
}
#endif
#endif /* BP_PROFILE_H */
