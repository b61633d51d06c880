/* common.cuh — element loads/stores and indexing shared by the kernels. */
#ifndef BP_CUDA_COMMON_CUH
#define BP_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels.h"

/* Same numbering as enum bp_type (abi/backplane/bp_types.h, frozen). */
#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_I32 3
#define T_Q4_0 4
#define T_Q8_0 5
#define T_Q4_K 6
#define T_Q6_K 7
#define T_Q4_1 9
#define T_Q5_0 10
#define T_Q5_1 11
#define T_Q2_K 12
#define T_Q3_K 13
#define T_Q5_K 14
#define T_IQ4_NL 15
#define T_IQ4_XS 16

static __device__ __forceinline__ float ld_f(const char *p, int type)
{
    switch (type) {
    case T_F32: return *(const float *)p;
    case T_F16: return __half2float(*(const __half *)p);
    case T_BF16: return __uint_as_float((uint32_t)(*(const uint16_t *)p) << 16);
    default: return 0.0f;
    }
}

static __device__ __forceinline__ void st_f(char *p, int type, float v)
{
    switch (type) {
    case T_F32: *(float *)p = v; break;
    case T_F16: *(__half *)p = __float2half_rn(v); break;
    case T_BF16: *(__nv_bfloat16 *)p = __float2bfloat16_rn(v); break;
    default: break;
    }
}

static __device__ __forceinline__ int elem_size(int type)
{
    return type == T_F16 || type == T_BF16 ? 2 : 4;
}

static __device__ __forceinline__ char *at(const cuda_tview &t, int64_t i0, int64_t i1, int64_t i2,
                                           int64_t i3)
{
    return (char *)t.data + (size_t)i0 * t.nb[0] + (size_t)i1 * t.nb[1] + (size_t)i2 * t.nb[2] +
           (size_t)i3 * t.nb[3];
}

static __device__ __forceinline__ void unflatten(const cuda_tview &t, int64_t f, int64_t *i)
{
    i[0] = f % t.ne[0]; f /= t.ne[0];
    i[1] = f % t.ne[1]; f /= t.ne[1];
    i[2] = f % t.ne[2];
    i[3] = f / t.ne[2];
}

static inline int64_t nelem(const cuda_tview &t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }
static inline int64_t nrows(const cuda_tview &t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Grid size for a grid-stride loop over n items. */
static inline unsigned grid_for(int64_t n, int block)
{
    int64_t g = (n + block - 1) / block;
    if (g > 65535 * 8) g = 65535 * 8;
    return (unsigned)(g < 1 ? 1 : g);
}

#endif
