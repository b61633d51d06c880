/* backend.c — the meta backend: a stream per sub-device, a worker thread per
 * extra sub-device (synchronous backends like the CPU one run side by side),
 * and graph compute: derive every node's split, cut after PARTIAL nodes at
 * the last moment, run each segment on all devices, close it with an
 * all-reduce. Plans are cached per graph (bounded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "meta_internal.h"

#define META_MAX_PLANS 16

enum { STEP_SEGMENT, STEP_REDUCE };

struct meta_step {
    int kind;
    struct bp_graph g[META_MAX_DEV];
    struct bp_tensor *reduce;
};

struct meta_plan {
    struct meta_plan *next;
    const struct bp_graph *key_graph;
    int32_t n_nodes;
    struct bp_tensor **nodes;
    void **datas;
    uint64_t *serials;                   /* per node: its record's, then its sources' (0: none) */
    struct meta_step *steps;
    size_t n_steps, cap_steps;
    struct bp_tensor **zero;             /* local tensors to zero before running */
    size_t n_zero, cap_zero;
    uint64_t n_segments, n_reductions, n_merged, bytes_reduced;
};

/* ---- workers ---- */

/* How long a thread handing segments over polls before it sleeps on the
 * condition variable. A decode step of the 1B model is 44 segments, each
 * handed to the workers and waited for: a sleeping thread took 3 us to
 * 4 ms to wake on the 2-core VM (mean 43-87 us), which cost meta:cpu*2
 * a fifth of its decode speed. Segments follow each other after one
 * all-reduce (microseconds), so the poll almost always ends in time, and
 * an idle backend sleeps after it. Only a thread that computes polls
 * (META_SPIN_JOBS of its jobs took META_SPIN_MIN_JOB_US of its own CPU
 * time or more; CPU time, as a thread preempted mid-job is not computing,
 * and a GPU's synchronize sleeps): one whose
 * sub-device never computes there (a dist: job's other ranks, whose
 * placeholders return at once) has no core of its own to keep, and its
 * polling took the cores of the threads that compute (dist:cpu with 2
 * ranks on 2 cores: 50.7 -> 19.1 tokens/s). So the threads poll only
 * once every one of them has computed (`polling`): with one that has not,
 * the others' polling competes with it, or, in a dist: job, with the
 * calling thread's MPI all-reduce (21.9 tokens/s in one such run); and
 * never with more threads than CPUs (meta:cpu*3 on 2 cores: 29.3 -> 7.3). */
#define META_SPIN_US 500
#define META_SPIN_MIN_JOB_US 5
#define META_SPIN_JOBS 4

/* The calling thread's CPU time in microseconds. */
static uint64_t thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Counts a job of t0..now CPU microseconds towards *computed; true once
 * META_SPIN_JOBS jobs have computed (then nothing is measured any more). */
static bool job_computed(uint32_t *computed, uint64_t t0)
{
    if (*computed < META_SPIN_JOBS && thread_cpu_us() - t0 >= META_SPIN_MIN_JOB_US) (*computed)++;
    return *computed >= META_SPIN_JOBS;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Polls until *word differs from old (or quit is set) or META_SPIN_US has
 * passed; the caller then checks and waits under the lock as before. */
static void spin_until_changed(struct meta_backend *be, _Atomic uint64_t *word, uint64_t old)
{
    const uint64_t end = now_us() + META_SPIN_US;
    do {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(word, memory_order_acquire) != old ||
                atomic_load_explicit(&be->quit, memory_order_relaxed))
                return;
            cpu_relax();
        }
    } while (now_us() < end);
}

static void *worker_main(void *arg)
{
    struct meta_worker *w = arg;
    struct meta_backend *be = w->be;
    uint64_t seen = 0;
    uint32_t computed = 0;
    for (;;) {
        if (atomic_load_explicit(&be->polling, memory_order_relaxed))
            spin_until_changed(be, &be->generation, seen);
        pthread_mutex_lock(&be->lock);
        while (!be->quit && be->generation == seen) pthread_cond_wait(&be->go, &be->lock);
        if (be->quit) {
            pthread_mutex_unlock(&be->lock);
            break;
        }
        seen = be->generation;
        struct bp_graph *g = be->job[w->index];
        pthread_mutex_unlock(&be->lock);
        bp_status st = BP_OK;
        struct bp_backend *sb = be->sub[w->index];
        const bool known = atomic_load_explicit(&w->busy, memory_order_relaxed);
        const uint64_t t0 = known ? 0 : thread_cpu_us();
        if (g && g->n_nodes > 0) {
            st = sb->iface->graph_compute(sb, g);
            if (st == BP_OK) st = meta_sub_synchronize(sb);
        }
        if (!known && job_computed(&computed, t0)) atomic_store_explicit(&w->busy, true, memory_order_relaxed);
        pthread_mutex_lock(&be->lock);
        be->job_status[w->index] = st;
        be->n_done++;
        pthread_cond_broadcast(&be->done);
        pthread_mutex_unlock(&be->lock);
    }
    return NULL;
}

