/*
 * matmul.cu — MUL_MAT kernels: dst[n, m] = sum_k W[k, n] * X[k, m].
 *
 * Quantized W (every type dot_q8_1.cuh takes: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): X is first quantized to
 * q8_1 blocks of 32 (scale + quant sum), then one warp per (row n, column m)
 * walks the row in units that cover whole weight blocks (dot_unit_elems), so
 * every weight byte is loaded once per column and the inner products are
 * dp4a on 4 packed int8 pairs, as the CPU plugin does. Float W: one warp per
 * output element with float accumulation. Large M goes to cuBLAS (ops.c)
 * when it loads, quantized W dequantized to F16 first (dequant.cuh).
 *
 * MUL_MAT_ID runs the same kernels with the routing in a cuda_mmid: the
 * grid's y and z are the slot and the token, each warp reads the expert of
 * its (slot, token) from the ids, so only the chosen experts' rows are read.
 */
#include <string.h>

#include "common.cuh"
#include "dequant.cuh"
#include "dot_q8_1.cuh"

/* ---- quantize X ---- */

__global__ void k_quantize_q8_1(cuda_tview x, cuda_block_q8_1 *out, int64_t nblk)
{
    const int64_t b = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk) return;
    const int lane = threadIdx.x % 32;
    const int64_t bpr = x.ne[0] / 32, r = b / bpr, kb = b % bpr;
    const int64_t m = r % x.ne[1], i2 = (r / x.ne[1]) % x.ne[2], i3 = r / (x.ne[1] * x.ne[2]);
    const float v = ld_f(at(x, kb * 32 + lane, m, i2, i3), x.type);
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : __float2int_rn(v / d);
    int s = q;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    out[b].qs[lane] = (int8_t)q;
    if (lane == 0) { out[b].d = d; out[b].s = s; }
}

#define MMQ_WARPS 4

/* MUL_MAT_ID: the expert of slot u of token t, or -1 (reported once) when
 * the id is out of range. */
static __device__ int expert_of(const cuda_mmid &id, int64_t u, int64_t t, int64_t n_expert)
{
    const int e = *(const int *)at(id.ids, u, t, 0, 0);
    if (e >= 0 && e < n_expert) return e;
    if (threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 &&
        atomicCAS(&id.err[0], 0, id.node + 1) == 0) {
        id.err[1] = e;
        id.err[2] = (int)(u + id.ids.ne[0] * t);
    }
    return -1;
}

/* MUL_MAT (id.ids.data == NULL) or MUL_MAT_ID; x1 is X's ne[1] for the
 * latter (the rows of xq are (x1, t)). */
template <int TYPE>
__global__ void k_mul_mat_q(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq, cuda_mmid id,
                            int64_t x1)
{
    const int64_t n = blockIdx.x * (int64_t)MMQ_WARPS + threadIdx.y;
    const int64_t m = blockIdx.y, z = blockIdx.z;
    const int64_t K = w.ne[0];
    const uint8_t *row;
    const cuda_block_q8_1 *xa;
    if (id.ids.data) {
        const int e = expert_of(id, m, z, w.ne[2]);
        if (e < 0 || n >= d.ne[0]) return;
        row = (const uint8_t *)at(w, 0, n, e, 0);
        xa = xq + (m % x1 + x1 * z) * (K / 32);
    } else {
        if (n >= d.ne[0]) return;
        const int64_t i2 = z % d.ne[2], i3 = z / d.ne[2];
        const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
        row = (const uint8_t *)at(w, 0, n, i2 / r2, i3 / r3);
        xa = xq + (m + d.ne[1] * (i2 + d.ne[2] * i3)) * (K / 32);
    }
    const int per = dot_unit_elems(TYPE);
    float acc = 0.0f;
    for (int64_t u = threadIdx.x; u < K / per; u += 32) acc += dot_unit(TYPE, row, u, xa);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) *(float *)at(d, n, m, z % d.ne[2], z / d.ne[2]) = acc;
}

/* ---- dequantization (fallback dot and the cuBLAS path): dequant.cuh ---- */

