/* sched_summary.c — a plan's placement as data (per backend nodes, runs and
 * copies in; the ops the first backend declines) and as one line, logged at
 * info level once per new plan. */
#include <stdio.h>
#include <string.h>

#include "sched_internal.h"

void sched__summarize(struct bp_sched *s, struct sched_plan *p)
{
    uint32_t fell[BP_OP_COUNT] = {0};
    memset(p->per_backend, 0, sizeof p->per_backend);
    for (int b = 0; b < s->n; b++) p->per_backend[b].name = sched__name(s, b);
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const struct bp_tensor *node = p->nodes[i];
        if (bp_op_is_view((enum bp_op)node->op)) continue;
        p->per_backend[p->assign[i]].n_nodes++;
        if (p->assign[i] != 0 && (unsigned)node->op < BP_OP_COUNT &&
            !bp_device_supports_op(s->be[0]->device, node)) {
            fell[node->op]++;
            p->n_fallback_nodes++;
        }
    }
    for (size_t r = 0; r < p->n_runs; r++) p->per_backend[p->runs[r].backend].n_runs++;
    for (size_t c = 0; c < p->n_copies; c++) {
        size_t bytes = bp_nbytes(p->copies[c].src);
        p->per_backend[p->copies[c].to].n_copies_in++;
        p->per_backend[p->copies[c].to].bytes_in += bytes;
        p->bytes_copied += bytes;
    }
    for (int op = 0; op < BP_OP_COUNT; op++)
        if (fell[op]) p->fallback[p->n_fallback_ops++] = (struct bp_sched_op_count){ (enum bp_op)op, fell[op] };
    if (bp__log_enabled(BP_LOG_INFO)) {
        struct bp_sched_summary sum = { .size = sizeof sum };
        char line[1024];
        bp_sched_graph_summary(s, p->key, &sum);
        bp__log(BP_LOG_INFO, "sched", "new graph of %d nodes: %s.", (int)p->n_nodes,
                bp_sched_summary_format(&sum, line, sizeof line));
    }
}

bp_status bp_sched_graph_summary(struct bp_sched *s, const struct bp_graph *g, struct bp_sched_summary *out)
{
    if (!s || !g || !out || out->size == 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_sched_graph_summary: the scheduler, graph or summary is "
                        "NULL, or summary.size is 0; set it to sizeof(struct bp_sched_summary).");
    const struct sched_plan *p = s->plans;
    while (p && p->key != g) p = p->next;
    if (!p)
        return bp__fail(BP_ERR_NOT_FOUND, "bp_sched_graph_summary: this graph has no plan yet; call "
                        "bp_sched_alloc_graph or bp_sched_graph_compute first.");
    struct bp_sched_summary sum = {
        .size = out->size < sizeof sum ? out->size : sizeof sum,
        .n_backends = (size_t)s->n,
        .backends = p->per_backend,
        .n_fallback_ops = p->n_fallback_ops,
        .fallback_ops = p->fallback,
        .n_fallback_nodes = p->n_fallback_nodes,
        .n_runs = (uint32_t)p->n_runs,
        .n_copies = (uint32_t)p->n_copies,
        .bytes_copied = p->bytes_copied,
    };
    memcpy(out, &sum, sum.size);
    return BP_OK;
}

const char *bp_sched_summary_format(const struct bp_sched_summary *sum, char *buf, size_t cap)
{
    size_t len = 0;
#define PUT(...) \
    do { if (len < cap) len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__); } while (0)
    if (!buf || !cap) return buf;
    buf[0] = '\0';
    if (!sum) return buf;
    for (size_t b = 0; b < sum->n_backends; b++)
        PUT("%s%s %u nodes/%u runs", b ? ", " : "", sum->backends[b].name, sum->backends[b].n_nodes,
            sum->backends[b].n_runs);
    if (sum->n_fallback_ops) {
        PUT("; fell back:");
        for (size_t i = 0; i < sum->n_fallback_ops; i++)
            PUT("%s %s x%u", i ? "," : "", bp_op_name(sum->fallback_ops[i].op), sum->fallback_ops[i].count);
    }
    char bytes[32];
    PUT("; %u copies (%s) per compute", sum->n_copies, bp_format_bytes((size_t)sum->bytes_copied, bytes, sizeof bytes));
#undef PUT
    return buf;
}
