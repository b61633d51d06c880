#version 450
// TOP_K: one workgroup per row. Each element's rank is the number of
// elements ordered before it: larger values first, equal values by
// ascending index, NaN after every number (so that a row with a NaN still
// gets distinct ranks). The elements ranked below k write their index.
layout(local_size_x = 64) in;
#include "common.glsl"

bool before(float a, uint ia, float b, uint ib)
{
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na == nb ? ia < ib : nb;
    return a > b || (a == b && ia < ib);
}

void main()
{
    uint row = gid_group(), t = gl_LocalInvocationID.x;
    uint n = tne(0u, 0u), k = tne(OUT, 0u);
    if (row >= tne(0u, 1u) * tne(0u, 2u) * tne(0u, 3u)) return;
    uvec4 c = unflat(0u, row * n);
    uint xs = at(0u, 0u, c.y, c.z, c.w), ds = at(OUT, 0u, c.y, c.z, c.w);
    uint nb = tnb(0u, 0u), ob = tnb(OUT, 0u);
    for (uint i = t; i < n; i += 64u) {
        float xi = uintBitsToFloat(rd(0u, (xs + i * nb) >> 2));
        uint rank = 0u;
        for (uint j = 0u; j < n && rank < k; j++)
            if (before(uintBitsToFloat(rd(0u, (xs + j * nb) >> 2)), j, xi, i)) rank++;
        if (rank < k) st_bits(ds + rank * ob, T_I32, i);
    }
}
