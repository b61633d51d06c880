/*
 * quantize_k.c — Q4_K and Q6_K quantization.
 *
 * Each super-block is encoded three ways and the encoding whose
 * dequantized values (through dequantize_k.c, the exact arithmetic every
 * reader uses) have the smallest squared error is kept:
 *   1. ggml's reference search (make_qkx2_quants / make_qx_quants and the
 *      6-/8-bit scale quantization that follows), so the result is never
 *      worse than ggml's on any block;
 *   2. that encoding refined;
 *   3. the same search with unit weights, refined. ggml's weights favour the
 *      large elements (|x| + rms for Q4_K, x^2 for Q6_K), which is not what
 *      the plain squared error rewards; on long-tailed data either may win.
 * The refinement alternates two least-squares steps that ggml leaves out:
 * each sub-block's integer scale (and min) is re-chosen among the
 * neighbours of its continuous optimum given the f16 super-block scale(s),
 * and the super-block scale(s) are re-fitted given the integer scales. A
 * step is kept only when it lowers the block's error.
 */
#include <math.h>

#include "quantize_internal.h"

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ======================= Q4_K ======================= */

/* ggml's make_qkx2_quants (squared error): the affine fit x ~ scale*L - min
 * with L in [0, nmax], searched over nstep+1 trial inverse scales around
 * nmax/(max-min), each followed by a weighted least-squares fit. */
static float qkx2_search(int n, int nmax, const float *x, const float *w, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = bp__nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(bp__nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * diff * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
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

/* The quants of one sub-block for effective scale d1 and offset m1 (what
 * ggml's requantization does); returns its squared error as dequantized. */
static double q4_K_fit_sub(const float *x, float d1, float m1, uint8_t *L)
{
    double err = 0.0;
    for (int l = 0; l < 32; l++) {
        int q = d1 != 0.0f ? clampi(bp__nearest_int((x[l] + m1) / d1), 0, 15) : 0;
        L[l] = (uint8_t)q;
        double diff = (double)(d1 * (float)q - m1) - (double)x[l];
        err += diff * diff;
    }
    return err;
}

/* ggml's quantize_row_q4_K_ref for one super-block, with the weights
 * either ggml's (rms + |x|) or all ones. */
static void q4_K_search(const float *x, struct bp_block_q4_K *y, uint8_t L[BP_QK_K],
                        bool unit_weights)
{
    float weights[32], scales[8], mins[8];
    uint8_t Laux[32], ls[8], lm[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xj[l] * xj[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = unit_weights ? 1.0f : av_x + fabsf(xj[l]);
        scales[j] = qkx2_search(32, 15, xj, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)clampi(bp__nearest_int(inv_scale * scales[j]), 0, 63);
        lm[j] = (uint8_t)clampi(bp__nearest_int(inv_min * mins[j]), 0, 63);
    }
    q4_K_pack_scales(y->scales, ls, lm);
    y->d = bp_f32_to_f16(max_scale / 63.0f);
    y->dmin = bp_f32_to_f16(max_min / 63.0f);
    const float d = bp_f16_to_f32(y->d), dmin = bp_f16_to_f32(y->dmin);
    for (int j = 0; j < 8; j++) {
        const float d1 = d * ls[j];
        if (d1 == 0.0f) continue; /* ggml keeps the search's quants here */
        q4_K_fit_sub(x + 32 * j, d1, dmin * lm[j], L + 32 * j);
    }
    q4_K_pack_quants(y->qs, L);
}

static double block_error(const float *x, const float *y)
{
    double err = 0.0;
    for (int i = 0; i < BP_QK_K; i++) {
        double diff = (double)y[i] - (double)x[i];
        err += diff * diff;
    }
    return err;
}

static double q4_K_error(const float *x, const struct bp_block_q4_K *y)
{
    float back[BP_QK_K];
    bp__dequantize_q4_K(y, back, BP_QK_K);
    return block_error(x, back);
}

/* Least squares of x ~ a*L + b over one sub-block; false when L is constant. */
static bool affine_fit(const float *x, const uint8_t *L, int n, double *a, double *b)
{
    double sl = 0, sl2 = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; i++) {
        sl += L[i];
        sl2 += (double)L[i] * L[i];
        sx += x[i];
        slx += (double)L[i] * x[i];
    }
    double D = n * sl2 - sl * sl;
    if (D <= 0) return false;
    *a = (n * slx - sl * sx) / D;
    *b = (sl2 * sx - sl * slx) / D;
    return true;
}

/* Re-chooses each sub-block's 6-bit scale and min given d and dmin. */
static void q4_K_refine_subs(const float *x, float d, float dmin, uint8_t ls[8], uint8_t lm[8],
                             uint8_t L[BP_QK_K])
{
    uint8_t Lt[32];
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        uint8_t *Lj = L + 32 * j;
        double best = q4_K_fit_sub(xj, d * ls[j], dmin * lm[j], Lj);
        int s0 = ls[j], m0 = lm[j];
        double a, b;
        if (affine_fit(xj, Lj, 32, &a, &b)) {
            if (d > 0) s0 = (int)lrint(a / d);
            if (dmin > 0) m0 = (int)lrint(-b / dmin);
        }
        int cs[6] = {s0 - 2, s0 - 1, s0, s0 + 1, s0 + 2, ls[j]};
        int cm[6] = {m0 - 2, m0 - 1, m0, m0 + 1, m0 + 2, lm[j]};
        int bs = ls[j], bm = lm[j];
        for (int u = 0; u < 6; u++) {
            for (int v = 0; v < 6; v++) {
                int s = clampi(cs[u], 0, 63), m = clampi(cm[v], 0, 63);
                if (s == bs && m == bm) continue;
                double e = q4_K_fit_sub(xj, d * (float)s, dmin * (float)m, Lt);
                if (e < best) {
                    best = e;
                    bs = s;
                    bm = m;
                }
            }
        }
        ls[j] = (uint8_t)bs;
        lm[j] = (uint8_t)bm;
        q4_K_fit_sub(xj, d * ls[j], dmin * lm[j], Lj);
    }
}

/* Least squares of d and dmin given the integer scales, mins and quants. */
static bool q4_K_refit_super(const float *x, const uint8_t ls[8], const uint8_t lm[8],
                             const uint8_t L[BP_QK_K], float *d, float *dmin)
{
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int i = 0; i < BP_QK_K; i++) {
        double u = (double)ls[i / 32] * L[i], v = -(double)lm[i / 32];
        suu += u * u;
        suv += u * v;
        svv += v * v;
        sux += u * x[i];
        svx += v * x[i];
    }
    double det = suu * svv - suv * suv;
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
    if (!(nd > 0) || !isfinite(nd) || !isfinite(nm)) return false;
    *d = bp_f16_to_f32(bp_f32_to_f16((float)nd));
    *dmin = bp_f16_to_f32(bp_f32_to_f16((float)nm));
    return isfinite(*d) && isfinite(*dmin);
}

