/*
 * bp_sched.h — the scheduler: one graph computed over several backends.
 *
 * A scheduler is made over an ordered list of backends (priority order; the
 * last one is the fallback and should be a CPU backend). Given a graph it
 * assigns every node to a backend: a node that reads a weight (a leaf with
 * BP_TENSOR_FLAG_PARAM) runs where the weight lives when that device
 * computes the op, a node that writes memory the application allocated (a
 * SET_ROWS into a cache) runs on a backend that can write it, and the rest
 * follow their neighbours so a run of ops stays on one device. It then cuts
 * the graph into runs per backend, gives every tensor of the graph that has
 * no memory yet a place in a buffer it owns on the backend that computes it,
 * and copies a run's inputs that live where its device cannot read them into
 * buffers it owns. All of that is planned once per graph and reused: a
 * graph computed again plans and allocates nothing (see bp_sched_stats).
 *
 * Threads: a scheduler is used by one thread at a time. While it computes a
 * graph it edits the graph's nodes' src pointers (to its copies) and puts
 * them back before returning; compute a graph on one scheduler at a time.
 */
#ifndef BACKPLANE_SCHED_H
#define BACKPLANE_SCHED_H

#include <backplane/backplane.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most backends one scheduler takes. */
#define BP_SCHED_MAX_BACKENDS 8

struct bp_sched;

/* Options of bp_sched_new; zero-initialise, set size = sizeof, then what you need. */
struct bp_sched_options {
    size_t size;
    /* A node the first backend cannot compute is an error instead of running
     * on a later backend (BACKPLANE_SCHED_STRICT=1 sets it too). */
    bool strict;
};

/* A scheduler over backends[0..n) (not owned: they must outlive it). opts
 * may be NULL. Errors: NULL arguments, n == 0 or above BP_SCHED_MAX_BACKENDS,
 * a backend listed twice, an options size of 0 (status + a sentence). */
BP_API bp_status bp_sched_new(struct bp_backend *const *backends, size_t n,
                              const struct bp_sched_options *opts, struct bp_sched **out);
/* Free the scheduler, its plans and buffers. Tensors it placed keep
 * pointers into freed buffers: do not compute their graphs afterwards. */
BP_API void bp_sched_free(struct bp_sched *s);

/* Plan g (assign, split, allocate) unless a plan for the same graph object
 * or the same node list exists. Afterwards every tensor of g has memory, so
 * inputs can be written with bp_tensor_set. Intermediates share memory
 * along g (as bp_context_alloc_graph's): after a compute read the last node
 * and nodes flagged BP_TENSOR_FLAG_OUTPUT, whose bytes are kept. An op no
 * backend computes, or (strict) one the first backend declines, is an
 * error naming the op, the tensor and the backends. */
BP_API bp_status bp_sched_alloc_graph(struct bp_sched *s, struct bp_graph *g);
/* The bytes bp_sched_alloc_graph would allocate for g, per backend in the
 * order of bp_sched_new (bytes[0..n)): its tensors without memory and the
 * copies, one buffer each per backend; nothing is allocated or cached.
 * Leaves without memory in leaf_ctx[i] count as living in leaf_buft[i] (a
 * plan made before the weights are uploaded). g's tensors get no memory;
 * nodes read by a later run are flagged BP_TENSOR_FLAG_OUTPUT, as when
 * planned for real. Errors as bp_sched_alloc_graph, plus NULL arguments. */
BP_API bp_status bp_sched_measure_graph(struct bp_sched *s, const struct bp_graph *g,
                                        struct bp_context *const *leaf_ctx,
                                        struct bp_buffer_type *const *leaf_buft, size_t n_leaf,
                                        size_t *bytes);
/* Bytes of the buffers the scheduler holds (all planned graphs, tensors and
 * copies) on the backends of dev; 0 for a NULL scheduler. */
BP_API size_t bp_sched_buffer_bytes(const struct bp_sched *s, const struct bp_device *dev);
/* The buffers the scheduler holds on the backends of dev (all planned
 * graphs): their count, out[0..min(cap, count)) filled. They stay the
 * scheduler's; valid until the next plan is made or reset. Any thread that
 * owns s. */
BP_API size_t bp_sched_buffers(const struct bp_sched *s, const struct bp_device *dev, struct bp_buffer **out,
                               size_t cap);
/* Compute g (planning it first when needed): each run on its backend, the
 * copies between them. May return before asynchronous backends finish:
 * call bp_sched_synchronize before reading results. */
BP_API bp_status bp_sched_graph_compute(struct bp_sched *s, struct bp_graph *g);
/* Wait for every backend of the scheduler. */
BP_API bp_status bp_sched_synchronize(struct bp_sched *s);
/* Forget the plan of g: free its buffers and take memory back from the
 * tensors it placed (they must still exist: call this before freeing the
 * graph's context). No-op when g has no plan. */
BP_API void bp_sched_reset_graph(struct bp_sched *s, struct bp_graph *g);
/* The backend that computes node t in its planned graph, or NULL. */
BP_API struct bp_backend *bp_sched_node_backend(struct bp_sched *s, const struct bp_tensor *t);

/* Placement of one planned graph, per backend. */
struct bp_sched_backend_summary {
    const char *name;          /* the backend's device name */
    uint32_t n_nodes;          /* nodes computed there (views excluded) */
    uint32_t n_runs;           /* runs of consecutive nodes */
    uint32_t n_copies_in;      /* copies into this backend per compute */
    uint64_t bytes_in;         /* their bytes per compute */
};
struct bp_sched_op_count {
    enum bp_op op;
    uint32_t count;
};
/* Filled by bp_sched_graph_summary; pointers are the scheduler's and stay
 * valid until the graph's plan is reset or the scheduler freed. */
struct bp_sched_summary {
    size_t size;               /* set to sizeof by the caller */
    size_t n_backends;
    const struct bp_sched_backend_summary *backends;
    /* Ops the first backend declines, so they ran on a later one. */
    size_t n_fallback_ops;
    const struct bp_sched_op_count *fallback_ops;
    uint32_t n_fallback_nodes;
    uint32_t n_runs;           /* all backends */
    uint32_t n_copies;         /* per compute */
    uint64_t bytes_copied;     /* per compute */
};
/* The placement of g (planned by bp_sched_alloc_graph or _graph_compute).
 * BP_ERR_NOT_FOUND when g has no plan. */
BP_API bp_status bp_sched_graph_summary(struct bp_sched *s, const struct bp_graph *g,
                                        struct bp_sched_summary *out);
/* The summary as one line: "partial0 52 nodes/9 runs, cpu 60 nodes/9 runs;
 * fell back: GET_ROWS x1, ROPE x4; 18 copies (3.1 KiB)". Returns buf. */
BP_API const char *bp_sched_summary_format(const struct bp_sched_summary *sum, char *buf,
                                           size_t cap);

/* Counters since bp_sched_new: a graph computed again adds to computes,
 * copies and bytes_copied only. */
struct bp_sched_stats {
    size_t size;               /* set to sizeof by the caller */
    uint64_t plans_made;
    uint64_t buffers_allocated;
    uint64_t computes;
    uint64_t copies;
    uint64_t bytes_copied;
};
/* Copies the counters into *out, as far as out->size covers (set it to
 * sizeof *out first); all zero when s is NULL. Same thread rules as s. */
BP_API void bp_sched_get_stats(const struct bp_sched *s, struct bp_sched_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_SCHED_H */
