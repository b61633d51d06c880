/*
 * quants_ref.c — activation quantizers and row expanders, in plain C.
 *
 * Every variant uses these same quantizers for the activation (it is
 * quantized once per op, O(K*M) against the dot's O(K*M*N)), so a SIMD
 * variant differs from the scalar one only by the summation order inside a
 * float dot: the integer parts are identical. The expanders are
 * bit-identical to ggml's dequantizers (same operation order).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Round to nearest, ties to even, as ggml's nearest_int does. */
static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* ggml-cpu's activation quantizer on x86 (quantize_row_q8_0 in
 * arch/x86/quants.c, the path llama.cpp's prebuilt x86 libraries take), not
 * ggml's reference quantize_row_q8_0_ref, which llama-quantize uses for
 * weights and host/src/quantize_q8.c follows: the multiplier is 127 / amax
 * (one rounding, not 1 / (amax / 127)) and halves round to even (_mm256_
 * round_ps), not away from zero (roundf). Both move some quants by one, so
 * the logits of a 1B-class model drifted from llama.cpp's (issue 15). */
void cpu_quantize_row_q8_0_ref(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < BP_QK8_0; j++) {
            float v = fabsf(x[i * BP_QK8_0 + j]);
            amax = v > amax ? v : amax;
        }
        y[i].d = bp_f32_to_f16(amax / 127.0f);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < BP_QK8_0; j++)
            y[i].qs[j] = (int8_t)nearest_int(x[i * BP_QK8_0 + j] * id);
    }
}

void cpu_quantize_row_q8_K_ref(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / BP_QK_K; i++, x += BP_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < BP_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < BP_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < BP_QK_K / 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void cpu_f32_copy_row(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void cpu_dequantize_row_q4_0(const void *vx, float *y, int64_t n)
{
    const struct bp_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / BP_QK4_0; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * BP_QK4_0 + j] = x0 * d;
            y[i * BP_QK4_0 + j + BP_QK4_0 / 2] = x1 * d;
        }
    }
}

void cpu_dequantize_row_q8_0(const void *vx, float *y, int64_t n)
{
    const struct bp_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        for (int j = 0; j < BP_QK8_0; j++) y[i * BP_QK8_0 + j] = x[i].qs[j] * d;
    }
}

void cpu_dequantize_row_q4_K(const void *vx, float *y, int64_t n)
{
    const struct bp_block_q4_K *x = vx;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = bp_f16_to_f32(x[i].d);
        const float min = bp_f16_to_f32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < BP_QK_K; j += 64) {
            cpu_q4_K_scale_min(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            cpu_q4_K_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void cpu_dequantize_row_q6_K(const void *vx, float *y, int64_t n)
{
    const struct bp_block_q6_K *x = vx;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const float d = bp_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int h = 0; h < BP_QK_K; h += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void cpu_f16_to_f32_row(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = bp_f16_to_f32(x[i]);
}

void cpu_bf16_to_f32_row(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = bp_bf16_to_f32(x[i]);
}

void cpu_f32_row_copy_out(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}
