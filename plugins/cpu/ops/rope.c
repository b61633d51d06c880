/*
 * rope.c — ROPE and ROPE_EXT: rotary position embedding, normal and NEOX
 * pairings. ROPE is ROPE_EXT with no frequency factors, no YaRN and a
 * magnitude of 1, and computes the same bits through the same code.
 *
 * Pair i (0 <= i < n_dims/2) of each head turns by
 *   theta_int = (pos * freq_scale) * fe[i],  fe[i] = base^(-2i/n_dims) / factor[i]
 * or, under YaRN (ext_factor != 0), by the mix
 *   theta_int (1 - ramp[i]) + theta_ext ramp[i],  theta_ext = pos * fe[i],
 * with cos and sin both multiplied by the magnitude (bp_ops.h has the
 * whole formula). Angles are formed in double so that large positions keep
 * their precision; ggml's CPU forms them in float, within the tolerance the
 * devices are compared at. Elements past n_dims are copied.
 *
 * Every head of a token turns by the same angles, so each thread keeps the
 * cos/sin of its current token in scratch and recomputes them only when the
 * token changes, from per-pair values (fe, ramp) it computes once per node
 * (the same double values, so the same bits as computing them per head: pow
 * per pair and token was a third of a prefill's ROPE time). Dense F32 rows
 * skip the per-element type switch (same arithmetic, same bits).
 *
 * Heads of up to ROPE_KEPT_PAIRS pairs keep the frequencies, the per-pair
 * values and the last token's angles in thread-local storage across nodes
 * instead: a decode step's 2 x n_layer ROPE nodes all turn one token by the
 * same angles, and its pow, cos and sin per pair were most of each node's
 * time. The kept angles are reused only when every input they came from is
 * the same (n_dims and base; the per-pair values, which carry the factors
 * and the YaRN ramp; position, freq_scale and magnitude), so the bits do
 * not change.
 */
#include <math.h>

#include "../ops.h"

bool cpu_supports_rope(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type);
}

/* Per pair: frequency, factor-divided frequency, YaRN ramp, cos and sin. */
size_t cpu_scratch_rope(const struct bp_tensor *t)
{
    return (size_t)(bp_op_param_i32(t, 0) / 2) * 5 * sizeof(double);
}

/* Pairs whose angles a thread keeps between nodes (a head of 256). */
#define ROPE_KEPT_PAIRS 128

/* One thread's frequencies for (n_dims, base), per-pair values fe and ramp
 * of the last node, and angles for (pos, fs, mscale) with those values;
 * n_dims = 0 until the first node, has_angles false until then. */
static _Thread_local struct rope_kept {
    int64_t n_dims;
    double base;
    bool has_angles;
    int32_t pos;
    double fs, mscale;
    double cs[ROPE_KEPT_PAIRS], sn[ROPE_KEPT_PAIRS], freq[ROPE_KEPT_PAIRS];
    double fe[ROPE_KEPT_PAIRS], ramp[ROPE_KEPT_PAIRS];
} rope_kept;

/* What a node turns by, apart from its positions and per-pair values. */
struct rope_node {
    int64_t n_dims, half;
    bool neox;
    double base, fs;
    double ext_factor; /* 0: no YaRN (always for ROPE) */
    double mscale;     /* attn_factor, times YaRN's 1 + 0.1 ln(1 / fs) */
    int32_t n_ctx_orig;
    double beta_fast, beta_slow;
};

static void rope_node_of(const struct bp_tensor *t, struct rope_node *n)
{
    n->n_dims = bp_op_param_i32(t, 0);
    n->half = n->n_dims / 2;
    n->neox = bp_op_param_i32(t, 1) == BP_ROPE_MODE_NEOX;
    n->base = bp_op_param_f32(t, 2);
    n->fs = bp_op_param_f32(t, 3);
    n->ext_factor = 0.0;
    n->mscale = 1.0;
    n->n_ctx_orig = 0;
    n->beta_fast = n->beta_slow = 0.0;
    if (t->op == BP_OP_ROPE_EXT) {
        n->n_ctx_orig = bp_op_param_i32(t, 4);
        n->ext_factor = bp_op_param_f32(t, 5);
        n->mscale = bp_op_param_f32(t, 6);
        n->beta_fast = bp_op_param_f32(t, 7);
        n->beta_slow = bp_op_param_f32(t, 8);
        if (n->ext_factor != 0.0)
            n->mscale *= 1.0 + 0.1 * log(1.0 / n->fs);
    }
}

/* YaRN's correction dimension of rotation count b: the pair index below
 * which a pair turns more than b times over the original context. */
