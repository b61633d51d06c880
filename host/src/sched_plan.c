/* sched_plan.c — from assignments to a plan: runs of consecutive nodes per
 * backend, memory for every tensor of the graph that has none (in one
 * buffer per backend, reused along the graph), and the copies of a run's inputs that its device
 * cannot read (in a second buffer per backend). A copy is made once per
 * tensor and backend and read by every later run there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

static bool is_view(const struct bp_tensor *t)
{
    return bp_op_is_view((enum bp_op)t->op);
}

static bool needs_memory(const struct bp_tensor *t)
{
    return !t->view_src && !t->buffer;
}

static int32_t node_index(const struct sched_plan *p, const struct bp_tensor *t)
{
    for (int32_t i = 0; i < p->n_nodes; i++)
        if (p->nodes[i] == t) return i;
    return -1;
}

/* ---- runs ---- */

static bp_status make_runs(struct sched_plan *p)
{
    int32_t *run_of = p->run_of = malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *run_of);
    p->runs = calloc((size_t)(p->n_nodes ? p->n_nodes : 1), sizeof *p->runs);
    p->run_nodes = malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *p->run_nodes);
    if (!run_of || !p->runs || !p->run_nodes)
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory splitting a graph of %d nodes.",
                        (int)p->n_nodes);
    for (int32_t i = 0; i < p->n_nodes; i++) {
        int b = p->assign[i];
        int32_t r = -1;
        if (is_view(p->nodes[i])) {
            /* A view computes nothing: it joins the latest run of the backend
             * holding its memory rather than cutting the current run. */
            for (int32_t k = (int32_t)p->n_runs - 1; k >= 0 && r < 0; k--)
                if (p->runs[k].backend == b) r = k;
        } else if (p->n_runs && p->runs[p->n_runs - 1].backend == b) {
            r = (int32_t)p->n_runs - 1;
        }
        if (r < 0) {
            r = (int32_t)p->n_runs++;
            p->runs[r].backend = b;
        }
        run_of[i] = r;
        p->runs[r].g.n_nodes++;
    }
    size_t at = 0;
    for (size_t r = 0; r < p->n_runs; r++) {
        p->runs[r].g.nodes = p->run_nodes + at;
        p->runs[r].g.capacity = p->runs[r].g.n_nodes;
        at += (size_t)p->runs[r].g.n_nodes;
        p->runs[r].g.n_nodes = 0;
    }
    for (int32_t i = 0; i < p->n_nodes; i++) {
        struct bp_graph *g = &p->runs[run_of[i]].g;
        g->nodes[g->n_nodes++] = p->nodes[i];
    }
    return BP_OK;
}

/* ---- memory ---- */

static bool remember(struct sched_plan *p, struct bp_tensor *t, size_t *cap)
{
    struct bp_tensor **m = bp__grow(p->placed, sizeof *m, p->n_placed, cap, 64);
    if (!m) return false;
    p->placed = m;
    p->placed[p->n_placed++] = t;
    return true;
}

static size_t alloc_size(struct bp_buffer_type *buft, const struct bp_tensor *t)
{
    size_t n = bp_nbytes(t);
    if (BP_IFACE_HAS(buft->iface, get_alloc_size) && buft->iface->get_alloc_size) {
        size_t a = buft->iface->get_alloc_size(buft, t);
        if (a > n) n = a;
    }
    return n;
}

/* Where ts[0..n) go in backend b's buffer of their sizes[] (aligned), and
 * its size. The graph's own tensors share memory along the plan's node
 * order (bp__graph_offsets, as bp_context_alloc_graph does for one
 * backend): runs execute in that order, and a tensor read by another run
 * is read (or copied) before its last reader's index has passed. A meta
 * device lays its computed tensors' slices out at these offsets on every
 * sub-device, so they share memory there too. Copies (not nodes of the
 * graph) stay apart. */
