#version 450
// FLASH_ATTN_EXT and FLASH_ATTN_SOFTCAP on CPU devices (those that take
// mul_mat_cpu: a subgroup of VK_MMC_LANES = 8 lanes run as one SIMD vector),
// heads up to VK_FAC_MAX_D. A workgroup is one subgroup and one query row
// (h, iq, b), with no shared memory and no barriers, which such a driver
// runs as coroutine switches. Lane l holds query elements l, l + 8, ...;
// keys go in blocks of 8, lane l forming key j0 + l's score with the query
// element e handed to every lane by subgroupBroadcast, so each key element
// is loaded once. The block's largest score rescales the running sums
// (online softmax); its weights reach every lane by broadcast and lane l
// accumulates output elements l, l + 8, ... Masked keys (score -inf) add
// nothing. Slots, mode words and output as flash_attn.comp. K and V share
// one type, the specialisation constant KVT: such a driver runs both sides
// of a branch it cannot fold, so a load through a type read at run time
// would cost one load per type.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
layout(local_size_x = 8) in;
#include "common.glsl"
layout(constant_id = 1) const uint KVT = 0u;

#define NE (VK_FAC_MAX_D / 8u)
// M(c) for each lane c (subgroupBroadcast wants a constant lane).
#define EACH_LANE(M) M(0u) M(1u) M(2u) M(3u) M(4u) M(5u) M(6u) M(7u)
// Query element 8 i + C times the key's element.
#define QK(C)                                                                                    \
    {                                                                                            \
        float qe = subgroupBroadcast(q[i], C);                                                   \
        if (8u * i + C < D) dot += qe * ld(1u, kr + (8u * i + C) * kb0, KVT);                     \
    }
#define BMAX(C) bm = max(bm, subgroupBroadcast(s, C));
// Key j0 + C's weight times its value row, into this lane's elements.
#define PV(C)                                                                                    \
    {                                                                                            \
        float w = subgroupBroadcast(p, C);                                                       \
        if (w != 0.0) {                                                                          \
            sum += w;                                                                            \
            uint vr = at(2u, 0u, j0 + C, kh, b);                                                 \
            [[unroll]] for (uint i = 0u; i < NE; i++) {                                          \
                if (8u * i >= DV) break;                                                         \
                uint e = lane + 8u * i;                                                          \
                if (e < DV) acc[i] += w * ld(2u, vr + e * vb0, KVT);                              \
            }                                                                                    \
        }                                                                                        \
    }

void main()
{
    uint lane = gl_SubgroupInvocationID;
    uint H = tne(OUT, 1u), NQ = tne(OUT, 2u), g = gid_group();
    if (g >= H * NQ * tne(OUT, 3u)) return; // the whole workgroup
    uint h = g % H, iq = (g / H) % NQ, b = g / (H * NQ);
    uint D = tne(0u, 0u), DV = tne(2u, 0u), nkv = tne(1u, 1u);
    uint kh = h / (tne(0u, 2u) / tne(1u, 2u));
    bool hm = aux(0u) == 1u;
    float scale = pf(0u);
    bool capped = aux(1u) == VK_ATTN_SOFTCAP;
    float cap = capped ? pf(1u) : 1.0;
    uint kb0 = tnb(1u, 0u), vb0 = tnb(2u, 0u);
    uint mr = hm ? at(3u, 0u, iq, h % tne(3u, 2u), b % tne(3u, 3u)) : 0u;
    uint qr = at(0u, 0u, iq, h, b);
    float q[NE], acc[NE];
    [[unroll]] for (uint i = 0u; i < NE; i++) {
        uint e = lane + 8u * i;
        q[i] = e < D ? ld(0u, qr + e * tnb(0u, 0u), ttype(0u)) : 0.0;
        acc[i] = 0.0;
    }
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float mx = NEG_INF, sum = 0.0;
    for (uint j0 = 0u; j0 < nkv; j0 += 8u) {
        bool live = j0 + lane < nkv;
        uint kr = at(1u, 0u, min(j0 + lane, nkv - 1u), kh, b);
        float dot = 0.0;
        [[unroll]] for (uint i = 0u; i < NE; i++) {
            if (8u * i >= D) break;
            EACH_LANE(QK)
        }
        float s = dot * scale;
        if (capped) s = cap * tanh(clamp(s / cap, -15.0, 15.0)); // tanh is +-1 in float past 15
        if (hm && live) s += ld(3u, mr + (j0 + lane) * tnb(3u, 0u), ttype(3u));
        if (!live) s = NEG_INF;
        float bm = NEG_INF;
        EACH_LANE(BMAX)
        float nm = max(mx, bm);
        if (nm == NEG_INF) continue; // every key so far masked (the same on every lane)
        float p = s == NEG_INF ? 0.0 : exp(s - nm);
        float corr = exp(mx - nm);
        sum *= corr;
        [[unroll]] for (uint i = 0u; i < NE; i++) acc[i] *= corr;
        EACH_LANE(PV)
        mx = nm;
    }
    float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    [[unroll]] for (uint i = 0u; i < NE; i++) {
        uint e = lane + 8u * i;
        if (e < DV) st(at(OUT, e, h, iq, b), T_F32, acc[i] * inv);
    }
}
