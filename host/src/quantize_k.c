/*
 * quantize_k.c — Q4_K and Q6_K quantization.
 *
 * Each super-block is first encoded by ggml's reference search
 * (make_qkx2_quants / make_qx_quants and the 6-/8-bit scale quantization
 * that follows), reproduced to the bit. Two refinements follow, one starting
 * from that encoding and one from the same search run with unit weights
 * (ggml's weights favour the large elements, |x| + rms for Q4_K and x^2 for
 * Q6_K, which is not what the plain squared error rewards; on long-tailed
 * data either start may win). The better refinement replaces ggml's encoding
 * only when the squared error of its dequantized values (bp_quant_ref.h's
 * arithmetic, summed in double in element order) is strictly smaller, so
 * the result is never worse than ggml's on any block.
 *
 * A refinement alternates two least-squares steps that ggml leaves out:
 * each sub-block's integer scale (and min) is re-chosen on a small grid
 * around its continuous least-squares optimum given the f16 super-block
 * scale(s), every candidate priced with its own re-rounded quants (pricing
 * candidates with the current quants, in O(1) from their sums, misjudges
 * them and loses most of the gain); then the super-block scale(s) are
 * re-fitted given the integer scales and quants. A step is kept only when it
 * lowers the error; the rounds stop when neither step changes anything, or
 * after 8 (most blocks settle in 2 or 3).
 *
 * Speed: all the work runs over the sub-blocks of a super-block side by
 * side, element-major with one sub-block per SIMD lane (GCC/Clang vector
 * extensions: SSE2 on x86-64, NEON on arm64, plain lane-by-lane code
 * elsewhere). The lanes do ggml's arithmetic in ggml's order where it must
 * match ggml, so those results are bit-identical, and the independent lanes
 * keep the sequential float sums from being bound by add latency.
 */
#include <math.h>

#include "quantize_internal.h"

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The squared error, in element order and in double, of a block against
 * its dequantized values: the measure every final choice is made by. */
static double block_error(const float *x, const float *y)
{
    double err = 0.0;
    for (int i = 0; i < BP_QK_K; i++) {
        double diff = (double)y[i] - (double)x[i];
        err += diff * diff;
    }
    return err;
}

/* ----------------------------------------------------- four float lanes */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* The loops over a super-block's vectors of lanes, unrolled so that the
 * compiler keeps each vector's accumulators in registers. */
#define FOR_EACH_VECTOR(h, nv) _Pragma("GCC unroll 4") for (int h = 0; h < (nv); h++)

static inline v4f vf(float f)
{
    return (v4f){f, f, f, f};
}

static inline v4i vi(int32_t i)
{
    return (v4i){i, i, i, i};
}

/* m ? a : b lane by lane (m from a comparison: all ones or all zeros). */
static inline v4f vsel(v4i m, v4f a, v4f b)
{
    return (v4f)((m & (v4i)a) | (~m & (v4i)b));
}

/* Lane-wise f > b ? f : b and f < b ? f : b (SSE's maxps/minps exactly). */
#if defined(__SSE__)
#include <xmmintrin.h>
static inline v4f vmax(v4f f, v4f b)
{
    return _mm_max_ps(f, b);
}
static inline v4f vmin(v4f f, v4f b)
{
    return _mm_min_ps(f, b);
}
#else
static inline v4f vmax(v4f f, v4f b)
{
    return vsel(f > b, f, b);
}
static inline v4f vmin(v4f f, v4f b)
{
    return vsel(f < b, f, b);
}
#endif

/* (float)clampi(bp_nearest_int(f), lo, hi) lane by lane, for integer
 * bounds: clamping first makes adding and removing 1.5 * 2^23 round half to
 * even, as bp_nearest_int does. The two agree wherever bp_nearest_int is
 * exact (|f| < 2^22), which covers every finite input whose range does not
 * overflow a float; there the searches below match ggml to the bit. */
static inline v4f vlevel(v4f f, float lo, float hi)
{
    f = vmin(vmax(f, vf(lo)), vf(hi));
    return (f + vf(12582912.0f)) - vf(12582912.0f);
}

static inline v4f vabs(v4f f)
{
    return (v4f)((v4i)f & vi(0x7fffffff));
}

/* The sum of every lane of nv vectors, in lane order. */
static inline float vtotal(int nv, const v4f *v)
{
    float t = 0;
    FOR_EACH_VECTOR(h, nv) t += v[h][0] + v[h][1] + v[h][2] + v[h][3];
    return t;
}

static inline bool vany(v4i m)
{
    return (m[0] | m[1] | m[2] | m[3]) != 0;
}

/* Lane by lane, where a candidate's error ce beats err: its error, its
 * scales cs into s and (m set) its mins cm into m. Returns the lanes taken. */
