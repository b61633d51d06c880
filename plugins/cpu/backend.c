/*
 * backend.c — a CPU execution stream: its own thread pool and scratch, and
 * graph_compute.
 *
 * Compute is synchronous (the call returns when the graph is done), so
 * synchronize has nothing to wait for. Two backends share nothing but the
 * registry's list of live objects, so they run concurrently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stdatomic.h>

#include "bp_cpu.h"
#include "cpu_internal.h"
#include "ops.h"
#include "plan.h"
#include "task_claim.h"

struct cpu_backend {
    struct bp_backend be;
    struct cpu_live live;
    struct cpu_plugin *pl;
    struct cpu_pool *pool;
    void *scratch;          /* the graph's work buffer: shared part, then per-thread slices */
    size_t scratch_size;
    struct cpu_plan_cache plans;
    /* What changes while a plan runs, one per step or claim word; grown to
     * the largest plan run, reset at the start of each graph. */
    _Atomic int64_t *done;      /* tasks finished, per step */
    int64_t *n_counted;         /* a counted step's tasks, set when the step before ends */
    uint64_t *t_end;            /* profiling: when the step's last task finished (ns) */
    int32_t steps_cap;
    _Atomic uint64_t *claims;   /* the steps' claim words (task_claim.h) */
    size_t claims_cap;
    bp_cpu_abort_fn abort_cb;
    void *abort_data;
    struct bp_profile *profile; /* the caller's, NULL when not profiling */
};

