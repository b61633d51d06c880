/*
 * bp_quant_ref.h — the block-level reference conversions, header-only
 * (static inline): the Q8_0 and Q8_K quantizers (activations and Q8_0
 * weights) and the Q4_0, Q8_0, Q8_K, Q4_K and Q6_K dequantizers, in ggml's
 * order of operations so that results agree with it to the bit.
 *
 * One copy for everyone: the host's bp_quantize/bp_dequantize and the CPU
 * plugin's activation quantizers and row expanders both call these. Plugins
 * may share only abi/, so the reference lives here rather than behind a
 * host service (a call per row through host->get_proc_address would sit in
 * the CPU plugin's matmul path). The K-quant weight quantizers (searches
 * over scales) are not here: only the host runs them (quantize_k.c).
 *
 * k (elements) is a multiple of the block size; x and y do not overlap.
 * ABI: the results are part of the contract (the CPU plugin's dots assume
 * them); a change is a new function, never a change of these.
 */
#ifndef BP_QUANT_REF_H
#define BP_QUANT_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bp_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ggml's nearest_int: round half to even through the float mantissa. Exact
 * for |f| <= 2^22, which every caller guarantees for finite input; outside
 * that range it returns a wrong value but never invokes undefined behaviour. */
static inline int bp_nearest_int(float f)
{
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Scale and min of sub-block j (0..7) from a Q4_K block's 12 packed bytes. */
static inline void bp_q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ggml's quantize_row_q8_0_ref: symmetric, d = amax / 127, roundf. */
static inline void bp_quantize_q8_0_ref(const float *x, struct bp_block_q8_0 *y, int64_t k)
{
    const int64_t nb = k / BP_QK8_0;
    for (int64_t i = 0; i < nb; i++, x += BP_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < BP_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        for (int j = 0; j < BP_QK8_0; j++) {
            const float v = roundf(x[j] * id);
            /* |v| <= 127 for finite input; NaN would make the conversion undefined. */
            y[i].qs[j] = (int8_t)(v >= -127.0f && v <= 127.0f ? v : (v > 0.0f ? 127 : v < 0.0f ? -127 : 0));
        }
    }
}

/* ggml's quantize_row_q8_K_ref: the signed extreme maps to -127 (ggml moved
 * from -128 to -127 so that SIMD sign tricks never meet -128), d = 1/iscale
 * kept in f32, and bsums hold the sums of each 16 quants so that the min
 * term of a Q4_K dot needs no second pass. */
static inline void bp_quantize_q8_K_ref(const float *x, struct bp_block_q8_K *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++, x += BP_QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < BP_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            /* ggml leaves bsums as they were here; zero is what they sum to. */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < BP_QK_K; j++) {
            int v = bp_nearest_int(iscale * x[j]);
            v = v < 127 ? v : 127;
            y[i].qs[j] = (int8_t)(v > -128 ? v : -128);
        }
        for (int j = 0; j < BP_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

static inline void bp_dequantize_q4_0_ref(const struct bp_block_q4_0 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK4_0;
    for (int64_t i = 0; i < nb; i++, y += BP_QK4_0) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK4_0 / 2; j++) {
            const int q0 = (x[i].qs[j] & 0x0F) - 8;
            const int q1 = (x[i].qs[j] >> 4) - 8;
            y[j] = (float)q0 * d;
            y[j + BP_QK4_0 / 2] = (float)q1 * d;
        }
    }
}

static inline void bp_dequantize_q8_0_ref(const struct bp_block_q8_0 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK8_0;
    for (int64_t i = 0; i < nb; i++, y += BP_QK8_0) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

static inline void bp_dequantize_q8_K_ref(const struct bp_block_q8_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++, y += BP_QK_K)
        for (int j = 0; j < BP_QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

static inline void bp_dequantize_q4_K_ref(const struct bp_block_q4_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        const float dmin = bp_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        /* Each group of 32 bytes holds two sub-blocks: low nibbles, then high. */
        for (int g = 0; g < 4; g++, q += 32) {
            uint8_t sc, m;
            bp_q4_K_scale_min(2 * g, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            bp_q4_K_scale_min(2 * g + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static inline void bp_dequantize_q6_K_ref(const struct bp_block_q6_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        /* Each half of 128 elements: 64 bytes of ql, 32 of qh, 8 scales.
         * Element l + 32*s takes its low bits from ql (nibble s/2 of byte
         * l + 32*(s%2)) and its high bits from bits 2s..2s+1 of qh[l]. */
        for (int n = 0; n < BP_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

#ifdef __cplusplus
}
#endif
#endif /* BP_QUANT_REF_H */
