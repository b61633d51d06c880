#version 450
// ADD, MUL and DIV (aux0 = VK_BINARY_*): b (slot 1) repeats over a (slot 0).
// VK_BINARY_ADD_SLOTS is a chain of ADDs in one dispatch (fusion.c): the
// aux1 slots of slot 0's dimension 1 summed in order (a mixture of
// experts' weighted outputs), each partial sum rounded as its ADD rounds
// it; the output is slot 0's shape without dimension 1.
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    uint mode = aux(0u);
    if (mode == VK_BINARY_ADD_SLOTS) {
        precise float r = ld(0u, at(0u, c.x, 0u, c.y, c.z), T_F32);
        for (uint j = 1u; j < aux(1u); j++) r = r + ld(0u, at(0u, c.x, j, c.y, c.z), T_F32);
        st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), r);
        return;
    }
    float x = ld(0u, at(0u, c.x, c.y, c.z, c.w), ttype(0u));
    float y = ld(1u, at_rep(1u, c), ttype(1u));
    precise float r;
    if (mode == VK_BINARY_ADD) r = x + y;
    else if (mode == VK_BINARY_MUL) r = x * y;
    else r = x / y;
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), r);
}