static bp_status offsets(struct sched_plan *p, struct bp_tensor **ts, const size_t *sizes, size_t n,
                         bool along_graph, size_t *offs, size_t *total)
{
    if (along_graph) {
        const struct bp_graph g = { .n_nodes = p->n_nodes, .capacity = p->n_nodes, .nodes = p->nodes };
        return bp__graph_offsets(ts, sizes, n, &g, offs, total);
    }
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        offs[i] = *total;
        *total += sizes[i];
    }
    return BP_OK;
}

/* One buffer of backend b's default type for ts[0..n) (the graph's own
 * tensors when along_graph, else copies), each at an aligned offset;
 * *out stays NULL when n is 0. */
static bp_status place(struct bp_sched *s, struct sched_plan *p, int b, struct bp_tensor **ts, size_t n,
                       bool along_graph, struct bp_buffer **out, size_t *placed_cap)
{
    if (n == 0) return BP_OK;
    struct bp_buffer_type *buft = bp_device_buffer_type(s->be[b]->device);
    if (!buft || !buft->iface)
        return bp__fail(BP_ERR_PLUGIN, "bp_sched: %s has no buffer type for the graph's tensors; its plugin "
                        "is broken.", sched__name(s, b));
    size_t align = 1, total = 0;
    if (BP_IFACE_HAS(buft->iface, get_alignment) && buft->iface->get_alignment)
        align = buft->iface->get_alignment(buft);
    if (!align || (align & (align - 1)))
        return bp__fail(BP_ERR_PLUGIN, "bp_sched: buffer type %s reports alignment %zu, not a power of two; "
                        "its plugin is broken.", bp__buft_name(buft), align);
    size_t *sizes = malloc(2 * n * sizeof *sizes);
    if (!sizes) return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning a graph.");
    size_t *offs = sizes + n;
    for (size_t i = 0; i < n; i++) sizes[i] = (alloc_size(buft, ts[i]) + align - 1) & ~(align - 1);
    bp_status st = offsets(p, ts, sizes, n, along_graph, offs, &total);
    if (st == BP_OK && s->measure) {
        /* A stand-in with the buffer type, so copies are found as for real. */
        s->measure[b].buft = buft;
        s->measured[b] += total;
        for (size_t i = 0; i < n && st == BP_OK; i++) {
            ts[i]->buffer = &s->measure[b];
            if (!remember(p, ts[i], placed_cap)) {
                ts[i]->buffer = NULL;
                st = bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory measuring a graph.");
            }
        }
        free(sizes);
        return st;
    }
    if (st == BP_OK && (st = bp_buffer_alloc(buft, total ? total : align, out)) == BP_OK)
        s->stats.buffers_allocated++;
    char *base = st == BP_OK ? (*out)->iface->get_base(*out) : NULL;
    for (size_t i = 0; i < n && st == BP_OK; i++) {
        struct bp_tensor *t = ts[i];
        t->data = base + offs[i];
        t->buffer = *out;
        if (!remember(p, t, placed_cap)) {
            t->data = NULL;
            t->buffer = NULL;
            st = bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning a graph.");
            break;
        }
        if (BP_IFACE_HAS((*out)->iface, init_tensor) && (*out)->iface->init_tensor)
            st = (*out)->iface->init_tensor(*out, t);
        if (st != BP_OK) {
            char l[BP_MAX_NAME + 8];
            st = bp__fail(st, "bp_sched: buffer %s could not set up tensor %s (%s).", bp__buffer_name(*out),
                          bp__tensor_label(t, l, sizeof l), bp_status_name(st));
        }
    }
    free(sizes);
    return st;
}

/* Tensors of the graph without memory, grouped by the backend computing
 * them (a leaf: the backend of its first reader), placed per backend; then
 * the views resolved over them. */