static void q4_K_store(struct bp_block_q4_K *y, float d, float dmin, const uint8_t ls[8],
                       const uint8_t lm[8], const uint8_t L[BP_QK_K])
{
    y->d = bp_f32_to_f16(d);
    y->dmin = bp_f32_to_f16(dmin);
    q4_K_pack_scales(y->scales, ls, lm);
    q4_K_pack_quants(y->qs, L);
}

/* Improves y in place; never makes its error larger. */
static void q4_K_refine(const float *x, struct bp_block_q4_K *y)
{
    float d = bp_f16_to_f32(y->d), dmin = bp_f16_to_f32(y->dmin);
    if (!(d > 0) || !isfinite(d) || !isfinite(dmin)) return;
    uint8_t ls[8], lm[8], L[BP_QK_K];
    for (int j = 0; j < 8; j++) bp__q4_K_scale_min(j, y->scales, &ls[j], &lm[j]);
    double best = q4_K_error(x, y);
    struct bp_block_q4_K t;
    for (int iter = 0; iter < 6; iter++) {
        /* Quants for the current scales first: y's may predate them. */
        for (int j = 0; j < 8; j++) q4_K_fit_sub(x + 32 * j, d * ls[j], dmin * lm[j], L + 32 * j);
        q4_K_refine_subs(x, d, dmin, ls, lm, L);
        q4_K_store(&t, d, dmin, ls, lm, L);
        double e = q4_K_error(x, &t);
        if (e < best) {
            best = e;
            *y = t;
        }
        float nd, nm;
        if (!q4_K_refit_super(x, ls, lm, L, &nd, &nm)) break;
        uint8_t L2[BP_QK_K];
        for (int j = 0; j < 8; j++) q4_K_fit_sub(x + 32 * j, nd * ls[j], nm * lm[j], L2 + 32 * j);
        q4_K_store(&t, nd, nm, ls, lm, L2);
        e = q4_K_error(x, &t);
        if (e < best) {
            best = e;
            *y = t;
            d = nd;
            dmin = nm;
        } else if (iter > 0) {
            break;
        }
    }
}

void bp__quantize_q4_K(const float *x, struct bp_block_q4_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    uint8_t L[BP_QK_K];
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        struct bp_block_q4_K cand[3];
        q4_K_search(x, &cand[0], L, false);
        cand[1] = cand[0];
        q4_K_refine(x, &cand[1]);
        q4_K_search(x, &cand[2], L, true);
        q4_K_refine(x, &cand[2]);
        int best = 0;
        double best_err = q4_K_error(x, &cand[0]);
        for (int c = 1; c < 3; c++) {
            double e = q4_K_error(x, &cand[c]);
            if (e < best_err) {
                best_err = e;
                best = c;
            }
        }
        y[i] = cand[best];
    }
}

/* ======================= Q6_K ======================= */

/* ggml's make_qx_quants for nmax = 32 and weights x^2 (rmse_type 1) or 1
 * (rmse_type 2): a symmetric fit x ~ scale*(L-32) with L in [0, 63],
 * searched over 19 trial scales around the signed extreme. */