static inline v4i vkeep_better(int nv, const v4f *ce, v4f *err, const v4f *cs, v4f *s, const v4f *cm, v4f *m)
{
    v4i taken = vi(0);
    FOR_EACH_VECTOR(h, nv) {
        const v4i better = ce[h] < err[h];
        err[h] = vsel(better, ce[h], err[h]);
        s[h] = vsel(better, cs[h], s[h]);
        if (m) m[h] = vsel(better, cm[h], m[h]);
        taken |= better;
    }
    return taken;
}

/* A super-block of x as lanes of nv vectors: element i of sub-block 4h + k
 * (sub elements each) goes to lane k of xt[i * nv + h]. */
static inline void to_lanes(const float *x, int sub, int nv, v4f *xt)
{
    FOR_EACH_VECTOR(h, nv)
        for (int i = 0; i < sub; i++)
            for (int k = 0; k < 4; k++) xt[i * nv + h][k] = x[sub * (4 * h + k) + i];
}

/* ======================= Q4_K ======================= */

/* A super-block as lanes: x[i][h][k] is element i of sub-block 4h + k. */
enum { Q4K_NSUB = 8, Q4K_SUB = 32, Q4K_NV = 2 };
typedef v4f q4_K_lanes[Q4K_SUB][Q4K_NV];

/* ggml's make_qkx2_quants(32, 15, x, w, L, &min, Laux, -1, 0.1, 20) for
 * the 8 sub-blocks at once: the affine fit x ~ scale*L - min with L in
 * [0, 15], searched over 21 trial inverse scales around 15/(max-min), each
 * followed by a weighted least-squares fit. ggml's later trials start from
 * the min of the best fit so far, which the lanes reproduce. */
static void qkx2_search(const q4_K_lanes xt, const q4_K_lanes wt, float scale[Q4K_NSUB],
                        float the_min[Q4K_NSUB], uint8_t L[BP_QK_K])
{
    const int nmax = 15, nstep = 20;
    const float rmin = -1.0f, rdelta = 0.1f;
    v4f min[Q4K_NV], max[Q4K_NV], sum_w[Q4K_NV], sum_x[Q4K_NV], best[Q4K_NV];
    v4f scl[Q4K_NV], best_is[Q4K_NV], best_min[Q4K_NV], range1[Q4K_NV];
    v4i flat[Q4K_NV];
    FOR_EACH_VECTOR(h, Q4K_NV) {
        min[h] = max[h] = xt[0][h];
        sum_w[h] = wt[0][h];
        sum_x[h] = sum_w[h] * xt[0][h];
    }
    for (int i = 1; i < Q4K_SUB; i++) {
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4f v = xt[i][h];
            min[h] = vsel(v < min[h], v, min[h]);
            max[h] = vsel(v > max[h], v, max[h]);
            sum_w[h] += wt[i][h];
            sum_x[h] += wt[i][h] * v;
        }
    }
    FOR_EACH_VECTOR(h, Q4K_NV) {
        min[h] = vsel(min[h] > vf(0), vf(0), min[h]);
        flat[h] = max[h] == min[h];
        /* Flat sub-blocks are finished below; 1 keeps their lanes quiet. */
        range1[h] = vsel(flat[h], vf(1), max[h] - min[h]);
        const v4f iscale = vf((float)nmax) / range1[h];
        scl[h] = vf(1) / iscale;
        best_is[h] = iscale;
        best_min[h] = min[h];
        best[h] = vf(0);
    }
    for (int i = 0; i < Q4K_SUB; i++) {
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4f v = xt[i][h];
            const v4f l = vlevel(best_is[h] * (v - min[h]), 0.0f, (float)nmax);
            const v4f diff = scl[h] * l + min[h] - v;
            best[h] += wt[i][h] * diff * diff;
        }
    }
    for (int is = 0; is <= nstep; is++) {
        v4f iscale[Q4K_NV], sum_l[Q4K_NV], sum_l2[Q4K_NV], sum_xl[Q4K_NV], err[Q4K_NV];
        v4f this_scale[Q4K_NV], this_min[Q4K_NV];
        v4f Laux[Q4K_SUB][Q4K_NV];
        const float num = rmin + rdelta * is + nmax;
        FOR_EACH_VECTOR(h, Q4K_NV) {
            range1[h] = vsel(flat[h], vf(1), max[h] - min[h]);
            iscale[h] = vf(num) / range1[h];
            sum_l[h] = sum_l2[h] = sum_xl[h] = err[h] = vf(0);
        }
        for (int i = 0; i < Q4K_SUB; i++) {
            FOR_EACH_VECTOR(h, Q4K_NV) {
                const v4f v = xt[i][h], w = wt[i][h];
                const v4f l = vlevel(iscale[h] * (v - min[h]), 0.0f, (float)nmax);
                const v4f wl = w * l;
                Laux[i][h] = l;
                sum_l[h] += wl;
                sum_l2[h] += wl * l;
                sum_xl[h] += wl * v;
            }
        }
        v4i ok[Q4K_NV];
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4f D = sum_w[h] * sum_l2[h] - sum_l[h] * sum_l[h];
            ok[h] = (D > vf(0)) & ~flat[h]; /* D > 0 implies sum_l2 > 0 */
            const v4f Ds = vsel(ok[h], D, vf(1));
            this_scale[h] = (sum_w[h] * sum_xl[h] - sum_x[h] * sum_l[h]) / Ds;
            this_min[h] = (sum_l2[h] * sum_x[h] - sum_l[h] * sum_xl[h]) / Ds;
            const v4i pos = this_min[h] > vf(0);
            this_scale[h] = vsel(pos, sum_xl[h] / vsel(ok[h], sum_l2[h], vf(1)), this_scale[h]);
            this_min[h] = vsel(pos, vf(0), this_min[h]);
        }
        for (int i = 0; i < Q4K_SUB; i++) {
            FOR_EACH_VECTOR(h, Q4K_NV) {
                const v4f diff = this_scale[h] * Laux[i][h] + this_min[h] - xt[i][h];
                err[h] += wt[i][h] * diff * diff;
            }
        }
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4i take = ok[h] & (err[h] < best[h]);
            best[h] = vsel(take, err[h], best[h]);
            scl[h] = vsel(take, this_scale[h], scl[h]);
            best_is[h] = vsel(take, iscale[h], best_is[h]);
            best_min[h] = vsel(take, min[h], best_min[h]);
            min[h] = vsel(take, this_min[h], min[h]);
        }
    }
    FOR_EACH_VECTOR(h, Q4K_NV) {
        for (int k = 0; k < 4; k++) {
            const int j = 4 * h + k;
            uint8_t *Lj = L + Q4K_SUB * j;
            the_min[j] = -min[h][k];
            if (flat[h][k]) {
                scale[j] = 0.0f;
                memset(Lj, 0, Q4K_SUB);
                continue;
            }
            scale[j] = scl[h][k];
            const float bis = best_is[h][k], bmin = best_min[h][k];
            for (int i = 0; i < Q4K_SUB; i++)
                Lj[i] = (uint8_t)clampi(bp_nearest_int(bis * (xt[i][h][k] - bmin)), 0, nmax);
        }
    }
}

