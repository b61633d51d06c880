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

bool bp_run_plan_fits(const struct bp_run_plan *p, char *why, size_t cap)
{
    for (size_t i = 0; i < p->n_devices; i++) {
        const struct bp_run_plan_device *d = &p->d[i];
        if (!d->mem_free || d->peak <= d->mem_free) continue;
        char need[32], have[32], offload[96] = "";
        const char *name = bp_device_name(d->dev);
        int64_t n = i == 0 ? layers_that_fit(p) : 0;
        if (n > 0) snprintf(offload, sizeof offload, "keep %lld layers on it with --offload-layers %lld, ",
                            (long long)n, (long long)n);
        snprintf(why, cap, "%s needs %s for this model at --n-ctx %lld, and has %s free; try a "
                 "smaller --n-ctx or --weight-type, %sor split it with --device meta:%s,cpu.", name,
                 bp_format_bytes(d->peak, need, sizeof need), (long long)p->n_ctx,
                 bp_format_bytes(d->mem_free, have, sizeof have), offload, name);
        return false;
    }
    return true;
}
