/*
 * elementwise.cu — ADD/MUL/DIV (b repeats over a), SCALE, SILU, GELU, SQR, TANH, CLAMP, the
 * element-order copy behind CPY/CONT, GET_ROWS (float or quantized
 * tables), SET_ROWS, and the packed helpers of the all-reduce. Grid-stride
 * loops over destination elements; sources are read through their byte
 * strides.
 */
#include "common.cuh"
#include "dequant.cuh"

__global__ void k_binary(cuda_tview d, cuda_tview a, cuda_tview b, int op, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unflatten(d, f, i);
        float x = ld_f(at(a, i[0], i[1], i[2], i[3]), a.type);
        float y = ld_f(at(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]), b.type);
        const float r = op == CUDA_BINARY_ADD ? x + y : op == CUDA_BINARY_MUL ? x * y : __fdiv_rn(x, y);
        st_f(at(d, i[0], i[1], i[2], i[3]), d.type, r);
    }
}

__global__ void k_unary(cuda_tview d, cuda_tview x, int kind, float s, float bias, int64_t n)
{
    const float gelu_c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unflatten(d, f, i);
        float v = ld_f(at(x, i[0], i[1], i[2], i[3]), x.type), y;
        if (kind == CUDA_UNARY_SCALE) y = v * s + bias;
        else if (kind == CUDA_UNARY_SILU) y = v / (1.0f + expf(-v));
        else if (kind == CUDA_UNARY_SQR) y = v * v;
        else if (kind == CUDA_UNARY_TANH) y = tanhf(v);
        else if (kind == CUDA_UNARY_CLAMP) y = v < s ? s : (v > bias ? bias : v); /* NaN stays */
        else if (v <= -10.0f) y = 0.0f;
        else if (v >= 10.0f) y = v;
        else { /* as ggml-cpu's table: input and result rounded to f16 */
            const float h = __half2float(__float2half_rn(v));
            y = __half2float(__float2half_rn(0.5f * h * (1.0f + tanhf(gelu_c * h * (1.0f + 0.044715f * h * h)))));
        }
        st_f(at(d, i[0], i[1], i[2], i[3]), d.type, y);
    }
}

__global__ void k_dup(cuda_tview d, cuda_tview s, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4], j[4];
        unflatten(d, f, i);
        unflatten(s, f, j);
        const char *sp = at(s, j[0], j[1], j[2], j[3]);
        char *dp = at(d, i[0], i[1], i[2], i[3]);
        if (d.type == s.type) {
            if (elem_size(d.type) == 4) *(uint32_t *)dp = *(const uint32_t *)sp;
            else *(uint16_t *)dp = *(const uint16_t *)sp;
        } else {
            st_f(dp, d.type, ld_f(sp, s.type));
        }
    }
}

static __device__ void report_bad_id(int *err, int node, int id, int64_t pos)
{
    if (atomicCAS(&err[0], 0, node + 1) == 0) {
        err[1] = id;
        err[2] = (int)pos;
    }
}

/* dst [K, n, d2, d3] F32; one thread per element. Quantized tables are
 * rows of whole blocks (ops.c checks), read element by element. */
__global__ void k_get_rows(cuda_tview d, cuda_tview tab, cuda_tview ids, int *err, int node, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        int64_t i[4];
        unflatten(d, f, i);
        const int id = *(const int *)at(ids, i[1], i[2], i[3], 0);
        if (id < 0 || id >= tab.ne[1]) {
            if (i[0] == 0) report_bad_id(err, node, id, i[1] + ids.ne[0] * (i[2] + ids.ne[1] * i[3]));
            continue;
        }
        const float v = tab.type == T_F32 || tab.type == T_F16 || tab.type == T_BF16
                            ? ld_f(at(tab, i[0], id, i[2], i[3]), tab.type)
                            : dq((const uint8_t *)at(tab, 0, id, i[2], i[3]), tab.type, i[0]);
        st_f(at(d, i[0], i[1], i[2], i[3]), d.type, v);
    }
}

/* One thread per (i0, i2, i3) walks every id in order, so with repeated ids
 * the last write wins, exactly as the sequential reference. */
__global__ void k_set_rows(cuda_tview d, cuda_tview v, cuda_tview ids, int *err, int node, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i0 = f % d.ne[0], r = f / d.ne[0];
        const int64_t i2 = r % d.ne[2], i3 = r / d.ne[2];
        for (int64_t i = 0; i < v.ne[1]; i++) {
            const int id = *(const int *)at(ids, i, i2 % ids.ne[1], i3 % ids.ne[2], 0);
            if (id < 0 || id >= d.ne[1]) {
                if (i0 == 0) report_bad_id(err, node, id, i + ids.ne[0] * (i2 % ids.ne[1] + ids.ne[1] * (i3 % ids.ne[2])));
                continue;
            }
            st_f(at(d, i0, id, i2, i3), d.type, ld_f(at(v, i0, i, i2, i3), v.type));
        }
    }
}

__global__ void k_add_inplace(char *d, const char *s, int type, int64_t n)
{
    const int es = elem_size(type);
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x)
        st_f(d + f * es, type, ld_f(d + f * es, type) + ld_f(s + f * es, type));
}

__global__ void k_f32_to_bf16(const float *s, __nv_bfloat16 *d, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x)
        d[f] = __float2bfloat16_rn(s[f]);
}

__global__ void k_bf16_to_f32(const __nv_bfloat16 *s, float *d, int64_t n)
{
    for (int64_t f = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; f < n;
         f += (int64_t)gridDim.x * blockDim.x)
        d[f] = __bfloat162float(s[f]);
}

#define BLOCK 256

extern "C" int cuda_launch_binary(cuda_tview d, cuda_tview a, cuda_tview b, int op, cudaStream_t s)
{
    int64_t n = nelem(d);
    k_binary<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(d, a, b, op, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_unary(cuda_tview d, cuda_tview x, int kind, float sc, float bias, cudaStream_t s)
{
    int64_t n = nelem(d);
    k_unary<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(d, x, kind, sc, bias, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_dup(cuda_tview d, cuda_tview src, cudaStream_t s)
{
    int64_t n = nelem(d);
    k_dup<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(d, src, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_get_rows(cuda_tview d, cuda_tview tab, cuda_tview ids, int *err, int node,
                                    cudaStream_t s)
{
    int64_t n = nelem(d);
    k_get_rows<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(d, tab, ids, err, node, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_set_rows(cuda_tview d, cuda_tview v, cuda_tview ids, int *err, int node,
                                    cudaStream_t s)
{
    int64_t n = d.ne[0] * d.ne[2] * d.ne[3];
    k_set_rows<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(d, v, ids, err, node, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_add_inplace(void *d, const void *src, int type, int64_t n, cudaStream_t s)
{
    k_add_inplace<<<grid_for(n, BLOCK), BLOCK, 0, s>>>((char *)d, (const char *)src, type, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_f32_to_bf16(const float *src, uint16_t *d, int64_t n, cudaStream_t s)
{
    k_f32_to_bf16<<<grid_for(n, BLOCK), BLOCK, 0, s>>>(src, (__nv_bfloat16 *)d, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_launch_bf16_to_f32(const uint16_t *src, float *d, int64_t n, cudaStream_t s)
{
    k_bf16_to_f32<<<grid_for(n, BLOCK), BLOCK, 0, s>>>((const __nv_bfloat16 *)src, d, n);
    return (int)cudaGetLastError();
}
