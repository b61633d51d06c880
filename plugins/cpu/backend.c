/*
 * backend.c — a CPU execution stream: its own thread pool and scratch, and
 * graph_compute.
 *
 * Compute is synchronous (the call returns when the graph is done), so
 * synchronize has nothing to wait for. Two backends share nothing but the
 * registry's list of live objects, so they run concurrently.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdatomic.h>

#include "bp_cpu.h"
#include "cpu_internal.h"
#include "ops.h"
#include "task_claim.h"

/* The plan of one graph: made before the parallel region, on the calling
 * thread, with every allocation the graph needs; the compute path
 * allocates nothing.
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
 * results are those of nth threads whoever computes them.
 *
 * MUL_MATs that read the same activation in the same converted layout (a
 * layer's Q, K and V; FFN gate and up) share one convert step and one
 * chunk step: the later ones are moved up to the first (see join_mul_mats),
 * which takes two step boundaries off each, and lets a thread that finishes
 * one weight's chunks go straight on to the next weight's. The step's task
 * c is chunk c - start of the member whose [start, end) holds c: the same
 * chunks as when the nodes run apart, so results are bit-equal. */
enum cpu_step_kind {
    CPU_STEP_PREPARE,   /* one task: the node's prepare (checks ids) */
    CPU_STEP_SHARES,    /* task c is compute() as thread c of n */
    CPU_STEP_MM_CONVERT,/* task c is cpu_mul_mat_convert as thread c of n */
    CPU_STEP_MM_CHUNKS, /* task c is cpu_mul_mat_chunk c (of the grid for nth) */
    CPU_STEP_ALL,       /* a kernel with barriers inside: every thread, as itself */
};

struct cpu_step {
    int32_t node;           /* CPU_STEP_MM_CHUNKS: members[m0 .. m0 + nm) instead */
    int32_t m0, nm;
    int kind;
    int nth;                /* the nth the kernel sees */
    int64_t n;              /* tasks */
    bool last;              /* the node's last step: run the abort callback after it */
    bool owned;             /* tasks in per-thread ranges, not in order (see above) */
    size_t claim0;          /* its claim words: cb->claims[claim0 ..], nth if owned, else 1 */
    _Atomic int64_t done;   /* tasks finished */
    uint64_t t_end;         /* profiling: when its last task finished (ns) */
};

/* One node of a chunk step: its chunks are the step's tasks [previous end, end). */
struct cpu_member {
    int32_t node;
    int64_t end;
};

/* MUL_MATs up to this many nodes after the first one of a group are looked
 * at for joining it: a layer's Q/K/V and gate/up are a few nodes apart, and
 * the bound keeps planning linear in the graph's size. */
#define CPU_JOIN_WINDOW 24

struct cpu_backend {
    struct bp_backend be;
    struct cpu_live live;
    struct cpu_plugin *pl;
    struct cpu_pool *pool;
    void *scratch;          /* the graph's work buffer: shared part, then per-thread slices */
    size_t scratch_size;
    struct cpu_step *steps;
    int32_t steps_cap;
    struct cpu_member *members; /* steps_cap / 3 of them: at most one per node */
    bool *joined;               /* per node: runs in an earlier node's chunk step */
    _Atomic uint64_t *claims;   /* the steps' claim words (task_claim.h) */
    size_t claims_cap;
    bp_cpu_abort_fn abort_cb;
    void *abort_data;
    struct bp_cpu_profile *profile; /* the caller's, NULL when not profiling */
};

/* One graph_compute as seen by every thread of the pool. */
struct cpu_graph_job {
    struct cpu_backend *cb;
    struct bp_graph *g;
    int32_t n_steps;
    size_t shared;          /* bytes of the shared part (aligned) */
    size_t per_thread;      /* scratch bytes per thread */
    _Atomic int chunk;      /* work counter of a CPU_STEP_ALL mul_mat */
    _Atomic uint64_t progress;  /* steps finished */
    _Atomic int status;     /* the graph's result: the first failure */
};

void cpu_params_barrier(const struct cpu_compute_params *p)
{
    cpu_pool_barrier(p->pool);
}

