#version 450
// One element per invocation: aux0 = 0 copy (CPY, CONT), 1 SCALE, 2 SILU,
// 3 GELU. aux1 = 1 when source and output shapes differ (CPY): the source
// element is the one at the same row-major position.
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    uvec4 s = aux(1u) == 1u ? unflat(0u, i) : c;
    uint mode = aux(0u), src = at(0u, s.x, s.y, s.z, s.w);
    if (mode == 0u && ttype(0u) == ttype(OUT)) {
        st_bits(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), ld_bits(0u, src, ttype(0u)));
        return;
    }
    float v = ld(0u, src, ttype(0u));
    if (mode == 1u) {
        v = v * pf(0u) + pf(1u);
    } else if (mode == 2u) {
        v = v / (1.0 + exp(-v));
    } else if (mode == 3u) {
        float u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
        v = 0.5 * v * (1.0 + tanh(u));
    }
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), v);
}
