/* graph.c — graphs: nodes in dependency order, built by a depth-first walk
 * from each output. A private wrapper around the ABI struct keeps a hash set
 * of the nodes already in the graph, so tensors carry no host state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

enum { MARK_NONE = 0, MARK_OPEN = 1, MARK_DONE = 2 };

struct slot {
    const struct bp_tensor *key;
    int mark;
};

struct graph {
    struct bp_graph pub;   /* first: the pointer handed out is &pub */
    struct slot *set;      /* open addressing, power-of-two size */
    size_t set_cap;
    size_t set_len;
};

static struct graph *priv(struct bp_graph *g)
{
    return (struct graph *)g; /* pub is the first member */
}

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static struct slot *set_find(struct graph *g, const struct bp_tensor *t)
{
    size_t mask = g->set_cap - 1;
    for (size_t i = hash_ptr(t) & mask;; i = (i + 1) & mask)
        if (g->set[i].key == t || g->set[i].key == NULL) return &g->set[i];
}

static bool set_grow(struct graph *g)
{
    size_t cap = g->set_cap * 2;
    struct slot *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return false;
    struct slot *old = g->set;
    size_t old_cap = g->set_cap;
    g->set = fresh;
    g->set_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *set_find(g, old[i].key) = old[i];
    free(old);
    return true;
}

static int set_mark(struct graph *g, const struct bp_tensor *t)
{
    return set_find(g, t)->mark;
}

static bool set_put(struct graph *g, const struct bp_tensor *t, int mark)
{
    if ((g->set_len + 1) * 2 > g->set_cap && !set_grow(g)) return false;
    struct slot *s = set_find(g, t);
    if (!s->key) {
        s->key = t;
        g->set_len++;
    }
    s->mark = mark;
    return true;
}

/* After a failed build: forget everything, then re-mark the nodes kept. */
static void set_rebuild(struct graph *g)
{
    memset(g->set, 0, g->set_cap * sizeof *g->set);
    g->set_len = 0;
    for (int32_t i = 0; i < g->pub.n_nodes; i++) set_put(g, g->pub.nodes[i], MARK_DONE);
}

bp_status bp_graph_new(size_t capacity, struct bp_graph **out)
{
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_new: out is NULL; pass the address of a graph pointer.");
    *out = NULL;
    if (capacity > INT32_MAX)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_new: capacity %zu is above the limit of %d nodes.",
                        capacity, INT32_MAX);
    struct graph *g = calloc(1, sizeof *g);
    size_t set_cap = 16;
    while (set_cap < capacity * 2 + 2) set_cap *= 2;
    if (g) {
        g->pub.nodes = calloc(capacity ? capacity : 1, sizeof *g->pub.nodes);
        g->set = calloc(set_cap, sizeof *g->set);
    }
    if (!g || !g->pub.nodes || !g->set) {
        if (g) {
            free(g->pub.nodes);
            free(g->set);
        }
        free(g);
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_graph_new: could not allocate a graph of %zu nodes.", capacity);
    }
    g->set_cap = set_cap;
    g->pub.capacity = (int32_t)capacity;
    *out = &g->pub;
    return BP_OK;
}

void bp_graph_free(struct bp_graph *pub)
{
    if (!pub) return;
    struct graph *g = priv(pub);
    free(g->set);
    free(g->pub.nodes);
    free(g);
}

/* The inputs of t in the order they are walked: sources, then the memory owner. */
static struct bp_tensor *child(const struct bp_tensor *t, int i)
{
    return i < BP_MAX_SRC ? t->src[i] : t->view_src;
}
#define N_CHILDREN (BP_MAX_SRC + 1)

struct frame {
    struct bp_tensor *t;
    int next;  /* next child to visit */
};

static bp_status walk(struct graph *g, struct bp_tensor *root)
{
    size_t cap = 64, depth = 0;
    struct frame *stack = malloc(cap * sizeof *stack);
    bp_status st = BP_OK;
    if (!stack) return bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_graph_build: out of memory for the walk.");
    if (root->op == BP_OP_NONE || set_mark(g, root) == MARK_DONE) goto out;
    if (!set_put(g, root, MARK_OPEN)) goto oom;
    stack[depth++] = (struct frame){root, 0};
    while (depth > 0) {
        struct frame *f = &stack[depth - 1];
        if (f->next < N_CHILDREN) {
            struct bp_tensor *c = child(f->t, f->next++);
            if (!c || c->op == BP_OP_NONE) continue;
            int mark = set_mark(g, c);
            if (mark == MARK_DONE) continue;
            if (mark == MARK_OPEN) {
                char lb[BP_MAX_NAME + 8];
                st = bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_build: tensor %s depends on itself; "
                              "its src or view_src fields were edited into a cycle.",
                              bp__tensor_label(c, lb, sizeof lb));
                goto out;
            }
            if (!set_put(g, c, MARK_OPEN)) goto oom;
            if (depth == cap) {
                struct frame *bigger = realloc(stack, cap * 2 * sizeof *stack);
                if (!bigger) goto oom;
                stack = bigger;
                cap *= 2;
            }
            stack[depth++] = (struct frame){c, 0};
            continue;
        }
        /* Every input is placed: the node itself comes next. */
        if (g->pub.n_nodes >= g->pub.capacity) {
            char lb[BP_MAX_NAME + 8];
            st = bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_build: the graph is full (%d nodes) before %s; "
                          "create it with a larger capacity in bp_graph_new.",
                          (int)g->pub.capacity, bp__tensor_label(f->t, lb, sizeof lb));
            goto out;
        }
        g->pub.nodes[g->pub.n_nodes++] = f->t;
        set_put(g, f->t, MARK_DONE); /* present already: cannot grow */
        depth--;
    }
    goto out;
oom:
    st = bp__fail(BP_ERR_OUT_OF_MEMORY, "bp_graph_build: out of memory for the walk.");
out:
    free(stack);
    return st;
}

bp_status bp_graph_build(struct bp_graph *pub, struct bp_tensor *t)
{
    if (!pub) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_build: the graph is NULL; create it with bp_graph_new.");
    if (!t) {
        const char *prev = bp_last_error();
        if (prev[0]) {
            char copy[512];
            strncpy(copy, prev, sizeof copy - 1);
            copy[sizeof copy - 1] = '\0';
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_build: the output tensor is NULL because an op "
                            "constructor failed: %s", copy);
        }
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_graph_build: the output tensor is NULL; an op constructor "
                        "failed earlier (see bp_context_status).");
    }
    struct bp_context *ctx = bp__context_of(t);
    if (ctx && bp_context_status(ctx) != BP_OK)
        return bp__fail(bp_context_status(ctx), "bp_graph_build: the context of this tensor has a failed op: %s",
                        bp__context_error(ctx));
    struct graph *g = priv(pub);
    int32_t before = pub->n_nodes;
    bp_status st = walk(g, t);
    if (st != BP_OK) {
        pub->n_nodes = before;
        set_rebuild(g);
    }
    return st;
}
