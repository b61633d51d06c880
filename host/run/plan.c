/* plan.c — judging a memory plan against the devices' free memory
 * (bp_run_plan_make itself lives in decoder.c, beside the placement it
 * reuses). */
#include <stdio.h>

#include "plan.h"

bool bp_run_plan_fits(const struct bp_run_plan *p, char *why, size_t cap)
{
    for (size_t i = 0; i < p->n_devices; i++) {
        const struct bp_run_plan_device *d = &p->d[i];
        if (!d->mem_free || d->peak <= d->mem_free) continue;
        char need[32], have[32];
        const char *name = bp_device_name(d->dev);
        snprintf(why, cap, "%s needs %s for this model at --n-ctx %lld, and has %s free; try a "
                 "smaller --n-ctx or --weight-type, or split it with --device meta:%s,cpu.", name,
                 bp_format_bytes(d->peak, need, sizeof need), (long long)p->n_ctx,
                 bp_format_bytes(d->mem_free, have, sizeof have), name);
        return false;
    }
    return true;
}
