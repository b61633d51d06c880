/*
 * profile.c — attach a plugin's per-op profile to a session and print it.
 */
#include "profile.h"

#include <inttypes.h>
#include <string.h>

bp_status bp_run_profile_attach(struct bp_run_session *s, struct bp_run_profile *pr)
{
    struct bp_backend *be = bp_run_session_backend(s);
    bp_set_profile_fn fn = NULL;
    void *p = be ? bp_device_proc_address(bp_run_session_device(s), BP_PROC_SET_PROFILE) : NULL;
    if (!p) return BP_ERR_UNSUPPORTED;
    memcpy(&fn, &p, sizeof fn);
    if (pr) {
        memset(pr, 0, sizeof *pr);
        pr->p.n_ops = BP_OP_COUNT;
        pr->p.ops = pr->ops;
    }
    return fn(be, pr ? &pr->p : NULL);
}

void bp_run_profile_print(FILE *f, const char *what, const struct bp_run_profile *pr)
{
    const struct bp_profile *p = &pr->p;
    if (!p->graphs) return;
    const double graphs = (double)p->graphs, total = (double)p->graph_ns;
    uint64_t in_ops = 0;
    for (int o = 0; o < BP_OP_COUNT; o++) in_ops += pr->ops[o].ns;
    fprintf(f, "profile: %s, %" PRIu64 " graph%s, %.3f ms per graph (%.1f%% in ops, the rest "
            "planning and waking threads)\n", what, p->graphs, p->graphs == 1 ? "" : "s",
            total / graphs * 1e-6, total > 0 ? 100.0 * (double)in_ops / total : 0.0);
    fprintf(f, "  %-16s %8s %12s %7s\n", "op", "nodes", "ms/graph", "share");
    /* Largest first: the reader looks for what to fix. */
    bool shown[BP_OP_COUNT] = {false};
    for (;;) {
        int best = -1;
        for (int o = 0; o < BP_OP_COUNT; o++)
            if (!shown[o] && pr->ops[o].count && (best < 0 || pr->ops[o].ns > pr->ops[best].ns))
                best = o;
        if (best < 0) break;
        shown[best] = true;
        const struct bp_profile_op *t = &pr->ops[best];
        fprintf(f, "  %-16s %8.0f %12.3f %6.1f%%\n", bp_op_name((enum bp_op)best),
                (double)t->count / graphs, (double)t->ns / graphs * 1e-6,
                total > 0 ? 100.0 * (double)t->ns / total : 0.0);
        if (best == BP_OP_MUL_MAT && p->convert_ns)
            fprintf(f, "  %-16s %8s %12.3f %6.1f%%\n", "  converting x", "",
                    (double)p->convert_ns / graphs * 1e-6, 100.0 * (double)p->convert_ns / total);
    }
}
