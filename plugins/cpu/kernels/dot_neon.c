/*
 * dot_neon.c — ARM NEON dot products with the dot-product extension
 * (sdot, vdotq_s32): four int8 products summed into each int32 lane in one
 * instruction. Built into the neon variant; tested under qemu-aarch64 by
 * tests/test_cpu_kernels_neon (see tests/cpu.cmake).
 */
#include "simd.h"

#if defined(CPU_HAVE_NEON_SIMD)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* Per block: the maximum by compare-and-select, `|x| > m` as the reference
 * writes it (a NaN lane compares false and keeps m, where fmaxnm would
 * raise on a signalling NaN); the first lane equal to it gives the signed
 * extreme; then bp_nearest_int's float add and bit masks on 4 lanes, the
 * saturating narrows doing the clamp to [-128, 127], and each block sum
 * one widening add across 16 bytes. The same bytes for every input. */
void cpu_quantize_row_q8_K_neon(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_K *y = vy;
    const uint32x4_t mant = vdupq_n_u32(0x007fffff);
    const int32x4_t half = vdupq_n_s32(0x00400000);
    for (int64_t i = 0; i < n / BP_QK_K; i++, x += BP_QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < BP_QK_K; k += 4) {
            const float32x4_t a = vabsq_f32(vld1q_f32(x + k));
            m = vbslq_f32(vcgtq_f32(a, m), a, m);
        }
        const float amax = vmaxvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float32x4_t va = vdupq_n_f32(amax);
        int first = 0;
        for (int k = 0; k < BP_QK_K; k += 4)
            if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + k)), va))) {
                first = k;
                while (fabsf(x[first]) != amax) first++;
                break;
            }
        const float iscale = -127.0f / x[first];
        const float32x4_t is = vdupq_n_f32(iscale), magic = vdupq_n_f32(12582912.0f);
        for (int k = 0; k < BP_QK_K; k += 16) {
            int16x8_t h[2];
            for (int l = 0; l < 2; l++) {
                int32x4_t q[2];
                for (int e = 0; e < 2; e++) {
                    const float32x4_t f = vaddq_f32(vmulq_f32(is, vld1q_f32(x + k + 8 * l + 4 * e)), magic);
                    q[e] = vsubq_s32(vreinterpretq_s32_u32(vandq_u32(vreinterpretq_u32_f32(f), mant)), half);
                }
                h[l] = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
            }
            const int8x16_t b = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
            vst1q_s8(y[i].qs + k, b);
            y[i].bsums[k / 16] = vaddlvq_s8(b);
        }
        y[i].d = 1 / iscale;
    }
}

void cpu_vec_dot_q4_0_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), s8);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), s8);
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y[i].qs));
        p = vdotq_s32(p, hi, vld1q_s8(y[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

void cpu_vec_dot_q8_0_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q8_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[i].qs), vld1q_s8(y[i].qs));
        p = vdotq_s32(p, vld1q_s8(x[i].qs + 16), vld1q_s8(y[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

void cpu_vec_dot_q4_K_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summ = 0;
        for (int j = 0; j < 8; j++) {
            bp_q4_K_scale_min(j, x[i].scales, &sc[j], &mn[j]);
            summ += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32_t sumi = 0;
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const uint8x16_t a0 = vld1q_u8(q4), a1 = vld1q_u8(q4 + 16);
            int32x4_t pl = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(a0, m4)), vld1q_s8(q8));
            pl = vdotq_s32(pl, vreinterpretq_s8_u8(vandq_u8(a1, m4)), vld1q_s8(q8 + 16));
            int32x4_t ph = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(a0, 4)), vld1q_s8(q8 + 32));
            ph = vdotq_s32(ph, vreinterpretq_s8_u8(vshrq_n_u8(a1, 4)), vld1q_s8(q8 + 48));
            sumi += vaddvq_s32(pl) * sc[2 * j] + vaddvq_s32(ph) * sc[2 * j + 1];
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi -
                bp_f16_to_f32(x[i].dmin) * y[i].d * (float)summ;
    }
    *s = sumf;
}

void cpu_vec_dot_q6_K_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q6_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs, *sc = x[i].scales;
        int32_t sumi = 0;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            for (int half = 0; half < 2; half++) { /* l in [0,16) then [16,32) */
                const int o = 16 * half;
                const uint8x16_t l0 = vld1q_u8(ql + o), l1 = vld1q_u8(ql + 32 + o);
                const uint8x16_t hb = vld1q_u8(qh + o);
                const uint8x16_t q[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m2), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m2), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m2), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                for (int k = 0; k < 4; k++) {
                    const int8x16_t qv = vsubq_s8(vreinterpretq_s8_u8(q[k]), vdupq_n_s8(32));
                    const int32x4_t p = vdotq_s32(vdupq_n_s32(0), qv, vld1q_s8(q8 + 32 * k + o));
                    sumi += vaddvq_s32(p) * sc[2 * k + half];
                }
            }
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi;
    }
    *s = sumf;
}

void cpu_vec_dot_f32_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const float *a = va, *b = vb;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}
#else
typedef int cpu_dot_neon_not_built; /* ISO C forbids an empty translation unit */
#endif
