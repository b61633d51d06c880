#version 450
// One element per invocation: aux0 is the VK_EW_* mode (vk_params.h).
// aux1 = 1 when source and output shapes differ (CPY): the source element is
// the one at the same row-major position.
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    uvec4 s = aux(1u) == 1u ? unflat(0u, i) : c;
    uint mode = aux(0u), src = at(0u, s.x, s.y, s.z, s.w);
    if (mode == VK_EW_COPY && ttype(0u) == ttype(OUT)) {
        st_bits(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), ld_bits(0u, src, ttype(0u)));
        return;
    }
    float v = ld(0u, src, ttype(0u));
    if (mode == VK_EW_SCALE) {
        v = v * pf(0u) + pf(1u);
    } else if (mode == VK_EW_SILU) {
        v = v / (1.0 + exp(-v));
    } else if (mode == VK_EW_SQR) {
        v = v * v;
    } else if (mode == VK_EW_TANH) {
        v = tanh(clamp(v, -15.0, 15.0)); // +-1 in float past 15, and no inf/inf inside tanh
    } else if (mode == VK_EW_GELU) {
        float u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
        v = 0.5 * v * (1.0 + tanh(u));
    }
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), v);
}