bp_status meta_run_parallel(struct meta_backend *be, struct bp_graph **graphs)
{
    pthread_mutex_lock(&be->lock);
    for (size_t i = 0; i < be->n; i++) be->job[i] = graphs[i];
    be->n_done = 0;
    be->generation++;
    pthread_cond_broadcast(&be->go);
    pthread_mutex_unlock(&be->lock);
    /* device 0 runs on the calling thread */
    bp_status st0 = BP_OK;
    struct bp_backend *sb = be->sub[0];
    const uint64_t t0 = be->main_busy ? 0 : thread_cpu_us();
    if (graphs[0] && graphs[0]->n_nodes > 0) {
        st0 = sb->iface->graph_compute(sb, graphs[0]);
        if (st0 == BP_OK) st0 = meta_sub_synchronize(sb);
    }
    if (!be->main_busy) be->main_busy = job_computed(&be->main_computed, t0);
    const uint64_t t1 = now_us();
    bool poll = be->poll_allowed && be->main_busy;
    for (size_t i = 1; i < be->n && poll; i++) poll = atomic_load_explicit(&be->worker[i].busy, memory_order_relaxed);
    atomic_store_explicit(&be->polling, poll, memory_order_relaxed);
    const uint64_t end = poll ? t1 + META_SPIN_US : t1;
    while (atomic_load_explicit(&be->n_done, memory_order_acquire) < be->n - 1 && now_us() < end)
        for (int i = 0; i < 64; i++) cpu_relax();
    pthread_mutex_lock(&be->lock);
    while (be->n_done < be->n - 1) pthread_cond_wait(&be->done, &be->lock);
    bp_status st = st0;
    for (size_t i = 1; i < be->n && st == BP_OK; i++) st = be->job_status[i];
    pthread_mutex_unlock(&be->lock);
    return st;
}

/* ---- plans ---- */

/* A plan points at the per-device tensors of the records of a graph's nodes
 * and their sources; it is only valid while those very records live. The
 * pointers alone cannot tell (a graph rebuilt after freeing its buffers gets
 * the same addresses), the records' serials can. */
#define SERIALS_PER_NODE (1 + BP_MAX_SRC)

static void node_serials(const struct bp_tensor *node, uint64_t *out)
{
    for (int s = -1; s < BP_MAX_SRC; s++) {
        const struct bp_tensor *t = s < 0 ? node : node->src[s];
        const struct meta_tensor *mt = t ? meta_tensor_of(t) : NULL;
        out[s + 1] = mt ? mt->serial : 0;
    }
}

static void plan_free(struct meta_plan *p)
{
    if (!p) return;
    for (size_t s = 0; s < p->n_steps; s++)
        for (size_t d = 0; d < META_MAX_DEV; d++) free(p->steps[s].g[d].nodes);
    free(p->steps);
    free(p->zero);
    free(p->nodes);
    free(p->datas);
    free(p->serials);
    free(p);
}