static const struct bp_backend_iface cpu_backend_iface;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct cpu_backend *cpu_backend_of_live(struct cpu_live *l)
{
    return (struct cpu_backend *)((char *)l - offsetof(struct cpu_backend, live));
}

static const char *be_get_name(struct bp_backend *b)
{
    (void)b;
    return CPU_FAMILY;
}

static void be_free(struct bp_backend *b)
{
    if (!b)
        return;
    struct cpu_backend *cb = b->context;
    cpu_live_remove(cb->pl, &cb->live);
    cpu_pool_free(cb->pool);
    free(cb->scratch);
    free(cb->steps);
    free(cb->members);
    free(cb->joined);
    free(cb->claims);
    free(cb);
}

static bp_status be_synchronize(struct bp_backend *b)
{
    (void)b;
    return BP_OK;
}

/* Task c of step st. */
static void run_task(struct cpu_graph_job *job, struct cpu_compute_params *p,
                     const struct cpu_step *st, int64_t c)
{
    struct cpu_backend *cb = job->cb;
    struct bp_tensor *node = job->g->nodes[st->node];
    const struct cpu_op_entry *e = &cpu_op_table[node->op];
    p->nth = st->nth;
    p->ith = (int)c;
    switch (st->kind) {
    case CPU_STEP_PREPARE: {
        const bp_status v = e->prepare(cb->pl, node);
        if (v != BP_OK)
            atomic_store(&job->status, (int)v);
        break;
    }
    case CPU_STEP_SHARES:
    case CPU_STEP_ALL:
        if (bp_nelements(node) > 0)
            e->compute(p, node);
        break;
    case CPU_STEP_MM_CONVERT:
        cpu_mul_mat_convert(p, node);
        break;
    case CPU_STEP_MM_CHUNKS: {
        const struct cpu_member *m = &cb->members[st->m0];
        const struct cpu_member *m_last = m + st->nm - 1;
        int64_t start = 0;
        while (c >= m->end && m < m_last) {
            start = m->end;
            m++;
        }
        cpu_mul_mat_chunk(p, job->g->nodes[m->node], c - start);
        break;
    }
    }
}

/* Count one finished task of step s; the thread that finishes the last one
 * runs the abort callback (after a node's last step) and starts step s+1.
 * The callback's calls are ordered through `progress`, one at a time. */
static void finish_task(struct cpu_graph_job *job, struct cpu_step *st, int32_t s)
{
    if (atomic_fetch_add_explicit(&st->done, 1, memory_order_acq_rel) != st->n - 1)
        return;
    struct cpu_backend *cb = job->cb;
    if (cb->profile)
        st->t_end = now_ns();   /* before the next step can start: steps tile the time */
    if (st->last && cb->abort_cb && atomic_load(&job->status) == BP_OK) {
        const bp_status v = cb->abort_cb(cb->abort_data);
        if (v != BP_OK)
            atomic_store(&job->status, (int)v);
    }
    atomic_store(&job->progress, (uint64_t)s + 1);
    cpu_pool_wake(cb->pool);
}