static float qx_search(int n, const float *x, int8_t *L, bool unit_weights)
{
    const int nmax = 32;
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(bp__nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = unit_weights ? 1.0f : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(bp__nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = unit_weights ? 1.0f : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(bp__nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
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

/* The quants (offset by 32) of one sub-block of 16 for effective scale d1;
 * returns its squared error as dequantized. */
static double q6_K_fit_sub(const float *x, float d1, int8_t *L)
{
    double err = 0.0;
    for (int l = 0; l < 16; l++) {
        int q = d1 != 0.0f ? clampi(bp__nearest_int(x[l] / d1), -32, 31) : 0;
        L[l] = (int8_t)(q + 32);
        double diff = (double)(d1 * (float)q) - (double)x[l];
        err += diff * diff;
    }
    return err;
}

/* ggml's quantize_row_q6_K_ref for one super-block (weights x^2 or ones). */
static void q6_K_search(const float *x, struct bp_block_q6_K *y, int8_t L[BP_QK_K],
                        bool unit_weights)
{
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = qx_search(16, x + 16 * ib, L + 16 * ib, unit_weights);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.0f / max_scale;
    y->d = bp_f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ib++)
        y->scales[ib] = (int8_t)clampi(bp__nearest_int(iscale * scales[ib]), -128, 127);
    const float d = bp_f16_to_f32(y->d);
    for (int j = 0; j < 16; j++) {
        const float d1 = d * y->scales[j];
        if (d1 == 0.0f) continue; /* ggml keeps the search's quants here */
        q6_K_fit_sub(x + 16 * j, d1, L + 16 * j);
    }
    q6_K_pack_quants(y, L);
}

static double q6_K_error(const float *x, const struct bp_block_q6_K *y)
{
    float back[BP_QK_K];
    bp__dequantize_q6_K(y, back, BP_QK_K);
    return block_error(x, back);
}

static void q6_K_refine(const float *x, struct bp_block_q6_K *y)
{
    float d = bp_f16_to_f32(y->d);
    if (d == 0.0f || !isfinite(d)) return;
    int8_t sc[16], L[BP_QK_K], Lt[16];
    memcpy(sc, y->scales, sizeof sc);
    double best = q6_K_error(x, y);
    struct bp_block_q6_K t;
    for (int iter = 0; iter < 6; iter++) {
        /* Each sub-block's 8-bit scale among the neighbours of its optimum. */
        for (int j = 0; j < 16; j++) {
            const float *xj = x + 16 * j;
            double e0 = q6_K_fit_sub(xj, d * sc[j], L + 16 * j);
            double sxq = 0, sqq = 0;
            for (int l = 0; l < 16; l++) {
                double q = L[16 * j + l] - 32;
                sxq += xj[l] * q;
                sqq += q * q;
            }
            int s0 = sc[j];
            if (sqq > 0) {
                double s = sxq / sqq / d;
                if (s > -1000 && s < 1000) s0 = (int)lrint(s);
            }
            int bs = sc[j];
            for (int u = -2; u <= 2; u++) {
                int s = clampi(s0 + u, -128, 127);
                if (s == bs) continue;
                double e = q6_K_fit_sub(xj, d * (float)s, Lt);
                if (e < e0) {
                    e0 = e;
                    bs = s;
                }
            }
            sc[j] = (int8_t)bs;
            q6_K_fit_sub(xj, d * sc[j], L + 16 * j);
        }
        t = *y;
        memcpy(t.scales, sc, sizeof sc);
        q6_K_pack_quants(&t, L);
        double e = q6_K_error(x, &t);
        if (e < best) {
            best = e;
            *y = t;
        }
        /* The super-block scale by least squares given scales and quants. */
        double suu = 0, sux = 0;
        for (int i = 0; i < BP_QK_K; i++) {
            double u = (double)sc[i / 16] * (L[i] - 32);
            suu += u * u;
            sux += u * x[i];
        }
        if (!(suu > 0)) break;
        float nd = bp_f16_to_f32(bp_f32_to_f16((float)(sux / suu)));
        if (!isfinite(nd) || nd == 0.0f) break;
        int8_t L2[BP_QK_K];
        for (int j = 0; j < 16; j++) q6_K_fit_sub(x + 16 * j, nd * sc[j], L2 + 16 * j);
        t.d = bp_f32_to_f16(nd);
        memcpy(t.scales, sc, sizeof sc);
        q6_K_pack_quants(&t, L2);
        e = q6_K_error(x, &t);
        if (e < best) {
            best = e;
            *y = t;
            d = nd;
        } else if (iter > 0) {
            break;
        }
    }
}

void bp__quantize_q6_K(const float *x, struct bp_block_q6_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    int8_t L[BP_QK_K];
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        struct bp_block_q6_K cand[3];
        q6_K_search(x, &cand[0], L, false);
        cand[1] = cand[0];
        q6_K_refine(x, &cand[1]);
        q6_K_search(x, &cand[2], L, true);
        q6_K_refine(x, &cand[2]);
        int best = 0;
        double best_err = q6_K_error(x, &cand[0]);
        for (int c = 1; c < 3; c++) {
            double e = q6_K_error(x, &cand[c]);
            if (e < best_err) {
                best_err = e;
                best = c;
            }
        }
        y[i] = cand[best];
    }
}