static double rope_corr_dim(const struct rope_node *n, double b)
{
    return (double)n->n_dims * log((double)n->n_ctx_orig / (2.0 * 3.14159265358979323846 * b)) /
           (2.0 * log(n->base));
}

/* fe[i] = freq[i] / factor[i] (factor 1 without src2) and ramp[i], the
 * weight of theta_ext in pair i's angle (0 without YaRN). */
static void rope_pair_values(const struct bp_tensor *t, const struct rope_node *n, const double *freq,
                             double *fe, double *ramp)
{
    const struct bp_tensor *ff = t->op == BP_OP_ROPE_EXT ? t->src[2] : NULL;
    for (int64_t i = 0; i < n->half; i++)
        fe[i] = ff ? freq[i] / (double)cpu_load(cpu_at(ff, i, 0, 0, 0), BP_TYPE_F32) : freq[i];
    if (n->ext_factor == 0.0) {
        for (int64_t i = 0; i < n->half; i++) ramp[i] = 0.0;
        return;
    }
    const double lo = fmax(0.0, floor(rope_corr_dim(n, n->beta_fast)));
    const double hi = fmin((double)(n->n_dims - 1), ceil(rope_corr_dim(n, n->beta_slow)));
    for (int64_t i = 0; i < n->half; i++) {
        const double y = ((double)i - lo) / fmax(0.001, hi - lo);
        ramp[i] = (1.0 - fmin(1.0, fmax(0.0, y))) * n->ext_factor;
    }
}

/* cos and sin of every pair's angle for a token at position pos. */
static void rope_angles(const struct rope_node *n, int32_t pos, const double *fe, const double *ramp,
                        double *cs, double *sn)
{
    const double p = (double)pos, ps = p * n->fs;
    for (int64_t i = 0; i < n->half; i++) {
        double theta = ps * fe[i];
        if (ramp[i] != 0.0)
            theta = theta * (1.0 - ramp[i]) + p * fe[i] * ramp[i];
        cs[i] = cos(theta) * n->mscale;
        sn[i] = sin(theta) * n->mscale;
    }
}

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
    struct rope_node n;
    rope_node_of(t, &n);
    const int64_t n_dims = n.n_dims, half = n.half;
    const bool neox = n.neox;
    struct rope_kept *kept = half <= ROPE_KEPT_PAIRS ? &rope_kept : NULL;
    double *scratch = p->wdata;
    double *cs = kept ? kept->cs : scratch, *sn = kept ? kept->sn : scratch + half;
    double *freq = kept ? kept->freq : scratch + 2 * half;
    int64_t cached = -1; /* the token whose angles cs/sn hold */
    const bool dense = t->type == BP_TYPE_F32 && x->type == BP_TYPE_F32 && t->nb[0] == 4 &&
                       x->nb[0] == 4;
    if (!kept || kept->n_dims != n_dims || kept->base != n.base) {
        for (int64_t i = 0; i < half; i++) freq[i] = pow(n.base, -2.0 * (double)i / (double)n_dims);
        if (kept) {
            kept->n_dims = n_dims;
            kept->base = n.base;
            kept->has_angles = false;
        }
    }
    double *fe, *ramp;
    if (kept) {
        /* This node's values beside the kept ones: the kept angles stay
         * only when they are the same. */
        double nfe[ROPE_KEPT_PAIRS], nramp[ROPE_KEPT_PAIRS];
        rope_pair_values(t, &n, freq, nfe, nramp);
        const size_t bytes = (size_t)half * sizeof(double);
        if (memcmp(nfe, kept->fe, bytes) != 0 || memcmp(nramp, kept->ramp, bytes) != 0) {
            memcpy(kept->fe, nfe, bytes);
            memcpy(kept->ramp, nramp, bytes);
            kept->has_angles = false;
        }
        fe = kept->fe;
        ramp = kept->ramp;
    } else {
        fe = scratch + 3 * half;
        ramp = scratch + 4 * half;
        rope_pair_values(t, &n, freq, fe, ramp);
    }
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        char *dr = cpu_at(t, 0, i1, i2, i3);
        if (i2 != cached) {
            const int32_t pi = cpu_load_i32(cpu_at(pos, i2, 0, 0, 0));
            if (!kept || !kept->has_angles || kept->pos != pi || kept->fs != n.fs ||
                kept->mscale != n.mscale) {
                rope_angles(&n, pi, fe, ramp, cs, sn);
                if (kept) {
                    kept->pos = pi;
                    kept->fs = n.fs;
                    kept->mscale = n.mscale;
                    kept->has_angles = true;
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
