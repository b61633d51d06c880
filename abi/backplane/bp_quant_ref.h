/*
 * bp_quant_ref.h — the block-level reference conversions, header-only
 * (static inline): the Q8_0 and Q8_K quantizers (activations and Q8_0
 * weights) and the dequantizers of every block type, in ggml's order of
 * operations so that results agree with it to the bit.
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
 * them); a change is a new function, never a change of these. The 1.2
 * types' dequantizers were checked against ggml's own output on the vectors
 * in tests/data/quant/.
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

/* The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl): denser near
 * zero, where most weights are. A function, so that a file including this
 * header without using it has no unused table. */
static inline const int8_t *bp_iq4nl_values(void)
{
    static const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
    return values;
}

/* The 16 six-bit scales of a Q3_K block, unpacked from its 12 bytes (see
 * struct bp_block_q3_K), still offset by 32. */
static inline void bp_q3_K_scales(const uint8_t *q, int8_t out[16])
{
    for (int i = 0; i < 16; i++) {
        const int lo = (q[i % 8] >> (4 * (i / 8))) & 0xF;
        const int hi = (q[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)(lo | (hi << 4));
    }
}

/* The 6-bit scale of sub-block b (0..7) of an IQ4_XS block, offset by 32. */
static inline int bp_iq4_xs_scale(const struct bp_block_iq4_xs *x, int b)
{
    return ((x->scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | (((x->scales_h >> (2 * b)) & 3) << 4);
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

/* ---- ABI 1.2 types ---- */

static inline void bp_dequantize_q4_1_ref(const struct bp_block_q4_1 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK4_1;
    for (int64_t i = 0; i < nb; i++, y += BP_QK4_1) {
        const float d = bp_f16_to_f32(x[i].d), m = bp_f16_to_f32(x[i].m);
        for (int j = 0; j < BP_QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[j + BP_QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* The fifth bits of a Q5_0 / Q5_1 block as one word: bit j is element j's. */
static inline uint32_t bp_q5_high_bits(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void bp_dequantize_q5_0_ref(const struct bp_block_q5_0 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK5_0;
    for (int64_t i = 0; i < nb; i++, y += BP_QK5_0) {
        const float d = bp_f16_to_f32(x[i].d);
        const uint32_t qh = bp_q5_high_bits(x[i].qh);
        for (int j = 0; j < BP_QK5_0 / 2; j++) {
            const int q0 = ((x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4)) - 16;
            const int q1 = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            y[j] = (float)q0 * d;
            y[j + BP_QK5_0 / 2] = (float)q1 * d;
        }
    }
}

static inline void bp_dequantize_q5_1_ref(const struct bp_block_q5_1 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK5_1;
    for (int64_t i = 0; i < nb; i++, y += BP_QK5_1) {
        const float d = bp_f16_to_f32(x[i].d), m = bp_f16_to_f32(x[i].m);
        const uint32_t qh = bp_q5_high_bits(x[i].qh);
        for (int j = 0; j < BP_QK5_1 / 2; j++) {
            const int q0 = (x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
            const int q1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)q0 * d + m;
            y[j + BP_QK5_1 / 2] = (float)q1 * d + m;
        }
    }
}

static inline void bp_dequantize_q2_K_ref(const struct bp_block_q2_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d), dmin = bp_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs, *sc = x[i].scales;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int p = 0; p < 4; p++) {
                for (int half = 0; half < 2; half++, sc++) {
                    const float dl = d * (float)(*sc & 0xF), ml = dmin * (float)(*sc >> 4);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)((q[l] >> (2 * p)) & 3) - ml;
                }
            }
        }
    }
}

static inline void bp_dequantize_q3_K_ref(const struct bp_block_q3_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        int8_t sc[16];
        bp_q3_K_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int p = 0; p < 4; p++) {
                const int bit = 4 * h + p;
                for (int half = 0; half < 2; half++, is++) {
                    const float dl = d * (float)(sc[is] - 32);
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int lo = (q[l] >> (2 * p)) & 3;
                        const int v = lo - (((x[i].hmask[l] >> bit) & 1) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

static inline void bp_dequantize_q5_K_ref(const struct bp_block_q5_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d), dmin = bp_f16_to_f32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, m;
            bp_q4_K_scale_min(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            bp_q4_K_scale_min(2 * c + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (((qh[l] >> (2 * c)) & 1) << 4)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (((qh[l] >> (2 * c + 1)) & 1) << 4)) - m2;
        }
    }
}

static inline void bp_dequantize_iq4_nl_ref(const struct bp_block_iq4_nl *x, float *y, int64_t k)
{
    const int8_t *values = bp_iq4nl_values();
    const int64_t nb = k / BP_QK4_NL;
    for (int64_t i = 0; i < nb; i++, y += BP_QK4_NL) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK4_NL / 2; j++) {
            y[j] = d * (float)values[x[i].qs[j] & 0xF];
            y[j + BP_QK4_NL / 2] = d * (float)values[x[i].qs[j] >> 4];
        }
    }
}

static inline void bp_dequantize_iq4_xs_ref(const struct bp_block_iq4_xs *x, float *y, int64_t k)
{
    const int8_t *values = bp_iq4nl_values();
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int b = 0; b < BP_QK_K / 32; b++, y += 32) {
            const float dl = d * (float)(bp_iq4_xs_scale(&x[i], b) - 32);
            const uint8_t *qs = x[i].qs + 16 * b;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)values[qs[j] & 0xF];
                y[j + 16] = dl * (float)values[qs[j] >> 4];
            }
        }
    }
}

#ifdef __cplusplus
}
#endif
#endif /* BP_QUANT_REF_H */
