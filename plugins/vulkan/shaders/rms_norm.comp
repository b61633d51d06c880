#version 450
// One workgroup per row: sum of squares reduced in shared memory; with aux0
// VK_ROWS_SUM (SUM_ROWS) the plain sum, written as the row's one element.
// VK_ROWS_RMS_NORM_MUL is RMS_NORM -> MUL in one dispatch (fusion.c): the
// normalised row goes to the RMS_NORM node's own output (slot VK_PB_FUSED)
// and, times the weight (slot 1, repeated over the row's shape), to the
// MUL's output; each is rounded as the two ops alone round it.
// VK_ROWS_ADD_RMS_NORM_MUL puts an ADD in front: the row is slot 0 + slot 3,
// written to the ADD node's output (slot VK_PB_FUSED) and read back from
// there by the invocation that wrote each element (so an ADD in place over
// slot 0 is safe); the normalised row itself is not stored (fusion.c fuses
// only where nothing else reads it).
layout(local_size_x = 64) in;
#include "common.glsl"
shared float red[64];

void main()
{
    uint row = gid_group(), t = gl_LocalInvocationID.x;
    uint n = tne(0u, 0u);
    if (row >= tne(0u, 1u) * tne(0u, 2u) * tne(0u, 3u)) return;
    uvec4 c = unflat(0u, row * n);
    uint xs = at(0u, 0u, c.y, c.z, c.w), ds = at(OUT, 0u, c.y, c.z, c.w);
    uint ty = ttype(0u), nb = tnb(0u, 0u), ob = tnb(OUT, 0u);
    bool sum = aux(0u) == VK_ROWS_SUM, add = aux(0u) == VK_ROWS_ADD_RMS_NORM_MUL;
    uint fs = at(VK_PB_FUSED, 0u, c.y, c.z, c.w), fb = tnb(VK_PB_FUSED, 0u);
    uint ys = at(3u, 0u, c.y, c.z, c.w), yb = tnb(3u, 0u);
    float ss = 0.0;
    for (uint i = t; i < n; i += 64u) {
        float v = ld(0u, xs + i * nb, ty);
        if (add) {
            precise float a = v + ld(3u, ys + i * yb, T_F32);
            st_fused(fs + i * fb, a);
            v = a;
        }
        ss += sum ? v : v * v;
    }
    red[t] = ss;
    barrier();
    [[unroll]] for (uint w = 32u; w > 0u; w >>= 1) {
        if (t < w) red[t] += red[t + w];
        barrier();
    }
    if (sum) {
        if (t == 0u) st(ds, ttype(OUT), red[0]);
        return;
    }
    float inv = inversesqrt(red[0] / float(n) + pf(0u));
    if (aux(0u) == VK_ROWS_RMS_NORM_MUL || add) {
        uint ws = at_rep(1u, uvec4(0u, c.yzw)), wn = tne(1u, 0u), wb = tnb(1u, 0u), wt = ttype(1u);
        for (uint i = t; i < n; i += 64u) {
            float x = add ? uintBitsToFloat(b2.d[(fs + i * fb) >> 2]) : ld(0u, xs + i * nb, ty);
            precise float v = x * inv;
            if (!add) st_fused(fs + i * fb, v);
            precise float r = v * ld(1u, ws + (i % wn) * wb, wt);
            st(ds + i * ob, ttype(OUT), r);
        }
        return;
    }
    for (uint i = t; i < n; i += 64u)
        st(ds + i * ob, ttype(OUT), ld(0u, xs + i * nb, ty) * inv);
}
