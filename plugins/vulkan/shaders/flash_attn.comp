#version 450
// FLASH_ATTN_EXT and FLASH_ATTN_SOFTCAP for head sizes up to VK_FA_MAX_D:
// one workgroup per query row (h, iq, b). The keys go in blocks of WG:
// invocation t forms the score of key j0 + t against the query (staged in
// shared memory), the block's largest score rescales the running sums
// (online softmax), and invocation t accumulates output elements t, t + WG,
// ... over the block's values. So each score is formed once, not once per
// output element. q slot 0, k slot 1, v slot 2, mask slot 3 (aux0 = 1 when
// present); aux1 = VK_ATTN_SOFTCAP: each score becomes c tanh(score / c),
// c = op param 1, before the mask. Output [Dv, H, n_q, B]. Keys whose
// score is -inf (masked) add nothing, as in the reference.
layout(local_size_x = 64) in;
#include "common.glsl"

#define WG 64u
shared float qs[VK_FA_MAX_D];
shared float ps[WG];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint H = tne(OUT, 1u), NQ = tne(OUT, 2u), g = gid_group();
    if (g >= H * NQ * tne(OUT, 3u)) return; // the whole workgroup
    uint h = g % H, iq = (g / H) % NQ, b = g / (H * NQ);
    uint D = tne(0u, 0u), DV = tne(2u, 0u), nkv = tne(1u, 1u);
    uint kh = h / (tne(0u, 2u) / tne(1u, 2u));
    bool hm = aux(0u) == 1u;
    float scale = pf(0u);
    bool capped = aux(1u) == VK_ATTN_SOFTCAP;
    float cap = capped ? pf(1u) : 1.0;
    uint kb0 = tnb(1u, 0u), kt = ttype(1u), vb0 = tnb(2u, 0u), vt = ttype(2u);
    uint mr = hm ? at(3u, 0u, iq, h % tne(3u, 2u), b % tne(3u, 3u)) : 0u;
    uint qr = at(0u, 0u, iq, h, b);
    for (uint e = t; e < D; e += WG) qs[e] = ld(0u, qr + e * tnb(0u, 0u), ttype(0u));
    barrier();
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float mx = NEG_INF, sum = 0.0;
    float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0; // elements t, t + WG, t + 2 WG, t + 3 WG
    for (uint j0 = 0u; j0 < nkv; j0 += WG) {
        uint j = j0 + t, nj = min(WG, nkv - j0);
        float s = NEG_INF;
        if (j < nkv) {
            uint kr = at(1u, 0u, j, kh, b);
            float dot = 0.0;
            if (kt == T_F32) {
                for (uint e = 0u; e < D; e++) dot += qs[e] * uintBitsToFloat(rd(1u, (kr + e * kb0) >> 2));
            } else {
                for (uint e = 0u; e < D; e++) dot += qs[e] * ld(1u, kr + e * kb0, kt);
            }
            s = dot * scale;
            if (capped) s = cap * tanh(clamp(s / cap, -15.0, 15.0)); // tanh is +-1 in float past 15
            if (hm) s += ld(3u, mr + j * tnb(3u, 0u), ttype(3u));
        }
        ps[t] = s;
        barrier();
        float bm = NEG_INF;
        for (uint i = 0u; i < nj; i++) bm = max(bm, ps[i]);
        barrier();
        float nm = max(mx, bm);
        if (nm == NEG_INF) continue; // every key so far masked: the same for the whole workgroup
        ps[t] = (j < nkv && s != NEG_INF) ? exp(s - nm) : 0.0;
        barrier();
        float corr = exp(mx - nm);
        sum *= corr;
        a0 *= corr; a1 *= corr; a2 *= corr; a3 *= corr;
        for (uint i = 0u; i < nj; i++) {
            float w = ps[i];
            if (w == 0.0) continue;
            sum += w;
            uint vr = at(2u, 0u, j0 + i, kh, b) + t * vb0;
            if (t < DV) a0 += w * ld(2u, vr, vt);
            if (t + WG < DV) a1 += w * ld(2u, vr + WG * vb0, vt);
            if (t + 2u * WG < DV) a2 += w * ld(2u, vr + 2u * WG * vb0, vt);
            if (t + 3u * WG < DV) a3 += w * ld(2u, vr + 3u * WG * vb0, vt);
        }
        mx = nm;
        barrier(); // every invocation has read ps before the next block writes it
    }
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    if (t < DV) st(at(OUT, t, h, iq, b), T_F32, a0 * inv);
    if (t + WG < DV) st(at(OUT, t + WG, h, iq, b), T_F32, a1 * inv);
    if (t + 2u * WG < DV) st(at(OUT, t + 2u * WG, h, iq, b), T_F32, a2 * inv);
    if (t + 3u * WG < DV) st(at(OUT, t + 3u * WG, h, iq, b), T_F32, a3 * inv);
}
