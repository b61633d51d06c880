/*
 * softmax.c — SOFT_MAX over dim 0 of (x * scale + mask).
 *
 * Numerically stable (the row maximum is subtracted before exp). A row whose
 * every entry is masked with -INFINITY has no defined softmax; the plugin
 * writes zeros there rather than NaN, so a padded batch does not poison the
 * rest of the graph. The mask broadcasts over dims 2 and 3 (m2 | d2, m3 | d3)
 * and may have more rows than x (only the first r are used).
 */
#include <math.h>

#include "../ops.h"

bool cpu_supports_soft_max(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type);
}

/* x * scale + mask at element i0 of the row; recomputed rather than stored so
 * that no scratch is needed and every pass sees the same double value. */
static inline double logit(const char *xr, const struct bp_tensor *x, const char *mr,
                           const struct bp_tensor *m, double scale, int64_t i0)
{
    double v = (double)cpu_load(xr + (size_t)i0 * x->nb[0], x->type) * scale;
    if (mr)
        v += cpu_load(mr + (size_t)i0 * m->nb[0], m->type);
    return v;
}

void cpu_compute_soft_max(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *m = t->src[1];
    const double scale = bp_op_param_f32(t, 0);
    const int64_t n = t->ne[0];
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        const char *mr = m ? cpu_at(m, 0, i1, i2 % m->ne[2], i3 % m->ne[3]) : NULL;
        char *dr = cpu_at(t, 0, i1, i2, i3);

        double mx = -INFINITY;
        for (int64_t i0 = 0; i0 < n; i0++) {
            double v = logit(xr, x, mr, m, scale, i0);
            if (v > mx) mx = v;
        }
        if (mx == -INFINITY) {
            for (int64_t i0 = 0; i0 < n; i0++)
                cpu_store(dr + (size_t)i0 * t->nb[0], t->type, 0.0f);
            continue;
        }
        double sum = 0.0;
        for (int64_t i0 = 0; i0 < n; i0++)
            sum += exp(logit(xr, x, mr, m, scale, i0) - mx);
        for (int64_t i0 = 0; i0 < n; i0++) {
            double e = exp(logit(xr, x, mr, m, scale, i0) - mx);
            cpu_store(dr + (size_t)i0 * t->nb[0], t->type, (float)(e / sum));
        }
    }
}
