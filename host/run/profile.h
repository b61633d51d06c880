/*
 * profile.h — per-op time of the graphs a session computes
 * (`backplane run --profile`, BACKPLANE_PROFILE=1).
 *
 * The timing is the device plugin's, not the host's: computing node by
 * node from here would take away what the CPU plugin does across nodes
 * (MUL_MATs sharing an activation in one step, no barrier between nodes)
 * and so change what is measured. A plugin that answers BP_PROC_SET_PROFILE
 * (bp_profile.h; the CPU plugin times each step of its plan with one clock
 * read) is profiled; a device whose plugin does not is not.
 */
#ifndef BP_RUN_PROFILE_H
#define BP_RUN_PROFILE_H

#include <stdio.h>

#include <backplane/backplane.h>

#include "decoder.h"

/* One profile: the plugin's counters and the ops array they index. */
struct bp_run_profile {
    struct bp_profile p;
    struct bp_profile_op ops[BP_OP_COUNT];
};

/* Zero pr and have every later graph of s add to it (pr NULL: stop). pr is
 * the caller's and must outlive its use. BP_ERR_UNSUPPORTED, with nothing
 * logged, when the session's device offers no profile. Not thread-safe
 * against a computing session. */
bp_status bp_run_profile_attach(struct bp_run_session *s, struct bp_run_profile *pr);

/* Print pr as a table (op, nodes per graph, total ms, share of the graph
 * time) under a heading naming what was profiled, e.g. "prefill". */
void bp_run_profile_print(FILE *f, const char *what, const struct bp_run_profile *pr);

#endif /* BP_RUN_PROFILE_H */