static void q4_K_pack_scales(uint8_t out[12], const uint8_t ls[8], const uint8_t lm[8])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(ls[j] | ((ls[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)(lm[j] | ((lm[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((ls[j + 4] & 0xF) | ((lm[j + 4] & 0xF) << 4));
    }
}

static void q4_K_pack_quants(uint8_t qs[BP_QK_K / 2], const uint8_t L[BP_QK_K])
{
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++)
            qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
}

/* An encoding: f16-exact super-block scales, 6-bit scales and mins, quants. */
struct q4_K_state {
    float d, dmin;
    uint8_t ls[Q4K_NSUB], lm[Q4K_NSUB];
    uint8_t L[BP_QK_K];
};

static void q4_K_store(struct bp_block_q4_K *y, const struct q4_K_state *s)
{
    y->d = bp_f32_to_f16(s->d);
    y->dmin = bp_f32_to_f16(s->dmin);
    q4_K_pack_scales(y->scales, s->ls, s->lm);
    q4_K_pack_quants(y->qs, s->L);
}

/* ggml's quantize_row_q4_K_ref for one super-block, with the weights either
 * ggml's (rms + |x|) or all ones. */
static void q4_K_search(const float *x, const q4_K_lanes xt, bool unit_weights,
                        struct q4_K_state *s)
{
    q4_K_lanes wt;
    float scales[Q4K_NSUB], mins[Q4K_NSUB];
    if (unit_weights) {
        for (int i = 0; i < Q4K_SUB; i++)
            FOR_EACH_VECTOR(h, Q4K_NV) wt[i][h] = vf(1);
    } else {
        FOR_EACH_VECTOR(h, Q4K_NV) {
            v4f sum_x2 = vf(0);
            for (int i = 0; i < Q4K_SUB; i++) sum_x2 += xt[i][h] * xt[i][h];
            v4f av_x = vf(0);
            for (int k = 0; k < 4; k++) av_x[k] = sqrtf(sum_x2[k] / 32);
            for (int i = 0; i < Q4K_SUB; i++) wt[i][h] = av_x + vabs(xt[i][h]);
        }
    }
    qkx2_search(xt, wt, scales, mins, s->L);
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < Q4K_NSUB; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < Q4K_NSUB; j++) {
        s->ls[j] = (uint8_t)clampi(bp_nearest_int(inv_scale * scales[j]), 0, 63);
        s->lm[j] = (uint8_t)clampi(bp_nearest_int(inv_min * mins[j]), 0, 63);
    }
    s->d = bp_f16_to_f32(bp_f32_to_f16(max_scale / 63.0f));
    s->dmin = bp_f16_to_f32(bp_f32_to_f16(max_min / 63.0f));
    for (int j = 0; j < Q4K_NSUB; j++) {
        const float d1 = s->d * s->ls[j], m1 = s->dmin * s->lm[j];
        if (d1 == 0.0f) continue; /* ggml keeps the search's quants here */
        const float *xj = x + Q4K_SUB * j;
        uint8_t *Lj = s->L + Q4K_SUB * j;
        for (int l = 0; l < Q4K_SUB; l++)
            Lj[l] = (uint8_t)clampi(bp_nearest_int((xj[l] + m1) / d1), 0, 15);
    }
}

/* Sums of the quants, per sub-block: sum L, sum L^2, sum L*x. */
struct q4_K_sums {
    v4f l[Q4K_NV], l2[Q4K_NV], lx[Q4K_NV];
};

/* One pass over the super-block for integer scales s and mins m (lane j:
 * sub-block j) given d and dmin: each quant re-rounded to its best level;
 * per sub-block the squared error and, when sums is set, the quants' sums.
 * Float is plenty for comparing candidates. */
static inline void q4_K_pass(const q4_K_lanes xt, float d, float dmin, const v4f s[Q4K_NV],
                             const v4f m[Q4K_NV], v4f err[Q4K_NV], struct q4_K_sums *sums)
{
    v4f d1[Q4K_NV], m1[Q4K_NV], id[Q4K_NV], e[Q4K_NV], sl[Q4K_NV], sl2[Q4K_NV], slx[Q4K_NV];
    FOR_EACH_VECTOR(h, Q4K_NV) {
        d1[h] = vf(d) * s[h];
        m1[h] = vf(dmin) * m[h];
        id[h] = vsel(d1[h] > vf(0), vf(1) / vsel(d1[h] > vf(0), d1[h], vf(1)), vf(0));
        e[h] = sl[h] = sl2[h] = slx[h] = vf(0);
    }
    for (int i = 0; i < Q4K_SUB; i++) {
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4f x = xt[i][h], xm = x + m1[h];
            const v4f l = vlevel(xm * id[h], 0.0f, 15.0f);
            const v4f diff = d1[h] * l - xm;
            e[h] += diff * diff;
            if (sums) {
                sl[h] += l;
                sl2[h] += l * l;
                slx[h] += l * x;
            }
        }
    }
    FOR_EACH_VECTOR(h, Q4K_NV) {
        err[h] = e[h];
        if (sums) {
            sums->l[h] = sl[h];
            sums->l2[h] = sl2[h];
            sums->lx[h] = slx[h];
        }
    }
}

/* Least squares of d and dmin given the integer scales and mins and the
 * quants' sums; false when there is no usable fit. */
static bool q4_K_refit_super(const v4f s[Q4K_NV], const v4f m[Q4K_NV],
                             const struct q4_K_sums *q, const v4f sx[Q4K_NV], float *d,
                             float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    FOR_EACH_VECTOR(h, Q4K_NV) {
        for (int k = 0; k < 4; k++) {
            const double a = s[h][k], b = m[h][k];
            suu += a * a * q->l2[h][k];
            suv -= a * b * q->l[h][k];
            svv += Q4K_SUB * b * b;
            sux += a * q->lx[h][k];
            svx -= b * sx[h][k];
        }
    }
    const double det = suu * svv - suv * suv;
    double nd, nm;
    if (svv > 0 && det > 1e-12 * suu * svv) {
        nd = (sux * svv - svx * suv) / det;
        nm = (suu * svx - suv * sux) / det;
    } else {
        nm = 0;
        nd = suu > 0 ? sux / suu : 0;
    }
    if (nm < 0) {
        nm = 0;
        nd = suu > 0 ? sux / suu : 0;
    }
    if (!(nd > 0) || !(nd < 65504) || !(nm < 65504)) return false;
    *d = bp_f16_to_f32(bp_f32_to_f16((float)nd));
    *dmin = bp_f16_to_f32(bp_f32_to_f16((float)nm));
    return *d > 0;
}

/* Refines st in place (its quants come out re-rounded for its scales) and
 * returns its error as q4_K_pass measures it; the caller compares the
 * result with where it started by the exact measure. */
static float q4_K_refine(const q4_K_lanes xt, const v4f sx[Q4K_NV], struct q4_K_state *st)
{
    float d = st->d, dmin = st->dmin;
    v4f s[Q4K_NV], m[Q4K_NV], err[Q4K_NV];
    struct q4_K_sums q;
    FOR_EACH_VECTOR(h, Q4K_NV)
        for (int k = 0; k < 4; k++) {
            s[h][k] = st->ls[4 * h + k];
            m[h][k] = st->lm[4 * h + k];
        }
    if (!(d > 0) || !isfinite(d) || !isfinite(dmin)) return INFINITY;
    q4_K_pass(xt, d, dmin, s, m, err, &q);
    for (int iter = 0; iter < 8; iter++) {
        /* Each sub-block's scale and min: a grid around the continuous
         * least-squares fit for its current quants. */
        const v4f n = vf(Q4K_SUB);
        v4f s0[Q4K_NV], m0[Q4K_NV];
        FOR_EACH_VECTOR(h, Q4K_NV) {
            const v4f D = n * q.l2[h] - q.l[h] * q.l[h];
            const v4i ok = D > vf(0);
            const v4f Ds = vsel(ok, D, vf(1));
            const v4f a = (n * q.lx[h] - q.l[h] * sx[h]) / Ds;
            const v4f b = (q.l2[h] * sx[h] - q.l[h] * q.lx[h]) / Ds;
            s0[h] = vsel(ok, vlevel(a / vf(d), 0.0f, 63.0f), s[h]);
            m0[h] = dmin > 0 ? vsel(ok, vlevel(-b / vf(dmin), 0.0f, 63.0f), m[h]) : m[h];
        }
        v4i changed = vi(0);
        for (int du = -2; du <= 2; du++) {
            for (int dv = -2; dv <= 2; dv++) {
                v4f cs[Q4K_NV], cm[Q4K_NV], ce[Q4K_NV];
                FOR_EACH_VECTOR(h, Q4K_NV) {
                    cs[h] = vlevel(s0[h] + vf((float)du), 0.0f, 63.0f);
                    cm[h] = vlevel(m0[h] + vf((float)dv), 0.0f, 63.0f);
                }
                q4_K_pass(xt, d, dmin, cs, cm, ce, NULL);
                changed |= vkeep_better(Q4K_NV, ce, err, cs, s, cm, m);
            }
        }
        bool any = vany(changed);
        if (any) q4_K_pass(xt, d, dmin, s, m, err, &q);
        /* Then d and dmin for those scales and quants. */
        float nd, nm;
        if (q4_K_refit_super(s, m, &q, sx, &nd, &nm) && (nd != d || nm != dmin)) {
            v4f ne[Q4K_NV];
            struct q4_K_sums nq;
            q4_K_pass(xt, nd, nm, s, m, ne, &nq);
            if (vtotal(Q4K_NV, ne) < vtotal(Q4K_NV, err)) {
                d = nd;
                dmin = nm;
                memcpy(err, ne, sizeof err);
                q = nq;
                any = true;
            }
        }
        if (!any) break;
    }
    st->d = d;
    st->dmin = dmin;
    FOR_EACH_VECTOR(h, Q4K_NV) {
        for (int k = 0; k < 4; k++) {
            const int j = 4 * h + k;
            st->ls[j] = (uint8_t)s[h][k];
            st->lm[j] = (uint8_t)m[h][k];
            const float d1 = d * st->ls[j], m1 = dmin * st->lm[j];
            const float id = d1 > 0 ? 1.0f / d1 : 0.0f;
            for (int i = 0; i < Q4K_SUB; i++)
                st->L[Q4K_SUB * j + i] =
                    (uint8_t)clampi(bp_nearest_int((xt[i][h][k] + m1) * id), 0, 15);
        }
    }
    return vtotal(Q4K_NV, err);
}

static double q4_K_error(const float *x, const struct bp_block_q4_K *y)
{
    float back[BP_QK_K];
    bp_dequantize_q4_K_ref(y, back, BP_QK_K);
    return block_error(x, back);
}

void bp__quantize_q4_K(const float *x, struct bp_block_q4_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t ib = 0; ib < nb; ib++, x += BP_QK_K) {
        q4_K_lanes xt;
        v4f sx[Q4K_NV];
        to_lanes(x, Q4K_SUB, Q4K_NV, &xt[0][0]);
        FOR_EACH_VECTOR(h, Q4K_NV) {
            sx[h] = vf(0);
            for (int i = 0; i < Q4K_SUB; i++) sx[h] += xt[i][h];
        }
        struct q4_K_state ggml, a, b;
        q4_K_search(x, xt, false, &ggml);
        q4_K_store(&y[ib], &ggml);
        a = ggml;
        const float ea = q4_K_refine(xt, sx, &a);
        q4_K_search(x, xt, true, &b);
        const float eb = q4_K_refine(xt, sx, &b);
        /* Strictly better by the exact measure, or ggml's stays. */
        struct bp_block_q4_K t;
        q4_K_store(&t, eb < ea ? &b : &a);
        if (q4_K_error(x, &t) < q4_K_error(x, &y[ib])) y[ib] = t;
    }
}

void bp__quantize_q4_K_ggml(const float *x, struct bp_block_q4_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t ib = 0; ib < nb; ib++, x += BP_QK_K) {
        q4_K_lanes xt;
        to_lanes(x, Q4K_SUB, Q4K_NV, &xt[0][0]);
        struct q4_K_state s;
        q4_K_search(x, xt, false, &s);
        q4_K_store(&y[ib], &s);
    }
}

