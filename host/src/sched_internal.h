/*
 * sched_internal.h — what the scheduler's files share: the scheduler, its
 * per-graph plans, and the passes that make a plan.
 *
 *   sched.c         API, plan cache, compute loop, counters
 *   sched_assign.c  node -> backend (pin, expand down/up, first that can)
 *   sched_plan.c    runs, copies, the plan's buffers
 *   sched_copy.c    one boundary copy (async where both ends offer it)
 *   sched_summary.c placement summary as data and as a line
 */
#ifndef BP_HOST_SCHED_INTERNAL_H
#define BP_HOST_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor_internal.h"

/* One boundary copy: src (where the reading backend cannot see it) into dst,
 * a tensor of the plan in a buffer of backend `to`. */
struct sched_copy {
    struct bp_tensor *src;
    struct bp_tensor *dst;
    int from;                  /* backend that produces src; -1: a leaf */
    int to;
};

/* A node source redirected to a copy while a run computes. */
struct sched_swap {
    struct bp_tensor *node;
    int slot;
    struct bp_tensor *orig;
    struct bp_tensor *copy;
};

/* A run: consecutive nodes on one backend, the copies made before it and
 * the source swaps in force while it computes. */
struct sched_run {
    int backend;
    struct bp_graph g;         /* nodes point into plan->run_nodes */
    size_t copy_first, n_copies;
    size_t swap_first, n_swaps;
};

struct sched_plan {
    struct sched_plan *next;
    const struct bp_graph *key;
    int32_t n_nodes;
    struct bp_tensor **nodes;  /* the node list when planned: the structure key */
    int *assign;               /* per node: backend index */
    int32_t *run_of;           /* per node: its run */
    struct bp_tensor **run_nodes;
    struct sched_run *runs;
    size_t n_runs;
    struct sched_copy *copies;
    size_t n_copies;
    struct sched_swap *swaps;
    size_t n_swaps;
    size_t max_copy;           /* bytes of the largest copy (staging size) */
    struct bp_context *copy_ctx;          /* the copies' tensors */
    struct bp_buffer *bufs[2 * BP_SCHED_MAX_BACKENDS]; /* per backend: tensors, copies */
    struct bp_tensor **placed;            /* tensors given memory here (views too) */
    size_t n_placed;
    /* summary */
    struct bp_sched_backend_summary per_backend[BP_SCHED_MAX_BACKENDS];
    struct bp_sched_op_count fallback[BP_OP_COUNT];
    size_t n_fallback_ops;
    uint32_t n_fallback_nodes;
    uint64_t bytes_copied;
};

struct bp_sched {
    struct bp_backend *be[BP_SCHED_MAX_BACKENDS];
    struct bp_event *ev[BP_SCHED_MAX_BACKENDS];   /* NULL: the backend has no events */
    bool pending[BP_SCHED_MAX_BACKENDS];          /* work queued since its last synchronize */
    int n;
    bool strict;
    struct sched_plan *plans;
    void *staging;             /* host bytes for copies neither end can do alone */
    size_t staging_size;
    struct bp_sched_stats stats;
    /* bp_sched_measure_graph in progress: place() counts bytes per backend
     * and points tensors at measure[b] (no memory) instead of allocating. */
    struct bp_buffer *measure;
    size_t *measured;
};

/* sched_assign.c — plan->assign for every node; an error names the op, the
 * tensor and the backends. */
BP_HIDDEN bp_status sched__assign(struct bp_sched *s, struct sched_plan *p);
/* The backend index that owns t's memory (buffer's device first, then the
 * first that can use the buffer type), or -1. */
BP_HIDDEN int sched__memory_backend(const struct bp_sched *s, const struct bp_tensor *t);
/* True when backend i's device can use buffer type buft. */
BP_HIDDEN bool sched__reads(const struct bp_sched *s, int i, struct bp_buffer_type *buft);
BP_HIDDEN const char *sched__name(const struct bp_sched *s, int i);

/* sched_plan.c — runs, copies, buffers; needs plan->assign. */
BP_HIDDEN bp_status sched__split(struct bp_sched *s, struct sched_plan *p);
BP_HIDDEN void sched__plan_free(struct sched_plan *p, bool unplace);

/* sched_copy.c — perform one copy, ordered after src's producer and before
 * the reading run. */
BP_HIDDEN bp_status sched__copy(struct bp_sched *s, const struct sched_copy *c);

/* sched_summary.c — fill the plan's summary fields and log it at info. */
BP_HIDDEN void sched__summarize(struct bp_sched *s, struct sched_plan *p);

#endif /* BP_HOST_SCHED_INTERNAL_H */
