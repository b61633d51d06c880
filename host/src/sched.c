/* sched.c — the scheduler's API: creation with its checks, the per-graph
 * plan cache (by graph object, or by node list for a rebuilt graph of the
 * same tensors), and compute: each run's copies, a fence against the other
 * streams, the run on its backend with its sources swapped to the copies. */
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

static bool strict_from_env(void)
{
    const char *v = bp__getenv("BACKPLANE_SCHED_STRICT");
    return v && *v && strcmp(v, "0") != 0;
}

static bool can_event(struct bp_backend *b)
{
    struct bp_device *d = b->device;
    return BP_IFACE_HAS(d->iface, event_new) && d->iface->event_new &&
           BP_IFACE_HAS(b->iface, event_record) && b->iface->event_record &&
           BP_IFACE_HAS(b->iface, event_wait) && b->iface->event_wait;
}

bp_status bp_sched_new(struct bp_backend *const *backends, size_t n, const struct bp_sched_options *opts,
                       struct bp_sched **out)
{
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: out is NULL; pass the address of a scheduler pointer.");
    *out = NULL;
    if (!backends || n == 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: no backends given; pass at least one, the "
                        "last a CPU backend to fall back on.");
    if (n > BP_SCHED_MAX_BACKENDS)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: %zu backends given; a scheduler takes at most %d.",
                        n, BP_SCHED_MAX_BACKENDS);
    if (opts && opts->size == 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: options.size is 0; set it to "
                        "sizeof(struct bp_sched_options).");
    for (size_t i = 0; i < n; i++) {
        if (!backends[i] || !backends[i]->iface || !backends[i]->device || !backends[i]->device->iface)
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: backend %zu is NULL; make it with "
                            "bp_backend_init.", i);
        for (size_t j = 0; j < i; j++)
            if (backends[j] == backends[i])
                return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_new: backend %zu (%s) is listed twice; "
                                "list each backend once.", i, bp_device_name(backends[i]->device));
    }
    struct bp_sched *s = calloc(1, sizeof *s);
    if (!s) return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched_new: out of memory.");
    s->n = (int)n;
    bool strict = opts && opts->size >= offsetof(struct bp_sched_options, strict) + sizeof opts->strict &&
                  opts->strict;
    s->strict = strict || strict_from_env();
    for (size_t i = 0; i < n; i++) {
        s->be[i] = backends[i];
        struct bp_device *d = backends[i]->device;
        if (can_event(backends[i]) && d->iface->event_new(d, &s->ev[i]) != BP_OK) s->ev[i] = NULL;
    }
    *out = s;
    return BP_OK;
}

void bp_sched_free(struct bp_sched *s)
{
    if (!s) return;
    bp_sched_synchronize(s);
    while (s->plans) {
        struct sched_plan *p = s->plans;
        s->plans = p->next;
        sched__plan_free(p, false);
    }
    for (int i = 0; i < s->n; i++)
        if (s->ev[i] && s->ev[i]->iface && s->ev[i]->iface->free) s->ev[i]->iface->free(s->ev[i]);
    free(s->staging);
    free(s);
}

void bp_sched_get_stats(const struct bp_sched *s, struct bp_sched_stats *out)
{
    if (!out || out->size == 0) return;
    struct bp_sched_stats st = {0};
    if (s) st = s->stats;
    st.size = out->size < sizeof st ? out->size : sizeof st;
    memcpy(out, &st, st.size);
}

/* The plan of g: same object first, else the same node list (then it is
 * re-keyed to g, the graph the caller now uses). */
static struct sched_plan *lookup(struct bp_sched *s, const struct bp_graph *g)
{
    for (struct sched_plan *p = s->plans; p; p = p->next)
        if (p->key == g && p->n_nodes == g->n_nodes &&
            !memcmp(p->nodes, g->nodes, (size_t)g->n_nodes * sizeof *g->nodes))
            return p;
    for (struct sched_plan *p = s->plans; p; p = p->next)
        if (p->n_nodes == g->n_nodes && !memcmp(p->nodes, g->nodes, (size_t)g->n_nodes * sizeof *g->nodes)) {
            p->key = g;
            return p;
        }
    return NULL;
}

static bp_status check_graph(const char *what, struct bp_sched *s, const struct bp_graph *g)
{
    if (!s) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the scheduler is NULL; make it with bp_sched_new.", what);
    if (!g || g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the graph is NULL or malformed; make it with bp_graph_new "
                        "and bp_graph_build.", what);
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: node %d of the graph is NULL.", what, (int)i);
    return BP_OK;
}