/* ======================= Q6_K ======================= */

/* A super-block as lanes: x[i][h][k] is element i of sub-block 4h + k. */
enum { Q6K_NSUB = 16, Q6K_SUB = 16, Q6K_NV = 4 };
typedef v4f q6_K_lanes[Q6K_SUB][Q6K_NV];

/* ggml's make_qx_quants(16, 32, x, L, rmse_type) for the 16 sub-blocks at
 * once, with weights x^2 (rmse_type 1) or 1 (2): a symmetric fit
 * x ~ scale*(L-32) with L in [0, 63], searched over 19 trial scales around
 * the signed extreme. */
static void qx_search(const q6_K_lanes xt, bool unit_weights, float scale[Q6K_NSUB],
                      int8_t L[BP_QK_K])
{
    const int nmax = 32;
    v4f max[Q6K_NV], amax[Q6K_NV], best[Q6K_NV], scl[Q6K_NV], best_is[Q6K_NV], max1[Q6K_NV];
    v4i zero[Q6K_NV];
    q6_K_lanes w, wx; /* ggml's weights and weights * x */
    FOR_EACH_VECTOR(h, Q6K_NV) max[h] = amax[h] = vf(0);
    for (int i = 0; i < Q6K_SUB; i++) {
        FOR_EACH_VECTOR(h, Q6K_NV) {
            const v4f v = xt[i][h], a = vabs(v);
            const v4i bigger = a > amax[h];
            amax[h] = vsel(bigger, a, amax[h]);
            max[h] = vsel(bigger, v, max[h]);
            w[i][h] = unit_weights ? vf(1) : v * v;
            wx[i][h] = w[i][h] * v;
        }
    }
    FOR_EACH_VECTOR(h, Q6K_NV) {
        zero[h] = amax[h] < vf(GROUP_MAX_EPS);
        /* Zero sub-blocks are finished below; 1 keeps their lanes quiet. */
        max1[h] = vsel(zero[h], vf(1), max[h]);
    }
    /* ggml's first fit (is = 0), taken unconditionally, then the trials
     * is = -9..-1 and 1..9 in that order. The unit-weight search is only a
     * starting point for the refinement, not ggml's encoding, and stops
     * after trials -9 and -8: its best fit nearly always lies there, and
     * measured on Gaussian, Student-t and outlier data the other 16 trials
     * change the final error by under 0.01% while costing a third of the
     * Q6_K time. */
    const int ntrials = unit_weights ? 3 : 19;
    for (int t = 0; t < ntrials; t++) {
        const int is = t == 0 ? 0 : t <= 9 ? t - 10 : t - 9;
        const float num = is == 0 ? (float)-nmax : -(nmax + 0.1f * is);
        v4f iscale[Q6K_NV], sumlx[Q6K_NV], suml2[Q6K_NV];
        FOR_EACH_VECTOR(h, Q6K_NV) {
            iscale[h] = vf(num) / max1[h];
            sumlx[h] = suml2[h] = vf(0);
        }
        for (int i = 0; i < Q6K_SUB; i++) {
            FOR_EACH_VECTOR(h, Q6K_NV) {
                const v4f l = vlevel(iscale[h] * xt[i][h], (float)-nmax, (float)(nmax - 1));
                sumlx[h] += wx[i][h] * l;
                suml2[h] += w[i][h] * l * l;
            }
        }
        FOR_EACH_VECTOR(h, Q6K_NV) {
            if (is == 0) {
                scl[h] = vsel(suml2[h] != vf(0), sumlx[h] / vsel(suml2[h] != vf(0), suml2[h], vf(1)),
                              vf(0));
                best[h] = scl[h] * sumlx[h];
                best_is[h] = iscale[h];
                continue;
            }
            const v4i take = (suml2[h] > vf(0)) & (sumlx[h] * sumlx[h] > best[h] * suml2[h]);
            const v4f s = sumlx[h] / vsel(take, suml2[h], vf(1));
            scl[h] = vsel(take, s, scl[h]);
            best[h] = vsel(take, s * sumlx[h], best[h]);
            best_is[h] = vsel(take, iscale[h], best_is[h]);
        }
    }
    FOR_EACH_VECTOR(h, Q6K_NV) {
        for (int k = 0; k < 4; k++) {
            const int j = 4 * h + k;
            int8_t *Lj = L + Q6K_SUB * j;
            if (zero[h][k]) {
                scale[j] = 0.0f;
                memset(Lj, 0, Q6K_SUB);
                continue;
            }
            scale[j] = scl[h][k];
            const float bis = best_is[h][k];
            for (int i = 0; i < Q6K_SUB; i++)
                Lj[i] = (int8_t)(nmax + clampi(bp_nearest_int(bis * xt[i][h][k]), -nmax, nmax - 1));
        }
    }
}

