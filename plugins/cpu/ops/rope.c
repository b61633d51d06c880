/*
 * rope.c — ROPE: rotary position embedding, normal and NEOX pairings.
 *
 * Pair i (0 <= i < n_dims/2) of each head turns by
 * pos * freq_scale * base^(-2i/n_dims); the angle is formed in double so
 * that large positions keep their precision. Elements past n_dims are copied.
 *
 * Every head of a token turns by the same angles, so each thread keeps the
 * cos/sin of its current token in scratch and recomputes them only when the
 * token changes, from the frequencies base^(-2i/n_dims) it computes once
 * per node (the same double values, so the same bits as computing them per
 * head: pow per pair and token was a third of a prefill's ROPE time). Dense
 * F32 rows skip the per-element type switch (same arithmetic, same bits).
 *
 * Heads of up to ROPE_KEPT_PAIRS pairs keep the frequencies and the last
 * token's angles in thread-local storage across nodes instead: a decode
 * step's 2 x n_layer ROPE nodes all turn one token by the same angles, and
 * its pow, cos and sin per pair were most of each node's time. The values
 * are the ones the node would compute, so the bits do not change.
 */
#include <math.h>

#include "../ops.h"

bool cpu_supports_rope(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type);
}

/* Frequency, cos and sin of each of the n_dims / 2 angles of one token. */
size_t cpu_scratch_rope(const struct bp_tensor *t)
{
    return (size_t)(bp_op_param_i32(t, 0) / 2) * 3 * sizeof(double);
}

/* Pairs whose angles a thread keeps between nodes (a head of 256). */
#define ROPE_KEPT_PAIRS 128

/* One thread's frequencies for (n_dims, base) and angles for the scaled
 * position ps; n_dims = 0 until the first node, has_ps false until then. */
static _Thread_local struct rope_kept {
    int64_t n_dims;
    double base, ps;
    bool has_ps;
    double cs[ROPE_KEPT_PAIRS], sn[ROPE_KEPT_PAIRS], freq[ROPE_KEPT_PAIRS];
} rope_kept;

/* Pair i of a dense F32 row: elements a[i] and b[i] of the pairing. */
static void rope_row_f32(float *d, const float *x, const double *cs, const double *sn,
                         int64_t half, bool neox)
{
    for (int64_t i = 0; i < half; i++) {
        const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const double x0 = x[a], x1 = x[b];
        d[a] = (float)(x0 * cs[i] - x1 * sn[i]);
        d[b] = (float)(x0 * sn[i] + x1 * cs[i]);
    }
}

void cpu_compute_rope(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *x = t->src[0], *pos = t->src[1];
    const int64_t n_dims = bp_op_param_i32(t, 0);
    const bool neox = bp_op_param_i32(t, 1) == BP_ROPE_MODE_NEOX;
    const double base = bp_op_param_f32(t, 2), freq_scale = bp_op_param_f32(t, 3);
    const int64_t half = n_dims / 2;
    struct rope_kept *kept = half <= ROPE_KEPT_PAIRS ? &rope_kept : NULL;
    double *cs = kept ? kept->cs : p->wdata, *sn = kept ? kept->sn : cs + half;
    double *freq = kept ? kept->freq : sn + half;
    int64_t cached = -1; /* the token whose angles cs/sn hold */
    const bool dense = t->type == BP_TYPE_F32 && x->type == BP_TYPE_F32 && t->nb[0] == 4 &&
                       x->nb[0] == 4;
    if (!kept || kept->n_dims != n_dims || kept->base != base) {
        for (int64_t i = 0; i < half; i++) freq[i] = pow(base, -2.0 * (double)i / (double)n_dims);
        if (kept) {
            kept->n_dims = n_dims;
            kept->base = base;
            kept->has_ps = false;
        }
    }
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        char *dr = cpu_at(t, 0, i1, i2, i3);
        if (i2 != cached) {
            const double ps = (double)cpu_load_i32(cpu_at(pos, i2, 0, 0, 0)) * freq_scale;
            if (!kept || !kept->has_ps || kept->ps != ps) {
                for (int64_t i = 0; i < half; i++) {
                    const double theta = ps * freq[i];
                    cs[i] = cos(theta);
                    sn[i] = sin(theta);
                }
                if (kept) {
                    kept->ps = ps;
                    kept->has_ps = true;
                }
            }
            cached = i2;
        }
        if (dense) {
            rope_row_f32((float *)(void *)dr, (const float *)(const void *)xr, cs, sn, half, neox);
            if (n_dims < t->ne[0] && dr != xr)
                memcpy(dr + n_dims * 4, xr + n_dims * 4, (size_t)(t->ne[0] - n_dims) * 4);
            continue;
        }
        for (int64_t i = 0; i < half; i++) {
            const double c = cs[i], s = sn[i];
            const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const double x0 = cpu_load(xr + (size_t)a * x->nb[0], x->type);
            const double x1 = cpu_load(xr + (size_t)b * x->nb[0], x->type);
            cpu_store(dr + (size_t)a * t->nb[0], t->type, (float)(x0 * c - x1 * s));
            cpu_store(dr + (size_t)b * t->nb[0], t->type, (float)(x0 * s + x1 * c));
        }
        for (int64_t i0 = n_dims; i0 < t->ne[0]; i0++)
            cpu_store(dr + (size_t)i0 * t->nb[0], t->type,
                      cpu_load(xr + (size_t)i0 * x->nb[0], x->type));
    }
}
