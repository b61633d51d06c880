#version 450
// MUL_MAT, one workgroup per output element: the invocations split K and
// reduce in shared memory. The path for M = 1 (matrix-vector), where a
// tile would leave most of it idle. W in slot 0, X in slot 1.
// Built again with BP_MMID as mul_mat_vec_id, MUL_MAT_ID: output element
// (n, u, t) reads row n of expert ids[u, t] (slot 2) and X row (u % X1, t).
layout(local_size_x = 64) in;
#include "common.glsl"
#include "dequant.glsl"
shared float red[64];

void main()
{
    uint o = gid_group(), t = gl_LocalInvocationID.x;
    if (o >= nel(OUT)) return;
    uvec4 c = unflat(OUT, o);
#ifdef BP_MMID
    // The expert is the same for the whole workgroup: an id out of range
    // (checked on the host when the ids are an input) writes zero.
    int e = ld_i32(2u, at(2u, c.y, c.z, 0u, 0u));
    if (e < 0 || uint(e) >= tne(0u, 2u)) {
        if (t == 0u) st(at(OUT, c.x, c.y, c.z, 0u), T_F32, 0.0);
        return;
    }
    uint wr = at(0u, 0u, c.x, uint(e), 0u);
    uint xr = at(1u, 0u, c.y % tne(1u, 1u), c.z, 0u);
#else
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint wr = at(0u, 0u, c.x, c.z / r2, c.w / r3);
    uint xr = at(1u, 0u, c.y, c.z, c.w);
#endif
    uint xb = tnb(1u, 0u), xt = ttype(1u);
    uint K = tne(0u, 0u);
    float acc = 0.0;
    for (uint k = t; k < K; k += 64u) acc += wval(wr, k) * ld(1u, xr + k * xb, xt);
    red[t] = acc;
    barrier();
    [[unroll]] for (uint w = 32u; w > 0u; w >>= 1) {
        if (t < w) red[t] += red[t + w];
        barrier();
    }
    if (t == 0u) st(at(OUT, c.x, c.y, c.z, c.w), T_F32, red[0]);
}