static void graph_job(void *arg, int ith, int nth)
{
    struct cpu_graph_job *job = arg;
    struct cpu_backend *cb = job->cb;
    struct cpu_compute_params p = {
        .ith = ith, .nth = nth,
        .wdata = cb->scratch ? (char *)cb->scratch + job->shared + (size_t)ith * job->per_thread
                             : NULL,
        .wsize = job->per_thread,
        .wshared = cb->scratch, .wshared_size = job->shared,
        .pool = cb->pool, .chunk = &job->chunk,
    };
    uint64_t seen = atomic_load_explicit(&job->progress, memory_order_acquire);
    for (int32_t s = 0; s < job->n_steps; s++) {
        while (seen < (uint64_t)s)
            seen = cpu_pool_wait_word(cb->pool, &job->progress, seen);
        if (atomic_load(&job->status) != BP_OK)
            return;
        struct cpu_step *st = &cb->steps[s];
        if (st->kind == CPU_STEP_ALL) {
            /* mul_mat's own barrier needs every thread; job->chunk is free
             * again because every thread has finished the step before. */
            run_task(job, &p, st, ith);
            finish_task(job, st, s);
            continue;
        }
        _Atomic uint64_t *claims = cb->claims + st->claim0;
        int64_t lo, hi, c;
        if (!st->owned) { /* one range, everyone at its front */
            while (cpu_claim_front(&claims[0], 0, st->n, &c)) {
                run_task(job, &p, st, c);
                finish_task(job, st, s);
            }
            continue;
        }
        cpu_claim_range(st->n, nth, ith, &lo, &hi);
        while (cpu_claim_front(&claims[ith], lo, hi, &c)) {
            run_task(job, &p, st, c);
            finish_task(job, st, s);
        }
        for (int v = 1; v < nth; v++) {
            const int other = (ith + v) % nth;
            cpu_claim_range(st->n, nth, other, &lo, &hi);
            while (cpu_claim_back(&claims[other], lo, hi, &c)) {
                run_task(job, &p, st, c);
                finish_task(job, st, s);
            }
        }
    }
    /* Tasks still running on other threads end before cpu_pool_run
     * returns: it waits for every thread to leave this function. */
}

/* A node and its sources must have memory before any kernel reads them. */
static bp_status check_node_data(const struct cpu_plugin *pl, const struct bp_tensor *node)
{
    if (bp_nelements(node) > 0 && !node->data) {
        cpu_log(pl, BP_LOG_ERROR, "%s node '%s' has no memory; allocate it before computing.",
                bp_op_name((enum bp_op)node->op), cpu_name(node));
        return BP_ERR_INVALID_ARGUMENT;
    }
    for (int s = 0; s < BP_MAX_SRC; s++) {
        const struct bp_tensor *src = node->src[s];
        if (src && bp_nelements(src) > 0 && !src->data) {
            cpu_log(pl, BP_LOG_ERROR,
                    "source %d '%s' of %s node '%s' has no memory; allocate it before computing.",
                    s, src->name, bp_op_name((enum bp_op)node->op), cpu_name(node));
            return BP_ERR_INVALID_ARGUMENT;
        }
    }
    return BP_OK;
}

static void describe_types(const struct bp_tensor *node, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s", bp_type_name((enum bp_type)node->type));
    for (int s = 0; s < BP_MAX_SRC && node->src[s] && n > 0 && (size_t)n < cap; s++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", s == 0 ? " from " : ", ",
                      bp_type_name((enum bp_type)node->src[s]->type));
}

static void add_step(struct cpu_backend *cb, int32_t *n_steps, int32_t node, int kind, int nth,
                     int64_t n)
{
    struct cpu_step *st = &cb->steps[(*n_steps)++];
    st->node = node;
    st->m0 = st->nm = 0;
    st->kind = kind;
    st->nth = nth;
    st->n = n > 0 ? n : 1;  /* a step of no task would never finish */
    st->last = false;
    st->owned = false;
    atomic_init(&st->done, 0);
}

/* The bytes a tensor's kernel may touch: [data, data + span). */
static bool tensor_span(const struct bp_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    if (!t || !t->data || bp_nelements(t) <= 0)
        return false;
    *lo = (uintptr_t)t->data;
    *hi = *lo + bp_nbytes(t);
    return true;
}

static bool tensors_overlap(const struct bp_tensor *a, const struct bp_tensor *b)
{
    uintptr_t a0, a1, b0, b1;
    return tensor_span(a, &a0, &a1) && tensor_span(b, &b0, &b1) && a0 < b1 && b0 < a1;
}

/* True when node a reads memory that node b writes (b's output overlaps one
 * of a's sources). By data ranges, not tensor identity: views and the
 * graph allocator's reuse of memory make distinct tensors alias. */
static bool reads_output_of(const struct bp_tensor *a, const struct bp_tensor *b)
{
    for (int s = 0; s < BP_MAX_SRC; s++)
        if (a->src[s] && tensors_overlap(a->src[s], b))
            return true;
    return false;
}

/* True when moving node j before node b (or running the two at once)
 * changes what either computes: one reads what the other writes, or both
 * write the same bytes. */
