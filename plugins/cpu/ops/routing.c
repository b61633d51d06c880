/*
 * routing.c — the ops that route tokens to experts: TOP_K (a stable
 * descending argsort cut at k) and SUM_ROWS.
 *
 * TOP_K orders indices by (value descending, index ascending), NaN below
 * every number, one total order: a row's result is the same whichever way
 * it is found. Small k keeps the best k in an insertion list (a pass over
 * the row, k compares at most per element: a router's k of 2 to 8 over 8
 * to 512 experts); larger k sorts (value, index) pairs in the thread's
 * scratch.
 */
#include <math.h>
#include <stdlib.h>

#include "../ops.h"

#define TOPK_INSERT_MAX 16

struct vi {
    float v;
    int32_t i;
};

/* a before b in TOP_K's order. */
static inline bool vi_before(float va, int32_t ia, float vb, int32_t ib)
{
    if (isnan(va) || isnan(vb))
        return isnan(vb) && (!isnan(va) || ia < ib);
    return va > vb || (va == vb && ia < ib);
}

static int vi_cmp(const void *pa, const void *pb)
{
    const struct vi *a = pa, *b = pb;
    return vi_before(a->v, a->i, b->v, b->i) ? -1 : vi_before(b->v, b->i, a->v, a->i) ? 1 : 0;
}

bool cpu_supports_top_k(const struct bp_tensor *t)
{
    return t->src[0]->type == BP_TYPE_F32 && t->nb[0] == sizeof(int32_t);
}

size_t cpu_scratch_top_k(const struct bp_tensor *t)
{
    return bp_op_param_i32(t, 0) > TOPK_INSERT_MAX ? (size_t)t->src[0]->ne[0] * sizeof(struct vi) : 0;
}

void cpu_compute_top_k(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0];
    const int64_t n = x->ne[0];
    const int k = bp_op_param_i32(t, 0);
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        int32_t *dr = (int32_t *)(void *)cpu_at(t, 0, i1, i2, i3);
        if (k <= TOPK_INSERT_MAX) {
            float best[TOPK_INSERT_MAX];
            int m = 0; /* entries held, in order */
            for (int64_t i = 0; i < n; i++) {
                float v;
                memcpy(&v, xr + (size_t)i * x->nb[0], sizeof v);
                /* Indices come in ascending order, so an equal value goes after. */
                if (m == k && !vi_before(v, (int32_t)i, best[k - 1], dr[k - 1]))
                    continue;
                int pos = m < k ? m++ : k - 1;
                while (pos > 0 && vi_before(v, (int32_t)i, best[pos - 1], dr[pos - 1])) {
                    best[pos] = best[pos - 1];
                    dr[pos] = dr[pos - 1];
                    pos--;
                }
                best[pos] = v;
                dr[pos] = (int32_t)i;
            }
            continue;
        }
        struct vi *s = p->wdata;
        for (int64_t i = 0; i < n; i++) {
            memcpy(&s[i].v, xr + (size_t)i * x->nb[0], sizeof s[i].v);
            s[i].i = (int32_t)i;
        }
        qsort(s, (size_t)n, sizeof *s, vi_cmp);
        for (int j = 0; j < k; j++) dr[j] = s[j].i;
    }
}

bool cpu_supports_sum_rows(const struct bp_tensor *t)
{
    return t->src[0]->type == BP_TYPE_F32;
}

void cpu_compute_sum_rows(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0];
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        double acc = 0.0;
        for (int64_t i = 0; i < x->ne[0]; i++) acc += cpu_load(xr + (size_t)i * x->nb[0], BP_TYPE_F32);
        const float v = (float)acc;
        memcpy(cpu_at(t, 0, i1, i2, i3), &v, sizeof v);
    }
}
