/*
 * attention.c — FLASH_ATTN_EXT: out = softmax(scale * q.k^T + mask) . v with
 * grouped-query heads (head h reads kv head h / (H / H_kv)).
 *
 * The reference is two-pass rather than online: the scores of one query row
 * go to this thread's scratch (n_kv doubles), then the exact maximum is
 * subtracted once. Output is [Dv, H, n_q, B]: heads before tokens. A query
 * row whose every key is masked gets zeros, as SOFT_MAX does.
 */
#include <math.h>

#include "../ops.h"

bool cpu_supports_flash_attn(const struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    if (!q || !k || !v || t->type != BP_TYPE_F32 || !cpu_is_float(q->type) ||
        !cpu_is_float(k->type) || !cpu_is_float(v->type))
        return false;
    if (!cpu_shape_ok(k) || q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] ||
        k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3] || q->ne[2] % k->ne[2] != 0)
        return false;
    if (t->ne[0] != v->ne[0] || t->ne[1] != q->ne[2] || t->ne[2] != q->ne[1] || t->ne[3] != q->ne[3])
        return false;
    if (!m)
        return true;
    return (m->type == BP_TYPE_F32 || m->type == BP_TYPE_F16) && cpu_shape_ok(m) &&
           m->ne[0] == k->ne[1] && m->ne[1] >= q->ne[1] && q->ne[2] % m->ne[2] == 0 &&
           q->ne[3] % m->ne[3] == 0;
}

size_t cpu_scratch_flash_attn(const struct bp_tensor *t)
{
    return (size_t)(t->src[1]->ne[1] + t->src[2]->ne[0]) * sizeof(double);
}

void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const double scale = bp_op_param_f32(t, 0);
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t group = q->ne[2] / k->ne[2];
    double *score = p->wdata;
    double *acc = score + n_kv;

    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t h, iq, b;
        cpu_row_index(t, r, &h, &iq, &b);
        const int64_t kh = h / group;
        const char *qr = cpu_at(q, 0, iq, h, b);
        const char *mr = m ? cpu_at(m, 0, iq, h % m->ne[2], b % m->ne[3]) : NULL;
        char *dr = cpu_at(t, 0, h, iq, b);

        double mx = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            const char *kr = cpu_at(k, 0, j, kh, b);
            double s = 0.0;
            for (int64_t d = 0; d < D; d++)
                s += (double)cpu_load(qr + (size_t)d * q->nb[0], q->type) *
                     (double)cpu_load(kr + (size_t)d * k->nb[0], k->type);
            s *= scale;
            if (mr)
                s += cpu_load(mr + (size_t)j * m->nb[0], m->type);
            score[j] = s;
            if (s > mx) mx = s;
        }
        for (int64_t d = 0; d < Dv; d++)
            acc[d] = 0.0;
        if (mx != -INFINITY) {
            double sum = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                const double w = exp(score[j] - mx);
                const char *vr = cpu_at(v, 0, j, kh, b);
                sum += w;
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] += w * (double)cpu_load(vr + (size_t)d * v->nb[0], v->type);
            }
            for (int64_t d = 0; d < Dv; d++)
                acc[d] /= sum;
        }
        for (int64_t d = 0; d < Dv; d++) {
            float o = (float)acc[d];
            memcpy(dr + (size_t)d * t->nb[0], &o, 4);
        }
    }
}