__global__ void k_mul_mat_generic(cuda_tview d, cuda_tview w, cuda_tview x, cuda_mmid id)
{
    const int64_t n = blockIdx.x * (int64_t)MMQ_WARPS + threadIdx.y;
    const int64_t m = blockIdx.y, z = blockIdx.z;
    const int64_t i2 = z % d.ne[2], i3 = z / d.ne[2];
    const uint8_t *wr;
    const char *xr;
    if (id.ids.data) {
        const int e = expert_of(id, m, z, w.ne[2]);
        if (e < 0 || n >= d.ne[0]) return;
        wr = (const uint8_t *)at(w, 0, n, e, 0);
        xr = at(x, 0, m % x.ne[1], z, 0);
    } else {
        if (n >= d.ne[0]) return;
        const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
        wr = (const uint8_t *)at(w, 0, n, i2 / r2, i3 / r3);
        xr = at(x, 0, m, i2, i3);
    }
    const bool plain = w.type == T_F32 || w.type == T_F16 || w.type == T_BF16;
    float acc = 0.0f;
    for (int64_t k = threadIdx.x; k < w.ne[0]; k += 32) {
        const float wv = plain ? ld_f((const char *)wr + k * w.nb[0], w.type) : dq(wr, w.type, k);
        acc += wv * ld_f(xr + k * x.nb[0], x.type);
    }
    acc = warp_sum(acc);
    if (threadIdx.x == 0) *(float *)at(d, n, m, i2, i3) = acc;
}

__global__ void k_dequant_f16(cuda_tview w, int64_t i2, int64_t i3, __half *out, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = f % w.ne[0], r = f / w.ne[0];
        out[f] = __float2half_rn(dq((const uint8_t *)at(w, 0, r, i2, i3), w.type, k));
    }
}

/* ---- launchers ---- */

extern "C" int cuda_mul_mat_q_type(int type)
{
    return dot_unit_elems(type) > 0;
}

extern "C" int cuda_launch_quantize_q8_1(cuda_tview x, cuda_block_q8_1 *out, cudaStream_t s)
{
    const int64_t nblk = nelem(x) / 32;
    if (nblk == 0) return 0;
    k_quantize_q8_1<<<(unsigned)((nblk + 7) / 8), 256, 0, s>>>(x, out, nblk);
    return (int)cudaGetLastError();
}

static int launch_mmq(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq, cuda_mmid id,
                      int64_t x1, cudaStream_t s)
{
    dim3 grid((unsigned)((d.ne[0] + MMQ_WARPS - 1) / MMQ_WARPS), (unsigned)d.ne[1],
              (unsigned)(d.ne[2] * d.ne[3]));
    dim3 block(32, MMQ_WARPS);
    switch (w.type) {
    case T_Q4_0: k_mul_mat_q<T_Q4_0><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q4_1: k_mul_mat_q<T_Q4_1><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q5_0: k_mul_mat_q<T_Q5_0><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q5_1: k_mul_mat_q<T_Q5_1><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q8_0: k_mul_mat_q<T_Q8_0><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_IQ4_NL: k_mul_mat_q<T_IQ4_NL><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_IQ4_XS: k_mul_mat_q<T_IQ4_XS><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q2_K: k_mul_mat_q<T_Q2_K><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q3_K: k_mul_mat_q<T_Q3_K><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q4_K: k_mul_mat_q<T_Q4_K><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q5_K: k_mul_mat_q<T_Q5_K><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    case T_Q6_K: k_mul_mat_q<T_Q6_K><<<grid, block, 0, s>>>(d, w, xq, id, x1); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_mul_mat_q(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq, cudaStream_t s)
{
    cuda_mmid none;
    memset(&none, 0, sizeof none);
    return launch_mmq(d, w, xq, none, 1, s);
}

extern "C" int cuda_launch_mul_mat_id_q(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq,
                                        int64_t x1, cuda_mmid id, cudaStream_t s)
{
    return launch_mmq(d, w, xq, id, x1, s);
}

extern "C" int cuda_launch_mul_mat_generic(cuda_tview d, cuda_tview w, cuda_tview x, cuda_mmid id,
                                           cudaStream_t s)
{
    dim3 grid((unsigned)((d.ne[0] + MMQ_WARPS - 1) / MMQ_WARPS), (unsigned)d.ne[1],
              (unsigned)(d.ne[2] * d.ne[3]));
    dim3 block(32, MMQ_WARPS);
    k_mul_mat_generic<<<grid, block, 0, s>>>(d, w, x, id);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_dequant_f16(cuda_tview w, int64_t i2, int64_t i3, void *out, cudaStream_t s)
{
    const int64_t n = w.ne[0] * w.ne[1];
    k_dequant_f16<<<grid_for(n, 256), 256, 0, s>>>(w, i2, i3, (__half *)out, n);
    return (int)cudaGetLastError();
}
