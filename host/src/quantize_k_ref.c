/*
 * quantize_k_ref.c — Q2_K, Q3_K and Q5_K: ggml's reference quantizers
 * (quantize_row_q2_K_ref, _q3_K_ref, _q5_K_ref, the path llama-quantize
 * takes without an importance matrix) reproduced to the bit, with the scale
 * searches they use (make_qkx2_quants, make_q3_quants). Every float
 * operation is ggml's, in ggml's order; tests/data/quant/ holds ggml's own
 * bytes for these.
 *
 * Unlike Q4_K and Q6_K (quantize_k.c) there is no refinement after ggml's
 * search: these files must come out exactly as llama.cpp writes them.
 *
 * Where ggml converts an out-of-range int to a narrower type the conversion
 * here is the same modulo-256 one (uint8_t), spelled so that C defines it.
 */
#include <math.h>

#include "quantize_internal.h"

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ggml's make_qkx2_quants: the affine fit x ~ scale * L + min (min <= 0,
 * L in [0, nmax]) of n weighted elements, searched over nstep + 1 trial
 * inverse scales (rmin + rdelta * is + nmax) / (max - min), each followed by
 * a weighted least-squares fit; the error is the squared or (use_mad) the
 * absolute difference. Returns the scale, *the_min = -min. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
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
        const int l = bp_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(bp_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
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
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
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

/* ======================= Q2_K ======================= */

/* 16 sub-blocks of 16, each fitted with 4 levels and a min (weights |x|,
 * absolute error); the 16 scales and 16 mins then quantized to 4 bits
 * against their maxima, and every element re-rounded with the stored
 * values. */
void bp__quantize_q2_K(const float *x, struct bp_block_q2_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    uint8_t L[BP_QK_K], Laux[16];
    float weights[16], mins[BP_QK_K / 16], scales[BP_QK_K / 16];
    const float q4scale = 15.0f;
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < BP_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < BP_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)bp_nearest_int(iscale * scales[j]);
            y[i].d = bp_f32_to_f16(max_scale / q4scale);
        } else {
            for (int j = 0; j < BP_QK_K / 16; j++) y[i].scales[j] = 0;
            y[i].d = bp_f32_to_f16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < BP_QK_K / 16; j++) {
                const unsigned l = (unsigned)bp_nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = bp_f32_to_f16(max_min / q4scale);
        } else {
            y[i].dmin = bp_f32_to_f16(0.0f);
        }
        for (int j = 0; j < BP_QK_K / 16; j++) {
            const float d = bp_f16_to_f32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue; /* ggml keeps the search's levels here */
            const float dm = bp_f16_to_f32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (uint8_t)clampi(bp_nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
        }
        for (int j = 0; j < BP_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

/* ======================= Q3_K ======================= */

/* ggml's make_q3_quants with do_rmse: a symmetric fit x ~ scale * L, L in
 * [-nmax, nmax - 1], starting from the signed extreme and improved one
 * element at a time (up to 5 sweeps) while the weighted (x^2) fit gets
 * better. L comes out offset by nmax, except for an all-zero group (0). */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(bp_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                const int new_l = clampi(bp_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* 16 sub-blocks of 16 with 8 levels each; the 16 signed scales quantized to
 * 6 bits against the one of largest magnitude (with its sign), then every
 * element re-rounded with the stored scale. */
void bp__quantize_q3_K(const float *x, struct bp_block_q3_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    int8_t L[BP_QK_K];
    float scales[BP_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < BP_QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < BP_QK_K / 16; j++) {
                /* ggml narrows to int8_t before clamping: the same for every
                 * value |iscale * scale| <= 32 gives. */
                const int l = clampi((int8_t)bp_nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = bp_f32_to_f16(1 / iscale);
        } else {
            y[i].d = bp_f32_to_f16(0.0f);
        }
        int8_t sc[16];
        bp_q3_K_scales(y[i].scales, sc);
        for (int j = 0; j < BP_QK_K / 16; j++) {
            const float d = bp_f16_to_f32(y[i].d) * (sc[j] - 32);
            if (!d) continue; /* ggml keeps the search's levels here */
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (int8_t)(clampi(bp_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
        }
        /* The third bit of element j goes to bit j / 32 of hmask[j % 32]. */
        memset(y[i].hmask, 0, BP_QK_K / 8);
        for (int j = 0; j < BP_QK_K; j++) {
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                L[j] -= 4;
            }
        }
        for (int j = 0; j < BP_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

/* ======================= Q5_K ======================= */

/* 8 sub-blocks of 32 fitted with 32 levels and a min (weights rms + |x|,
 * squared error); scales and mins quantized to 6 bits as in Q4_K; every
 * element re-rounded with the stored values. */
void bp__quantize_q5_K(const float *x, struct bp_block_q5_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    uint8_t L[BP_QK_K], Laux[32];
    float mins[BP_QK_K / 32], scales[BP_QK_K / 32], weights[32];
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < BP_QK_K / 32; j++) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, false);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < BP_QK_K / 32; j++) {
            /* ggml narrows to uint8_t, then caps at 63. */
            uint8_t ls = (uint8_t)bp_nearest_int(inv_scale * scales[j]);
            uint8_t lm = (uint8_t)bp_nearest_int(inv_min * mins[j]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (j < 4) {
                y[i].scales[j] = ls;
                y[i].scales[j + 4] = lm;
            } else {
                y[i].scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                y[i].scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
                y[i].scales[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        y[i].d = bp_f32_to_f16(max_scale / 63.0f);
        y[i].dmin = bp_f32_to_f16(max_min / 63.0f);
        for (int j = 0; j < BP_QK_K / 32; j++) {
            uint8_t sc, m;
            bp_q4_K_scale_min(j, y[i].scales, &sc, &m);
            const float d = bp_f16_to_f32(y[i].d) * sc;
            if (!d) continue; /* ggml keeps the search's levels here */
            const float dm = bp_f16_to_f32(y[i].dmin) * m;
            for (int ii = 0; ii < 32; ii++)
                L[32 * j + ii] = (uint8_t)clampi(bp_nearest_int((x[32 * j + ii] + dm) / d), 0, 31);
        }
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, BP_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < BP_QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}
