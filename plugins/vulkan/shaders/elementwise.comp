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
    } else if (mode == VK_EW_CLAMP) {
        // Comparisons, not clamp(): NaN compares false and stays NaN.
        float lo = pf(0u), hi = pf(1u);
        v = v < lo ? lo : (v > hi ? hi : v);
    } else if (mode == VK_EW_TANH) {
        v = tanh(clamp(v, -15.0, 15.0)); // +-1 in float past 15, and no inf/inf inside tanh
    } else if (mode == VK_EW_GELU) {
        // As ggml-cpu computes it (and so llama.cpp's CPU logits for Gemma):
        // the input rounded to f16, the tanh GELU of that in f32, rounded to
        // f16 (ggml's table); 0 below -10 and the input itself above 10.
        if (v <= -10.0) {
            v = 0.0;
        } else if (v < 10.0) {
            float h = unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
            float u = clamp(0.7978845608028654 * h * (1.0 + 0.044715 * h * h), -15.0, 15.0);
            v = unpackHalf2x16(packHalf2x16(vec2(0.5 * h * (1.0 + tanh(u)), 0.0))).x;
        }
    }
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), v);
}