static void q6_K_pack_quants(struct bp_block_q6_K *y, const int8_t L[BP_QK_K])
{
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < BP_QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
            const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                              ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
    }
}

/* An encoding: f16-exact super-block scale, 8-bit scales, quants + 32. */
struct q6_K_state {
    float d;
    int8_t sc[Q6K_NSUB];
    int8_t L[BP_QK_K];
};

static void q6_K_store(struct bp_block_q6_K *y, const struct q6_K_state *s)
{
    y->d = bp_f32_to_f16(s->d);
    memcpy(y->scales, s->sc, sizeof s->sc);
    q6_K_pack_quants(y, s->L);
}

/* ggml's quantize_row_q6_K_ref for one super-block (weights x^2 or ones). */
static void q6_K_search(const float *x, const q6_K_lanes xt, bool unit_weights,
                        struct q6_K_state *s)
{
    float scales[Q6K_NSUB];
    qx_search(xt, unit_weights, scales, s->L);
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < Q6K_NSUB; ib++) {
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        s->d = 0.0f;
        memset(s->sc, 0, sizeof s->sc);
        memset(s->L, 0, sizeof s->L);
        return;
    }
    const float iscale = -128.0f / max_scale;
    s->d = bp_f16_to_f32(bp_f32_to_f16(1 / iscale));
    for (int ib = 0; ib < Q6K_NSUB; ib++)
        s->sc[ib] = (int8_t)clampi(bp_nearest_int(iscale * scales[ib]), -128, 127);
    for (int j = 0; j < Q6K_NSUB; j++) {
        const float d1 = s->d * s->sc[j];
        if (d1 == 0.0f) continue; /* ggml keeps the search's quants here */
        for (int l = 0; l < Q6K_SUB; l++)
            s->L[Q6K_SUB * j + l] =
                (int8_t)(clampi(bp_nearest_int(x[Q6K_SUB * j + l] / d1), -32, 31) + 32);
    }
}

