/*
 * matmul.c — MUL_MAT: dst[n, m] = sum_k W[k, n] * X[k, m], W broadcast over
 * dims 2 and 3 (W slice i2 / (e2 / d2)).
 *
 * The reference accumulates every dot product in double, in k order, so the
 * result is as close to exact as F32 output allows and does not depend on
 * the thread count. Quantized W comes with the block-format issue: until
 * then supports says no.
 */
#include "../ops.h"

bool cpu_supports_mul_mat(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    if (!w || !x || t->type != BP_TYPE_F32 || !cpu_is_float(w->type) || !cpu_is_float(x->type))
        return false;
    if (!cpu_shape_ok(w)) /* its dims divide X's */
        return false;
    return w->ne[0] == x->ne[0] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0 &&
           t->ne[0] == w->ne[1] && t->ne[1] == x->ne[1] && t->ne[2] == x->ne[2] &&
           t->ne[3] == x->ne[3];
}

static double dot(const char *a, size_t sa, int32_t ta, const char *b, size_t sb, int32_t tb,
                  int64_t n)
{
    double acc = 0.0;
    if (ta == BP_TYPE_F32 && tb == BP_TYPE_F32) {
        for (int64_t k = 0; k < n; k++) {
            float fa, fb;
            memcpy(&fa, a + (size_t)k * sa, 4);
            memcpy(&fb, b + (size_t)k * sb, 4);
            acc += (double)fa * (double)fb;
        }
        return acc;
    }
    for (int64_t k = 0; k < n; k++)
        acc += (double)cpu_load(a + (size_t)k * sa, ta) * (double)cpu_load(b + (size_t)k * sb, tb);
    return acc;
}

void cpu_compute_mul_mat(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const int64_t K = w->ne[0], N = t->ne[0];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];

    /* Split over output elements, not rows: a matrix-vector product (M = 1)
     * still uses every thread. */
    int64_t f0, f1;
    cpu_split(bp_nelements(t), p, &f0, &f1);
    for (int64_t f = f0; f < f1; f++) {
        int64_t n = f % N, m, i2, i3;
        cpu_row_index(t, f / N, &m, &i2, &i3);
        const char *wr = cpu_at(w, 0, n, i2 / r2, i3 / r3);
        const char *xr = cpu_at(x, 0, m, i2, i3);
        float v = (float)dot(wr, w->nb[0], w->type, xr, x->nb[0], x->type, K);
        memcpy(cpu_at(t, n, m, i2, i3), &v, 4);
    }
}
