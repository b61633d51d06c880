/*
 * plan_cache.c — a backend's last plans, each with the key it was made
 * from (plan.h says why the key holds what it holds), reused while a
 * graph's key is unchanged.
 *
 * The key is compared in full on every call, never hashed: a collision
 * would run a stale plan. Its cost is a walk over the graph reading each
 * node's and source's first 136 bytes, against planning's support checks,
 * chunk grids and join windows.
 */
#include <stddef.h>
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

/* One tensor as the plan saw it. A node's record is followed by those of
 * its sources present (src_mask bit s: src[s] is not NULL), in order. */
struct cpu_plan_rec {
    const struct bp_tensor *t;
    const void *data;
    unsigned char head[REC_HEAD];
    uint8_t layout;
    uint8_t src_mask;
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

static uint8_t src_mask_of(const struct bp_tensor *t)
{
    uint8_t m = 0;
    for (int s = 0; s < BP_MAX_SRC; s++)
        if (t->src[s])
            m |= (uint8_t)(1u << s);
    return m;
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
    r->src_mask = src_mask_of(t);
}

static bool key_matches(const struct cpu_plan *p, const struct bp_graph *g, int nth)
{
    if (p->nth != nth || p->n_nodes != g->n_nodes)
        return false;
    const struct cpu_plan_rec *r = p->recs;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (!node || !rec_matches(r, node) || r->src_mask != src_mask_of(node))
            return false;
        r++;
        for (int s = 0; s < BP_MAX_SRC; s++)
            if (node->src[s] && !rec_matches(r++, node->src[s]))
                return false;
    }
    return true;
}

/* Record g's key in p (made from g for nth threads: every node is there).
 * The recorded addresses are only compared, never followed: the tensors
 * they named may be gone. */
static bool key_fill(struct cpu_plan *p, const struct bp_graph *g, int nth)
{
    size_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n += 1 + (size_t)__builtin_popcount(src_mask_of(g->nodes[i]));
    p->recs = malloc((n > 0 ? n : 1) * sizeof *p->recs);
    if (!p->recs)
        return false;
    struct cpu_plan_rec *r = p->recs;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        rec_fill(r++, node);
        for (int s = 0; s < BP_MAX_SRC; s++)
            if (node->src[s])
                rec_fill(r++, node->src[s]);
    }
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