/* Sums of the quants (q = L - 32), per sub-block: sum q^2, sum q*x. */
struct q6_K_sums {
    v4f q2[Q6K_NV], qx[Q6K_NV];
};

/* One pass over the super-block for integer scales s (lane j: sub-block j)
 * given d: each quant re-rounded to its best level; per sub-block the
 * squared error and, when sums is set, the quants' sums. */
static inline void q6_K_pass(const q6_K_lanes xt, float d, const v4f s[Q6K_NV], v4f err[Q6K_NV],
                             struct q6_K_sums *sums)
{
    v4f d1[Q6K_NV], id[Q6K_NV], e[Q6K_NV], sq2[Q6K_NV], sqx[Q6K_NV];
    FOR_EACH_VECTOR(h, Q6K_NV) {
        d1[h] = vf(d) * s[h];
        const v4i nz = d1[h] != vf(0);
        id[h] = vsel(nz, vf(1) / vsel(nz, d1[h], vf(1)), vf(0));
        e[h] = sq2[h] = sqx[h] = vf(0);
    }
    for (int i = 0; i < Q6K_SUB; i++) {
        FOR_EACH_VECTOR(h, Q6K_NV) {
            const v4f x = xt[i][h];
            const v4f q = vlevel(x * id[h], -32.0f, 31.0f);
            const v4f diff = d1[h] * q - x;
            e[h] += diff * diff;
            if (sums) {
                sq2[h] += q * q;
                sqx[h] += q * x;
            }
        }
    }
    FOR_EACH_VECTOR(h, Q6K_NV) {
        err[h] = e[h];
        if (sums) {
            sums->q2[h] = sq2[h];
            sums->qx[h] = sqx[h];
        }
    }
}

