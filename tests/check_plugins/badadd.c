/* badadd.c — a plugin whose ADD is subtly wrong (a + b + 1e-3*|b|): the
 * check must report FAIL for ADD and "unsupported" for everything else. */
#include <math.h>

#include "checkplug.h"

static bool supports(const struct bp_tensor *n)
{
    return n->op == BP_OP_ADD && n->type == BP_TYPE_F32 && n->src[0]->type == BP_TYPE_F32 &&
           n->src[1]->type == BP_TYPE_F32;
}

static bp_status compute(struct bp_tensor *n)
{
    const struct bp_tensor *a = n->src[0], *b = n->src[1];
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
                    float x = checkplug_get(a, i0, i1, i2, i3);
                    float y = checkplug_get(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2],
                                            i3 % b->ne[3]);
                    *(float *)checkplug_at(n, i0, i1, i2, i3) = x + y + 1e-3f * fabsf(y);
                }
    return BP_OK;
}

const struct checkplug_def checkplug = {
    .family = "badadd",
    .description = "test plugin: ADD off by 1e-3*|b|",
    .supports = supports,
    .compute = compute,
};

BP_PLUGIN_DEFINE(checkplug_init)