/* A plan of g (assigned, split, placed), not yet in the cache. */
static bp_status plan_new(struct bp_sched *s, const struct bp_graph *g, struct sched_plan **out)
{
    struct sched_plan *p = calloc(1, sizeof *p);
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    if (p) {
        p->key = g;
        p->n_nodes = g->n_nodes;
        p->nodes = malloc(n * sizeof *p->nodes);
        p->assign = malloc(n * sizeof *p->assign);
    }
    if (!p || !p->nodes || !p->assign) {
        sched__plan_free(p, false);
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning a graph of %d nodes.", (int)g->n_nodes);
    }
    memcpy(p->nodes, g->nodes, (size_t)g->n_nodes * sizeof *g->nodes);
    bp_status st = sched__assign(s, p);
    if (st == BP_OK) st = sched__split(s, p);
    if (st != BP_OK) {
        sched__plan_free(p, true);
        return st;
    }
    *out = p;
    return BP_OK;
}

static bp_status plan_graph(struct bp_sched *s, struct bp_graph *g, struct sched_plan **out)
{
    struct sched_plan *p;
    bp_status st = plan_new(s, g, &p);
    if (st != BP_OK) return st;
    p->next = s->plans;
    s->plans = p;
    s->stats.plans_made++;
    sched__summarize(s, p);
    *out = p;
    return BP_OK;
}

/* A leaf of the caller's contexts that needs memory (no buffer, not a view). */
static bool unplaced_leaf(const struct bp_tensor *t)
{
    return !t->buffer && !t->view_src;
}

bp_status bp_sched_measure_graph(struct bp_sched *s, const struct bp_graph *g,
                                 struct bp_context *const *leaf_ctx, struct bp_buffer_type *const *leaf_buft,
                                 size_t n_leaf, size_t *bytes)
{
    const char *what = "bp_sched_measure_graph";
    bp_status st = check_graph(what, s, g);
    if (st != BP_OK) return st;
    if (!bytes || (n_leaf && (!leaf_ctx || !leaf_buft)))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: bytes, or the leaf contexts and buffer types, are NULL.", what);
    for (size_t i = 0; i < n_leaf; i++)
        if (!leaf_ctx[i] || !leaf_buft[i])
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: leaf context %zu or its buffer type is NULL.", what, i);
    memset(bytes, 0, (size_t)s->n * sizeof *bytes);
    /* Stand-in buffers: one per leaf context, one per backend for what the
     * plan places; they carry a buffer type and no memory. */
    struct bp_buffer *stand = calloc(n_leaf + (size_t)s->n, sizeof *stand);
    if (!stand) return bp__fail(BP_ERR_OUT_OF_MEMORY, "%s: out of memory.", what);
    for (size_t i = 0; i < n_leaf; i++) {
        stand[i].buft = leaf_buft[i];
        for (size_t k = 0; k < bp_context_tensor_count(leaf_ctx[i]); k++) {
            struct bp_tensor *t = bp_context_tensor(leaf_ctx[i], k);
            if (unplaced_leaf(t)) t->buffer = &stand[i];
        }
    }
    s->measure = stand + n_leaf;
    s->measured = bytes;
    struct sched_plan *p = NULL;
    st = plan_new(s, g, &p);
    sched__plan_free(p, true);  /* takes the stand-ins back from what it placed */
    s->measure = NULL;
    s->measured = NULL;
    for (size_t i = 0; i < n_leaf; i++)
        for (size_t k = 0; k < bp_context_tensor_count(leaf_ctx[i]); k++) {
            struct bp_tensor *t = bp_context_tensor(leaf_ctx[i], k);
            if (t->buffer == &stand[i]) t->buffer = NULL;
        }
    free(stand);
    return st;
}

size_t bp_sched_buffer_bytes(const struct bp_sched *s, const struct bp_device *dev)
{
    size_t n = 0;
    for (const struct sched_plan *p = s ? s->plans : NULL; p; p = p->next)
        for (int b = 0; b < s->n; b++)
            if (s->be[b]->device == dev)
                for (int k = 0; k < 2; k++)
                    if (p->bufs[2 * b + k]) n += bp_buffer_size(p->bufs[2 * b + k]);
    return n;
}

