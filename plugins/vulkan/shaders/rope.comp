#version 450
// One output element per invocation; pos (I32) in slot 1.
// op params: n_dims, mode, freq_base, freq_scale.
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    uint n_dims = uint(pi(0u));
    bool neox = pi(1u) == 2;
    uint xr = at(0u, 0u, c.y, c.z, c.w), nb = tnb(0u, 0u), ty = ttype(0u);
    uint o = at(OUT, c.x, c.y, c.z, c.w);
    if (c.x >= n_dims) {
        st(o, ttype(OUT), ld(0u, xr + c.x * nb, ty));
        return;
    }
    uint half_d = n_dims / 2u;
    uint p, a, b;
    if (neox) { p = c.x < half_d ? c.x : c.x - half_d; a = p; b = p + half_d; }
    else { p = c.x / 2u; a = 2u * p; b = a + 1u; }
    float pos = float(ld_i32(1u, at(1u, c.z, 0u, 0u, 0u))) * pf(3u);
    float theta = pos * pow(pf(2u), -2.0 * float(p) / float(n_dims));
    float cs = cos(theta), sn = sin(theta);
    float x0 = ld(0u, xr + a * nb, ty), x1 = ld(0u, xr + b * nb, ty);
    st(o, ttype(OUT), c.x == a ? x0 * cs - x1 * sn : x0 * sn + x1 * cs);
}