static struct meta_step *add_step(struct meta_plan *p, int kind)
{
    if (p->n_steps == p->cap_steps) {
        size_t cap = p->cap_steps ? p->cap_steps * 2 : 8;
        struct meta_step *v = realloc(p->steps, cap * sizeof *v);
        if (!v) return NULL;
        p->steps = v;
        p->cap_steps = cap;
    }
    struct meta_step *s = &p->steps[p->n_steps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    return s;
}

static bool graph_push(struct bp_graph *g, struct bp_tensor *t)
{
    if (g->n_nodes == g->capacity) {
        int32_t cap = g->capacity ? g->capacity * 2 : 16;
        struct bp_tensor **v = realloc(g->nodes, (size_t)cap * sizeof *v);
        if (!v) return false;
        g->nodes = v;
        g->capacity = cap;
    }
    g->nodes[g->n_nodes++] = t;
    return true;
}

static bool zero_push(struct meta_plan *p, struct bp_tensor *t)
{
    if (p->n_zero == p->cap_zero) {
        size_t cap = p->cap_zero ? p->cap_zero * 2 : 8;
        struct bp_tensor **v = realloc(p->zero, cap * sizeof *v);
        if (!v) return false;
        p->zero = v;
        p->cap_zero = cap;
    }
    p->zero[p->n_zero++] = t;
    return true;
}

static bool step_empty(const struct meta_step *s, size_t n)
{
    for (size_t d = 0; d < n; d++) if (s->g[d].n_nodes) return false;
    return true;
}

/* Close the open segment (if it has work) and queue a reduction of t. */
static bp_status add_reduce(struct meta_plan *p, struct meta_step **open, size_t n, struct bp_tensor *t)
{
    if (*open && step_empty(*open, n)) p->n_steps--; /* drop an empty segment */
    else if (*open) p->n_segments++;
    struct meta_step *r = add_step(p, STEP_REDUCE);
    if (!r) return BP_ERR_OUT_OF_MEMORY;
    r->reduce = t;
    p->n_reductions++;
    p->bytes_reduced += bp_nbytes(t);
    meta_layout_simple(&meta_tensor_of(t)->layout, BP_META_SPLIT_MIRRORED);
    *open = add_step(p, STEP_SEGMENT);
    return *open ? BP_OK : BP_ERR_OUT_OF_MEMORY;
}

/* Which operand of an ADD_ONCE node is the PARTIAL one (the other is added
 * on one device only), in bit 0, and that device in the bits above: the one
 * sub-device that cannot pass a partial through as SCALE if there is one
 * (dev_supports_op admits at most one), else device 0. */
static int once_code(const struct meta_device *md, const struct bp_tensor *node)
{
    int src = meta_tensor_of(node->src[0])->layout.state == BP_META_SPLIT_PARTIAL ? 0 : 1;
    size_t adder = 0;
    for (size_t d = 0; d < md->n; d++)
        if (!meta_sub_passes_through(md->sub[d], node)) {
            adder = d;
            break;
        }
    return src | (int)(adder << 1);
}

/* A view's local tensor can fail only where meta_derive already refused the
 * node (the same view_layout), so a failure here is the plugin's own bug. */
static bp_status local_node(struct bp_tensor *node, size_t d, enum meta_node_kind kind, int once)
{
    const int once_src = once & 1;
    const size_t adder = (size_t)once >> 1;
    struct meta_tensor *mt = meta_tensor_of(node);
    struct bp_tensor *l = &mt->local[d];
    if (kind == META_NODE_VIEW) {
        if (meta_derive_local_view(node, d) != BP_OK) {
            meta_log(BP_LOG_ERROR, "the meta device could not build device %zu's view of %s node '%s' "
                     "although its split was derived; this is a meta plugin bug, report it.", d,
                     bp_op_name((enum bp_op)node->op), node->name);
            return BP_ERR_INTERNAL;
        }
    } else {
        /* writers (CPY, SET_ROWS) return their destination: share its memory */
        struct bp_tensor *dst = node->op == BP_OP_CPY ? node->src[1] : node->op == BP_OP_SET_ROWS ? node->src[0] : NULL;
        meta_local_fill(node->buffer->context, node, mt, d, dst == NULL);
        if (dst) {
            struct bp_tensor *ld = &meta_tensor_of(dst)->local[d];
            memcpy(l->ne, ld->ne, sizeof l->ne);
            memcpy(l->nb, ld->nb, sizeof l->nb);
            l->data = ld->data;
            l->buffer = ld->buffer;
        }
    }
    for (int s = 0; s < BP_MAX_SRC; s++)
        l->src[s] = node->src[s] ? &meta_tensor_of(node->src[s])->local[d] : NULL;
    if (kind == META_NODE_COMPUTE && mt->slice_src >= 0) {
        meta_derive_local_slice(node, d);
        l->src[mt->slice_src] = &mt->slice[d];
    }
    if (kind == META_NODE_ADD_ONCE && d != adder) {
        /* the mirrored term is added on one device only; elsewhere pass the
         * partial operand through (x * 1 + 0) */
        struct bp_tensor *keep = l->src[once_src];
        memset(l->src, 0, sizeof l->src);
        l->src[0] = keep;
        l->op = BP_OP_SCALE;
        memset(l->op_params, 0, sizeof l->op_params);
        float one = 1.0f, zero = 0.0f;
        memcpy(&l->op_params[0], &one, 4);
        memcpy(&l->op_params[1], &zero, 4);
    }
    return BP_OK;
}

/* Every meta buffer the graph touches gives its waiting slices their
 * device bytes (intermediates are sized only once their split is derived). */
static bp_status materialize_graph(struct bp_graph *g)
{
    bp_status st = BP_OK;
    for (int32_t i = 0; i < g->n_nodes && st == BP_OK; i++) {
        struct bp_tensor *node = g->nodes[i];
        for (int s = -1; s < BP_MAX_SRC && st == BP_OK; s++) {
            struct bp_tensor *t = s < 0 ? node : node->src[s];
            if (t && meta_tensor_of(t)) {
                struct meta_buffer *mb = t->buffer->context;
                if (mb->n_pending) st = meta_buffer_materialize(mb);
            }
        }
    }
    return st;
}

/* The plan of g over md's sub-devices; it needs the device only, so
 * meta_plan_measure sizes a graph with the very code that places it. */
static bp_status plan_build(struct meta_device *md, struct bp_graph *g, struct meta_plan **out)
{
    struct meta_plan *p = calloc(1, sizeof *p);
    if (!p) return BP_ERR_OUT_OF_MEMORY;
    bp_status st = BP_OK;
    size_t n = md->n;
    uint64_t partial_made = 0;
    unsigned char *kinds = malloc((size_t)g->n_nodes + 1);
    unsigned char *once = malloc((size_t)g->n_nodes + 1);
    struct meta_step *open = add_step(p, STEP_SEGMENT);
    if (!open || !kinds || !once) st = BP_ERR_OUT_OF_MEMORY;
    if (st == BP_OK) st = materialize_graph(g); /* leaves first: views of them need addresses */
    for (int32_t i = 0; i < g->n_nodes && st == BP_OK; i++) {
        struct bp_tensor *node = g->nodes[i];
        struct meta_tensor *mt = meta_tensor_of(node);
        if (!mt) {
            meta_log(BP_LOG_ERROR, "node '%s' is not in a meta buffer; allocate the graph's tensors in "
                     "the meta device's buffer type.", node->name);
            st = BP_ERR_INVALID_ARGUMENT;
            break;
        }
        for (int s = 0; s < BP_MAX_SRC && st == BP_OK; s++) {
            struct meta_tensor *ms = meta_tensor_of(node->src[s]);
            if (node->src[s] && (!ms || !ms->placed)) {
                meta_log(BP_LOG_ERROR, "input '%s' of %s node '%s' has no split state: it is not in a meta "
                         "buffer or was never computed.", node->src[s]->name,
                         bp_op_name((enum bp_op)node->op), node->name);
                st = BP_ERR_INVALID_ARGUMENT;
            }
        }
        if (st != BP_OK) break;
        enum meta_node_kind kind;
        unsigned reduce = 0;
        st = meta_derive(node, n, &kind, &reduce);
        if (st != BP_OK) break;
        for (int s = 0; s < BP_MAX_SRC && st == BP_OK; s++)
            if (reduce & (1u << s)) st = add_reduce(p, &open, n, node->src[s]);
        if (st != BP_OK) break;
        if (node->op == BP_OP_MUL_MAT && mt->layout.state == BP_META_SPLIT_PARTIAL) partial_made++;
        mt->placed = true;
        kinds[i] = (unsigned char)kind;
        once[i] = (unsigned char)(kind == META_NODE_ADD_ONCE ? once_code(md, node) : 0);
        for (size_t d = 0; d < n && st == BP_OK; d++) {
            st = local_node(node, d, kind, once[i]);
            if (st != BP_OK) break;
            if (kind == META_NODE_VIEW) continue;
            struct bp_tensor *l = &mt->local[d];
            if (bp_nelements(l) == 0) continue; /* a zero slice: nothing to compute */
            bool empty_src = false;
            for (int s = 0; s < BP_MAX_SRC; s++)
                if (l->src[s] && bp_nelements(l->src[s]) == 0) empty_src = true;
            if (empty_src) {
                mt->zeroed_early[d] = true;
                if (!zero_push(p, l)) st = BP_ERR_OUT_OF_MEMORY;
            } else if (!graph_push(&open->g[d], l)) {
                st = BP_ERR_OUT_OF_MEMORY;
            }
        }
    }
    /* What the application reads must be whole: reduce PARTIAL outputs. */
    for (int32_t i = 0; i < g->n_nodes && st == BP_OK; i++) {
        struct bp_tensor *node = g->nodes[i];
        if ((i == g->n_nodes - 1 || (node->flags & BP_TENSOR_FLAG_OUTPUT)) &&
            meta_tensor_of(node)->layout.state == BP_META_SPLIT_PARTIAL)
            st = add_reduce(p, &open, n, node);
    }
    /* Now that every split is known, give the slices their device bytes and
     * point the per-device tensors (and views of them) at those bytes. */
    if (st == BP_OK) st = materialize_graph(g);
    for (int32_t i = 0; i < g->n_nodes && st == BP_OK; i++)
        for (size_t d = 0; d < n && st == BP_OK; d++)
            st = local_node(g->nodes[i], d, (enum meta_node_kind)kinds[i], once[i]);
    free(kinds);
    free(once);
    if (st == BP_OK && open) {
        if (step_empty(open, n)) p->n_steps--;
        else p->n_segments++;
    }
    if (st == BP_OK) {
        p->n_merged = partial_made > p->n_reductions ? partial_made - p->n_reductions : 0;
        p->key_graph = g;
        p->n_nodes = g->n_nodes;
        p->nodes = malloc(((size_t)g->n_nodes + 1) * sizeof *p->nodes);
        p->datas = malloc(((size_t)g->n_nodes + 1) * sizeof *p->datas);
        p->serials = malloc(((size_t)g->n_nodes + 1) * SERIALS_PER_NODE * sizeof *p->serials);
        if (!p->nodes || !p->datas || !p->serials) st = BP_ERR_OUT_OF_MEMORY;
    }
    if (st != BP_OK) { plan_free(p); return st; }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        p->nodes[i] = g->nodes[i];
        p->datas[i] = g->nodes[i]->data;
        node_serials(g->nodes[i], &p->serials[(size_t)i * SERIALS_PER_NODE]);
    }
    meta_log(BP_LOG_DEBUG, "%s: graph of %d nodes: %llu cuts, %llu reductions (%llu merged), %llu bytes reduced.",
             md->name, (int)g->n_nodes, (unsigned long long)p->n_segments,
             (unsigned long long)p->n_reductions, (unsigned long long)p->n_merged,
             (unsigned long long)p->bytes_reduced);
    *out = p;
    return BP_OK;
}

