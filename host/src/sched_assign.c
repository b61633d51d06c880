/* sched_assign.c — which backend computes each node. The passes follow what
 * a person placing a model by hand would do (and what ggml-backend's
 * scheduler does):
 *   1. pin: a node that writes memory that already exists (SET_ROWS into a
 *      cache) runs on a backend that can write it; a node that reads a
 *      weight runs where the weight lives when that device computes the op;
 *   2. expand the non-fallback assignments down, then up, over the nodes
 *      their backend computes, so a run of ops stays on the accelerator;
 *   3. expand every assignment down, then up, the same way;
 *   4. what is left goes to the first backend that computes it.
 * Views compute nothing: they go where the memory they alias lives. */
#include <stdio.h>
#include <string.h>

#include "sched_internal.h"

const char *sched__name(const struct bp_sched *s, int i)
{
    return bp_device_name(s->be[i]->device);
}

bool sched__reads(const struct bp_sched *s, int i, struct bp_buffer_type *buft)
{
    struct bp_device *dev = s->be[i]->device;
    if (!buft) return false;
    if (buft->device == dev) return true;
    return BP_IFACE_HAS(dev->iface, supports_buft) && dev->iface->supports_buft &&
           dev->iface->supports_buft(dev, buft);
}

/* The tensor whose buffer holds t's bytes. */
static const struct bp_tensor *owner(const struct bp_tensor *t)
{
    while (t->view_src) t = t->view_src;
    return t;
}

int sched__memory_backend(const struct bp_sched *s, const struct bp_tensor *t)
{
    const struct bp_tensor *o = owner(t);
    if (!o->buffer || !o->buffer->buft) return -1;
    for (int i = 0; i < s->n; i++)
        if (o->buffer->buft->device == s->be[i]->device) return i;
    for (int i = 0; i < s->n; i++)
        if (sched__reads(s, i, o->buffer->buft)) return i;
    return -1;
}

static bool computes(const struct bp_sched *s, int i, const struct bp_tensor *node)
{
    return bp_device_supports_op(s->be[i]->device, node);
}

static bool is_weight(const struct bp_tensor *t)
{
    return t && t->op == BP_OP_NONE && t->buffer && (t->flags & BP_TENSOR_FLAG_PARAM);
}

/* Pass 1 for one node; -1 when nothing pins it. */
static int pin(const struct bp_sched *s, const struct bp_tensor *node)
{
    const struct bp_tensor *o = owner(node);
    if (o != node && o->buffer) {
        /* It writes existing memory: the owner's device if it computes the
         * op, else the first that computes it and can reach that memory. */
        int home = sched__memory_backend(s, node);
        if (home >= 0 && computes(s, home, node)) return home;
        for (int i = 0; i < s->n; i++)
            if (sched__reads(s, i, o->buffer->buft) && computes(s, i, node)) return i;
        return -1;
    }
    for (int j = 0; j < BP_MAX_SRC; j++) {
        if (!is_weight(node->src[j])) continue;
        int home = sched__memory_backend(s, node->src[j]);
        if (home >= 0 && computes(s, home, node)) return home;
    }
    return -1;
}

/* Passes 2 and 3: give unassigned nodes the backend of the run before them
 * (down) or after them (up) when it computes them. A run's backend carries
 * over views; with skip_fallback the last backend does not spread. */
static void expand(const struct bp_sched *s, struct sched_plan *p, bool down, bool skip_fallback)
{
    int cur = -1;
    for (int32_t k = 0; k < p->n_nodes; k++) {
        int32_t i = down ? k : p->n_nodes - 1 - k;
        struct bp_tensor *node = p->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op)) continue;
        if (p->assign[i] >= 0) {
            cur = skip_fallback && p->assign[i] == s->n - 1 ? -1 : p->assign[i];
            continue;
        }
        if (cur >= 0 && computes(s, cur, node))
            p->assign[i] = cur;
        else
            cur = -1;
    }
}

static bp_status unplaceable(const struct bp_sched *s, const struct bp_tensor *node, const char *why)
{
    char names[BP_SCHED_MAX_BACKENDS * (BP_MAX_NAME + 2)] = "";
    for (int i = 0; i < s->n; i++) {
        if (i) strcat(names, ", ");
        strncat(names, sched__name(s, i), BP_MAX_NAME);
    }
    char l[BP_MAX_NAME + 8];
    return bp__fail(BP_ERR_UNSUPPORTED, "no backend of the scheduler (%s) %s %s %s (%s); add a backend "
                    "that computes it (`backplane info` lists what each device supports).",
                    names, why, bp_op_name((enum bp_op)node->op), bp__tensor_label(node, l, sizeof l),
                    bp_type_name((enum bp_type)node->type));
}

/* Strict mode: one sentence listing the ops the first backend declines. */
static bp_status strict_refusal(const struct bp_sched *s, const struct sched_plan *p)
{
    uint32_t count[BP_OP_COUNT] = {0};
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const struct bp_tensor *node = p->nodes[i];
        if (!bp_op_is_view((enum bp_op)node->op) && p->assign[i] != 0 && !computes(s, 0, node) &&
            (unsigned)node->op < BP_OP_COUNT)
            count[node->op]++;
    }
    char list[1024] = "";
    size_t len = 0;
    for (int op = 0; op < BP_OP_COUNT && len < sizeof list; op++)
        if (count[op])
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s x%u", len ? ", " : "",
                                    bp_op_name((enum bp_op)op), count[op]);
    if (!len) return BP_OK;
    return bp__fail(BP_ERR_UNSUPPORTED, "strict scheduling: %s does not compute %s; turn strict mode off "
                    "to let %s compute them.", sched__name(s, 0), list, sched__name(s, s->n - 1));
}

bp_status sched__assign(struct bp_sched *s, struct sched_plan *p)
{
    for (int32_t i = 0; i < p->n_nodes; i++) {
        struct bp_tensor *node = p->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op)) {
            p->assign[i] = -1;
            continue;
        }
        p->assign[i] = pin(s, node);
        if (p->assign[i] < 0 && owner(node) != node && owner(node)->buffer)
            return unplaceable(s, node, "can both write the memory of and compute");
    }
    expand(s, p, true, true);
    expand(s, p, false, true);
    expand(s, p, true, false);
    expand(s, p, false, false);
    for (int32_t i = 0; i < p->n_nodes; i++) {
        struct bp_tensor *node = p->nodes[i];
        if (p->assign[i] >= 0 || bp_op_is_view((enum bp_op)node->op)) continue;
        for (int b = 0; b < s->n && p->assign[i] < 0; b++)
            if (computes(s, b, node)) p->assign[i] = b;
        if (p->assign[i] < 0) return unplaceable(s, node, "computes");
    }
    /* Views: where the memory they alias is, or where its producer runs. */
    for (int32_t i = 0; i < p->n_nodes; i++) {
        struct bp_tensor *node = p->nodes[i];
        if (!bp_op_is_view((enum bp_op)node->op)) continue;
        const struct bp_tensor *o = owner(node);
        int b = o->buffer ? sched__memory_backend(s, node) : -1;
        for (int32_t j = 0; b < 0 && j < i; j++)
            if (p->nodes[j] == o) b = p->assign[j];
        p->assign[i] = b >= 0 ? b : s->n - 1;
    }
    return s->strict ? strict_refusal(s, p) : BP_OK;
}
