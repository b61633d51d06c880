/*
 * dot_ref.c — the scalar dot products every SIMD variant is checked
 * against. Integer sums per block, the scales applied once per block (or,
 * for the K-quants, once per sub-block on the integer sum and once per
 * super-block in float); the Q4_K, Q5_K and Q2_K min terms come from the
 * activation's block sums, so they need no second pass over the quants.
 */
#include "kernels.h"

void cpu_vec_dot_q4_0_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < BP_QK4_0 / 2; j++) {
            const int v0 = (x[i].qs[j] & 0x0F) - 8;
            const int v1 = (x[i].qs[j] >> 4) - 8;
            sumi += v0 * y[i].qs[j] + v1 * y[i].qs[j + BP_QK4_0 / 2];
        }
        sumf += sumi * bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d);
    }
    *s = sumf;
}

void cpu_vec_dot_q8_0_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q8_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < BP_QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += sumi * bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d);
    }
    *s = sumf;
}

void cpu_vec_dot_q4_K_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_K *x = va;
    const struct bp_block_q8_K *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < BP_QK_K / 32; j++) {
            uint8_t sc, m;
            bp_q4_K_scale_min(j, x[i].scales, &sc, &m);
            const int shift = (j & 1) * 4;
            const uint8_t *q = q4 + (j / 2) * 32;
            int sub = 0;
            for (int l = 0; l < 32; l++) sub += ((q[l] >> shift) & 0xF) * q8[j * 32 + l];
            sumi += sc * sub;
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const float d = bp_f16_to_f32(x[i].d) * y[i].d;
        const float dmin = bp_f16_to_f32(x[i].dmin) * y[i].d;
        sumf += d * (float)sumi - dmin * (float)summ;
    }
    *s = sumf;
}

void cpu_vec_dot_q6_K_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q6_K *x = va;
    const struct bp_block_q8_K *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        int sumi = 0;
        /* (q - 32) * q8 = q * q8 - 32 * q8: the second part is the block sum. */
        for (int h = 0; h < 2; h++) {
            int sub[8] = { 0 };
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
                const int q2 = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                const int q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                const int q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                sub[is + 0] += q1 * q8[l];
                sub[is + 2] += q2 * q8[l + 32];
                sub[is + 4] += q3 * q8[l + 64];
                sub[is + 6] += q4 * q8[l + 96];
            }
            for (int j = 0; j < 8; j++)
                sumi += x[i].scales[h * 8 + j] * (sub[j] - 32 * y[i].bsums[h * 8 + j]);
            ql += 64;
            qh += 32;
            q8 += 128;
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi;
    }
    *s = sumf;
}

/* Float weights meet an F32 activation (not one rounded to the weight's
 * type), accumulated in double: the reference the SIMD sums are held to. */
void cpu_vec_dot_f32_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const float *a = va, *b = vb;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)a[i] * (double)b[i];
    *s = (float)acc;
}

void cpu_vec_dot_f16_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const uint16_t *a = va;
    const float *b = vb;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)bp_f16_to_f32(a[i]) * (double)b[i];
    *s = (float)acc;
}

void cpu_vec_dot_bf16_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const uint16_t *a = va;
    const float *b = vb;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)bp_bf16_to_f32(a[i]) * (double)b[i];
    *s = (float)acc;
}

/* ---- the ABI 1.2 weight types ---- */

/* Q4_1 and Q5_1 meet ggml's Q8_1 activation (repack.h, cpu_type_q8_1):
 * the min term is m * s per block, summed apart from the quant products and
 * added at the end, as ggml-cpu does. */
void cpu_vec_dot_q4_1_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int64_t nb = n / BP_QK8_0;
    float sumf = 0, summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        int sumi = 0;
        for (int j = 0; j < BP_QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + BP_QK4_1 / 2];
        }
        sumf += bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d) * (float)sumi;
        summs += bp_f16_to_f32(x[i].m) * cpu_q8_1_s(vb, nb, i);
    }
    *s = sumf + summs;
}

void cpu_vec_dot_q5_0_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        const uint32_t qh = bp_q5_high_bits(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < BP_QK5_0 / 2; j++) {
            const int v0 = ((x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4)) - 16;
            const int v1 = ((x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += v0 * y[i].qs[j] + v1 * y[i].qs[j + BP_QK5_0 / 2];
        }
        sumf += bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d) * (float)sumi;
    }
    *s = sumf;
}

