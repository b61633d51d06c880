#version 450
// MUL_MAT of one column (decode) with integer dot products
// (SPV_KHR_integer_dot_product, OpSDotKHR on four packed int8 pairs), for
// devices that report them accelerated: W of a 32-element block type
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) or of 256 (the K-quants, IQ4_XS:
// sub-blocks of 32, or pairs of 16, meet one X block each) against X
// quantized to Q8_0 as
// the CPU reference quantizes it (per 32 elements d = max |x| / 127,
// q = round(x / d)), so the sums are exact integers and only the per-block
// scaling is float. Each weight block's quants become signed bytes in
// registers (nibbles minus 8 or 16, the fifth bits spread in, IQ4_NL's
// levels looked up); Q4_1 and Q5_1 add their min times the block's X sum,
// kept beside its scale as Q8_1 keeps it.
// A workgroup of 128 first quantizes the whole column into shared memory
// (an invocation per block of 32, the column's blocks spread over all of
// them; K / 32 blocks at most MAXB, specialisation constant 2, which
// pipelines.c sizes from maxComputeSharedMemorySize), then computes NR
// rows: LPR invocations per row, each a stride of the row's blocks, summed
// in shared memory. Quantizing per workgroup costs a read of X per NR rows,
// as the float mat-vec reads X per row pair; it needs no scratch buffer and
// no second dispatch.
// W in slot 0, X (contiguous F32, K a multiple of 32) in slot 1.
#extension GL_EXT_spirv_intrinsics : require
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"

// OpSDotKHR with PackedVectorFormat4x8Bit (0): the sum of the products of
// the four signed bytes of a and of b. Capabilities DotProductKHR (6019),
// DotProductInput4x8BitPackedKHR (6018).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);

layout(constant_id = 2) const uint MAXB = 256u;
#define WG 128u
#define NR VK_MMQ_ROWS
#define LPR (WG / NR)
shared uint xq[MAXB * 8u];
shared float xd[MAXB];
shared float xs[MAXB]; // xd times the block's sum of quants
shared float red[WG];

// Four bytes at a 2-byte-aligned offset of slot 0.
uint w32(uint byte) { return rd_u16(0u, byte) | (rd_u16(0u, byte + 2u) << 16); }

// Four unsigned nibbles, one per byte, as signed bytes minus 8: each byte
// b (0..15) becomes b + 0x78 (no carry out of the byte), whose top bit
// flipped is b - 8 in two's complement.
uint minus8(uint v) { return (v + 0x78787878u) ^ 0x80808080u; }
// The same for bytes 0..31 minus 16.
uint minus16(uint v) { return (v + 0x70707070u) ^ 0x80808080u; }
// Bits 0-3 of h as bit 4 of bytes 0-3 (a Q5 block's fifth bits).
uint fifth(uint h)
{
    return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4;
}
// IQ4_NL's levels (dequant.glsl's IQ4NL_PACKED) of the four nibbles in
// bytes 0-3 of v, as signed bytes.
uint iq4x4(uint v)
{
    uint r = 0u;
    for (uint i = 0u; i < 4u; i++) {
        uint n = (v >> (8u * i)) & 15u;
        r |= ((IQ4NL_PACKED[n >> 2] >> ((n & 3u) * 8u)) & 255u) << (8u * i);
    }
    return r;
}

// Bits j of the four bytes of h as bit 4 of each byte (Q5_K's fifth bits).
uint bit4(uint h, uint j) { return ((h >> j) & 0x01010101u) << 4; }

// X block b (elements 32 b ..) against the row at byte row of a type of
// 256-element blocks: block b / 8, its sub-block (Q4_K, Q5_K, IQ4_XS) or
// 32 elements with two 16-element scales (Q2_K, Q3_K, Q6_K) b % 8.
float kdot(uint row, uint b, uint nb0)
{
    uint blk = row + (b >> 3) * nb0, i = b & 7u, xw = b * 8u;
    if (WTYPE == T_Q2_K || WTYPE == T_Q3_K) {
        // Q2_K: scales[16] (scale low nibble, min high), qs[64], d, dmin;
        // Q3_K: hmask[32], qs[64], scales[12], d. Elements 32 p + l of half
        // h: bits 2p of qs[32h + l]; Q3_K subtracts 4 where bit 4h + p of
        // hmask[l] is clear. Sub-blocks 8h + 2p (l < 16) and 8h + 2p + 1.
        bool k3 = WTYPE == T_Q3_K;
        uint h = i >> 2, p = i & 3u, qs = blk + (k3 ? 32u : 16u) + 32u * h;
        int s0 = 0, s1 = 0, x0 = 0, x1 = 0;
        for (uint w = 0u; w < 8u; w++) {
            uint v = (w32(qs + 4u * w) >> (2u * p)) & 0x03030303u;
            if (k3) v = ((v | (((w32(blk + 4u * w) >> (4u * h + p)) & 0x01010101u) << 2)) + 0x7c7c7c7cu) ^ 0x80808080u;
            int d = sdot4x8(v, xq[xw + w], 0);
            int xsum = k3 ? 0 : sdot4x8(0x01010101u, xq[xw + w], 0); // Q2_K's min meets it
            if (w < 4u) {
                s0 += d;
                x0 += xsum;
            } else {
                s1 += d;
                x1 += xsum;
            }
        }
        uint k = 8u * h + 2u * p;
        if (k3) {
            float d = f16(rd_u16(0u, blk + 108u));
            // 6-bit scale k: nibble k / 8 of scales[k % 8], bits 2 (k / 4) of scales[8 + k % 4]
#define LS3(K) (int(((rd_u8(0u, blk + 96u + ((K) & 7u)) >> (4u * ((K) >> 3))) & 15u) | \
                     (((rd_u8(0u, blk + 104u + ((K) & 3u)) >> (2u * ((K) >> 2))) & 3u) << 4)) - 32)
            return d * xd[b] * (float(LS3(k)) * float(s0) + float(LS3(k + 1u)) * float(s1));
        }
        vec2 dm = vec2(f16(rd_u16(0u, blk + 80u)), f16(rd_u16(0u, blk + 82u)));
        uint c0 = rd_u8(0u, blk + k), c1 = rd_u8(0u, blk + k + 1u);
        return xd[b] * (dm.x * (float(c0 & 15u) * float(s0) + float(c1 & 15u) * float(s1)) -
                        dm.y * (float(c0 >> 4) * float(x0) + float(c1 >> 4) * float(x1)));
    }
    if (WTYPE == T_IQ4_XS) {
        // d, scales_h, scales_l[4], qs[128]: sub-block i as an IQ4_NL
        // block at qs + 16 i, 6-bit scale minus 32.
        uint qs = blk + 8u + 16u * i;
        int s = 0;
        for (uint w = 0u; w < 4u; w++) {
            uint q = w32(qs + 4u * w);
            s += sdot4x8(iq4x4(q & 0x0f0f0f0fu), xq[xw + w], 0);
            s += sdot4x8(iq4x4((q >> 4) & 0x0f0f0f0fu), xq[xw + w + 4u], 0);
        }
        uint ls = ((rd_u8(0u, blk + 4u + (i >> 1)) >> (4u * (i & 1u))) & 15u) |
                  (((rd_u16(0u, blk + 2u) >> (2u * i)) & 3u) << 4);
        return f16(rd_u16(0u, blk)) * float(int(ls) - 32) * xd[b] * float(s);
    }
    if (WTYPE == T_Q6_K) {
        // ql[128], qh[64], scales[16] (int8), d: quarter q of half h is
        // ql[64h + 32 (q & 1) + l] nibble q >> 1, qh[32h + l] bits 2q,
        // minus 32; scales 8h + 2q (l < 16) and 8h + 2q + 1.
        uint h = i >> 2, q = i & 3u;
        uint ql = blk + 64u * h + 32u * (q & 1u), qh = blk + 128u + 32u * h;
        int s0 = 0, s1 = 0;
        for (uint w = 0u; w < 8u; w++) {
            uint v = ((w32(ql + 4u * w) >> (4u * (q >> 1))) & 0x0f0f0f0fu) |
                     (((w32(qh + 4u * w) >> (2u * q)) & 0x03030303u) << 4);
            int p = sdot4x8((v + 0x60606060u) ^ 0x80808080u, xq[xw + w], 0);
            if (w < 4u) s0 += p;
            else s1 += p;
        }
        uint sc = blk + 192u + 8u * h + 2u * q;
        float sc0 = float(bitfieldExtract(int(rd_u8(0u, sc)), 0, 8));
        float sc1 = float(bitfieldExtract(int(rd_u8(0u, sc + 1u)), 0, 8));
        return f16(rd_u16(0u, blk + 208u)) * xd[b] * (sc0 * float(s0) + sc1 * float(s1));
    }
    // Q4_K, Q5_K: d, dmin, scales[12], (Q5_K: qh[32],) qs[128]; sub-block
    // i is the low (i even) or high nibbles of qs[32 (i / 2) + l], plus 16
    // times bit i of qh[l]; x = d sc q - dmin m.
    bool k5 = WTYPE == T_Q5_K;
    uint qs = blk + (k5 ? 48u : 16u) + 32u * (i >> 1), sh = 4u * (i & 1u);
    int s = 0;
    for (uint w = 0u; w < 8u; w++) {
        uint v = (w32(qs + 4u * w) >> sh) & 0x0f0f0f0fu;
        if (k5) v |= bit4(w32(blk + 16u + 4u * w), i);
        s += sdot4x8(v, xq[xw + w], 0);
    }
    // 6-bit scale and min i of the 12 bytes at blk + 4.
    uint sc, m;
    if (i < 4u) {
        sc = rd_u8(0u, blk + 4u + i) & 63u;
        m = rd_u8(0u, blk + 8u + i) & 63u;
    } else {
        uint a = rd_u8(0u, blk + 8u + i), lo = rd_u8(0u, blk + i), hi = rd_u8(0u, blk + 4u + i);
        sc = (a & 15u) | ((lo >> 6) << 4);
        m = (a >> 4) | ((hi >> 6) << 4);
    }
    vec2 dm = unpackHalf2x16(w32(blk));
    return dm.x * float(sc) * xd[b] * float(s) - dm.y * float(m) * xs[b];
}

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint N = tne(OUT, 0u), K = tne(0u, 0u), nb = K / 32u;
    uint g = gid_group();
    uint nrb = (N + NR - 1u) / NR, n0 = (g % nrb) * NR, z = g / nrb;
    uint i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint x0 = at(1u, 0u, 0u, i2, i3);
    for (uint b = t; b < nb; b += WG) {
        uint xo = (x0 >> 2) + b * 32u;
        float amax = 0.0;
        for (uint i = 0u; i < 32u; i++) amax = max(amax, abs(uintBitsToFloat(rd(1u, xo + i))));
        // as bp_quantize_q8_0_ref: the quants from the float scale, rounded
        // half away from zero; the scale kept as f16
        float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
        int sum = 0;
        for (uint w = 0u; w < 8u; w++) {
            uint packed = 0u;
            for (uint i = 0u; i < 4u; i++) {
                float v = uintBitsToFloat(rd(1u, xo + 4u * w + i)) * id;
                int q = int(sign(v) * floor(abs(v) + 0.5));
                packed |= uint(q & 0xff) << (8u * i);
                sum += q;
            }
            xq[b * 8u + w] = packed;
        }
        xd[b] = unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x;
        xs[b] = xd[b] * float(sum);
    }
    barrier();

    uint r = t / LPR, l = t % LPR, n = min(n0 + r, N - 1u);
    uint row = at(0u, 0u, n, i2 / r2, i3 / r3), nb0 = tnb(0u, 0u);
    float acc = 0.0;
    for (uint b = l; b < nb; b += LPR) {
        if (wbs() == 256u) {
            acc += kdot(row, b, nb0);
            continue;
        }
        uint blk = row + b * nb0;
        int s = 0;
        if (WTYPE == T_Q8_0) {
            for (uint w = 0u; w < 8u; w++) s += sdot4x8(w32(blk + 2u + 4u * w), xq[b * 8u + w], 0);
        } else {
            // 16 nibble bytes at qs: word w's low nibbles are elements
            // 4w .. 4w + 3, its high ones 16 + 4w ..; Q5's fifth bits in qh.
            bool q5 = WTYPE == T_Q5_0 || WTYPE == T_Q5_1;
            uint qs = blk + (WTYPE == T_Q4_1 ? 4u : WTYPE == T_Q5_0 ? 6u : WTYPE == T_Q5_1 ? 8u : 2u);
            uint qh = q5 ? w32(blk + (WTYPE == T_Q5_0 ? 2u : 4u)) : 0u;
            for (uint w = 0u; w < 4u; w++) {
                uint q = w32(qs + 4u * w);
                uint lo = q & 0x0f0f0f0fu, hi = (q >> 4) & 0x0f0f0f0fu;
                if (q5) {
                    lo |= fifth(qh >> (4u * w));
                    hi |= fifth(qh >> (16u + 4u * w));
                }
                if (WTYPE == T_Q4_0) {
                    lo = minus8(lo);
                    hi = minus8(hi);
                } else if (WTYPE == T_Q5_0) {
                    lo = minus16(lo);
                    hi = minus16(hi);
                } else if (WTYPE == T_IQ4_NL) {
                    lo = iq4x4(lo);
                    hi = iq4x4(hi);
                }
                s += sdot4x8(lo, xq[b * 8u + w], 0);
                s += sdot4x8(hi, xq[b * 8u + w + 4u], 0);
            }
        }
        if (WTYPE == T_Q4_1 || WTYPE == T_Q5_1) {
            vec2 dm = unpackHalf2x16(w32(blk));
            acc += dm.x * xd[b] * float(s) + dm.y * xs[b];
        } else {
            acc += f16(rd_u16(0u, blk)) * xd[b] * float(s);
        }
    }
    red[t] = acc;
    barrier();
    for (uint w = LPR / 2u; w > 0u; w >>= 1) {
        if (l < w) red[t] += red[t + w];
        barrier();
    }
    if (l == 0u && n0 + r < N) st(at(OUT, n0 + r, 0u, i2, i3), T_F32, red[t]);
}