bp_status meta_plan_measure(struct meta_device *md, struct bp_graph *g, size_t *reduce_max)
{
    struct meta_plan *p = NULL;
    bp_status st = plan_build(md, g, &p);
    if (st != BP_OK) return st;
    /* the butterfly's scratch holds device 0's copy of the reduced tensor
     * (allreduce.c), grown to the largest one */
    for (size_t s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == STEP_REDUCE) {
            size_t b = bp_nbytes(&meta_tensor_of(p->steps[s].reduce)->local[0]);
            if (b > *reduce_max) *reduce_max = b;
        }
    plan_free(p);
    return BP_OK;
}

static struct meta_plan *plan_find(struct meta_backend *be, struct bp_graph *g)
{
    for (struct meta_plan *p = be->plans; p; p = p->next) {
        if (p->key_graph != g || p->n_nodes != g->n_nodes) continue;
        bool same = true;
        for (int32_t i = 0; i < g->n_nodes && same; i++) {
            uint64_t now[SERIALS_PER_NODE];
            node_serials(g->nodes[i], now);
            same = p->nodes[i] == g->nodes[i] && p->datas[i] == g->nodes[i]->data &&
                   memcmp(now, &p->serials[(size_t)i * SERIALS_PER_NODE], sizeof now) == 0;
        }
        if (same) return p;
    }
    return NULL;
}

