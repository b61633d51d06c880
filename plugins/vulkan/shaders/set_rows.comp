#version 450
// One invocation per (i0, i2, i3) walks the value rows in order, so with
// repeated ids the last write wins as in the sequential reference.
// slot 1 values (F32), slot 2 ids (I32), output = the destination view.
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    uint n0 = tne(1u, 0u), n2 = tne(1u, 2u), n3 = tne(1u, 3u);
    if (i >= n0 * n2 * n3) return;
    uint i0 = i % n0, i2 = (i / n0) % n2, i3 = i / (n0 * n2);
    for (uint r = 0u; r < tne(1u, 1u); r++) {
        int id = ld_i32(2u, at(2u, r, i2 % tne(2u, 1u), i3 % tne(2u, 2u), 0u));
        if (id < 0 || uint(id) >= tne(OUT, 1u)) continue;
        st(at(OUT, i0, uint(id), i2, i3), ttype(OUT), ld(1u, at(1u, i0, r, i2, i3), ttype(1u)));
    }
}
