/*
 * plan.c — the plan of one graph: which nodes the device runs, as which
 * steps (plan.h), which MUL_MATs share one, how many tasks each has, and
 * the work buffer it needs. Made on the calling thread before the parallel
 * region, with every allocation; running it allocates nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"
#include "plan.h"
#include "task_claim.h"

/* MUL_MATs up to this many nodes after the first one of a group are looked
 * at for joining it: a layer's Q/K/V and gate/up are a few nodes apart, and
 * the bound keeps planning linear in the graph's size. */
#define CPU_JOIN_WINDOW 24

/* A plan being made, with the scratch only making needs. */
struct plan_maker {
    const struct cpu_plugin *pl;
    const struct bp_graph *g;
    struct cpu_plan *p;
    bool *joined;           /* per node: runs in an earlier node's chunk step */
    int32_t n_members;
    /* The MUL_MAT whose converted activation the work buffer's shared part
     * holds after the steps made so far, -1 if none (see plan_node). */
    int32_t held;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* Every node present, supported and with memory; the work buffer's parts
 * sized to the largest node's need. */
static bp_status check_and_size(struct plan_maker *m)
{
    const struct bp_graph *g = m->g;
    size_t per_thread = 0, shared = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *node = g->nodes[i];
        if (!node) {
            cpu_log(m->pl, BP_LOG_ERROR, "graph node %" PRId32 " is NULL; rebuild the graph.", i);
            return BP_ERR_INVALID_ARGUMENT;
        }
        if (!cpu_supports_node(node)) {
            char types[128];
            describe_types(node, types, sizeof types);
            cpu_log(m->pl, BP_LOG_ERROR,
                    "the cpu device cannot compute %s node '%s' (%s); check supports_op and "
                    "place it on another device.",
                    bp_op_name((enum bp_op)node->op), cpu_name(node), types);
            return BP_ERR_UNSUPPORTED;
        }
        if (bp_op_is_view((enum bp_op)node->op))
            continue;
        bp_status st = check_node_data(m->pl, node);
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
    m->p->per_thread = (per_thread + CPU_BUFFER_ALIGNMENT - 1) / CPU_BUFFER_ALIGNMENT *
                       CPU_BUFFER_ALIGNMENT;
    m->p->shared = (shared + CPU_BUFFER_ALIGNMENT - 1) / CPU_BUFFER_ALIGNMENT * CPU_BUFFER_ALIGNMENT;
    return BP_OK;
}

static struct cpu_step *add_step(struct cpu_plan *p, int32_t node, int kind, int nth, int64_t n)
{
    struct cpu_step *st = &p->steps[p->n_steps++];
    *st = (struct cpu_step){ .node = node, .kind = kind, .nth = nth,
                             .n = n > 0 ? n : 1 };  /* a step of no task would never finish */
    return st;
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
static int32_t join_mul_mats(struct plan_maker *mk, int32_t i, int tasks, int32_t m0)
{
    const struct bp_graph *g = mk->g;
    struct cpu_member *mem = mk->p->members;
    const struct bp_tensor *first = g->nodes[i];
    int32_t nm = 1;
    mem[m0] = (struct cpu_member){ .node = i, .end = cpu_mul_mat_n_chunks(first, tasks) };
    const int32_t last = g->n_nodes - 1 < i + CPU_JOIN_WINDOW ? g->n_nodes - 1 : i + CPU_JOIN_WINDOW;
    for (int32_t j = i + 1; j <= last; j++) {
        const struct bp_tensor *nj = g->nodes[j];
        if (bp_op_is_view((enum bp_op)nj->op) || mk->joined[j])
            continue;   /* computes nothing, or already ran in an earlier step */
        bool ok = nj->op == BP_OP_MUL_MAT && bp_nelements(nj) > 0 && cpu_mul_mat_same_x(first, nj);
        for (int32_t k = 0; ok && k < nm; k++)
            ok = !conflict(nj, g->nodes[mem[m0 + k].node]);
        for (int32_t b = i + 1; ok && b < j; b++) {
            const struct bp_tensor *nb = g->nodes[b];
            if (!bp_op_is_view((enum bp_op)nb->op) && !mk->joined[b])
                ok = !conflict(nj, nb);
        }
        if (ok) {
            mk->joined[j] = true;
            mem[m0 + nm] = (struct cpu_member){
                .node = j, .end = mem[m0 + nm - 1].end + cpu_mul_mat_n_chunks(nj, tasks) };
            nm++;
        } else if (tensors_overlap(nj, first->src[1])) {
            break;  /* the activation is overwritten: no later node reads it */
        }
    }
    return nm;
}

/* After node n has run (its own steps, or as a member of a chunk step):
 * the held activation rows stay valid unless n wrote the shared work part
 * (only a MUL_MAT that converts does) or the bytes they were converted from. */
static void node_ran(struct plan_maker *mk, const struct bp_tensor *n)
{
    const struct cpu_op_entry *e = &cpu_op_table[n->op];
    if (mk->held >= 0 && ((e->work && e->work(n) > 0) ||
                          tensors_overlap(n, mk->g->nodes[mk->held]->src[1])))
        mk->held = -1;
}

/* The steps of node i (not a view, not joined to an earlier one). A MUL_MAT
 * whose activation an earlier step converted the same way (the same src[1]
 * tensor, cpu_mul_mat_same_x) reads those rows when nothing ran in between
 * that rewrote the shared work part or the activation's bytes (node_ran):
 * a layer's Q, K and V, which cannot share a chunk step when the graph
 * allocator gives K's output the bytes of Q's once Q's RoPE has read them.
 * Steps run in order, each after the one before has ended, so the rows are
 * complete and visible to every thread; the decision is by the plan key's
 * fields (src[1] identity, types, shapes, data ranges), so a cached plan
 * makes it again for the same graph. */
static void plan_node(struct plan_maker *mk, int32_t i)
{
    struct cpu_plan *p = mk->p;
    const struct bp_tensor *node = mk->g->nodes[i];
    const struct cpu_op_entry *e = &cpu_op_table[node->op];
    /* Small nodes are not worth splitting. Attention's output is small (one
     * row per head in decode) but each element reads the whole KV cache, so
     * count that work too. */
    int64_t n = bp_nelements(node);
    if ((node->op == BP_OP_FLASH_ATTN_EXT || node->op == BP_OP_FLASH_ATTN_SOFTCAP) && node->src[1])
        n *= node->src[1]->ne[1];
    const int tasks = e->work || n >= 4096 ? p->nth : 1;
    struct cpu_step *st;
    if (node->op == BP_OP_MUL_MAT_ID && bp_nelements(node) > 0) {
        /* The route checks the ids and sizes the chunk list, as one task
         * (the chunk step's nth, for its grids); the chunk step takes its
         * task count from the work buffer. */
        add_step(p, i, CPU_STEP_MMID_ROUTE, tasks, 1);
        if (!cpu_mul_mat_id_route_converts(node)) {
            const struct bp_tensor *ids = node->src[2];
            const int64_t pairs = ids->ne[0] * ids->ne[1];
            const int conv = pairs < tasks ? (int)pairs : tasks;
            add_step(p, i, CPU_STEP_MMID_CONVERT, conv, conv);
        }
        st = add_step(p, i, CPU_STEP_MMID_CHUNKS, tasks, 1);
        st->counted = true;
        st->owned = tasks > 1 && cpu_mul_mat_id_stream(node);
        node_ran(mk, node);
        st->last = true;
        return;
    }
    if (e->prepare)
        add_step(p, i, CPU_STEP_PREPARE, 1, 1);
    if (node->op == BP_OP_MUL_MAT && bp_nelements(node) > 0 && cpu_mul_mat_stepwise(node)) {
        /* A task per activation row at most: in decode the one row is one
         * task, and no thread claims an empty share. Rows convert alone, so
         * the split does not change the bytes. */
        const struct bp_tensor *x = node->src[1];
        const int64_t rows = x->ne[1] * x->ne[2] * x->ne[3];
        const int conv = rows < tasks ? (int)rows : tasks;
        if (mk->held >= 0 && cpu_mul_mat_same_x(mk->g->nodes[mk->held], node)) {
            p->converts_shared++;
        } else {
            add_step(p, i, CPU_STEP_MM_CONVERT, conv, conv);
            if (e->work(node) > 0)
                mk->held = i;
        }
        const int32_t m0 = mk->n_members;
        const int32_t nm = join_mul_mats(mk, i, tasks, m0);
        st = add_step(p, i, CPU_STEP_MM_CHUNKS, tasks, p->members[m0 + nm - 1].end);
        st->m0 = m0;
        st->nm = nm;
        p->mul_mats_joined += nm - 1;
        bool stream = tasks > 1;
        for (int32_t k = 0; k < nm && stream; k++)
            stream = cpu_mul_mat_chunks_stream(mk->g->nodes[p->members[m0 + k].node], tasks);
        st->owned = stream;
        mk->n_members += nm;
        for (int32_t k = 0; k < nm; k++)
            if (mk->held >= 0 && tensors_overlap(mk->g->nodes[p->members[m0 + k].node],
                                                 mk->g->nodes[mk->held]->src[1]))
                mk->held = -1;
    } else if (node->op == BP_OP_MUL_MAT && bp_nelements(node) > 0) {
        /* Barriers inside: every thread runs the node together. */
        st = add_step(p, i, CPU_STEP_ALL, p->nth, p->nth);
        node_ran(mk, node);
    } else {
        st = add_step(p, i, CPU_STEP_SHARES, tasks, tasks);
        node_ran(mk, node);
    }
    st->last = true;
}

/* The steps of every node, then their claim words. */
static bp_status plan_steps(struct plan_maker *mk)
{
    struct cpu_plan *p = mk->p;
    const struct bp_graph *g = mk->g;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!bp_op_is_view((enum bp_op)g->nodes[i]->op) && !mk->joined[i])
            plan_node(mk, i);
    for (int32_t s = 0; s < p->n_steps; s++) {
        const struct cpu_step *st = &p->steps[s];
        if (st->n > CPU_CLAIM_MAX_TASKS) {
            cpu_log(mk->pl, BP_LOG_ERROR, "node '%s' splits into %" PRId64 " tasks, more than the "
                    "%" PRId64 " one step can share out; split the node.",
                    cpu_name(g->nodes[st->node]), st->n, CPU_CLAIM_MAX_TASKS);
            return BP_ERR_INVALID_ARGUMENT;
        }
        p->steps[s].claim0 = p->n_claims;
        p->n_claims += st->owned ? (size_t)p->nth : 1;
    }
    return BP_OK;
}

bp_status cpu_plan_make(const struct cpu_plugin *pl, const struct bp_graph *g, int nth,
                        struct cpu_plan **out)
{
    const uint64_t t0 = now_ns();
    *out = NULL;
    if (!g || g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes)) {
        cpu_log(pl, BP_LOG_ERROR, "graph_compute was given no graph or a graph without nodes.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    /* At most three steps a node (prepare, convert, chunks). */
    if (g->n_nodes > INT32_MAX / 3) {
        cpu_log(pl, BP_LOG_ERROR, "a %" PRId32 "-node graph is too large; split it.", g->n_nodes);
        return BP_ERR_INVALID_ARGUMENT;
    }
    const size_t n = g->n_nodes > 0 ? (size_t)g->n_nodes : 1;
    struct cpu_plan *p = calloc(1, sizeof *p);
    struct plan_maker mk = { .pl = pl, .g = g, .p = p, .joined = calloc(n, sizeof *mk.joined),
                             .held = -1 };
    if (p) {
        p->nth = nth;
        p->steps = malloc(n * 3 * sizeof *p->steps);
        p->members = malloc(n * sizeof *p->members);
    }
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    if (!p || !mk.joined || !p->steps || !p->members)
        cpu_log(pl, BP_LOG_ERROR, "could not allocate the plan of a %" PRId32 "-node graph; "
                "free memory.", g->n_nodes);
    else if ((st = check_and_size(&mk)) == BP_OK)
        st = plan_steps(&mk);
    free(mk.joined);
    if (st != BP_OK) {
        cpu_plan_free(p);
        return st;
    }
    /* Keep what the plan uses: the cache holds it for as long as it lives. */
    struct cpu_step *steps = realloc(p->steps, (size_t)(p->n_steps > 0 ? p->n_steps : 1) *
                                                   sizeof *steps);
    if (steps)
        p->steps = steps;
    struct cpu_member *mem = realloc(p->members, (size_t)(mk.n_members > 0 ? mk.n_members : 1) *
                                                     sizeof *mem);
    if (mem)
        p->members = mem;
    p->make_ns = now_ns() - t0;
    *out = p;
    return BP_OK;
}

void cpu_plan_free(struct cpu_plan *p)
{
    if (!p)
        return;
    free(p->recs);
    free(p->src_rec);
    free(p->steps);
    free(p->members);
    free(p);
}