static bp_status place_graph(struct bp_sched *s, struct sched_plan *p, size_t *placed_cap)
{
    size_t cap = (size_t)p->n_nodes * (BP_MAX_SRC + 1) + 1;
    struct bp_tensor **ts = malloc(cap * sizeof *ts);
    struct bp_tensor **mine = malloc(cap * sizeof *mine);
    int *home = malloc(cap * sizeof *home);
    bp_status st = BP_OK;
    size_t n = 0;
    if (!ts || !mine || !home) {
        st = bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning a graph.");
        goto out;
    }
    for (int32_t i = 0; i < p->n_nodes; i++) {
        struct bp_tensor *node = p->nodes[i];
        for (int j = 0; j <= BP_MAX_SRC; j++) {
            struct bp_tensor *t = j < BP_MAX_SRC ? node->src[j] : node;
            if (!t || !needs_memory(t) || (t != node && t->op != BP_OP_NONE)) continue;
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++) seen = ts[k] == t;
            if (seen) continue;
            ts[n] = t;
            home[n++] = p->assign[i];
        }
    }
    for (int b = 0; b < s->n && st == BP_OK; b++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (home[k] == b) mine[m++] = ts[k];
        st = place(s, p, b, mine, m, true, &p->bufs[2 * b], placed_cap);
    }
    for (int32_t i = 0; i < p->n_nodes && st == BP_OK && !s->measure; i++) {
        struct bp_tensor *node = p->nodes[i];
        if (!node->view_src || node->buffer) continue;
        st = bp__view_resolve(node);
        if (st == BP_OK && node->buffer && !remember(p, node, placed_cap))
            st = bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning a graph.");
    }
out:
    free(ts);
    free(mine);
    free(home);
    return st;
}

/* ---- copies ---- */

static bool grow(void **arr, size_t elem, size_t n, size_t *cap)
{
    void *m = bp__grow(*arr, elem, n, cap, 16);
    if (!m) return false;
    *arr = m;
    return true;
}

/* The copy of t on backend b made so far, or NULL. */
static struct bp_tensor *find_copy(const struct sched_plan *p, const struct bp_tensor *t, int b)
{
    for (size_t c = 0; c < p->n_copies; c++)
        if (p->copies[c].src == t && p->copies[c].to == b) return p->copies[c].dst;
    return NULL;
}

/* A tensor of the plan on backend b with t's type, shape and strides, so
 * the bytes t spans copy over as they are (a view keeps its layout). */
static struct bp_tensor *copy_tensor_like(struct bp_sched *s, struct sched_plan *p, const struct bp_tensor *t,
                                          int b)
{
    struct bp_tensor *c = bp_tensor_new(p->copy_ctx, (enum bp_type)t->type, 4, t->ne);
    if (!c) return NULL;
    memcpy(c->nb, t->nb, sizeof c->nb);
    char nm[BP_MAX_NAME];
    snprintf(nm, sizeof nm, "%.40s#%s", t->name[0] ? t->name : "(unnamed)", sched__name(s, b));
    bp_tensor_set_name(c, nm);
    return c;
}

/* A node read by a later run is an output of its own run: a backend that
 * keeps results in a form only it reads (a meta device's partial sums)
 * finishes them before the run ends. */
static void mark_output(struct sched_plan *p, struct bp_tensor *t, int32_t reader_run)
{
    for (; t && t->op != BP_OP_NONE; t = t->view_src) {
        int32_t i = node_index(p, t);
        if (i >= 0 && p->run_of[i] != reader_run) t->flags |= BP_TENSOR_FLAG_OUTPUT;
    }
}

/* For every run, the sources its device cannot read: a copy (reused when an
 * earlier run on the same backend made it) and a swap while it computes. */