static bool conflict(const struct bp_tensor *j, const struct bp_tensor *b)
{
    return reads_output_of(j, b) || reads_output_of(b, j) || tensors_overlap(j, b);
}

/* The chunk step of MUL_MAT node i (members[m0] is i): adds the later
 * MUL_MATs that may run in it. Node j joins when it converts the same
 * activation the same way (cpu_mul_mat_same_x) and conflicts neither with
 * a member (they run at once) nor with a node between i and j that stays
 * where it is (j now runs before it). Returns the members' count. */
static int32_t join_mul_mats(struct cpu_backend *cb, const struct bp_graph *g, int32_t i, int tasks,
                             int32_t m0)
{
    const struct bp_tensor *first = g->nodes[i];
    int32_t nm = 1;
    cb->members[m0] = (struct cpu_member){ .node = i, .end = cpu_mul_mat_n_chunks(first, tasks) };
    const int32_t last = g->n_nodes - 1 < i + CPU_JOIN_WINDOW ? g->n_nodes - 1 : i + CPU_JOIN_WINDOW;
    for (int32_t j = i + 1; j <= last; j++) {
        const struct bp_tensor *nj = g->nodes[j];
        if (bp_op_is_view((enum bp_op)nj->op) || cb->joined[j])
            continue;   /* computes nothing, or already ran in an earlier step */
        bool ok = nj->op == BP_OP_MUL_MAT && bp_nelements(nj) > 0 && cpu_mul_mat_same_x(first, nj);
        for (int32_t k = 0; ok && k < nm; k++)
            ok = !conflict(nj, g->nodes[cb->members[m0 + k].node]);
        for (int32_t b = i + 1; ok && b < j; b++) {
            const struct bp_tensor *nb = g->nodes[b];
            if (!bp_op_is_view((enum bp_op)nb->op) && !cb->joined[b])
                ok = !conflict(nj, nb);
        }
        if (ok) {
            cb->joined[j] = true;
            cb->members[m0 + nm] = (struct cpu_member){
                .node = j, .end = cb->members[m0 + nm - 1].end + cpu_mul_mat_n_chunks(nj, tasks) };
            nm++;
        } else if (tensors_overlap(nj, first->src[1])) {
            break;  /* the activation is overwritten: no later node reads it */
        }
    }
    return nm;
}

/* Adds a computed graph's steps to the profile: step s took from the end of
 * step s - 1 (of the threads' start, for the first) to its own end. A chunk
 * step counts each of its members as a node; every other step counts its
 * node once, at the node's last step. */
static void profile_account(struct cpu_backend *cb, const struct bp_graph *g, int32_t n_steps,
                            uint64_t t_call, uint64_t t_run, uint64_t t_done)
{
    struct bp_cpu_profile *pr = cb->profile;
    uint64_t t = t_run;
    for (int32_t s = 0; s < n_steps; s++) {
        const struct cpu_step *st = &cb->steps[s];
        const uint64_t ns = st->t_end > t ? st->t_end - t : 0;
        if (st->t_end > t)
            t = st->t_end;
        const int op = g->nodes[st->node]->op;
        if (op < 0 || op >= pr->n_ops || !pr->ops)
            continue;
        pr->ops[op].ns += ns;
        if (st->kind == CPU_STEP_MM_CONVERT)
            pr->convert_ns += ns;
        if (st->kind == CPU_STEP_MM_CHUNKS)
            pr->ops[op].count += (uint64_t)st->nm;
        else if (st->last)
            pr->ops[op].count++;
    }
    pr->graphs++;
    pr->graph_ns += t_done - t_call;
}

