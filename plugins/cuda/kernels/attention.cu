/*
 * attention.cu — FLASH_ATTN_EXT and FLASH_ATTN_SOFTCAP (softcap > 0: each
 * score capped, c tanh(score / c), before the mask): one warp per (head, query, batch) output
 * row with an online softmax over the keys (running maximum and sum), so
 * any n_kv fits without scratch. Lanes split the head dimension; each lane
 * keeps Dv/32 accumulators (Dv <= CUDA_FA_MAX_DV). A row whose every key
 * is masked gets zeros, as SOFT_MAX does.
 */
#include <math.h>

#include "common.cuh"

#define FA_MAX_DV 512
#define FA_WARPS 4

__global__ void k_flash_attn(cuda_tview o, cuda_tview q, cuda_tview k, cuda_tview v, cuda_tview m,
                             float scale, float softcap, int64_t rows)
{
    const int64_t r = blockIdx.x * (int64_t)FA_WARPS + threadIdx.y;
    if (r >= rows) return;
    const int lane = threadIdx.x;
    const int64_t h = r % o.ne[1], iq = (r / o.ne[1]) % o.ne[2], b = r / (o.ne[1] * o.ne[2]);
    const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1];
    const int64_t kh = h / (q.ne[2] / k.ne[2]);
    const char *qr = at(q, 0, iq, h, b);
    const char *mr = m.data ? at(m, 0, iq, h % m.ne[2], b % m.ne[3]) : NULL;
    float acc[FA_MAX_DV / 32];
    for (int i = 0; i < FA_MAX_DV / 32; i++) acc[i] = 0.0f;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < n_kv; j++) {
        const char *kr = at(k, 0, j, kh, b);
        float s = 0.0f;
        for (int64_t d = lane; d < D; d += 32) s += ld_f(qr + d * q.nb[0], q.type) * ld_f(kr + d * k.nb[0], k.type);
        s = warp_sum(s) * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        if (mr) s += ld_f(mr + j * m.nb[0], m.type);
        if (s == -INFINITY) continue;
        const float nmx = fmaxf(mx, s);
        const float corr = expf(mx - nmx), w = expf(s - nmx);
        sum = sum * corr + w;
        const char *vr = at(v, 0, j, kh, b);
        for (int i = 0; i < FA_MAX_DV / 32; i++) {
            const int64_t d = lane + 32 * i;
            if (d < Dv) acc[i] = acc[i] * corr + w * ld_f(vr + d * v.nb[0], v.type);
        }
        mx = nmx;
    }
    char *orow = at(o, 0, h, iq, b);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int i = 0; i < FA_MAX_DV / 32; i++) {
        const int64_t d = lane + 32 * i;
        if (d < Dv) *(float *)(orow + d * o.nb[0]) = acc[i] * inv;
    }
}

extern "C" int cuda_launch_flash_attn(cuda_tview o, cuda_tview q, cuda_tview k, cuda_tview v,
                                      cuda_tview m, float scale, float softcap, cudaStream_t s)
{
    const int64_t rows = nrows(o);
    if (v.ne[0] > FA_MAX_DV) return (int)cudaErrorInvalidValue;
    dim3 block(32, FA_WARPS);
    k_flash_attn<<<(unsigned)((rows + FA_WARPS - 1) / FA_WARPS), block, 0, s>>>(o, q, k, v, m, scale, softcap, rows);
    return (int)cudaGetLastError();
}