static bp_status find_copies(struct bp_sched *s, struct sched_plan *p)
{
    size_t cap_c = 0, cap_s = 0, n_leaf_copies = 0;
    bp_status st = bp_context_new((size_t)p->n_nodes * BP_MAX_SRC + 1, &p->copy_ctx);
    if (st != BP_OK) return st;
    for (size_t r = 0; r < p->n_runs; r++) {
        struct sched_run *run = &p->runs[r];
        int b = run->backend;
        run->copy_first = p->n_copies;
        run->swap_first = p->n_swaps;
        for (int32_t k = 0; k < run->g.n_nodes; k++) {
            struct bp_tensor *node = run->g.nodes[k];
            if (is_view(node)) continue;
            for (int j = 0; j < BP_MAX_SRC; j++) {
                struct bp_tensor *t = node->src[j];
                if (!t) continue;
                mark_output(p, t, (int32_t)r);
                const struct bp_tensor *o = t;
                while (o->view_src) o = o->view_src;
                if (!o->buffer || sched__reads(s, b, o->buffer->buft)) continue;
                struct bp_tensor *c = find_copy(p, t, b);
                if (!c) {
                    if (!grow((void **)&p->copies, sizeof *p->copies, p->n_copies, &cap_c) ||
                        !(c = copy_tensor_like(s, p, t, b)))
                        return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning copies.");
                    int32_t from = t->op == BP_OP_NONE ? -1 : node_index(p, t);
                    p->copies[p->n_copies++] = (struct sched_copy){
                        .src = t, .dst = c, .from = from >= 0 ? p->assign[from] : -1, .to = b };
                    if (from < 0) n_leaf_copies++;
                    size_t bytes = bp_nbytes(t);
                    if (bytes > p->max_copy) p->max_copy = bytes;
                }
                if (!grow((void **)&p->swaps, sizeof *p->swaps, p->n_swaps, &cap_s))
                    return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning copies.");
                p->swaps[p->n_swaps++] = (struct sched_swap){ .node = node, .slot = j, .orig = t, .copy = c };
            }
        }
        run->n_copies = p->n_copies - run->copy_first;
        run->n_swaps = p->n_swaps - run->swap_first;
    }
    if (n_leaf_copies)
        bp__log(BP_LOG_DEBUG, "sched", "%zu leaves (weights or inputs) are copied at every compute because "
                "the backends that read them cannot reach their memory.", n_leaf_copies);
    return bp_context_status(p->copy_ctx);
}

/* The copies' memory: one buffer per backend that receives any. */
static bp_status place_copies(struct bp_sched *s, struct sched_plan *p, size_t *placed_cap)
{
    if (!p->n_copies) return BP_OK;
    struct bp_tensor **ts = malloc(p->n_copies * sizeof *ts);
    if (!ts) return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory planning copies.");
    bp_status st = BP_OK;
    for (int b = 0; b < s->n && st == BP_OK; b++) {
        size_t m = 0;
        for (size_t c = 0; c < p->n_copies; c++)
            if (p->copies[c].to == b) ts[m++] = p->copies[c].dst;
        st = place(s, p, b, ts, m, false, &p->bufs[2 * b + 1], placed_cap);
    }
    free(ts);
    return st;
}

bp_status sched__split(struct bp_sched *s, struct sched_plan *p)
{
    size_t placed_cap = 0;
    bp_status st = make_runs(p);
    if (st == BP_OK) st = place_graph(s, p, &placed_cap);
    if (st == BP_OK) st = find_copies(s, p);
    if (st == BP_OK) st = place_copies(s, p, &placed_cap);
    if (st == BP_OK && p->max_copy > s->staging_size) {
        void *m = realloc(s->staging, p->max_copy);
        if (!m) return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_sched: out of memory for %zu staging bytes.", p->max_copy);
        s->staging = m;
        s->staging_size = p->max_copy;
    }
    return st;
}

void sched__plan_free(struct sched_plan *p, bool unplace)
{
    if (!p) return;
    if (unplace)
        for (size_t i = 0; i < p->n_placed; i++) {
            p->placed[i]->data = NULL;
            p->placed[i]->buffer = NULL;
            p->placed[i]->extra = NULL;
        }
    for (size_t i = 0; i < 2 * BP_SCHED_MAX_BACKENDS; i++) bp_buffer_free(p->bufs[i]);
    bp_context_free(p->copy_ctx);
    free(p->nodes);
    free(p->assign);
    free(p->run_of);
    free(p->run_nodes);
    free(p->runs);
    free(p->copies);
    free(p->swaps);
    free(p->placed);
    free(p);
}
