/* nansilu.c — a plugin whose SILU is right except for one NaN: the check
 * must report NaN in the output. */
#include <math.h>

#include "checkplug.h"

static bool supports(const struct bp_tensor *n)
{
    return n->op == BP_OP_SILU && n->type == BP_TYPE_F32 && n->src[0]->type == BP_TYPE_F32;
}

static bp_status compute(struct bp_tensor *n)
{
    const struct bp_tensor *x = n->src[0];
    int64_t k = 0, bad = bp_nelements(n) / 2;
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++, k++) {
                    float v = checkplug_get(x, i0, i1, i2, i3);
                    *(float *)checkplug_at(n, i0, i1, i2, i3) = k == bad ? NAN : v / (1.0f + expf(-v));
                }
    return BP_OK;
}

const struct checkplug_def checkplug = {
    .family = "nansilu",
    .description = "test plugin: SILU with one NaN",
    .supports = supports,
    .compute = compute,
};

BP_PLUGIN_DEFINE(checkplug_init)
