/*
 * matmul.cu — MUL_MAT kernels: dst[n, m] = sum_k W[k, n] * X[k, m].
 *
 * Quantized W (Q4_0, Q8_0, Q4_K, Q6_K): X is first quantized to q8_1
 * blocks of 32 (scale + quant sum), then one warp per (row n, column m)
 * walks the row in units that cover whole weight blocks (32 elements for
 * Q4_0/Q8_0, 64 for Q4_K — both nibble halves of one 32-byte group — and
 * 128 for Q6_K), so every weight byte is loaded once per column and the
 * inner products are dp4a on 4 packed int8 pairs, as the CPU plugin does.
 * Float W and the fallback for anything else: one warp per output element
 * with float accumulation. Large M goes to cuBLAS (ops.c) when it loads.
 */
#include "common.cuh"
#include "dequant.cuh"

static __device__ __forceinline__ int ld_i32_2(const uint8_t *p) /* 2-byte aligned */
{
    const uint16_t *h = (const uint16_t *)p;
    return (int)((uint32_t)h[0] | ((uint32_t)h[1] << 16));
}

static __device__ __forceinline__ int ld_qs(const cuda_block_q8_1 *a, int i)
{
    return ((const int *)a->qs)[i];
}

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

/* ---- per-unit dot products ---- */

static __device__ float dot_q4_0(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 18;
    const cuda_block_q8_1 *a = xa + u;
    int sumi = 0;
    for (int j = 0; j < 4; j++) {
        const int v = ld_i32_2(blk + 2 + 4 * j);
        sumi = __dp4a(v & 0x0F0F0F0F, ld_qs(a, j), sumi);
        sumi = __dp4a((v >> 4) & 0x0F0F0F0F, ld_qs(a, j + 4), sumi);
    }
    return ld_half(blk) * a->d * (float)(sumi - 8 * a->s);
}

static __device__ float dot_q8_0(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 34;
    const cuda_block_q8_1 *a = xa + u;
    int sumi = 0;
    for (int j = 0; j < 8; j++) sumi = __dp4a(ld_i32_2(blk + 2 + 4 * j), ld_qs(a, j), sumi);
    return ld_half(blk) * a->d * (float)sumi;
}

/* Unit u: group g = u % 4 of super-block u / 4 (sub-blocks 2g and 2g+1). */
static __device__ float dot_q4_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 4;
    const int g = (int)(u % 4);
    const uint8_t *blk = row + sb * 144;
    const cuda_block_q8_1 *a0 = xa + sb * 8 + 2 * g, *a1 = a0 + 1;
    const uint8_t *qs = blk + 16 + 32 * g;
    int s0 = 0, s1 = 0;
    for (int j = 0; j < 8; j++) {
        const int v = ld_i32_2(qs + 4 * j);
        s0 = __dp4a(v & 0x0F0F0F0F, ld_qs(a0, j), s0);
        s1 = __dp4a((v >> 4) & 0x0F0F0F0F, ld_qs(a1, j), s1);
    }
    int sc0, m0, sc1, m1;
    q4k_scale_min(blk + 4, 2 * g, &sc0, &m0);
    q4k_scale_min(blk + 4, 2 * g + 1, &sc1, &m1);
    const float d = ld_half(blk), dmin = ld_half(blk + 2);
    return d * (a0->d * (float)(sc0 * s0) + a1->d * (float)(sc1 * s1)) -
           dmin * (a0->d * (float)(m0 * a0->s) + a1->d * (float)(m1 * a1->s));
}

/* Unit u: half h = u % 2 (128 elements) of super-block u / 2; ggml's
 * interleaving: element l + 32c of the half takes 4 bits from
 * ql[l + 32(c&1)] (low nibble for c < 2) and 2 bits from qh[l] >> 2c. */
static __device__ float dot_q6_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 2;
    const int h = (int)(u % 2);
    const uint8_t *blk = row + sb * 210;
    const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192 + 8 * h);
    float acc = 0.0f;
    for (int c = 0; c < 4; c++) {
        const cuda_block_q8_1 *a = xa + sb * 8 + 4 * h + c;
        const uint8_t *qlc = ql + 32 * (c & 1);
        int part[2] = { 0, 0 };
        for (int j = 0; j < 8; j++) {
            int packed = 0;
            for (int b = 0; b < 4; b++) {
                const int l = 4 * j + b;
                const int lo = c < 2 ? (qlc[l] & 0xF) : (qlc[l] >> 4);
                const int q = (lo | (((qh[l] >> (2 * c)) & 3) << 4)) - 32;
                packed |= (q & 0xFF) << (8 * b);
            }
            part[j / 4] = __dp4a(packed, ld_qs(a, j), part[j / 4]);
        }
        acc += a->d * (float)(sc[2 * c] * part[0] + sc[2 * c + 1] * part[1]);
    }
    return ld_half(blk + 208) * acc;
}

