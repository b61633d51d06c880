/*
 * norm.cu — RMS_NORM, SOFT_MAX, SUM_ROWS, TOP_K and ROPE. One thread block per row for the
 * reductions (float accumulation, block-wide tree sums); ROPE is one
 * thread per rotated pair or copied element.
 */
#include <math.h>

#include "common.cuh"

#define ROW_BLOCK 256

static __device__ float block_sum(float v, float *sh)
{
    v = warp_sum(v);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0.0f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

static __device__ float block_max(float v, float *sh)
{
    v = warp_max(v);
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : -INFINITY;
    if (w == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

__global__ void k_rms_norm(cuda_tview d, cuda_tview x, float eps)
{
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
    const char *xr = at(x, 0, i1, i2, i3);
    char *dr = at(d, 0, i1, i2, i3);
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d.ne[0]; i += blockDim.x) {
        float v = ld_f(xr + i * x.nb[0], x.type);
        ss += v * v;
    }
    ss = block_sum(ss, sh);
    const float inv = rsqrtf(ss / (float)d.ne[0] + eps);
    for (int64_t i = threadIdx.x; i < d.ne[0]; i += blockDim.x)
        st_f(dr + i * d.nb[0], d.type, ld_f(xr + i * x.nb[0], x.type) * inv);
}

__global__ void k_sum_rows(cuda_tview d, cuda_tview x)
{
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
    const char *xr = at(x, 0, i1, i2, i3);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < x.ne[0]; i += blockDim.x) s += ld_f(xr + i * x.nb[0], x.type);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) *(float *)at(d, 0, i1, i2, i3) = s;
}

/* TOP_K's order: a before b when larger, equal values by ascending index,
 * NaN after every number (a strict total order, so ranks are distinct). */
static __device__ bool top_k_before(float a, int64_t ia, float b, int64_t ib)
{
    const bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na == nb ? ia < ib : nb;
    return a > b || (a == b && ia < ib);
}

/* One block per row: each element counts the elements ranked before it;
 * those ranked below k write their index at their rank. */
__global__ void k_top_k(cuda_tview d, cuda_tview x)
{
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
    const char *xr = at(x, 0, i1, i2, i3);
    const int64_t n = x.ne[0], k = d.ne[0];
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float xi = *(const float *)(xr + i * x.nb[0]);
        int64_t rank = 0;
        for (int64_t j = 0; j < n && rank < k; j++)
            rank += top_k_before(*(const float *)(xr + j * x.nb[0]), j, xi, i);
        if (rank < k) *(int32_t *)at(d, rank, i1, i2, i3) = (int32_t)i;
    }
}

__global__ void k_soft_max(cuda_tview d, cuda_tview x, cuda_tview m, float scale)
{
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
    const char *xr = at(x, 0, i1, i2, i3);
    const char *mr = m.data ? at(m, 0, i1, i2 % m.ne[2], i3 % m.ne[3]) : NULL;
    char *dr = at(d, 0, i1, i2, i3);
    const int64_t n = d.ne[0];
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = ld_f(xr + i * x.nb[0], x.type) * scale + (mr ? ld_f(mr + i * m.nb[0], m.type) : 0.0f);
        mx = fmaxf(mx, v);
    }
    mx = block_max(mx, sh);
    if (mx == -INFINITY) { /* every entry masked: zeros, as the reference */
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) st_f(dr + i * d.nb[0], d.type, 0.0f);
        return;
    }
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = ld_f(xr + i * x.nb[0], x.type) * scale + (mr ? ld_f(mr + i * m.nb[0], m.type) : 0.0f);
        sum += expf(v - mx);
    }
    sum = block_sum(sum, sh);
    const float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = ld_f(xr + i * x.nb[0], x.type) * scale + (mr ? ld_f(mr + i * m.nb[0], m.type) : 0.0f);
        st_f(dr + i * d.nb[0], d.type, expf(v - mx) * inv);
    }
}

/* Items per row: n_dims/2 rotated pairs plus ne0 - n_dims copied elements. */
/* Pair j turns by theta = (pos freq_scale) fe, fe = base^(-2j/n_dims) /
 * factor_j, or under YaRN by theta (1 - ramp_j) + pos fe ramp_j; cos and
 * sin carry the magnitude (bp_ops.h). In double, as the cpu reference; with
 * no factors, YaRN or magnitude the arithmetic is ROPE's. */
__global__ void k_rope(cuda_tview d, cuda_tview x, cuda_tview pos, cuda_tview ff, int n_dims, int neox,
                       float base, float freq_scale, cuda_rope_ext ext, int64_t per_row, int64_t n)
{
    const int64_t half = n_dims / 2;
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = f % per_row, r = f / per_row;
        const int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
        const char *xr = at(x, 0, i1, i2, i3);
        char *dr = at(d, 0, i1, i2, i3);
        if (j >= half) {
            const int64_t i0 = n_dims + (j - half);
            st_f(dr + i0 * d.nb[0], d.type, ld_f(xr + i0 * x.nb[0], x.type));
            continue;
        }
        const double p = (double)*(const int *)at(pos, i2, 0, 0, 0);
        double fe = pow((double)base, -2.0 * (double)j / (double)n_dims);
        if (ff.data) fe /= (double)*(const float *)at(ff, j, 0, 0, 0);
        double theta = p * (double)freq_scale * fe;
        if (ext.ext_factor != 0.0f) {
            const double y = ((double)j - ext.corr_lo) / fmax(0.001, (double)ext.corr_hi - ext.corr_lo);
            const double ramp = (1.0 - fmin(1.0, fmax(0.0, y))) * ext.ext_factor;
            theta = theta * (1.0 - ramp) + p * fe * ramp;
        }
        double sn, cs;
        sincos(theta, &sn, &cs);
        sn *= ext.mscale;
        cs *= ext.mscale;
        const int64_t a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        const float x0 = ld_f(xr + a * x.nb[0], x.type), x1 = ld_f(xr + b * x.nb[0], x.type);
        st_f(dr + a * d.nb[0], d.type, (float)(x0 * cs - x1 * sn));
        st_f(dr + b * d.nb[0], d.type, (float)(x0 * sn + x1 * cs));
    }
}

extern "C" int cuda_launch_rms_norm(cuda_tview d, cuda_tview x, float eps, cudaStream_t s)
{
    k_rms_norm<<<(unsigned)nrows(d), ROW_BLOCK, 0, s>>>(d, x, eps);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_sum_rows(cuda_tview d, cuda_tview x, cudaStream_t s)
{
    k_sum_rows<<<(unsigned)nrows(d), ROW_BLOCK, 0, s>>>(d, x);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_top_k(cuda_tview d, cuda_tview x, cudaStream_t s)
{
    k_top_k<<<(unsigned)nrows(d), 128, 0, s>>>(d, x);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_soft_max(cuda_tview d, cuda_tview x, cuda_tview m, float scale, cudaStream_t s)
{
    k_soft_max<<<(unsigned)nrows(d), ROW_BLOCK, 0, s>>>(d, x, m, scale);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_rope(cuda_tview d, cuda_tview x, cuda_tview pos, cuda_tview ff, int n_dims,
                                int neox, float base, float freq_scale, cuda_rope_ext ext, cudaStream_t s)
{
    const int64_t per_row = n_dims / 2 + (d.ne[0] - n_dims);
    const int64_t n = per_row * nrows(d);
    if (n == 0) return 0;
    k_rope<<<grid_for(n, 256), 256, 0, s>>>(d, x, pos, ff, n_dims, neox, base, freq_scale, ext, per_row, n);
    return (int)cudaGetLastError();
}
