/*
 * norm.c — RMS_NORM: each row (dim 0) divided by sqrt(mean(x^2) + eps).
 * The sum of squares is taken in double: rows of a few thousand F32 values
 * lose digits in a float sum, and this plugin is the reference. Dense F32
 * rows keep four double partial sums (so the compiler can widen and
 * vectorise them) and skip the per-element type switch.
 */
#include <math.h>

#include "../ops.h"

bool cpu_supports_rms_norm(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type);
}

void cpu_compute_rms_norm(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0];
    const double eps = bp_op_param_f32(t, 0);
    const int64_t n = t->ne[0];
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        char *dr = cpu_at(t, 0, i1, i2, i3);
        if (t->type == BP_TYPE_F32 && x->type == BP_TYPE_F32 && t->nb[0] == 4 && x->nb[0] == 4) {
            const float *xs = (const float *)(const void *)xr;
            float *d = (float *)(void *)dr;
            double acc[4] = { 0.0, 0.0, 0.0, 0.0 };
            int64_t i0 = 0;
            for (; i0 + 4 <= n; i0 += 4)
                for (int k = 0; k < 4; k++) acc[k] += (double)xs[i0 + k] * (double)xs[i0 + k];
            for (; i0 < n; i0++) acc[0] += (double)xs[i0] * (double)xs[i0];
            const double inv = 1.0 / sqrt((acc[0] + acc[1] + acc[2] + acc[3]) / (double)n + eps);
            for (i0 = 0; i0 < n; i0++) d[i0] = (float)((double)xs[i0] * inv);
            continue;
        }
        double ss = 0.0;
        for (int64_t i0 = 0; i0 < n; i0++) {
            double v = cpu_load(xr + (size_t)i0 * x->nb[0], x->type);
            ss += v * v;
        }
        const double inv = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t i0 = 0; i0 < n; i0++) {
            double v = cpu_load(xr + (size_t)i0 * x->nb[0], x->type);
            cpu_store(dr + (size_t)i0 * t->nb[0], t->type, (float)(v * inv));
        }
    }
}