/* Refines st in place (its quants come out re-rounded for its scales) and
 * returns its error as q6_K_pass measures it. */
static float q6_K_refine(const q6_K_lanes xt, struct q6_K_state *st)
{
    float d = st->d;
    if (d == 0.0f || !isfinite(d)) return INFINITY;
    v4f s[Q6K_NV], err[Q6K_NV];
    struct q6_K_sums q;
    FOR_EACH_VECTOR(h, Q6K_NV)
        for (int k = 0; k < 4; k++) s[h][k] = st->sc[4 * h + k];
    q6_K_pass(xt, d, s, err, &q);
    for (int iter = 0; iter < 8; iter++) {
        /* Each sub-block's scale among the neighbours of its continuous
         * least-squares optimum for its current quants. */
        v4f s0[Q6K_NV];
        FOR_EACH_VECTOR(h, Q6K_NV) {
            const v4i ok = q.q2[h] > vf(0);
            const v4f opt = q.qx[h] / (vf(d) * vsel(ok, q.q2[h], vf(1)));
            s0[h] = vsel(ok, vlevel(opt, -128.0f, 127.0f), s[h]);
        }
        v4i changed = vi(0);
        for (int du = -2; du <= 2; du++) {
            v4f cs[Q6K_NV], ce[Q6K_NV];
            FOR_EACH_VECTOR(h, Q6K_NV)
                cs[h] = vlevel(s0[h] + vf((float)du), -128.0f, 127.0f);
            q6_K_pass(xt, d, cs, ce, NULL);
            changed |= vkeep_better(Q6K_NV, ce, err, cs, s, NULL, NULL);
        }
        bool any = vany(changed);
        if (any) q6_K_pass(xt, d, s, err, &q);
        /* Then d by least squares given the scales and quants. */
        double suu = 0, sux = 0;
        FOR_EACH_VECTOR(h, Q6K_NV) {
            for (int k = 0; k < 4; k++) {
                suu += (double)s[h][k] * s[h][k] * q.q2[h][k];
                sux += (double)s[h][k] * q.qx[h][k];
            }
        }
        if (suu > 0 && fabs(sux / suu) < 65504) {
            const float nd = bp_f16_to_f32(bp_f32_to_f16((float)(sux / suu)));
            if (nd != 0.0f && nd != d) {
                v4f ne[Q6K_NV];
                struct q6_K_sums nq;
                q6_K_pass(xt, nd, s, ne, &nq);
                if (vtotal(Q6K_NV, ne) < vtotal(Q6K_NV, err)) {
                    d = nd;
                    memcpy(err, ne, sizeof err);
                    q = nq;
                    any = true;
                }
            }
        }
        if (!any) break;
    }
    st->d = d;
    FOR_EACH_VECTOR(h, Q6K_NV) {
        for (int k = 0; k < 4; k++) {
            const int j = 4 * h + k;
            st->sc[j] = (int8_t)s[h][k];
            const float d1 = d * st->sc[j];
            const float id = d1 != 0.0f ? 1.0f / d1 : 0.0f;
            for (int i = 0; i < Q6K_SUB; i++)
                st->L[Q6K_SUB * j + i] =
                    (int8_t)(clampi(bp_nearest_int(xt[i][h][k] * id), -32, 31) + 32);
        }
    }
    return vtotal(Q6K_NV, err);
}