static void plan_store(struct meta_backend *be, struct meta_plan *p)
{
    p->next = be->plans;
    be->plans = p;
    be->n_plans++;
    if (be->n_plans > META_MAX_PLANS) { /* drop the oldest */
        struct meta_plan **pp = &be->plans;
        while ((*pp)->next) pp = &(*pp)->next;
        plan_free(*pp);
        *pp = NULL;
        be->n_plans--;
    }
}

static bp_status zero_fill(struct bp_tensor *l)
{
    size_t nb = bp_nbytes(l);
    void *z = calloc(1, nb ? nb : 1);
    if (!z) return BP_ERR_OUT_OF_MEMORY;
    bp_status st = l->buffer->iface->set_tensor(l->buffer, l, z, 0, nb);
    free(z);
    return st;
}

/* ---- backend iface ---- */

static const char *be_get_name(struct bp_backend *b) { return ((struct meta_backend *)b)->md->name; }

static void be_free(struct bp_backend *b)
{
    struct meta_backend *be = (struct meta_backend *)b;
    pthread_mutex_lock(&be->lock);
    be->quit = true;
    pthread_cond_broadcast(&be->go);
    pthread_mutex_unlock(&be->lock);
    for (size_t i = 1; i < be->n; i++) pthread_join(be->worker[i].thread, NULL);
    while (be->plans) {
        struct meta_plan *p = be->plans;
        be->plans = p->next;
        plan_free(p);
    }
    meta_ar_paths_close(be);
    for (size_t i = 0; i < be->n; i++) {
        meta_sub_free_buffer(be->scratch[i]);
        if (be->sub[i]) be->sub[i]->iface->free(be->sub[i]);
    }
    pthread_mutex_destroy(&be->lock);
    pthread_cond_destroy(&be->go);
    pthread_cond_destroy(&be->done);
    free(be);
}

