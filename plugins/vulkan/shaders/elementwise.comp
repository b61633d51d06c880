#version 450
// One element per invocation: aux0 is the VK_EW_* mode (vk_params.h).
// aux1 = 1 when source and output shapes differ (CPY): the source element is
// the one at the same row-major position.
//
// Built with BP_SILU_MUL (the silu_mul shader) it is SILU -> MUL in one
// dispatch (fusion.c) and nothing else, so that no other mode's branch runs
// (lavapipe runs every side of a branch it cannot fold): silu(slot 0) goes
// to the SILU node's own output (slot VK_PB_FUSED) and, times slot 1
// repeated over the output's shape, to the MUL's output, each rounded as
// the two ops alone round it. With aux2 = s > 0 (the output's bytes are the
// source's shifted by s elements) invocation r computes elements r, r + s,
// ... in the order in which each overwrites only a source element that the
// same invocation has already read: upwards when the output starts below
// the source, downwards (aux3 = 1) when above.
#include "vk_params.h"
layout(local_size_x = VK_EW_LOCAL) in;
#include "common.glsl"

#ifdef BP_SILU_MUL
void element(uint i)
{
    uvec4 c = unflat(OUT, i);
    float v = silu(ld(0u, at(0u, c.x, c.y, c.z, c.w), ttype(0u)));
    st_fused(at(VK_PB_FUSED, c.x, c.y, c.z, c.w), v);
    precise float r = v * ld(1u, at_rep(1u, c), ttype(1u));
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), r);
}

void main()
{
    uint i = gidx(), n = nel(OUT), s = aux(2u);
    if (s == 0u) {
        if (i < n) element(i);
        return;
    }
    if (i >= s || i >= n) return;
    uint len = (n - i + s - 1u) / s;
    bool down = aux(3u) == 1u;
    for (uint k = 0u; k < len; k++)
        element(i + s * (down ? len - 1u - k : k));
}
#else
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
        v = silu(v);
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
#endif