static double q6_K_error(const float *x, const struct bp_block_q6_K *y)
{
    float back[BP_QK_K];
    bp_dequantize_q6_K_ref(y, back, BP_QK_K);
    return block_error(x, back);
}

void bp__quantize_q6_K(const float *x, struct bp_block_q6_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t ib = 0; ib < nb; ib++, x += BP_QK_K) {
        q6_K_lanes xt;
        to_lanes(x, Q6K_SUB, Q6K_NV, &xt[0][0]);
        struct q6_K_state ggml, a, b;
        q6_K_search(x, xt, false, &ggml);
        q6_K_store(&y[ib], &ggml);
        a = ggml;
        const float ea = q6_K_refine(xt, &a);
        q6_K_search(x, xt, true, &b);
        const float eb = q6_K_refine(xt, &b);
        /* Strictly better by the exact measure, or ggml's stays. */
        struct bp_block_q6_K t;
        q6_K_store(&t, eb < ea ? &b : &a);
        if (q6_K_error(x, &t) < q6_K_error(x, &y[ib])) y[ib] = t;
    }
}

void bp__quantize_q6_K_ggml(const float *x, struct bp_block_q6_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t ib = 0; ib < nb; ib++, x += BP_QK_K) {
        q6_K_lanes xt;
        to_lanes(x, Q6K_SUB, Q6K_NV, &xt[0][0]);
        struct q6_K_state s;
        q6_K_search(x, xt, false, &s);
        q6_K_store(&y[ib], &s);
    }
}
