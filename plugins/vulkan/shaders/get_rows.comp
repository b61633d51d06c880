#version 450
// One output element per invocation (any table type, dequantised): row ids (I32) in slot 1. Ids were
// checked on the host when they are leaves; any other bad id writes zero
// rather than reading out of bounds.
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);
    int id = ld_i32(1u, at(1u, c.y, c.z, c.w, 0u));
    float v = 0.0;
    if (id >= 0 && uint(id) < tne(0u, 1u))
        v = wval(at(0u, 0u, uint(id), c.z, c.w), c.x);
    st(at(OUT, c.x, c.y, c.z, c.w), ttype(OUT), v);
}
