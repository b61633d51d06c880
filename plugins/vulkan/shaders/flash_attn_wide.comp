#version 450
// FLASH_ATTN_EXT and FLASH_ATTN_SOFTCAP, one output element (d, h, iq, b)
// per invocation with an online softmax over the keys. q slot 0, k slot 1,
// v slot 2, mask slot 3 (aux0 = 1 when present). aux1 = VK_ATTN_SOFTCAP:
// each score becomes c tanh(score / c), c = op param 1, before the mask.
// Output [Dv, H, n_q, B]. Every invocation forms all the scores of its
// row, so this path is for head sizes flash_attn.comp does not hold (above
// VK_FA_MAX_D).
layout(local_size_x = 64) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    if (i >= nel(OUT)) return;
    uvec4 c = unflat(OUT, i);          // (d, h, iq, b)
    uint d = c.x, h = c.y, iq = c.z, b = c.w;
    uint D = tne(0u, 0u), nkv = tne(1u, 1u);
    uint kh = h / (tne(0u, 2u) / tne(1u, 2u));
    bool hm = aux(0u) == 1u;
    float scale = pf(0u);
    bool capped = aux(1u) == VK_ATTN_SOFTCAP;
    float cap = capped ? pf(1u) : 1.0;
    uint qr = at(0u, 0u, iq, h, b);
    uint mr = hm ? at(3u, 0u, iq, h % tne(3u, 2u), b % tne(3u, 3u)) : 0u;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float mx = NEG_INF, sum = 0.0, acc = 0.0;
    for (uint j = 0u; j < nkv; j++) {
        uint kr = at(1u, 0u, j, kh, b);
        float s = 0.0;
        for (uint e = 0u; e < D; e++)
            s += ld(0u, qr + e * tnb(0u, 0u), ttype(0u)) * ld(1u, kr + e * tnb(1u, 0u), ttype(1u));
        s *= scale;
        if (capped) s = cap * tanh(clamp(s / cap, -15.0, 15.0)); // tanh is +-1 in float past 15
        if (hm) s += ld(3u, mr + j * tnb(3u, 0u), ttype(3u));
        if (s == NEG_INF) continue;
        float nm = max(mx, s);
        float corr = exp(mx - nm), w = exp(s - nm);
        sum = sum * corr + w;
        acc = acc * corr + w * ld(2u, at(2u, d, j, kh, b), ttype(2u));
        mx = nm;
    }
    st(at(OUT, d, h, iq, b), T_F32, sum > 0.0 ? acc / sum : 0.0);
}