static bp_status be_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    struct cpu_backend *cb = b->context;
    struct cpu_plugin *pl = cb->pl;
    const uint64_t t_call = cb->profile ? now_ns() : 0;
    if (!g || g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes)) {
        cpu_log(pl, BP_LOG_ERROR, "graph_compute was given no graph or a graph without nodes.");
        return BP_ERR_INVALID_ARGUMENT;
    }

    /* Everything that can be known before running is checked here, on this
     * thread, so that the parallel region never fails half-way. */
    const int nth = cpu_pool_n_threads(cb->pool);
    if (g->n_nodes > cb->steps_cap / 3) {
        /* At most three steps a node (prepare, convert, chunks). */
        if (g->n_nodes > INT32_MAX / 3) {
            cpu_log(pl, BP_LOG_ERROR, "a %" PRId32 "-node graph is too large; split it.",
                    g->n_nodes);
            return BP_ERR_INVALID_ARGUMENT;
        }
        struct cpu_step *np = realloc(cb->steps, (size_t)g->n_nodes * 3 * sizeof *np);
        if (np)
            cb->steps = np;
        struct cpu_member *nmem = np ? realloc(cb->members, (size_t)g->n_nodes * sizeof *nmem) : NULL;
        if (nmem)
            cb->members = nmem;
        bool *nj = nmem ? realloc(cb->joined, (size_t)g->n_nodes * sizeof *nj) : NULL;
        if (!nj) {
            cpu_log(pl, BP_LOG_ERROR, "could not allocate the plan of a %" PRId32 "-node graph; "
                    "free memory.", g->n_nodes);
            return BP_ERR_OUT_OF_MEMORY;
        }
        cb->joined = nj;
        cb->steps_cap = g->n_nodes * 3;
    }
    int32_t n_steps = 0;
    size_t per_thread = 0, shared = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (!node) {
            cpu_log(pl, BP_LOG_ERROR, "graph node %" PRId32 " is NULL; rebuild the graph.", i);
            return BP_ERR_INVALID_ARGUMENT;
        }
        if (!cpu_supports_node(node)) {
            char types[128];
            describe_types(node, types, sizeof types);
            cpu_log(pl, BP_LOG_ERROR,
                    "the cpu device cannot compute %s node '%s' (%s); check supports_op and "
                    "place it on another device.",
                    bp_op_name((enum bp_op)node->op), cpu_name(node), types);
            return BP_ERR_UNSUPPORTED;
        }
        if (bp_op_is_view((enum bp_op)node->op))
            continue;
        bp_status st = check_node_data(pl, node);
        if (st != BP_OK)
            return st;
        const struct cpu_op_entry *e = &cpu_op_table[node->op];
        if (e->scratch) {
            size_t need = e->scratch(node);
            if (need > per_thread) per_thread = need;
        }
        if (e->work) {
            size_t need = e->work(node);
            if (need > shared) shared = need;
        }
    }
    if (g->n_nodes > 0)
        memset(cb->joined, 0, (size_t)g->n_nodes * sizeof *cb->joined);
    int32_t n_members = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op) || cb->joined[i])
            continue;
        const struct cpu_op_entry *e = &cpu_op_table[node->op];
        /* Small nodes are not worth splitting. Attention's output is
         * small (one row per head in decode) but each element reads the
         * whole KV cache, so count that work too. */
        int64_t n = bp_nelements(node);
        if (node->op == BP_OP_FLASH_ATTN_EXT && node->src[1])
            n *= node->src[1]->ne[1];
        const int tasks = e->work || n >= 4096 ? nth : 1;
        if (e->prepare)
            add_step(cb, &n_steps, i, CPU_STEP_PREPARE, 1, 1);
        if (node->op == BP_OP_MUL_MAT && bp_nelements(node) > 0 && cpu_mul_mat_stepwise(node)) {
            /* A task per activation row at most: in decode the one row is
             * one task, and no thread claims an empty share. Rows convert
             * alone, so the split does not change the bytes. */
            const struct bp_tensor *x = node->src[1];
            const int64_t rows = x->ne[1] * x->ne[2] * x->ne[3];
            const int conv = rows < tasks ? (int)rows : tasks;
            add_step(cb, &n_steps, i, CPU_STEP_MM_CONVERT, conv, conv);
            const int32_t nm = join_mul_mats(cb, g, i, tasks, n_members);
            add_step(cb, &n_steps, i, CPU_STEP_MM_CHUNKS, tasks, cb->members[n_members + nm - 1].end);
            cb->steps[n_steps - 1].m0 = n_members;
            cb->steps[n_steps - 1].nm = nm;
            bool stream = tasks > 1;
            for (int32_t m = 0; m < nm && stream; m++)
                stream = cpu_mul_mat_chunks_stream(g->nodes[cb->members[n_members + m].node], tasks);
            cb->steps[n_steps - 1].owned = stream;
            n_members += nm;
        } else if (node->op == BP_OP_MUL_MAT && bp_nelements(node) > 0) {
            add_step(cb, &n_steps, i, CPU_STEP_ALL, nth, nth);
        } else {
            add_step(cb, &n_steps, i, CPU_STEP_SHARES, tasks, tasks);
        }
        cb->steps[n_steps - 1].last = true;
    }

    for (int32_t s = 0; s < n_steps; s++)
        if (cb->steps[s].n > CPU_CLAIM_MAX_TASKS) {
            cpu_log(pl, BP_LOG_ERROR, "node '%s' splits into %" PRId64 " tasks, more than the "
                    "%" PRId64 " one step can share out; split the node.",
                    cpu_name(g->nodes[cb->steps[s].node]), cb->steps[s].n, CPU_CLAIM_MAX_TASKS);
            return BP_ERR_INVALID_ARGUMENT;
        }
    per_thread = (per_thread + CPU_BUFFER_ALIGNMENT - 1) / CPU_BUFFER_ALIGNMENT * CPU_BUFFER_ALIGNMENT;
    shared = (shared + CPU_BUFFER_ALIGNMENT - 1) / CPU_BUFFER_ALIGNMENT * CPU_BUFFER_ALIGNMENT;
    if (shared + per_thread * (size_t)nth > cb->scratch_size) {
        size_t want = shared + per_thread * (size_t)nth;
        void *p = aligned_alloc(CPU_BUFFER_ALIGNMENT, want);
        if (!p) {
            cpu_log(pl, BP_LOG_ERROR,
                    "could not allocate %zu bytes of scratch for graph_compute; free memory.", want);
            return BP_ERR_OUT_OF_MEMORY;
        }
        free(cb->scratch);
        cb->scratch = p;
        cb->scratch_size = want;
    }

    size_t n_claims = 0;
    for (int32_t s = 0; s < n_steps; s++) {
        cb->steps[s].claim0 = n_claims;
        n_claims += cb->steps[s].owned ? (size_t)nth : 1;
    }
    if (n_claims > cb->claims_cap) {
        _Atomic uint64_t *c = malloc(n_claims * sizeof *c);
        if (!c) {
            cpu_log(pl, BP_LOG_ERROR, "could not allocate the task claims of a %" PRId32
                    "-step plan; free memory.", n_steps);
            return BP_ERR_OUT_OF_MEMORY;
        }
        free(cb->claims);
        cb->claims = c;
        cb->claims_cap = n_claims;
    }
    for (size_t i = 0; i < n_claims; i++)
        atomic_init(&cb->claims[i], 0);

    struct cpu_graph_job job = { .cb = cb, .g = g, .n_steps = n_steps, .shared = shared,
                                 .per_thread = per_thread };
    atomic_init(&job.chunk, 0);
    atomic_init(&job.progress, 0);
    atomic_init(&job.status, BP_OK);
    const uint64_t t_run = cb->profile ? now_ns() : 0;
    cpu_pool_run(cb->pool, graph_job, &job);
    const bp_status st = (bp_status)atomic_load(&job.status);
    if (cb->profile && st == BP_OK)
        profile_account(cb, g, n_steps, t_call, t_run, now_ns());
    return st;
}

