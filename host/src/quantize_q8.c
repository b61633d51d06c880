/* quantize_q8.c — the 8-bit formats: Q8_0 (weights and activations, 32
 * elements, f16 d) and Q8_K (activations for the K-quant dots, 256 elements,
 * f32 d, block sums), ggml's arithmetic. */
#include <math.h>

#include "quantize_internal.h"

/* ggml's quantize_row_q8_0_ref: symmetric, d = amax / 127, roundf. */
void bp__quantize_q8_0(const float *x, struct bp_block_q8_0 *y, int64_t k)
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

void bp__dequantize_q8_0(const struct bp_block_q8_0 *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK8_0;
    for (int64_t i = 0; i < nb; i++, y += BP_QK8_0) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

/* ggml's quantize_row_q8_K_ref: the signed extreme maps to -127 (ggml moved
 * from -128 to -127 so that SIMD sign tricks never meet -128), d = 1/iscale
 * kept in f32, and bsums hold the sums of each 16 quants so that the min
 * term of a Q4_K dot needs no second pass. */
void bp__quantize_q8_K(const float *x, struct bp_block_q8_K *y, int64_t k)
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
            int v = bp__nearest_int(iscale * x[j]);
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

void bp__dequantize_q8_K(const struct bp_block_q8_K *x, float *y, int64_t k)
{
    const int64_t nb = k / BP_QK_K;
    for (int64_t i = 0; i < nb; i++, y += BP_QK_K)
        for (int j = 0; j < BP_QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}