size_t bp_sched_buffers(const struct bp_sched *s, const struct bp_device *dev, struct bp_buffer **out, size_t cap)
{
    size_t n = 0;
    for (const struct sched_plan *p = s ? s->plans : NULL; p; p = p->next)
        for (int b = 0; b < s->n; b++)
            for (int k = 0; k < 2 && s->be[b]->device == dev; k++)
                if (p->bufs[2 * b + k]) {
                    if (n < cap && out) out[n] = p->bufs[2 * b + k];
                    n++;
                }
    return n;
}

bp_status bp_sched_alloc_graph(struct bp_sched *s, struct bp_graph *g)
{
    bp_status st = check_graph("bp_sched_alloc_graph", s, g);
    if (st != BP_OK) return st;
    struct sched_plan *p = lookup(s, g);
    return p ? BP_OK : plan_graph(s, g, &p);
}

/* Order run r's backend after the work queued on the others: an event where
 * both offer them, else wait for them. */
static bp_status fence(struct bp_sched *s, int b)
{
    for (int a = 0; a < s->n; a++) {
        if (a == b || !s->pending[a]) continue;
        struct bp_backend *ab = s->be[a], *bb = s->be[b];
        if (s->ev[a] && BP_IFACE_HAS(bb->iface, event_wait) && bb->iface->event_wait &&
            ab->iface->event_record(ab, s->ev[a]) == BP_OK && bb->iface->event_wait(bb, s->ev[a]) == BP_OK)
            continue;
        bp_status st = bp_backend_synchronize(ab);
        if (st != BP_OK) return st;
        s->pending[a] = false;
    }
    return BP_OK;
}

static bp_status run_one(struct bp_sched *s, struct sched_plan *p, const struct sched_run *run)
{
    bp_status st = BP_OK;
    for (size_t c = run->copy_first; c < run->copy_first + run->n_copies && st == BP_OK; c++) {
        st = sched__copy(s, &p->copies[c]);
        s->stats.copies++;
        s->stats.bytes_copied += bp_nbytes(p->copies[c].src);
    }
    if (st == BP_OK) st = fence(s, run->backend);
    if (st != BP_OK) return st;
    for (size_t w = run->swap_first; w < run->swap_first + run->n_swaps; w++)
        p->swaps[w].node->src[p->swaps[w].slot] = p->swaps[w].copy;
    st = bp_backend_graph_compute(s->be[run->backend], (struct bp_graph *)&run->g);
    for (size_t w = run->swap_first; w < run->swap_first + run->n_swaps; w++)
        p->swaps[w].node->src[p->swaps[w].slot] = p->swaps[w].orig;
    s->pending[run->backend] = true;
    return st;
}

bp_status bp_sched_graph_compute(struct bp_sched *s, struct bp_graph *g)
{
    bp_status st = check_graph("bp_sched_graph_compute", s, g);
    if (st != BP_OK) return st;
    struct sched_plan *p = lookup(s, g);
    if (!p && (st = plan_graph(s, g, &p)) != BP_OK) return st;
    /* Copies write their tensors from the host: nothing of the previous
     * compute may still read them. */
    if ((st = bp_sched_synchronize(s)) != BP_OK) return st;
    s->stats.computes++;
    for (size_t r = 0; r < p->n_runs && st == BP_OK; r++) st = run_one(s, p, &p->runs[r]);
    return st;
}

bp_status bp_sched_synchronize(struct bp_sched *s)
{
    if (!s) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_synchronize: the scheduler is NULL.");
    for (int i = 0; i < s->n; i++) {
        if (!s->pending[i]) continue;
        bp_status st = bp_backend_synchronize(s->be[i]);
        if (st != BP_OK) return st;
        s->pending[i] = false;
    }
    return BP_OK;
}

void bp_sched_reset_graph(struct bp_sched *s, struct bp_graph *g)
{
    if (!s || !g) return;
    for (struct sched_plan **pp = &s->plans; *pp; pp = &(*pp)->next)
        if ((*pp)->key == g) {
            struct sched_plan *p = *pp;
            *pp = p->next;
            bp_sched_synchronize(s);
            sched__plan_free(p, true);
            return;
        }
}

struct bp_backend *bp_sched_node_backend(struct bp_sched *s, const struct bp_tensor *t)
{
    if (!s || !t) return NULL;
    for (struct sched_plan *p = s->plans; p; p = p->next)
        for (int32_t i = 0; i < p->n_nodes; i++)
            if (p->nodes[i] == t) return s->be[p->assign[i]];
    return NULL;
}
