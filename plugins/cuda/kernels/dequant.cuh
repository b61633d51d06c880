/*
 * dequant.cuh — reading one element of a quantized row (bp_quant.h
 * layouts, identical to ggml's): MUL_MAT's fallback dot and its cuBLAS
 * path, and GET_ROWS on quantized tables. A row is a run of whole blocks.
 */
#ifndef BP_CUDA_DEQUANT_CUH
#define BP_CUDA_DEQUANT_CUH

#include "common.cuh"

static __device__ __forceinline__ float ld_half(const uint8_t *p)
{
    return __half2float(*(const __half *)p);
}

static __device__ void q4k_scale_min(const uint8_t *sc, int j, int *s, int *m)
{
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

static __device__ float dq(const uint8_t *row, int type, int64_t k)
{
    switch (type) {
    case T_Q4_0: {
        const uint8_t *b = row + (k / 32) * 18;
        const int j = (int)(k % 32);
        const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
        return ld_half(b) * (float)(q - 8);
    }
    case T_Q8_0: {
        const uint8_t *b = row + (k / 32) * 34;
        return ld_half(b) * (float)(int8_t)b[2 + k % 32];
    }
    case T_Q4_K: {
        const uint8_t *b = row + (k / 256) * 144;
        const int e = (int)(k % 256), sub = e / 32, g = sub / 2, l = e % 32;
        int s, m;
        q4k_scale_min(b + 4, sub, &s, &m);
        const uint8_t byte = b[16 + 32 * g + l];
        const int q = (sub & 1) ? (byte >> 4) : (byte & 0xF);
        return ld_half(b) * (float)s * (float)q - ld_half(b + 2) * (float)m;
    }
    case T_Q6_K: {
        const uint8_t *b = row + (k / 256) * 210;
        const int e = (int)(k % 256), h = e / 128, c = (e % 128) / 32, l = e % 32;
        const uint8_t *ql = b + 64 * h + 32 * (c & 1), *qh = b + 128 + 32 * h;
        const int lo = c < 2 ? (ql[l] & 0xF) : (ql[l] >> 4);
        const int q = (lo | (((qh[l] >> (2 * c)) & 3) << 4)) - 32;
        const int8_t sc = (int8_t)b[192 + 8 * h + 2 * c + l / 16];
        return ld_half(b + 208) * (float)sc * (float)q;
    }
    default:
        return ld_f((const char *)row + k * elem_size(type), type);
    }
}

#endif
