/*
 * plan.h — the plan of one graph on a CPU backend (plan.c) and the cache
 * that keeps it while the graph is unchanged (plan_cache.c).
 *
 * A graph runs as a list of steps, each a set of tasks that any thread may
 * take, in any order: a step starts when the one before has finished, and
 * nothing else makes a thread wait. Tasks are handed out in order, except
 * in the chunk steps of decode-shaped MUL_MATs, where each thread owns a
 * contiguous range of chunks (one part of the weight, streamed) and takes
 * the others' from their far ends once its own is done (task_claim.h). In
 * prefill every chunk row of the weight meets many activation blocks, and
 * chunks in order keep the threads on the same weight rows at the same
 * time, read once from memory for both. So a worker that the OS has not
 * scheduled yet holds nobody up: the running threads take its tasks, and it
 * finds them gone when it catches up. (With a barrier per node, on two
 * cores shared with other work, every node waited for the slowest thread
 * to be scheduled, and two threads decoded slower than one.) Task c of a
 * step is the kernel's share ith = c of nth = the node's task count, so
 * results are those of nth threads whoever computes them. A MUL_MAT_ID's
 * chunk count depends on its ids: a one-task route step writes it into the
 * work buffer, and its chunk step is "counted" (the backend reads the count
 * when the step before ends).
 *
 * MUL_MATs that read the same activation in the same converted layout (a
 * layer's Q, K and V; FFN gate and up) share one convert step and one
 * chunk step: the later ones are moved up to the first (plan.c,
 * join_mul_mats), which takes two step boundaries off each, and lets a
 * thread that finishes one weight's chunks go straight on to the next
 * weight's. The step's task c is chunk c - start of the member whose
 * [start, end) holds c: the same chunks as when the nodes run apart, so
 * results are bit-equal. A MUL_MAT that cannot join (its output overlaps a
 * member's: the graph allocator reused the bytes) still skips its convert
 * step when the shared work part holds its activation's rows, converted by
 * an earlier step and overwritten by nothing since (plan.c, plan_node).
 *
 * A plan is a pure function of its key (plan_cache.c): the thread count and,
 * for every node and every source of a node, the tensor's address, its
 * type, op, shape, strides, op parameters, data address and weight layout.
 * Everything the plan says (which nodes the device supports, step kinds,
 * task counts, chunk grids, which MUL_MATs join — decided by byte ranges —,
 * work-buffer sizes) is derived from those fields alone, so equal keys give
 * equal plans and a reused plan can never be stale. Shapes are in the key
 * on purpose: support, chunk grids, joins and sizes all depend on them, and
 * re-deriving them is the whole of planning. The runner's decode graphs
 * keep one KV capacity per bucket (the mask hides the unwritten positions),
 * so its decode steps repeat one shape and plan once; a caller that grows
 * the KV view every step re-plans every step, at the cost of planning
 * before this cache and never with a wrong plan.
 */
#ifndef BP_CPU_PLAN_H
#define BP_CPU_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>

#include "bp_cpu.h"
#include "cpu_internal.h"

enum cpu_step_kind {
    CPU_STEP_PREPARE,   /* one task: the node's prepare (checks ids) */
    CPU_STEP_SHARES,    /* task c is compute() as thread c of n */
    CPU_STEP_MM_CONVERT,/* task c is cpu_mul_mat_convert as thread c of n */
    CPU_STEP_MM_CHUNKS, /* task c is cpu_mul_mat_chunk c (of the grid for nth) */
    CPU_STEP_ALL,       /* a kernel with barriers inside: every thread, as itself */
    CPU_STEP_MMID_ROUTE,   /* one task: the MUL_MAT_ID's id check and cpu_mul_mat_id_route */
    CPU_STEP_MMID_CONVERT, /* task c is cpu_mul_mat_id_convert as thread c of n */
    CPU_STEP_MMID_CHUNKS,  /* task c is cpu_mul_mat_id_chunk c; n is the route's count */
};

struct cpu_step {
    int32_t node;           /* CPU_STEP_MM_CHUNKS: members[m0 .. m0 + nm) instead */
    int32_t m0, nm;
    int kind;
    int nth;                /* the nth the kernel sees */
    int64_t n;              /* tasks */
    bool last;              /* the node's last step: run the abort callback after it */
    bool owned;             /* tasks in per-thread ranges, not in order (see above) */
    bool counted;           /* n is known at run time only: the work buffer says (MMID_CHUNKS) */
    size_t claim0;          /* its claim words: [claim0 ..], nth if owned, else 1 */
};

/* One node of a chunk step: its chunks are the step's tasks [previous end, end). */
struct cpu_member {
    int32_t node;
    int64_t end;
};

struct cpu_plan_rec;

struct cpu_plan {
    /* The key (plan_cache.c). */
    int nth;
    int32_t n_nodes;
    int32_t n_recs;             /* the nodes' (record i is node i), then the leaves' */
    struct cpu_plan_rec *recs;
    int32_t *src_rec;           /* [node * BP_MAX_SRC + s]: the record of src[s], -1 if NULL */
    uint64_t used;              /* the cache's clock at its last use */
    /* The plan. Read-only once made: what changes while a graph runs lives
     * in the backend (task counters, claim words, step end times). */
    int32_t n_steps;
    struct cpu_step *steps;
    struct cpu_member *members;
    size_t n_claims;            /* claim words of all steps */
    size_t shared;              /* bytes of the work buffer's shared part (aligned) */
    size_t per_thread;          /* bytes of each thread's slice (aligned) */
    int32_t converts_shared;    /* MUL_MATs reading an earlier one's converted rows */
    int32_t mul_mats_joined;    /* MUL_MATs computing in an earlier one's chunk step */
    uint64_t make_ns;           /* what making it took */
};

/* plan.c: make the plan of g for nth threads into *out (new, the caller
 * frees it with cpu_plan_free). Every check that can fail is made here, on
 * the calling thread, so that running the plan cannot fail half-way; a graph
 * the device cannot run is logged (one sentence naming the node) and
 * returned as BP_ERR_INVALID_ARGUMENT, BP_ERR_UNSUPPORTED or
 * BP_ERR_OUT_OF_MEMORY with *out NULL. The key is not filled in. */
bp_status cpu_plan_make(const struct cpu_plugin *pl, const struct bp_graph *g, int nth,
                        struct cpu_plan **out);
/* Free p and everything it holds (NULL is a no-op). */
void cpu_plan_free(struct cpu_plan *p);

/* plan_cache.c: the last CPU_PLAN_CACHE plans of one backend, least
 * recently used evicted; the memory is that of the plans (each linear in
 * its graph's size) and is freed with the backend. One thread at a time,
 * as the backend computes one graph at a time. */
#define CPU_PLAN_CACHE 8
struct cpu_plan_cache {
    struct cpu_plan *plans[CPU_PLAN_CACHE];
    uint64_t clock;
    struct bp_cpu_plan_stats stats;
};

/* The plan of g for nth threads: a cached one whose key equals g's now, or
 * a new one (cpu_plan_make), which is cached. *out belongs to the cache and
 * stays valid until the next call. Errors are cpu_plan_make's. */
bp_status cpu_plan_get(struct cpu_plan_cache *c, const struct cpu_plugin *pl,
                       const struct bp_graph *g, int nth, const struct cpu_plan **out);
/* Free every cached plan (the cache itself is the caller's). */
void cpu_plan_cache_free(struct cpu_plan_cache *c);

#endif /* BP_CPU_PLAN_H */
