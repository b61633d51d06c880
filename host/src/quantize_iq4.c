/*
 * quantize_iq4.c — IQ4_NL and IQ4_XS: ggml's quantize_row_iq4_nl_impl as
 * llama-quantize runs it without an importance matrix (quantize_iq4_nl and
 * quantize_iq4_xs: weights x^2, 7 trial scales either side), reproduced to
 * the bit; tests/data/quant/ holds ggml's own bytes for both.
 *
 * Note that ggml's quantize_row_iq4_nl_ref (ntry -1, one trial) is not what
 * llama-quantize writes; files in the wild come from the ntry 7 search, so
 * that is the one here.
 */
#include <math.h>

#include "quantize_internal.h"

#define GROUP_MAX_EPS 1e-15f
#define IQ4_NTRY 7

/* ggml's best_index_int8: the index of the level nearest x (the lower one
 * on a tie), by bisection over the sorted levels. */
static int best_index(const int8_t *val, float x)
{
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* One block of 32 (IQ4_NL) or one super-block of 256 in sub-blocks of 32
 * (IQ4_XS), as quantize_row_iq4_nl_impl with quant_weights NULL and ntry 7:
 * per sub-block, a least-squares scale for the levels picked at d =
 * max / 127, then the 15 trial inverse scales (itry - 127) / max, keeping
 * the best fit. IQ4_NL stores that scale in f16 and re-picks the levels
 * with it (unrounded); IQ4_XS quantizes the 8 scales to 6 bits against
 * -max_scale / 32 and re-picks each sub-block's levels. */
static void iq4_impl(int super_block_size, const float *x, uint16_t *dh, uint8_t *q4,
                     uint16_t *scales_h, uint8_t *scales_l)
{
    const int block_size = 32;
    const int8_t *values = bp_iq4nl_values();
    float scales[BP_QK_K / 32], weight[32];
    uint8_t L[BP_QK_K];
    memset(q4, 0, (size_t)super_block_size / 2);
    dh[0] = bp_f32_to_f16(0.0f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < super_block_size / block_size; ib++) {
        const float *xb = x + ib * block_size;
        uint8_t *Lb = L + ib * block_size;
        for (int j = 0; j < block_size; j++) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < block_size; j++) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = -max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < block_size; j++) {
            const int l = best_index(values, id * xb[j]);
            Lb[j] = (uint8_t)l;
            const float q = values[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
        float best = d * sumqx;
        for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; itry++) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < block_size; j++) {
                const float q = values[best_index(values, id * xb[j])], w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        const float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }
    if (super_block_size / block_size > 1) {
        *scales_h = 0;
        const float d = -max_scale / 32;
        dh[0] = bp_f32_to_f16(d);
        const float id = d ? 1 / d : 0.0f;
        for (int ib = 0; ib < super_block_size / block_size; ib++) {
            int l = clampi(bp_nearest_int(id * scales[ib]), -32, 31);
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.0f;
            uint8_t *Lb = L + ib * block_size;
            const float *xb = x + ib * block_size;
            for (int j = 0; j < block_size; j++) Lb[j] = (uint8_t)best_index(values, idl * xb[j]);
            l += 32;
            if (ib % 2 == 0) scales_l[ib / 2] = (uint8_t)(l & 0xF);
            else scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4);
            *scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    } else {
        dh[0] = bp_f32_to_f16(scales[0]);
        const float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < super_block_size; j++) L[j] = (uint8_t)best_index(values, id * x[j]);
    }
    for (int i = 0; i < super_block_size / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void bp__quantize_iq4_nl(const float *x, struct bp_block_iq4_nl *y, int64_t k)
{
    const int64_t nb = k / BP_QK4_NL;
    for (int64_t i = 0; i < nb; i++, x += BP_QK4_NL)
        iq4_impl(BP_QK4_NL, x, &y[i].d, y[i].qs, NULL, NULL);
}

void bp__quantize_iq4_xs(const float *x, struct bp_block_iq4_xs *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K)
        iq4_impl(BP_QK_K, x, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}
