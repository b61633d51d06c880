/*
 * plan_cache.c — a backend's last plans, each with the key it was made
 * from (plan.h says why the key holds what it holds), reused while a
 * graph's key is unchanged.
 *
 * The key is compared in full on every call, never hashed: a collision
 * would run a stale plan. Its cost is one read of each tensor of the graph
 * (the first 208 bytes), against planning's reads of the same tensors plus
 * its support checks, chunk grids and join windows.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"
#include "plan.h"

/* The fields of a tensor that planning reads and that sit together at its
 * head: type, op, ne, nb, op_params (bp_tensor.h freezes the layout). */
#define REC_HEAD offsetof(struct bp_tensor, flags)
_Static_assert(offsetof(struct bp_tensor, type) == 0 &&
               offsetof(struct bp_tensor, op_params) + sizeof(int32_t) * BP_MAX_OP_PARAMS ==
                   REC_HEAD,
               "the key's head is type .. op_params");

enum {
    REC_REPACKED = 1,   /* the tensor is a weight in the x8 layout */
    REC_TOUCHES = 2,    /* it or what it views is one */
};

/* One tensor as the plan saw it. */
struct cpu_plan_rec {
    const struct bp_tensor *t;
    const void *data;
    unsigned char head[REC_HEAD];
    uint8_t layout;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The weight layout is the buffer's (CPU_REPACK) and, for a view, its
 * root's: fields outside the tensor, so they are asked, not copied. */
static uint8_t layout_of(const struct bp_tensor *t)
{
    return (uint8_t)((cpu_tensor_repacked(t) ? REC_REPACKED : 0) |
                     (cpu_tensor_touches_repacked(t) ? REC_TOUCHES : 0));
}

static bool rec_matches(const struct cpu_plan_rec *r, const struct bp_tensor *t)
{
    return r->t == t && r->data == t->data && memcmp(r->head, t, REC_HEAD) == 0 &&
           r->layout == layout_of(t);
}

static void rec_fill(struct cpu_plan_rec *r, const struct bp_tensor *t)
{
    r->t = t;
    r->data = t->data;
    memcpy(r->head, t, REC_HEAD);
    r->layout = layout_of(t);
}

/* Each tensor is compared once: a node in its own record, a source that is
 * a node by address only, a leaf (weight, input, cache) in a record after
 * the nodes'. Reading tensors is most of the cost (a decode step has just
 * streamed the weights through the caches), so no tensor is read twice. */
static bool key_matches(const struct cpu_plan *p, const struct bp_graph *g, int nth)
{
    if (p->nth != nth || p->n_nodes != g->n_nodes)
        return false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (!node || !rec_matches(&p->recs[i], node))
            return false;
        const int32_t *sr = &p->src_rec[(size_t)i * BP_MAX_SRC];
        for (int s = 0; s < BP_MAX_SRC; s++)
            if (node->src[s] != (sr[s] < 0 ? NULL : p->recs[sr[s]].t))
                return false;
    }
    /* Every leaf is a source of a node that matched: an address the graph
     * holds now, so it may be read. */
    for (int32_t j = p->n_nodes; j < p->n_recs; j++)
        if (!rec_matches(&p->recs[j], p->recs[j].t))
            return false;
    return true;
}

/* Tensor address -> record index while a key is made (open addressing). */
struct rec_index {
    const struct bp_tensor **keys;
    int32_t *vals;
    size_t mask;
};

/* The record of t, or -1 after entering it as record `next`. */
static int32_t rec_index_find_or_add(struct rec_index *x, const struct bp_tensor *t, int32_t next)
{
    size_t h = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & x->mask;
    while (x->keys[h] && x->keys[h] != t)
        h = (h + 1) & x->mask;
    if (x->keys[h])
        return x->vals[h];
    x->keys[h] = t;
    x->vals[h] = next;
    return -1;
}

/* Record g's key in p (made from g for nth threads: every node is there).
 * The recorded addresses are only compared until a graph holds them again.
 * First every source gets its record's index (a node's, or a new leaf's),
 * then the records are allocated to size and filled. */