static bp_status be_synchronize(struct bp_backend *b)
{
    struct meta_backend *be = (struct meta_backend *)b;
    for (size_t i = 0; i < be->n; i++) {
        bp_status st = meta_sub_synchronize(be->sub[i]);
        if (st != BP_OK) return st;
    }
    return BP_OK;
}

static bp_status be_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    struct meta_backend *be = (struct meta_backend *)b;
    struct meta_plan *p = plan_find(be, g);
    bp_status st = BP_OK;
    if (!p) {
        st = plan_build(be->md, g, &p);
        if (st != BP_OK) return st;
        plan_store(be, p);
    }
    for (size_t i = 0; i < p->n_zero && st == BP_OK; i++) st = zero_fill(p->zero[i]);
    for (size_t s = 0; s < p->n_steps && st == BP_OK; s++) {
        struct meta_step *step = &p->steps[s];
        if (step->kind == STEP_SEGMENT) {
            struct bp_graph *gs[META_MAX_DEV];
            for (size_t d = 0; d < be->n; d++) gs[d] = &step->g[d];
            st = meta_run_parallel(be, gs);
        } else {
            /* a PARTIAL leaf is summed in place once per write: running the
             * plan again must not add the copies up a second time */
            struct meta_tensor *rt = meta_tensor_of(step->reduce);
            if (rt->leaf && !rt->needs_reduce) continue;
            st = meta_allreduce(be, step->reduce);
            if (st == BP_OK && rt->leaf) rt->needs_reduce = false;
        }
    }
    if (st != BP_OK) {
        meta_log(BP_LOG_ERROR, "%s: computing the graph failed (%s); see the sub-device's message above.",
                 be->md->name, bp_status_name(st));
        return st;
    }
    be->stats.graphs++;
    be->stats.cuts += p->n_segments;
    be->stats.reductions += p->n_reductions;
    be->stats.merged += p->n_merged;
    be->stats.bytes_reduced += p->bytes_reduced;
    return BP_OK;
}

static const struct bp_backend_iface meta_backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = be_get_name,
    .free = be_free,
    .set_tensor_async = NULL,
    .get_tensor_async = NULL,
    .copy_tensor_async = NULL,
    .synchronize = be_synchronize,
    .graph_compute = be_graph_compute,
    .event_record = NULL,
    .event_wait = NULL,
};

bool meta_is_meta_backend(const struct bp_backend *b) { return b && b->iface == &meta_backend_iface; }

/* The parameters of sub-device s's backend. A CPU device listed k times
 * (meta:cpu*2) is k backends on the same CPUs, so when the caller names no
 * thread count and BACKPLANE_CPU_THREADS is unset each occurrence gets
 * ncpu / k threads (at least 1) instead of the CPU plugin's default of
 * every CPU: oversubscribed, its spinning waits hold off the threads they
 * wait for (meta:cpu*2 on 2 cores decoded the 1B Q4_0 model at 5.6
 * tokens/s with 2 threads each, 11.0 with 1). Occurrences of one device,
 * not every CPU-type sub-device: a dist: job's slots for other ranks are
 * CPU-typed placeholders that run nothing here, and the dist runner splits
 * a node's CPUs between its ranks itself. */
