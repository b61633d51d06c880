/* oobwrite.c — a plugin whose SCALE is right but writes one element past the
 * end of its output: the check must report an out-of-bounds write. */
#include "checkplug.h"

static bool supports(const struct bp_tensor *n)
{
    return n->op == BP_OP_SCALE && n->type == BP_TYPE_F32 && n->src[0]->type == BP_TYPE_F32 &&
           bp_is_contiguous(n);
}

static bp_status compute(struct bp_tensor *n)
{
    const struct bp_tensor *x = n->src[0];
    float s = bp_op_param_f32(n, 0), b = bp_op_param_f32(n, 1);
    float *dst = n->data;
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++)
                    dst[k++] = checkplug_get(x, i0, i1, i2, i3) * s + b;
    dst[k] = 42.0f; /* the bug under test: one element too many */
    return BP_OK;
}

const struct checkplug_def checkplug = {
    .family = "oobwrite",
    .description = "test plugin: SCALE writes one element past its output",
    .supports = supports,
    .compute = compute,
};

BP_PLUGIN_DEFINE(checkplug_init)
