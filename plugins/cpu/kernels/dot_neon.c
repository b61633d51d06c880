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

/* ---- the ABI 1.2 weight types ----
 *
 * sdot over 16-byte halves of each 32-element run; the 32-element blocks
 * apply their float scale per block, the super-blocks multiply each
 * sub-block's integer sum by its scale and meet the float scales once per
 * super-block, as the reference does. */

/* The fifth bits of a Q5_0 / Q5_1 block as two registers of bytes, 0xFF
 * where set: elements 0..15 and 16..31. */
static inline void high_bits32_neon(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t sel = vld1q_u8(bit);
    *lo = vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), sel);
    *hi = vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), sel);
}

/* Q4_1 and Q5_1 against Q8_1 (repack.h): m * s per block summed apart, as
 * in the reference. */
void cpu_vec_dot_q4_1_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int64_t nb = n / BP_QK8_0;
    float32x4_t acc_d = vdupq_n_f32(0.0f);
    float summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t y0 = vld1q_s8(y[i].qs), y1 = vld1q_s8(y[i].qs + 16);
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v, m4)), y0);
        p = vdotq_s32(p, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), y1);
        acc_d = vmlaq_n_f32(acc_d, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
        summs += bp_f16_to_f32(x[i].m) * cpu_q8_1_s(vb, nb, i);
    }
    *s = vaddvq_f32(acc_d) + summs;
}

void cpu_vec_dot_q5_1_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    const int64_t nb = n / BP_QK8_0;
    float32x4_t acc_d = vdupq_n_f32(0.0f);
    float summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        uint8x16_t hl, hh;
        high_bits32_neon(x[i].qh, &hl, &hh);
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const uint8x16_t q0 = vorrq_u8(vandq_u8(v, m4), vandq_u8(hl, b4));
        const uint8x16_t q1 = vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(hh, b4));
        const int8x16_t y0 = vld1q_s8(y[i].qs), y1 = vld1q_s8(y[i].qs + 16);
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), y0);
        p = vdotq_s32(p, vreinterpretq_s8_u8(q1), y1);
        acc_d = vmlaq_n_f32(acc_d, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
        summs += bp_f16_to_f32(x[i].m) * cpu_q8_1_s(vb, nb, i);
    }
    *s = vaddvq_f32(acc_d) + summs;
}

/* Q5_0: q - 16 is the nibble with the top four bits set where the fifth bit
 * is clear. */
void cpu_vec_dot_q5_0_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), top = vdupq_n_u8(0xF0);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        uint8x16_t hl, hh;
        high_bits32_neon(x[i].qh, &hl, &hh);
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const uint8x16_t q0 = vorrq_u8(vandq_u8(v, m4), vbicq_u8(top, hl));
        const uint8x16_t q1 = vorrq_u8(vshrq_n_u8(v, 4), vbicq_u8(top, hh));
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), vld1q_s8(y[i].qs));
        p = vdotq_s32(p, vreinterpretq_s8_u8(q1), vld1q_s8(y[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

/* IQ4_NL: one table lookup (tbl) per 16 indices. */
void cpu_vec_dot_iq4_nl_q8_0_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_nl *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int8x16_t table = vld1q_s8(bp_iq4nl_values());
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t q0 = vqtbl1q_s8(table, vandq_u8(v, m4)), q1 = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
        int32x4_t p = vdotq_s32(vdupq_n_s32(0), q0, vld1q_s8(y[i].qs));
        p = vdotq_s32(p, q1, vld1q_s8(y[i].qs + 16));
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

/* Q2_K: plane p of each half's 32 quant bytes, 16 bytes per sub-block. */
void cpu_vec_dot_q2_K_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q2_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        int summ = 0;
        for (int j = 0; j < 16; j++) summ += (x[i].scales[j] >> 4) * y[i].bsums[j];
        int32_t sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            const uint8_t *sc = x[i].scales + 8 * h;
            for (int p = 0; p < 4; p++) {
                const int8x16_t s = vdupq_n_s8((int8_t)(-2 * p));
                const uint8x16_t q0 = vandq_u8(vshlq_u8(b0, s), m3), q1 = vandq_u8(vshlq_u8(b1, s), m3);
                const int32x4_t p0 = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), vld1q_s8(q8 + 32 * p));
                const int32x4_t p1 = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(q1), vld1q_s8(q8 + 32 * p + 16));
                sumi += vaddvq_s32(p0) * (sc[2 * p] & 0xF) + vaddvq_s32(p1) * (sc[2 * p + 1] & 0xF);
            }
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi - bp_f16_to_f32(x[i].dmin) * y[i].d * (float)summ;
    }
    *s = sumf;
}

