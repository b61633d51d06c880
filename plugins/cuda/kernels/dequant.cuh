/*
 * dequant.cuh — reading one element of a quantized row (bp_quant.h
 * layouts, identical to ggml's): MUL_MAT's cuBLAS path and GET_ROWS on
 * quantized tables. A row is a run of whole blocks.
 *
 * Every value is the one bp_quant_ref.h's dequantizer writes, to the bit:
 * the same operations in the same order. Each product of an f16 scale, a
 * sub-block scale and a quant needs at most 24 significant bits, so it is
 * exact and an FMA would round d * q - m as the reference does; mul_rn,
 * add_rn and sub_rn still keep nvcc from fusing, so that the equality does
 * not rest on that count. dq_quant is __host__ __device__ so that
 * tests/test_cuda_quant.c compares it with the reference without a GPU
 * (through tools/quant_host.cu).
 */
#ifndef BP_CUDA_DEQUANT_CUH
#define BP_CUDA_DEQUANT_CUH

#include "common.cuh"

#define BP_HD static __host__ __device__ __forceinline__

BP_HD float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

BP_HD float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

BP_HD float sub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

BP_HD float ld_half(const uint8_t *p)
{
    return __half2float(*(const __half *)p);
}

BP_HD int ld_u16(const uint8_t *p)
{
    return *(const uint16_t *)p;
}