#define MMQ_WARPS 4

template <int TYPE>
__global__ void k_mul_mat_q(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq)
{
    const int64_t n = blockIdx.x * (int64_t)MMQ_WARPS + threadIdx.y;
    if (n >= d.ne[0]) return;
    const int64_t m = blockIdx.y, z = blockIdx.z;
    const int64_t i2 = z % d.ne[2], i3 = z / d.ne[2];
    const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
    const uint8_t *row = (const uint8_t *)at(w, 0, n, i2 / r2, i3 / r3);
    const int64_t K = w.ne[0];
    const cuda_block_q8_1 *xa = xq + (m + d.ne[1] * (i2 + d.ne[2] * i3)) * (K / 32);
    const int per = TYPE == T_Q4_K ? 64 : TYPE == T_Q6_K ? 128 : 32;
    float acc = 0.0f;
    for (int64_t u = threadIdx.x; u < K / per; u += 32) {
        if (TYPE == T_Q4_0) acc += dot_q4_0(row, u, xa);
        else if (TYPE == T_Q8_0) acc += dot_q8_0(row, u, xa);
        else if (TYPE == T_Q4_K) acc += dot_q4_k(row, u, xa);
        else acc += dot_q6_k(row, u, xa);
    }
    acc = warp_sum(acc);
    if (threadIdx.x == 0) *(float *)at(d, n, m, i2, i3) = acc;
}

/* ---- dequantization (fallback dot and the cuBLAS path): dequant.cuh ---- */

__global__ void k_mul_mat_generic(cuda_tview d, cuda_tview w, cuda_tview x)
{
    const int64_t n = blockIdx.x * (int64_t)MMQ_WARPS + threadIdx.y;
    if (n >= d.ne[0]) return;
    const int64_t m = blockIdx.y, z = blockIdx.z;
    const int64_t i2 = z % d.ne[2], i3 = z / d.ne[2];
    const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
    const uint8_t *wr = (const uint8_t *)at(w, 0, n, i2 / r2, i3 / r3);
    const char *xr = at(x, 0, m, i2, i3);
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
    return type == T_Q4_0 || type == T_Q8_0 || type == T_Q4_K || type == T_Q6_K;
}

extern "C" int cuda_launch_quantize_q8_1(cuda_tview x, cuda_block_q8_1 *out, cudaStream_t s)
{
    const int64_t nblk = nelem(x) / 32;
    if (nblk == 0) return 0;
    k_quantize_q8_1<<<(unsigned)((nblk + 7) / 8), 256, 0, s>>>(x, out, nblk);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_mul_mat_q(cuda_tview d, cuda_tview w, const cuda_block_q8_1 *xq, cudaStream_t s)
{
    dim3 grid((unsigned)((d.ne[0] + MMQ_WARPS - 1) / MMQ_WARPS), (unsigned)d.ne[1],
              (unsigned)(d.ne[2] * d.ne[3]));
    dim3 block(32, MMQ_WARPS);
    switch (w.type) {
    case T_Q4_0: k_mul_mat_q<T_Q4_0><<<grid, block, 0, s>>>(d, w, xq); break;
    case T_Q8_0: k_mul_mat_q<T_Q8_0><<<grid, block, 0, s>>>(d, w, xq); break;
    case T_Q4_K: k_mul_mat_q<T_Q4_K><<<grid, block, 0, s>>>(d, w, xq); break;
    case T_Q6_K: k_mul_mat_q<T_Q6_K><<<grid, block, 0, s>>>(d, w, xq); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_mul_mat_generic(cuda_tview d, cuda_tview w, cuda_tview x, cudaStream_t s)
{
    dim3 grid((unsigned)((d.ne[0] + MMQ_WARPS - 1) / MMQ_WARPS), (unsigned)d.ne[1],
              (unsigned)(d.ne[2] * d.ne[3]));
    dim3 block(32, MMQ_WARPS);
    k_mul_mat_generic<<<grid, block, 0, s>>>(d, w, x);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_dequant_f16(cuda_tview w, int64_t i2, int64_t i3, void *out, cudaStream_t s)
{
    const int64_t n = w.ne[0] * w.ne[1];
    k_dequant_f16<<<grid_for(n, 256), 256, 0, s>>>(w, i2, i3, (__half *)out, n);
    return (int)cudaGetLastError();
}