static const struct bp_backend_iface cpu_backend_iface = {
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

/* params: NULL or "n_threads=N" (other keys are warned about and ignored). */
static int parse_threads_param(const struct cpu_plugin *pl, const char *params, int dflt)
{
    if (!params || !*params)
        return dflt;
    int n = dflt;
    const char *s = params;
    while (*s) {
        size_t len = strcspn(s, ";");
        if (len > 10 && strncmp(s, "n_threads=", 10) == 0) {
            char *end;
            long v = strtol(s + 10, &end, 10);
            if (end == s + len && v >= 1 && v <= 4096)
                n = (int)v;
            else
                cpu_log(pl, BP_LOG_WARN, "backend parameter '%.*s' is not a thread count from 1 "
                        "to 4096; using %d threads.", (int)len, s, dflt);
        } else if (len > 0) {
            cpu_log(pl, BP_LOG_WARN, "unknown cpu backend parameter '%.*s' ignored; the cpu "
                    "backend knows n_threads=N.", (int)len, s);
        }
        s += len;
        if (*s == ';') s++;
    }
    return n;
}

bp_status cpu_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out)
{
    struct cpu_plugin *pl = cpu_plugin_of_device(dev);
    if (!out)
        return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    int nth = parse_threads_param(pl, params, cpu_default_threads(pl));
    struct cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        cpu_log(pl, BP_LOG_ERROR, "could not allocate a cpu backend; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    bp_status st = cpu_pool_new(nth, cpu_default_poll(pl), &cb->pool);
    if (st != BP_OK) {
        cpu_log(pl, BP_LOG_ERROR, "could not start %d worker threads for a cpu backend; lower "
                "BACKPLANE_CPU_THREADS.", nth - 1);
        free(cb);
        return st;
    }
    cb->pl = pl;
    cb->be = (struct bp_backend){ .iface = &cpu_backend_iface, .device = dev, .context = cb };
    cpu_live_add(pl, &cb->live, &pl->live_backends);
    *out = &cb->be;
    return BP_OK;
}

bp_status cpu_backend_set_n_threads(struct bp_backend *b, int n_threads)
{
    if (!b || b->iface != &cpu_backend_iface)
        return BP_ERR_INVALID_ARGUMENT;
    struct cpu_backend *cb = b->context;
    if (n_threads < 1 || n_threads > 4096) {
        cpu_log(cb->pl, BP_LOG_ERROR, "set_n_threads(%d): the thread count must be from 1 to 4096.",
                n_threads);
        return BP_ERR_INVALID_ARGUMENT;
    }
    if (n_threads == cpu_pool_n_threads(cb->pool))
        return BP_OK;
    bp_status st;
    if (n_threads > cpu_pool_n_threads(cb->pool)) {
        st = cpu_pool_set_n_threads(cb->pool, n_threads);
    } else {
        /* Fewer threads: stop the surplus workers (a new, smaller pool) so
         * that the threads a caller gave back are really gone. */
        struct cpu_pool *pool;
        st = cpu_pool_new(n_threads, cpu_default_poll(cb->pl), &pool);
        if (st == BP_OK) {
            cpu_pool_free(cb->pool);
            cb->pool = pool;
        }
    }
    if (st != BP_OK) {
        cpu_log(cb->pl, BP_LOG_ERROR, "could not start %d worker threads; the backend keeps %d "
                "threads.", n_threads - 1, cpu_pool_n_threads(cb->pool));
        return st;
    }
    return BP_OK;
}

bp_status cpu_backend_set_profile(struct bp_backend *b, struct bp_cpu_profile *p)
{
    if (!b || b->iface != &cpu_backend_iface)
        return BP_ERR_INVALID_ARGUMENT;
    struct cpu_backend *cb = b->context;
    if (p && p->n_ops > 0 && !p->ops) {
        cpu_log(cb->pl, BP_LOG_ERROR, "set_profile: the profile counts %d ops but has no ops "
                "array; give it one or set n_ops to 0.", p->n_ops);
        return BP_ERR_INVALID_ARGUMENT;
    }
    cb->profile = p;
    return BP_OK;
}

bp_status cpu_backend_set_abort_callback(struct bp_backend *b, bp_cpu_abort_fn cb_fn, void *data)
{
    if (!b || b->iface != &cpu_backend_iface)
        return BP_ERR_INVALID_ARGUMENT;
    struct cpu_backend *cb = b->context;
    cb->abort_cb = cb_fn;
    cb->abort_data = data;
    return BP_OK;
}

void cpu_backends_free_all(struct cpu_plugin *pl)
{
    while (pl->live_backends.next != &pl->live_backends)
        be_free(&cpu_backend_of_live(pl->live_backends.next)->be);
}
