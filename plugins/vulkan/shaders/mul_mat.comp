#version 450
// MUL_MAT, tiled (prefill): a workgroup of 64 computes a BN (rows of W) x
// BM (columns of X) tile of one (i2, i3) slice. Per step of BK elements of
// K it dequantises the W tile into shared memory once (dequant.glsl; each
// invocation one row's BK elements, so a block's scales are read once per
// step) and stages the X tile, both k-major; then invocation t accumulates
// rows t % 8 + 8 i (i < 8) against columns 4 (t / 8) + j (j < 4) from
// registers: 32 multiply-adds per 12 shared reads. On a CPU
// device (lavapipe) eight consecutive invocations are one SIMD vector, so
// their W reads are consecutive words and their X reads one broadcast.
// Rows past N and columns past M are loaded clamped and not stored; K
// past its end loads zeros. W in slot 0, X in slot 1.
layout(local_size_x = 64) in;
#include "common.glsl"
#include "dequant.glsl"

#define BN VK_MM_BN
#define BM VK_MM_BM
#define BK 32u
shared float ws[BK][BN];
shared float xs[BK][BM];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint N = tne(OUT, 0u), M = tne(OUT, 1u), K = tne(0u, 0u);
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint z = gl_WorkGroupID.z, i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint xb = tnb(1u, 0u), xt = ttype(1u), nb0 = tnb(0u, 0u), bs = wbs();
    // Loads: invocation t brings k0 .. k0 + 31 of W row n0 + t, and
    // k0 + 16 (t % 2) .. + 15 of X column m0 + t / 2.
    uint lr = t >> 1, lk = (t & 1u) * 16u;
    uint wr = at(0u, 0u, min(n0 + t, N - 1u), i2 / r2, i3 / r3);
    uint xr = at(1u, 0u, min(m0 + lr, M - 1u), i2, i3);
    uint tr = t & 7u, tc = (t >> 3) * 4u;
    // Row tr + 8 i in ci, columns tc .. tc + 3 in its four lanes.
    vec4 c0 = vec4(0.0), c1 = vec4(0.0), c2 = vec4(0.0), c3 = vec4(0.0);
    vec4 c4 = vec4(0.0), c5 = vec4(0.0), c6 = vec4(0.0), c7 = vec4(0.0);
    for (uint k0 = 0u; k0 < K; k0 += BK) {
        uint kk = k0 + lk;
        if (bs == 1u) {
            for (uint i = 0u; i < BK; i++)
                ws[i][t] = k0 + i < K ? ld(0u, wr + (k0 + i) * nb0, WTYPE) : 0.0;
        } else {
            // BK divides every block size: the step lies in one block.
            uint blk = wr + (k0 / bs) * nb0, j0 = k0 % bs;
            for (uint i = 0u; i < BK; i++) ws[i][t] = wblk(blk, j0 + i);
        }
        if (xt == T_F32) {
            for (uint i = 0u; i < 16u; i++)
                xs[lk + i][lr] = kk + i < K ? uintBitsToFloat(rd(1u, (xr + (kk + i) * xb) >> 2)) : 0.0;
        } else {
            for (uint i = 0u; i < 16u; i++)
                xs[lk + i][lr] = kk + i < K ? ld(1u, xr + (kk + i) * xb, xt) : 0.0;
        }
        barrier();
        for (uint k = 0u; k < BK; k++) {
            vec4 x = vec4(xs[k][tc], xs[k][tc + 1u], xs[k][tc + 2u], xs[k][tc + 3u]);
            c0 += ws[k][tr] * x;
            c1 += ws[k][tr + 8u] * x;
            c2 += ws[k][tr + 16u] * x;
            c3 += ws[k][tr + 24u] * x;
            c4 += ws[k][tr + 32u] * x;
            c5 += ws[k][tr + 40u] * x;
            c6 += ws[k][tr + 48u] * x;
            c7 += ws[k][tr + 56u] * x;
        }
        barrier();
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint m = m0 + tc + j;
        if (m >= M) continue;
        if (n0 + tr < N) st(at(OUT, n0 + tr, m, i2, i3), T_F32, c0[j]);
        if (n0 + tr + 8u < N) st(at(OUT, n0 + tr + 8u, m, i2, i3), T_F32, c1[j]);
        if (n0 + tr + 16u < N) st(at(OUT, n0 + tr + 16u, m, i2, i3), T_F32, c2[j]);
        if (n0 + tr + 24u < N) st(at(OUT, n0 + tr + 24u, m, i2, i3), T_F32, c3[j]);
        if (n0 + tr + 32u < N) st(at(OUT, n0 + tr + 32u, m, i2, i3), T_F32, c4[j]);
        if (n0 + tr + 40u < N) st(at(OUT, n0 + tr + 40u, m, i2, i3), T_F32, c5[j]);
        if (n0 + tr + 48u < N) st(at(OUT, n0 + tr + 48u, m, i2, i3), T_F32, c6[j]);
        if (n0 + tr + 56u < N) st(at(OUT, n0 + tr + 56u, m, i2, i3), T_F32, c7[j]);
    }
}