/* Q3_K: the two low bits plus 4 where the high bit is set, minus 4. */
void cpu_vec_dot_q3_K_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q3_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const int8x16_t four = vdupq_n_s8(4);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        int8_t sc[16];
        bp_q3_K_scales(x[i].scales, sc);
        const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
        int32_t sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int p = 0; p < 4; p++) {
                const int8x16_t s = vdupq_n_s8((int8_t)(-2 * p)), sh = vdupq_n_s8((int8_t)(-(4 * h + p)));
                const uint8x16_t h0 = vshlq_n_u8(vandq_u8(vshlq_u8(hm0, sh), one), 2);
                const uint8x16_t h1 = vshlq_n_u8(vandq_u8(vshlq_u8(hm1, sh), one), 2);
                const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(b0, s), m3), h0)), four);
                const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(b1, s), m3), h1)), four);
                const int32x4_t p0 = vdotq_s32(vdupq_n_s32(0), q0, vld1q_s8(q8 + 32 * p));
                const int32x4_t p1 = vdotq_s32(vdupq_n_s32(0), q1, vld1q_s8(q8 + 32 * p + 16));
                const int sub = 8 * h + 2 * p;
                sumi += vaddvq_s32(p0) * (sc[sub] - 32) + vaddvq_s32(p1) * (sc[sub + 1] - 32);
            }
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi;
    }
    *s = sumf;
}

/* Q5_K: Q4_K's loop with the fifth bit (bit j of qh[l] for sub-block j). */
void cpu_vec_dot_q5_K_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summ = 0;
        for (int j = 0; j < 8; j++) {
            bp_q4_K_scale_min(j, x[i].scales, &sc[j], &mn[j]);
            summ += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const uint8x16_t hb0 = vld1q_u8(x[i].qh), hb1 = vld1q_u8(x[i].qh + 16);
        int32_t sumi = 0;
        for (int c = 0; c < 4; c++) {
            const uint8x16_t a0 = vld1q_u8(x[i].qs + 32 * c), a1 = vld1q_u8(x[i].qs + 32 * c + 16);
            const int8x16_t sl = vdupq_n_s8((int8_t)(-2 * c)), sh = vdupq_n_s8((int8_t)(-2 * c - 1));
            const uint8x16_t l0 = vorrq_u8(vandq_u8(a0, m4), vshlq_n_u8(vandq_u8(vshlq_u8(hb0, sl), one), 4));
            const uint8x16_t l1 = vorrq_u8(vandq_u8(a1, m4), vshlq_n_u8(vandq_u8(vshlq_u8(hb1, sl), one), 4));
            const uint8x16_t u0 = vorrq_u8(vshrq_n_u8(a0, 4), vshlq_n_u8(vandq_u8(vshlq_u8(hb0, sh), one), 4));
            const uint8x16_t u1 = vorrq_u8(vshrq_n_u8(a1, 4), vshlq_n_u8(vandq_u8(vshlq_u8(hb1, sh), one), 4));
            const int8_t *q8 = y[i].qs + 64 * c;
            int32x4_t pl = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(q8));
            pl = vdotq_s32(pl, vreinterpretq_s8_u8(l1), vld1q_s8(q8 + 16));
            int32x4_t ph = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(u0), vld1q_s8(q8 + 32));
            ph = vdotq_s32(ph, vreinterpretq_s8_u8(u1), vld1q_s8(q8 + 48));
            sumi += vaddvq_s32(pl) * sc[2 * c] + vaddvq_s32(ph) * sc[2 * c + 1];
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi -
                bp_f16_to_f32(x[i].dmin) * y[i].d * (float)summ;
    }
    *s = sumf;
}

/* IQ4_XS: IQ4_NL's lookup per sub-block of 32, times its 6-bit scale. */
void cpu_vec_dot_iq4_xs_q8_K_neon(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_xs *x = va;
    const struct bp_block_q8_K *y = vb;
    const int8x16_t table = vld1q_s8(bp_iq4nl_values());
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        int32_t sumi = 0;
        for (int b = 0; b < BP_QK_K / 32; b++) {
            const uint8x16_t v = vld1q_u8(x[i].qs + 16 * b);
            const int8x16_t q0 = vqtbl1q_s8(table, vandq_u8(v, m4)), q1 = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
            int32x4_t p = vdotq_s32(vdupq_n_s32(0), q0, vld1q_s8(y[i].qs + 32 * b));
            p = vdotq_s32(p, q1, vld1q_s8(y[i].qs + 32 * b + 16));
            sumi += vaddvq_s32(p) * (bp_iq4_xs_scale(&x[i], b) - 32);
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
