/* plan.c — judging a memory plan against the devices' free memory
 * (bp_run_plan_make itself lives in decoder.c, beside the placement it
 * reuses). */
#include <stdio.h>

#include "plan.h"

/* The layers that would fit on d[0] with the rest on the cpu: each layer
 * takes its share of d[0]'s weights and cache; the step buffers stay.
 * 0 when not even one layer fits or the plan has no fallback. */
static int64_t layers_that_fit(const struct bp_run_plan *p)
{
    const struct bp_run_plan_device *d = &p->d[0];
    if (p->n_devices < 2 || p->offload_layers <= 0) return 0;
    const double per_layer = (double)(d->weights + d->kv_cache) / (double)p->offload_layers;
    const double fixed = (double)(d->decode + d->prefill);
    if (per_layer <= 0 || (double)d->mem_free <= fixed) return 0;
    int64_t n = (int64_t)(((double)d->mem_free - fixed) / per_layer);
    if (n >= p->offload_layers) n = p->offload_layers - 1;
    return n > 0 ? n : 0;
}

/* The rows the plan judges: a meta device's sub-devices in its stead. */
static size_t judged_rows(const struct bp_run_plan *p, const struct bp_run_plan_device **rows)
{
    size_t n = 0;
    if (p->n_subs)
        for (size_t k = 0; k < p->n_subs; k++) rows[n++] = &p->sub[k];
    else
        rows[n++] = &p->d[0];
    if (p->n_devices > 1) rows[n++] = &p->d[1];
    return n;
}

static void meta_refusal(const struct bp_run_plan *p, const struct bp_run_plan_device *r, size_t need,
                         char *why, size_t cap)
{
    char a[32], b[32];
    size_t k = (size_t)(r - p->sub);
    snprintf(why, cap, "%s (sub-device %zu of %s) needs %s for its share of this model at --n-ctx %lld, and "
             "has %s free; try a smaller --n-ctx or --weight-type, a smaller share for it with "
             "BACKPLANE_META_SPLIT, or more sub-devices.", bp_device_name(r->dev), k,
             bp_device_name(p->d[0].dev), bp_format_bytes(need, a, sizeof a), (long long)p->n_ctx,
             bp_format_bytes(r->mem_free, b, sizeof b));
}

bool bp_run_plan_fits(const struct bp_run_plan *p, char *why, size_t cap)
{
    const struct bp_run_plan_device *rows[BP_META_MAX_DEVICES + 1];
    const size_t n = judged_rows(p, rows);
    for (size_t i = 0; i < n; i++) {
        const struct bp_run_plan_device *d = rows[i];
        /* One physical device under several rows (meta:cpu*2 and its cpu
         * fallback) holds all of them: judge it once, at its first row. */
        size_t need = 0;
        bool first = true;
        for (size_t j = 0; j < n; j++)
            if (rows[j]->dev == d->dev) {
                need += rows[j]->peak;
                if (j < i) first = false;
            }
        if (!first || !d->mem_free || need <= d->mem_free) continue;
        if (p->n_subs && d != &p->d[1]) {
            meta_refusal(p, d, need, why, cap);
            return false;
        }
        char needs[32], have[32], offload[96] = "";
        const char *name = bp_device_name(d->dev);
        int64_t nl = d == &p->d[0] ? layers_that_fit(p) : 0;
        if (nl > 0) snprintf(offload, sizeof offload, "keep %lld layers on it with --offload-layers %lld, ",
                             (long long)nl, (long long)nl);
        snprintf(why, cap, "%s needs %s for this model at --n-ctx %lld, and has %s free; try a "
                 "smaller --n-ctx or --weight-type, %sor split it with --device meta:%s,cpu.", name,
                 bp_format_bytes(need, needs, sizeof needs), (long long)p->n_ctx,
                 bp_format_bytes(d->mem_free, have, sizeof have), offload, name);
        return false;
    }
    return true;
}