static const char *sub_params(const struct meta_device *md, struct bp_device *s, const char *params,
                              char *buf, size_t cap)
{
    if (s->iface->get_type(s) != BP_DEVICE_TYPE_CPU || (params && strstr(params, "n_threads=")))
        return params;
    const char *env = meta_host->get_env("BACKPLANE_CPU_THREADS");
    if (env && *env)
        return params;
    long k = 0;
    for (size_t i = 0; i < md->n; i++) k += md->sub[i] == s;
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (k <= 1 || ncpu < 1)
        return params;
    const long share = ncpu / k > 1 ? ncpu / k : 1;
    const int w = params && *params ? snprintf(buf, cap, "%s;n_threads=%ld", params, share)
                                    : snprintf(buf, cap, "n_threads=%ld", share);
    return w > 0 && (size_t)w < cap ? buf : params;
}

bp_status meta_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out)
{
    struct meta_device *md = (struct meta_device *)dev;
    struct meta_backend *be = calloc(1, sizeof *be);
    if (!be) return BP_ERR_OUT_OF_MEMORY;
    be->md = md;
    be->n = md->n;
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    be->poll_allowed = ncpu < 1 || (size_t)ncpu >= md->n;
    be->backend.iface = &meta_backend_iface;
    be->backend.device = dev;
    be->backend.context = be;
    pthread_mutex_init(&be->lock, NULL);
    pthread_cond_init(&be->go, NULL);
    pthread_cond_init(&be->done, NULL);
    bp_status st = BP_OK;
    size_t started = 1;
    for (size_t i = 0; i < be->n && st == BP_OK; i++) {
        struct bp_device *s = md->sub[i];
        char buf[256];
        st = meta_sub_backend_init(s, sub_params(md, s, params, buf, sizeof buf), &be->sub[i]);
        if (st != BP_OK)
            meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not start a backend (%s).", i, meta_sub_name(s),
                     bp_status_name(st));
    }
    for (size_t i = 1; i < be->n && st == BP_OK; i++) {
        be->worker[i] = (struct meta_worker){.be = be, .index = i};
        if (pthread_create(&be->worker[i].thread, NULL, worker_main, &be->worker[i]) != 0) {
            meta_log(BP_LOG_ERROR, "could not start worker thread %zu of %s.", i, md->name);
            st = BP_ERR_OUT_OF_MEMORY;
        } else {
            started++;
        }
    }
    if (st == BP_OK) st = meta_ar_paths_open(be);
    if (st != BP_OK) {
        size_t n = be->n;
        be->n = started; /* only join threads that exist */
        pthread_mutex_lock(&be->lock);
        be->quit = true;
        pthread_cond_broadcast(&be->go);
        pthread_mutex_unlock(&be->lock);
        for (size_t i = 1; i < started; i++) pthread_join(be->worker[i].thread, NULL);
        for (size_t i = 0; i < n; i++)
            if (be->sub[i]) be->sub[i]->iface->free(be->sub[i]);
        pthread_mutex_destroy(&be->lock);
        pthread_cond_destroy(&be->go);
        pthread_cond_destroy(&be->done);
        free(be);
        return st;
    }
    *out = &be->backend;
    return BP_OK;
}

bp_status meta_get_stats(struct bp_backend *b, struct bp_meta_stats *out)
{
    if (!b || b->iface != &meta_backend_iface || !out) return BP_ERR_INVALID_ARGUMENT;
    struct meta_backend *be = (struct meta_backend *)b;
    /* Only what the caller's size covers; never its size. */
    if (out->size < sizeof out->size) {
        meta_log(BP_LOG_ERROR, "bp_meta_get_stats: set out->size = sizeof(struct bp_meta_stats) first.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    size_t sz = out->size < sizeof *out ? out->size : sizeof *out;
    be->stats.scratch_bytes = be->scratch_size;
    memcpy((char *)out + sizeof out->size, (const char *)&be->stats + sizeof out->size, sz - sizeof out->size);
    return BP_OK;
}
