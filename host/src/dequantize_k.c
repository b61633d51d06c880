/* dequantize_k.c — Q4_K and Q6_K back to floats, in ggml's order of
 * operations so that the results agree to the bit (the quantizer in
 * quantize_k.c also measures its candidates through these). */
#include "quantize_internal.h"

void bp__dequantize_q4_K(const struct bp_block_q4_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        const float dmin = bp_f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        /* Each group of 32 bytes holds two sub-blocks: low nibbles, then high. */
        for (int g = 0; g < 4; g++, q += 32) {
            uint8_t sc, m;
            bp__q4_K_scale_min(2 * g, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            bp__q4_K_scale_min(2 * g + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void bp__dequantize_q6_K(const struct bp_block_q6_K *x, float *y, int64_t k)
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