/* One graph_compute as seen by every thread of the pool. */
struct cpu_graph_job {
    struct cpu_backend *cb;
    struct bp_graph *g;
    const struct cpu_plan *plan;
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
    cpu_plan_cache_free(&cb->plans);
    free(cb->done);
    free(cb->n_counted);
    free(cb->t_end);
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
    case CPU_STEP_MMID_ROUTE: {
        const bp_status v = e->prepare(cb->pl, node);
        if (v != BP_OK)
            atomic_store(&job->status, (int)v);
        else
            cpu_mul_mat_id_route(p, node);
        break;
    }
    case CPU_STEP_MMID_CONVERT:
        cpu_mul_mat_id_convert(p, node);
        break;
    case CPU_STEP_MMID_CHUNKS:
        cpu_mul_mat_id_chunk(p, node, c);
        break;
    case CPU_STEP_MM_CHUNKS: {
        const struct cpu_member *m = &job->plan->members[st->m0];
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

/* Count one finished task of step s (of n); the thread that finishes the last one
 * runs the abort callback (after a node's last step) and starts step s+1.
 * The callback's calls are ordered through `progress`, one at a time.
 * When step s+1 is a single task (a small node, decode's activation
 * conversion), that thread claims it before starting the step and sets
 * *next to s+1: a chain of small nodes then runs on the core that holds
 * their data, and a waiting thread, which would win the race for the task
 * half the time, does not pull each node's input to its own core. */
static void finish_task(struct cpu_graph_job *job, const struct cpu_step *st, int32_t s,
                        int64_t n, int32_t *next)
{
    struct cpu_backend *cb = job->cb;
    if (atomic_fetch_add_explicit(&cb->done[s], 1, memory_order_acq_rel) != n - 1)
        return;
    if (cb->profile)
        cb->t_end[s] = now_ns();   /* before the next step can start: steps tile the time */
    if (st->last && cb->abort_cb && atomic_load(&job->status) == BP_OK) {
        const bp_status v = cb->abort_cb(cb->abort_data);
        if (v != BP_OK)
            atomic_store(&job->status, (int)v);
    }
    if (s + 1 < job->plan->n_steps) {
        const struct cpu_step *nx = &job->plan->steps[s + 1];
        int64_t c;
        /* A counted step's task count, read once from the work buffer while
         * it holds it: a thread that reaches the step late, after later
         * steps have reused the buffer, still sees the count. */
        if (nx->counted && atomic_load(&job->status) == BP_OK) {
            c = cpu_mul_mat_id_n_chunks(job->g->nodes[nx->node], cb->scratch);
            cb->n_counted[s + 1] = c > 0 ? c : 1;  /* a step of no task would never end */
        }
        if (nx->n == 1 && !nx->owned && !nx->counted && nx->kind != CPU_STEP_ALL &&
            cpu_claim_front(&cb->claims[nx->claim0], 0, 1, &c))
            *next = s + 1;
    }
    atomic_store(&job->progress, (uint64_t)s + 1);
    cpu_pool_wake(cb->pool);
}

static void graph_job(void *arg, int ith, int nth)
{
    struct cpu_graph_job *job = arg;
    struct cpu_backend *cb = job->cb;
    const struct cpu_plan *plan = job->plan;
    struct cpu_compute_params p = {
        .ith = ith, .nth = nth,
        .wdata = cb->scratch ? (char *)cb->scratch + plan->shared + (size_t)ith * plan->per_thread
                             : NULL,
        .wsize = plan->per_thread,
        .wshared = cb->scratch, .wshared_size = plan->shared,
        .pool = cb->pool, .chunk = &job->chunk,
    };
    uint64_t seen = atomic_load_explicit(&job->progress, memory_order_acquire);
    int32_t mine = -1;  /* a step whose one task this thread has claimed */
    for (int32_t s = 0; s < plan->n_steps; s++) {
        while (seen < (uint64_t)s)
            seen = cpu_pool_wait_word(cb->pool, &job->progress, seen);
        if (atomic_load(&job->status) != BP_OK)
            return;
        const struct cpu_step *st = &plan->steps[s];
        if (st->kind == CPU_STEP_ALL) {
            /* mul_mat's own barrier needs every thread; job->chunk is free
             * again because every thread has finished the step before. */
            run_task(job, &p, st, ith);
            finish_task(job, st, s, st->n, &mine);
            continue;
        }
        /* A counted step's tasks: set before the step started (finish_task). */
        const int64_t n = st->counted ? cb->n_counted[s] : st->n;
        _Atomic uint64_t *claims = cb->claims + st->claim0;
        int64_t lo, hi, c;
        if (mine == s) { /* claimed when this thread ended step s - 1 */
            run_task(job, &p, st, 0);
            finish_task(job, st, s, n, &mine);
            continue;
        }
        if (!st->owned) { /* one range, everyone at its front */
            while (cpu_claim_front(&claims[0], 0, n, &c)) {
                run_task(job, &p, st, c);
                finish_task(job, st, s, n, &mine);
            }
            continue;
        }
        cpu_claim_range(n, nth, ith, &lo, &hi);
        while (cpu_claim_front(&claims[ith], lo, hi, &c)) {
            run_task(job, &p, st, c);
            finish_task(job, st, s, n, &mine);
        }
        for (int v = 1; v < nth; v++) {
            const int other = (ith + v) % nth;
            cpu_claim_range(n, nth, other, &lo, &hi);
            while (cpu_claim_back(&claims[other], lo, hi, &c)) {
                run_task(job, &p, st, c);
                finish_task(job, st, s, n, &mine);
            }
        }
    }
    /* Tasks still running on other threads end before cpu_pool_run
     * returns: it waits for every thread to leave this function. */
}

/* Adds a computed graph's steps to the profile: step s took from the end of
 * step s - 1 (of the threads' start, for the first) to its own end. A chunk
 * step counts each of its members as a node; every other step counts its
 * node once, at the node's last step. */
static void profile_account(struct cpu_backend *cb, const struct bp_graph *g,
                            const struct cpu_plan *plan, uint64_t t_call, uint64_t t_run,
                            uint64_t t_done)
{
    struct bp_profile *pr = cb->profile;
    uint64_t t = t_run;
    for (int32_t s = 0; s < plan->n_steps; s++) {
        const struct cpu_step *st = &plan->steps[s];
        const uint64_t t_end = cb->t_end[s];
        const uint64_t ns = t_end > t ? t_end - t : 0;
        if (t_end > t)
            t = t_end;
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

/* The per-step counters, claim words and scratch that plan needs, reset. */
static bp_status ready_run_state(struct cpu_backend *cb, const struct cpu_plan *plan)
{
    const int nth = plan->nth;
    if (plan->n_steps > cb->steps_cap) {
        _Atomic int64_t *done = malloc((size_t)plan->n_steps * sizeof *done);
        int64_t *n_counted = malloc((size_t)plan->n_steps * sizeof *n_counted);
        uint64_t *t_end = malloc((size_t)plan->n_steps * sizeof *t_end);
        if (!done || !n_counted || !t_end) {
            free(done);
            free(n_counted);
            free(t_end);
            cpu_log(cb->pl, BP_LOG_ERROR, "could not allocate the step counters of a %d-step "
                    "plan; free memory.", (int)plan->n_steps);
            return BP_ERR_OUT_OF_MEMORY;
        }
        free(cb->done);
        free(cb->n_counted);
        free(cb->t_end);
        cb->done = done;
        cb->n_counted = n_counted;
        cb->t_end = t_end;
        cb->steps_cap = plan->n_steps;
    }
    if (plan->n_claims > cb->claims_cap) {
        _Atomic uint64_t *c = malloc(plan->n_claims * sizeof *c);
        if (!c) {
            cpu_log(cb->pl, BP_LOG_ERROR, "could not allocate the task claims of a %d-step "
                    "plan; free memory.", (int)plan->n_steps);
            return BP_ERR_OUT_OF_MEMORY;
        }
        free(cb->claims);
        cb->claims = c;
        cb->claims_cap = plan->n_claims;
    }
    const size_t want = plan->shared + plan->per_thread * (size_t)nth;
    if (want > cb->scratch_size) {
        void *p = aligned_alloc(CPU_BUFFER_ALIGNMENT, want);
        if (!p) {
            cpu_log(cb->pl, BP_LOG_ERROR,
                    "could not allocate %zu bytes of scratch for graph_compute; free memory.", want);
            return BP_ERR_OUT_OF_MEMORY;
        }
        free(cb->scratch);
        cb->scratch = p;
        cb->scratch_size = want;
    }
    for (int32_t s = 0; s < plan->n_steps; s++) {
        atomic_init(&cb->done[s], 0);
        cb->t_end[s] = 0;
    }
    for (size_t i = 0; i < plan->n_claims; i++)
        atomic_init(&cb->claims[i], 0);
    return BP_OK;
}

static bp_status be_graph_compute(struct bp_backend *b, struct bp_graph *g)
{
    struct cpu_backend *cb = b->context;
    const uint64_t t_call = cb->profile ? now_ns() : 0;
    const struct cpu_plan *plan;
    bp_status st = cpu_plan_get(&cb->plans, cb->pl, g, cpu_pool_n_threads(cb->pool), &plan);
    if (st == BP_OK)
        st = ready_run_state(cb, plan);
    if (st != BP_OK)
        return st;
    struct cpu_graph_job job = { .cb = cb, .g = g, .plan = plan };
    atomic_init(&job.chunk, 0);
    atomic_init(&job.progress, 0);
    atomic_init(&job.status, BP_OK);
    const uint64_t t_run = cb->profile ? now_ns() : 0;
    cpu_pool_run(cb->pool, graph_job, &job);
    st = (bp_status)atomic_load(&job.status);
    if (cb->profile && st == BP_OK)
        profile_account(cb, g, plan, t_call, t_run, now_ns());
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
    bp_status st = cpu_pool_new(nth, cpu_default_poll_us(pl), cpu_poll_adapts(pl), &cb->pool);
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
        st = cpu_pool_new(n_threads, cpu_default_poll_us(cb->pl), cpu_poll_adapts(cb->pl), &pool);
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

bp_status cpu_backend_set_profile(struct bp_backend *b, struct bp_profile *p)
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

bp_status cpu_backend_plan_stats(struct bp_backend *b, struct bp_cpu_plan_stats *out)
{
    if (!b || b->iface != &cpu_backend_iface || !out || out->size < sizeof out->size)
        return BP_ERR_INVALID_ARGUMENT;
    const struct cpu_backend *cb = b->context;
    struct bp_cpu_plan_stats s = cb->plans.stats;
    const size_t n = out->size < sizeof s ? out->size : sizeof s;
    s.size = out->size;
    memcpy(out, &s, n);
    return BP_OK;
}

void cpu_backends_free_all(struct cpu_plugin *pl)
{
    while (pl->live_backends.next != &pl->live_backends)
        be_free(&cpu_backend_of_live(pl->live_backends.next)->be);
}