void cpu_vec_dot_q5_1_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int64_t nb = n / BP_QK8_0;
    float sumf = 0, summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint32_t qh = bp_q5_high_bits(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < BP_QK5_1 / 2; j++) {
            const int v0 = (x[i].qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4);
            const int v1 = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            sumi += v0 * y[i].qs[j] + v1 * y[i].qs[j + BP_QK5_1 / 2];
        }
        sumf += bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d) * (float)sumi;
        summs += bp_f16_to_f32(x[i].m) * cpu_q8_1_s(vb, nb, i);
    }
    *s = sumf + summs;
}

void cpu_vec_dot_iq4_nl_q8_0_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_nl *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int8_t *values = bp_iq4nl_values();
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < BP_QK4_NL / 2; j++)
            sumi += values[x[i].qs[j] & 0x0F] * y[i].qs[j] + values[x[i].qs[j] >> 4] * y[i].qs[j + BP_QK4_NL / 2];
        sumf += bp_f16_to_f32(x[i].d) * bp_f16_to_f32(y[i].d) * (float)sumi;
    }
    *s = sumf;
}

/* Q2_K: per sub-block of 16 the 4-bit scale times the sum of 2-bit quants
 * by activations; the min term from the activation's block sums. */
void cpu_vec_dot_q2_K_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q2_K *x = va;
    const struct bp_block_q8_K *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < 16; j++) summ += (x[i].scales[j] >> 4) * y[i].bsums[j];
        for (int h = 0; h < 2; h++) {
            const uint8_t *q2 = x[i].qs + 32 * h;
            for (int p = 0; p < 4; p++)
                for (int half = 0; half < 2; half++) {
                    const int sub = 8 * h + 2 * p + half;
                    int acc = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        acc += ((q2[l] >> (2 * p)) & 3) * q8[128 * h + 32 * p + l];
                    sumi += (x[i].scales[sub] & 0xF) * acc;
                }
        }
        const float d = bp_f16_to_f32(x[i].d) * y[i].d;
        const float dmin = bp_f16_to_f32(x[i].dmin) * y[i].d;
        sumf += d * (float)sumi - dmin * (float)summ;
    }
    *s = sumf;
}

/* Q3_K: the quants in -4..3 (two bits minus 4 where the high bit is
 * clear), times the signed 6-bit scale of their sub-block of 16. */
void cpu_vec_dot_q3_K_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q3_K *x = va;
    const struct bp_block_q8_K *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        int8_t sc[16];
        bp_q3_K_scales(x[i].scales, sc);
        const int8_t *q8 = y[i].qs;
        int sumi = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *q3 = x[i].qs + 32 * h;
            for (int p = 0; p < 4; p++)
                for (int half = 0; half < 2; half++) {
                    const int sub = 8 * h + 2 * p + half;
                    int acc = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int v = ((q3[l] >> (2 * p)) & 3) - (((x[i].hmask[l] >> (4 * h + p)) & 1) ? 0 : 4);
                        acc += v * q8[128 * h + 32 * p + l];
                    }
                    sumi += (sc[sub] - 32) * acc;
                }
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi;
    }
    *s = sumf;
}

/* Q5_K: Q4_K with a fifth bit per quant; the same scale/min packing and
 * the same min term from the block sums. */
void cpu_vec_dot_q5_K_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_K *x = va;
    const struct bp_block_q8_K *y = vb;
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < BP_QK_K / 32; j++) {
            uint8_t sc, m;
            bp_q4_K_scale_min(j, x[i].scales, &sc, &m);
            const uint8_t *ql = x[i].qs + 32 * (j / 2);
            const int shift = 4 * (j & 1);
            int sub = 0;
            for (int l = 0; l < 32; l++) {
                const int q = ((ql[l] >> shift) & 0xF) | (((x[i].qh[l] >> j) & 1) << 4);
                sub += q * q8[32 * j + l];
            }
            sumi += sc * sub;
            summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const float d = bp_f16_to_f32(x[i].d) * y[i].d;
        const float dmin = bp_f16_to_f32(x[i].dmin) * y[i].d;
        sumf += d * (float)sumi - dmin * (float)summ;
    }
    *s = sumf;
}

void cpu_vec_dot_iq4_xs_q8_K_ref(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_xs *x = va;
    const struct bp_block_q8_K *y = vb;
    const int8_t *values = bp_iq4nl_values();
    float sumf = 0;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0;
        for (int b = 0; b < BP_QK_K / 32; b++) {
            const uint8_t *qs = x[i].qs + 16 * b;
            int sub = 0;
            for (int j = 0; j < 16; j++)
                sub += values[qs[j] & 0xF] * q8[32 * b + j] + values[qs[j] >> 4] * q8[32 * b + j + 16];
            sumi += (bp_iq4_xs_scale(&x[i], b) - 32) * sub;
        }
        sumf += bp_f16_to_f32(x[i].d) * y[i].d * (float)sumi;
    }
    *s = sumf;
}
