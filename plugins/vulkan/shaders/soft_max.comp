#version 450
// One workgroup per row of x * scale + mask (aux0 = 1 when slot 1 holds a
// mask). A row masked everywhere gives zeros, as the CPU reference does.
layout(local_size_x = 64) in;
#include "common.glsl"
shared float red[64];

float logit(uint xs, uint ms, uint i, bool has_mask)
{
    float v = ld(0u, xs + i * tnb(0u, 0u), ttype(0u)) * pf(0u);
    if (has_mask) v += ld(1u, ms + i * tnb(1u, 0u), ttype(1u));
    return v;
}

void main()
{
    uint row = gid_group(), t = gl_LocalInvocationID.x;
    uint n = tne(0u, 0u);
    if (row >= tne(0u, 1u) * tne(0u, 2u) * tne(0u, 3u)) return;
    uvec4 c = unflat(0u, row * n);
    bool hm = aux(0u) == 1u;
    uint xs = at(0u, 0u, c.y, c.z, c.w), ds = at(OUT, 0u, c.y, c.z, c.w);
    uint ms = hm ? at(1u, 0u, c.y, c.z % tne(1u, 2u), c.w % tne(1u, 3u)) : 0u;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float mx = NEG_INF;
    for (uint i = t; i < n; i += 64u) mx = max(mx, logit(xs, ms, i, hm));
    red[t] = mx;
    barrier();
    [[unroll]] for (uint w = 32u; w > 0u; w >>= 1) {
        if (t < w) red[t] = max(red[t], red[t + w]);
        barrier();
    }
    mx = red[0];
    barrier();
    if (mx == NEG_INF) {
        for (uint i = t; i < n; i += 64u) st(ds + i * tnb(OUT, 0u), ttype(OUT), 0.0);
        return;
    }
    float sum = 0.0;
    for (uint i = t; i < n; i += 64u) sum += exp(logit(xs, ms, i, hm) - mx);
    red[t] = sum;
    barrier();
    [[unroll]] for (uint w = 32u; w > 0u; w >>= 1) {
        if (t < w) red[t] += red[t + w];
        barrier();
    }
    float inv = 1.0 / red[0];
    for (uint i = t; i < n; i += 64u)
        st(ds + i * tnb(OUT, 0u), ttype(OUT), exp(logit(xs, ms, i, hm) - mx) * inv);
}
