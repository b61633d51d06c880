#version 450
// MUL_MAT, tiled: a 16x16 workgroup computes a 16 (N) x 16 (M) tile of one
// (i2, i3) slice, staging 16-wide K chunks of W (dequantised once per tile)
// and X in shared memory. W in slot 0, X in slot 1.
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "dequant.glsl"
shared float ws[16][17];
shared float xs[16][17];

void main()
{
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint N = tne(OUT, 0u), M = tne(OUT, 1u), K = tne(0u, 0u);
    uint n0 = gl_WorkGroupID.x * 16u, m0 = gl_WorkGroupID.y * 16u;
    uint z = gl_WorkGroupID.z, i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint xb = tnb(1u, 0u), xt = ttype(1u);
    // Loads: invocation (tx, ty) brings element k0+tx of W row n0+ty and of X row m0+ty.
    uint wn = min(n0 + ty, N - 1u), xm = min(m0 + ty, M - 1u);
    uint wr = at(0u, 0u, wn, i2 / r2, i3 / r3), xr = at(1u, 0u, xm, i2, i3);
    float acc = 0.0;
    for (uint k0 = 0u; k0 < K; k0 += 16u) {
        uint k = k0 + tx;
        ws[ty][tx] = k < K ? wval(wr, k) : 0.0;
        xs[ty][tx] = k < K ? ld(1u, xr + k * xb, xt) : 0.0;
        barrier();
        // Output (n0+tx, m0+ty).
        [[unroll]] for (uint j = 0u; j < 16u; j++) acc += ws[tx][j] * xs[ty][j];
        barrier();
    }
    if (n0 + tx < N && m0 + ty < M) st(at(OUT, n0 + tx, m0 + ty, i2, i3), T_F32, acc);
}