/* Q4_K's and Q5_K's 6-bit scale and min of sub-block j (0..7). */
BP_HD void q4k_scale_min(const uint8_t *sc, int j, int *s, int *m)
{
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

/* Q3_K's 6-bit scale of sub-block i (0..15), still offset by 32: its low
 * nibble in scales[i % 8] (nibble i / 8), its top 2 bits in scales[8 + i % 4]
 * (bits 2 * (i / 4)). */
BP_HD int q3k_scale(const uint8_t *sc, int i)
{
    return ((sc[i % 8] >> (4 * (i / 8))) & 0xF) | (((sc[8 + i % 4] >> (2 * (i / 4))) & 3) << 4);
}

/* IQ4_NL's 16 levels (bp_iq4nl_values) as int8 bytes in 4 little-endian
 * words, level i in byte i % 4 of word i / 4: held in registers rather than a
 * table in memory, and in the form __byte_perm takes (dot_q8_1.cuh). */
#define IQ4NL_W0 0xBFAD9881u /* -127 -104  -83  -65 */
#define IQ4NL_W1 0xF6EADDCFu /*  -49  -35  -22  -10 */
#define IQ4NL_W2 0x26190D01u /*    1   13   25   38 */
#define IQ4NL_W3 0x71594535u /*   53   69   89  113 */

BP_HD int iq4nl_value(int i)
{
    const uint32_t w = i < 8 ? (i < 4 ? IQ4NL_W0 : IQ4NL_W1) : (i < 12 ? IQ4NL_W2 : IQ4NL_W3);
    return (int8_t)(uint8_t)(w >> (8 * (i % 4)));
}

/* Nibble j (0..31) of a block of 32 packed as Q4_0: j < 16 in the low
 * nibble of qs[j], j >= 16 in the high nibble of qs[j - 16]. */
BP_HD int nib32(const uint8_t *qs, int j)
{
    return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}

/* Element k of a quantized row; 0 for a type that is not quantized. */
BP_HD float dq_quant(const uint8_t *row, int type, int64_t k)
{
    switch (type) {
    case T_Q4_0: {
        const uint8_t *b = row + (k / 32) * 18;
        return mul_rn((float)(nib32(b + 2, (int)(k % 32)) - 8), ld_half(b));
    }
    case T_Q8_0: {
        const uint8_t *b = row + (k / 32) * 34;
        return mul_rn((float)(int8_t)b[2 + k % 32], ld_half(b));
    }
    case T_Q4_1: {
        const uint8_t *b = row + (k / 32) * 20;
        return add_rn(mul_rn((float)nib32(b + 4, (int)(k % 32)), ld_half(b)), ld_half(b + 2));
    }
    case T_Q5_0:
    case T_Q5_1: {
        const bool one = type == T_Q5_1;
        const uint8_t *b = row + (k / 32) * (one ? 24 : 22), *qh = b + (one ? 4 : 2);
        const int j = (int)(k % 32);
        const int q = nib32(qh + 4, j) | (((qh[j / 8] >> (j % 8)) & 1) << 4);
        if (!one) return mul_rn((float)(q - 16), ld_half(b));
        return add_rn(mul_rn((float)q, ld_half(b)), ld_half(b + 2));
    }
    case T_IQ4_NL: {
        const uint8_t *b = row + (k / 32) * 18;
        return mul_rn(ld_half(b), (float)iq4nl_value(nib32(b + 2, (int)(k % 32))));
    }
    case T_Q2_K: {
        /* Element 128h + 32p + l: bits 2p of qs[32h + l], sub-block 8h + 2p + l / 16. */
        const uint8_t *b = row + (k / 256) * 84;
        const int e = (int)(k % 256), h = e / 128, p = (e % 128) / 32, l = e % 32;
        const int sc = b[8 * h + 2 * p + l / 16], q = (b[16 + 32 * h + l] >> (2 * p)) & 3;
        const float dl = mul_rn(ld_half(b + 80), (float)(sc & 0xF));
        const float ml = mul_rn(ld_half(b + 82), (float)(sc >> 4));
        return sub_rn(mul_rn(dl, (float)q), ml);
    }
    case T_Q3_K: {
        /* Q2_K's placement of the two low bits; the third, bit 4h + p of
         * hmask[l], clear means 4 less. */
        const uint8_t *b = row + (k / 256) * 110;
        const int e = (int)(k % 256), h = e / 128, p = (e % 128) / 32, l = e % 32;
        const int lo = (b[32 + 32 * h + l] >> (2 * p)) & 3;
        const int q = lo - (((b[l] >> (4 * h + p)) & 1) ? 0 : 4);
        const float dl = mul_rn(ld_half(b + 108), (float)(q3k_scale(b + 96, 8 * h + 2 * p + l / 16) - 32));
        return mul_rn(dl, (float)q);
    }
    case T_Q4_K: {
        const uint8_t *b = row + (k / 256) * 144;
        const int e = (int)(k % 256), sub = e / 32, g = sub / 2, l = e % 32;
        int s, m;
        q4k_scale_min(b + 4, sub, &s, &m);
        const uint8_t byte = b[16 + 32 * g + l];
        const int q = (sub & 1) ? (byte >> 4) : (byte & 0xF);
        return sub_rn(mul_rn(mul_rn(ld_half(b), (float)s), (float)q), mul_rn(ld_half(b + 2), (float)m));
    }
    case T_Q5_K: {
        /* Chunk c = e / 64: 32 bytes of qs, low nibbles then high, fifth bits
         * 2c and 2c + 1 of qh[l]. */
        const uint8_t *b = row + (k / 256) * 176;
        const int e = (int)(k % 256), sub = e / 32, c = sub / 2, l = e % 32;
        int s, m;
        q4k_scale_min(b + 4, sub, &s, &m);
        const uint8_t byte = b[48 + 32 * c + l];
        const int q = ((sub & 1) ? (byte >> 4) : (byte & 0xF)) | (((b[16 + l] >> sub) & 1) << 4);
        return sub_rn(mul_rn(mul_rn(ld_half(b), (float)s), (float)q), mul_rn(ld_half(b + 2), (float)m));
    }
    case T_Q6_K: {
        const uint8_t *b = row + (k / 256) * 210;
        const int e = (int)(k % 256), h = e / 128, c = (e % 128) / 32, l = e % 32;
        const uint8_t *ql = b + 64 * h + 32 * (c & 1), *qh = b + 128 + 32 * h;
        const int lo = c < 2 ? (ql[l] & 0xF) : (ql[l] >> 4);
        const int q = (lo | (((qh[l] >> (2 * c)) & 3) << 4)) - 32;
        const int8_t sc = (int8_t)b[192 + 8 * h + 2 * c + l / 16];
        return mul_rn(mul_rn(ld_half(b + 208), (float)sc), (float)q);
    }
    case T_IQ4_XS: {
        /* Sub-block s = e / 32: indices qs[16s ..] as IQ4_NL's, 6-bit scale
         * from nibble s % 2 of scales_l[s / 2] and bits 2s of scales_h. */
        const uint8_t *b = row + (k / 256) * 136;
        const int e = (int)(k % 256), s = e / 32;
        const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 0xF) | (((ld_u16(b + 2) >> (2 * s)) & 3) << 4);
        const float dl = mul_rn(ld_half(b), (float)(ls - 32));
        return mul_rn(dl, (float)iq4nl_value(nib32(b + 8 + 16 * s, e % 32)));
    }
    default:
        return 0.0f;
    }
}

/* Element k of a row of any type MUL_MAT and GET_ROWS take. */
static __device__ __forceinline__ float dq(const uint8_t *row, int type, int64_t k)
{
    if (type == T_F32 || type == T_F16 || type == T_BF16)
        return ld_f((const char *)row + k * elem_size(type), type);
    return dq_quant(row, type, k);
}

#endif