static bool key_fill(struct cpu_plan *p, const struct bp_graph *g, int nth)
{
    const size_t n = (size_t)g->n_nodes, most = n * (1 + BP_MAX_SRC);
    if (most > INT32_MAX)
        return false;
    size_t cap = 16;
    while (cap < 2 * most)
        cap *= 2;
    struct rec_index x = { calloc(cap, sizeof *x.keys), malloc(cap * sizeof *x.vals), cap - 1 };
    p->src_rec = malloc((n > 0 ? n : 1) * BP_MAX_SRC * sizeof *p->src_rec);
    bool ok = x.keys && x.vals && p->src_rec;
    int32_t n_recs = g->n_nodes;
    for (int32_t i = 0; ok && i < g->n_nodes; i++)
        rec_index_find_or_add(&x, g->nodes[i], i);
    for (int32_t i = 0; ok && i < g->n_nodes; i++)
        for (int s = 0; s < BP_MAX_SRC; s++) {
            const struct bp_tensor *src = g->nodes[i]->src[s];
            int32_t r = src ? rec_index_find_or_add(&x, src, n_recs) : -1;
            if (src && r < 0)
                r = n_recs++;
            p->src_rec[(size_t)i * BP_MAX_SRC + (size_t)s] = r;
        }
    free(x.keys);
    free(x.vals);
    p->recs = ok ? malloc((size_t)(n_recs > 0 ? n_recs : 1) * sizeof *p->recs) : NULL;
    if (!p->recs)
        return false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        rec_fill(&p->recs[i], g->nodes[i]);
        for (int s = 0; s < BP_MAX_SRC; s++) {
            const int32_t r = p->src_rec[(size_t)i * BP_MAX_SRC + (size_t)s];
            if (r >= g->n_nodes)
                rec_fill(&p->recs[r], g->nodes[i]->src[s]);
        }
    }
    p->n_recs = n_recs;
    p->n_nodes = g->n_nodes;
    p->nth = nth;
    return true;
}

/* Where a new plan goes: an empty slot, else the least recently used. */
static int victim(const struct cpu_plan_cache *c)
{
    int v = 0;
    for (int i = 0; i < CPU_PLAN_CACHE; i++) {
        if (!c->plans[i])
            return i;
        if (c->plans[i]->used < c->plans[v]->used)
            v = i;
    }
    return v;
}

bp_status cpu_plan_get(struct cpu_plan_cache *c, const struct cpu_plugin *pl,
                       const struct bp_graph *g, int nth, const struct cpu_plan **out)
{
    const uint64_t t0 = now_ns();
    *out = NULL;
    c->clock++;
    if (g && g->n_nodes >= 0 && (g->n_nodes == 0 || g->nodes))
        for (int i = 0; i < CPU_PLAN_CACHE; i++) {
            struct cpu_plan *p = c->plans[i];
            if (p && key_matches(p, g, nth)) {
                p->used = c->clock;
                c->stats.reused++;
                c->stats.lookup_ns += now_ns() - t0;
                *out = p;
                return BP_OK;
            }
        }
    c->stats.lookup_ns += now_ns() - t0;
    struct cpu_plan *p;
    bp_status st = cpu_plan_make(pl, g, nth, &p);
    if (st != BP_OK)
        return st;
    if (!key_fill(p, g, nth)) {
        cpu_log(pl, BP_LOG_ERROR, "could not allocate the key of a %d-node graph's plan; free "
                "memory.", (int)g->n_nodes);
        cpu_plan_free(p);
        return BP_ERR_OUT_OF_MEMORY;
    }
    const int v = victim(c);
    if (!c->plans[v])
        c->stats.cached++;
    cpu_plan_free(c->plans[v]);
    c->plans[v] = p;
    p->used = c->clock;
    c->stats.made++;
    c->stats.make_ns += p->make_ns;
    c->stats.converts_shared += (uint64_t)p->converts_shared;
    c->stats.mul_mats_joined += (uint64_t)p->mul_mats_joined;
    *out = p;
    return BP_OK;
}

void cpu_plan_cache_free(struct cpu_plan_cache *c)
{
    for (int i = 0; i < CPU_PLAN_CACHE; i++) {
        cpu_plan_free(c->plans[i]);
        c->plans[i] = NULL;
    }
    c->stats.cached = 0;
}
