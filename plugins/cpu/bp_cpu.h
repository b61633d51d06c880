/*
 * bp_cpu.h — optional features of the cpu plugin by proc-address name
 * (bp_device_proc_address(dev, name)), beside the generic BP_PROC_* ones.
 */
#ifndef BP_CPU_H
#define BP_CPU_H

#include <backplane/bp_abi.h>

/* Cancellation: cb(data) runs on one compute thread after every node of
 * every graph computed by backend b; when it returns anything but BP_OK the
 * graph stops there and graph_compute returns that status. Outputs of
 * later nodes are then unspecified; the backend stays usable. cb NULL
 * removes the callback. */
#define BP_CPU_PROC_SET_ABORT_CALLBACK "bp_cpu_set_abort_callback"
typedef bp_status (*bp_cpu_abort_fn)(void *data);
typedef bp_status (*bp_cpu_set_abort_callback_fn)(struct bp_backend *b, bp_cpu_abort_fn cb,
                                                  void *data);

#endif
