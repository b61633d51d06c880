#version 450
// ADD, MUL and DIV (aux0 = VK_BINARY_*): b (slot 1) repeats over a (slot 0).
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    float x = ld(0u, at(0u, c.x, c.y, c.z, c.w), ttype(0u));
    float y = ld(1u, at_rep(1u, c), ttype(1u));
    precise float r;
    uint mode = aux(0u);
    if (mode == VK_BINARY_ADD) r = x + y;
    else if (mode == VK_BINARY_MUL) r = x * y;
    else r = x / y;
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), r);
}
