#version 450
// MUL_MAT on CPU devices (lavapipe, llvmpipe's compute): a workgroup is one
// subgroup of VK_MMC_LANES invocations, which such a driver runs as the
// lanes of one SIMD vector. It computes VK_MMC_ROWS rows of W (lane l takes
// rows n0 + l + 8 r, r < 8) by VK_MMC_COLS columns of X (the same for every
// lane) of one (i2, i3) slice.
//
// Why this shape: such a driver loads a value whose address may differ
// between lanes one lane at a time (a loop over the vector with a bounds
// check per lane), for storage buffers and shared memory alike, while
// arithmetic and a broadcast from a lane cost one vector instruction. So
// the kernel keeps loads per multiply-add low and uses neither shared
// memory nor barriers:
// - X: lane l loads element e + l of each column (one load per eight
//   elements of a column); subgroupBroadcast then hands element e + i to
//   every lane, for i < 8.
// - W: each lane reads its rows' packed words (a quantized block's scales
//   once per step of 16 elements) and decodes them in registers; each
//   weight then meets all eight columns, each broadcast X value all eight
//   rows (64 multiply-adds per lane per element).
// K goes in steps of 16 elements made of two groups of 8 that share the
// step's packed words (a byte's two nibbles, say): `groups` gives their
// offsets, `wstep` loads a row's words, `wdec` decodes one group. Every
// weight type ops.c sends has a decoder here; `welem` (each element
// through dequant.glsl, several scattered loads apiece) is the fallback
// that keeps a type without one correct.
// The host sends only contiguous F32 X, K a multiple of 16 and W rows
// with packed elements (ops.c); rows past N and columns past M are loaded
// clamped and not stored. W in slot 0, X in slot 1.
// Built with BP_MMC_ID for MUL_MAT_ID (ids in slot 2): with BP_MMC_ONE one
// (slot, token) column per workgroup; without, a workgroup per expert
// gathers the columns routed to it eight at a time (main, below).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
layout(local_size_x = 8) in;
#include "common.glsl"
#include "dequant.glsl"

uint nb0_w; // W's bytes per block (per element for the float types)

// 8 bytes (two words) from a 2-aligned byte address of W: three word loads
// and a select per lane, so rows of either alignment share one path.
uvec2 rd8(uint byte)
{
    uint i = byte >> 2;
    bool odd = (byte & 2u) != 0u;
    uint w0 = rd(0u, i), w1 = rd(0u, i + 1u), w2 = rd(0u, odd ? i + 2u : i + 1u);
    return odd ? uvec2((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16)) : uvec2(w0, w1);
}
uint rd4(uint byte)
{
    uint i = byte >> 2;
    uint w0 = rd(0u, i), w1 = rd(0u, (byte & 2u) != 0u ? i + 1u : i);
    return (byte & 2u) != 0u ? (w0 >> 16) | (w1 << 16) : w0;
}
uvec4 rd16(uint byte)
{
    uint i = byte >> 2;
    bool odd = (byte & 2u) != 0u;
    uint w0 = rd(0u, i), w1 = rd(0u, i + 1u), w2 = rd(0u, i + 2u), w3 = rd(0u, i + 3u);
    uint w4 = rd(0u, odd ? i + 4u : i + 3u);
    return odd ? uvec4((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16), (w2 >> 16) | (w3 << 16),
                       (w3 >> 16) | (w4 << 16))
               : uvec4(w0, w1, w2, w3);
}

// Row-relative element offsets of step p's two groups of 8.
uvec2 groups(uint p)
{
    if (WTYPE == T_Q4_0 || WTYPE == T_Q4_1 || WTYPE == T_Q5_0 || WTYPE == T_Q5_1 ||
        WTYPE == T_IQ4_NL || WTYPE == T_IQ4_XS) {
        // Bytes 8s .. 8s + 7 of 32 elements' nibbles (a block, or an
        // IQ4_XS sub-block): low elements 8s + i, high 16 + 8s + i.
        uint e = (p >> 1) * 32u + (p & 1u) * 8u;
        return uvec2(e, e + 16u);
    }
    if (WTYPE == T_Q4_K || WTYPE == T_Q5_K || WTYPE == T_Q2_K || WTYPE == T_Q3_K) {
        // Chunk c of 64 (qs bytes 32c ..): low nibbles 64c + l, high
        // 64c + 32 + l. Q2_K and Q3_K: half c / 2 (qs bytes 32 (c / 2) ..),
        // 2-bit fields 2 (c % 2) and 2 (c % 2) + 1 of each byte.
        uint e = (p >> 4) * 256u + ((p >> 2) & 3u) * 64u + (p & 3u) * 8u;
        return uvec2(e, e + 32u);
    }
    if (WTYPE == T_Q6_K) {
        // Half h, quarter qp and qp + 2 (one ql byte's two nibbles).
        uint e = (p >> 4) * 256u + ((p >> 3) & 1u) * 128u + ((p >> 2) & 1u) * 32u + (p & 3u) * 8u;
        return uvec2(e, e + 64u);
    }
    return uvec2(p * 16u, p * 16u + 8u);
}

// Element k of the row at byte `row` (the types without a decoder below).
float welem(uint row, uint k)
{
    uint bs = wbs();
    if (bs == 1u) return ld(0u, row + k * nb0_w, WTYPE);
    return wblk(row + (k / bs) * nb0_w, k % bs);
}

// Step p's packed words of the row at byte `row` (q, q2) and its scales (s).
void wstep(uint row, uint p, out uvec4 q, out uvec4 q2, out vec4 s)
{
    q = uvec4(0u);
    q2 = uvec4(0u);
    s = vec4(0.0);
    // The 32-element blocks (bytes each in blk32's table): the step's 8
    // nibble bytes at qs + 8 (p % 2) (Q8_0: 16 bytes at qs + 16 (p % 2)),
    // the block's f16 scale (and min) in s, the fifth bits (Q5_0, Q5_1) of
    // the step's elements from bit 0 of q.z.
    uint blk32 = row + (p >> 1) * (WTYPE == T_Q4_1 ? 20u : WTYPE == T_Q5_0 ? 22u :
                                   WTYPE == T_Q5_1 ? 24u : WTYPE == T_Q8_0 ? 34u : 18u),
         h8 = (p & 1u) * 8u;
    if (WTYPE == T_Q4_0 || WTYPE == T_IQ4_NL) {
        q.xy = rd8(blk32 + 2u + h8);
        s.x = f16(rd_u16(0u, blk32));
    } else if (WTYPE == T_Q4_1) {
        q.xy = rd8(blk32 + 4u + h8);
        s.xy = unpackHalf2x16(rd4(blk32));
    } else if (WTYPE == T_Q5_0) {
        // d, qh[4], qs[16].
        uvec2 h = rd8(blk32);
        q.xy = rd8(blk32 + 6u + h8);
        q.z = ((h.x >> 16) | (h.y << 16)) >> h8;
        s.x = unpackHalf2x16(h.x).x;
    } else if (WTYPE == T_Q5_1) {
        // d, m, qh[4], qs[16].
        uvec2 h = rd8(blk32);
        q.xy = rd8(blk32 + 8u + h8);
        q.z = h.y >> h8;
        s.xy = unpackHalf2x16(h.x);
    } else if (WTYPE == T_Q8_0) {
        q = rd16(blk32 + 2u + (p & 1u) * 16u);
        s.x = f16(rd_u16(0u, blk32));
    } else if (WTYPE == T_Q4_K || WTYPE == T_Q5_K) {
        // d, dmin, 12 scale bytes, (Q5_K: qh[32],) then qs: sub-blocks 2c
        // (low nibbles) and 2c + 1 (high); Q5_K's fifth bits are bits 2c and
        // 2c + 1 of qh[l], in q.zw.
        bool k5 = WTYPE == T_Q5_K;
        uint blk = row + (p >> 4) * (k5 ? 176u : 144u), c = (p >> 2) & 3u, l8 = (p & 3u) * 8u;
        uvec4 h = rd16(blk);
        q.xy = rd8(blk + (k5 ? 48u : 16u) + c * 32u + l8);
        if (k5) q.zw = rd8(blk + 16u + l8);
        vec2 dm = unpackHalf2x16(h.x);
        uint j0 = 2u * c, j1 = j0 + 1u;
        // Scale byte x of the 12 at h.y .. h.w.
#define SB(x) ((h[1u + ((x) >> 2)] >> (8u * ((x) & 3u))) & 255u)
        float sc0, m0, sc1, m1;
        if (c < 2u) {
            sc0 = float(SB(j0) & 63u); m0 = float(SB(j0 + 4u) & 63u);
            sc1 = float(SB(j1) & 63u); m1 = float(SB(j1 + 4u) & 63u);
        } else {
            sc0 = float((SB(j0 + 4u) & 15u) | ((SB(j0 - 4u) >> 6) << 4));
            m0 = float((SB(j0 + 4u) >> 4) | ((SB(j0) >> 6) << 4));
            sc1 = float((SB(j1 + 4u) & 15u) | ((SB(j1 - 4u) >> 6) << 4));
            m1 = float((SB(j1 + 4u) >> 4) | ((SB(j1) >> 6) << 4));
        }
#undef SB
        s = vec4(dm.x * sc0, dm.y * m0, dm.x * sc1, dm.y * m1);
    } else if (WTYPE == T_Q2_K) {
        // scales[16], qs[64], d, dmin. The step's elements 64c + l8 .. and
        // 64c + 32 + l8 .. lie in sub-blocks 4c + l8 / 16 and that + 2: two
        // of the scale bytes 4c .. 4c + 3 (low nibble: scale, high: min).
        uint blk = row + (p >> 4) * 84u, c = (p >> 2) & 3u, l8 = (p & 3u) * 8u;
        q.xy = rd8(blk + 16u + (c >> 1) * 32u + l8);
        uint sw = rd4(blk + 4u * c) >> ((l8 >> 4) * 8u);
        vec2 dm = unpackHalf2x16(rd4(blk + 80u));
        s = vec4(dm.x * float(sw & 15u), dm.y * float((sw >> 4) & 15u),
                 dm.x * float((sw >> 16) & 15u), dm.y * float((sw >> 20) & 15u));
    } else if (WTYPE == T_Q3_K) {
        // hmask[32], qs[64], scales[12], d. Low bits as in Q2_K; the step's
        // hmask bytes l8 .. l8 + 7 in q.zw. Sub-block i (4c + l8 / 16, and
        // i + 2) has its low 4 bits in nibble i / 8 (= c / 2) of
        // scales[i % 8], its top 2 at bit 2 (i / 4) (= 2c) of scales[8 + i % 4].
        uint blk = row + (p >> 4) * 110u, c = (p >> 2) & 3u, l8 = (p & 3u) * 8u;
        q.xy = rd8(blk + 32u + (c >> 1) * 32u + l8);
        q.zw = rd8(blk + l8);
        uint t = (l8 >> 4) * 8u; // bit offset of byte l8 / 16
        uint lw = rd4(blk + 96u + (c & 1u) * 4u) >> (t + 4u * (c >> 1));
        uint hw = rd4(blk + 104u) >> (t + 2u * c);
        float d = f16(rd_u16(0u, blk + 108u));
        s.x = d * float(int((lw & 15u) | ((hw & 3u) << 4)) - 32);
        s.y = d * float(int(((lw >> 16) & 15u) | (((hw >> 16) & 3u) << 4)) - 32);
    } else if (WTYPE == T_Q6_K) {
        // ql[128] qh[64] scales[16] d.
        uint blk = row + (p >> 4) * 210u, hf = (p >> 3) & 1u, qp = (p >> 2) & 1u, l8 = (p & 3u) * 8u;
        q.xy = rd8(blk + hf * 64u + qp * 32u + l8);
        q.zw = rd8(blk + 128u + hf * 32u + l8);
        uint si = blk + 192u + hf * 8u + (l8 >> 4) + qp * 2u;
        float d = f16(rd_u16(0u, blk + 208u));
        s.x = d * float(rd_i8(0u, si));
        s.y = d * float(rd_i8(0u, si + 4u));
    } else if (WTYPE == T_IQ4_XS) {
        // d, scales_h, scales_l[4], qs[128]: sub-block b's indices at
        // qs[16b ..], its 6-bit scale nibble b % 2 of scales_l[b / 2] (bit
        // 4b of h.y) | bits 2b, 2b + 1 of scales_h << 4.
        uint blk = row + (p >> 4) * 136u, b = (p >> 1) & 7u;
        uvec2 h = rd8(blk);
        q.xy = rd8(blk + 8u + 16u * b + (p & 1u) * 8u);
        uint ls = ((h.y >> (4u * b)) & 15u) | (((h.x >> (16u + 2u * b)) & 3u) << 4);
        s.x = unpackHalf2x16(h.x).x * float(int(ls) - 32);
    } else if (WTYPE == T_F16 || WTYPE == T_BF16) {
        q = rd16(row + p * 32u);
        q2 = rd16(row + p * 32u + 16u);
    }
}

// Field (w >> sh) & m of each of the four bytes of w.
uvec4 bytef(uint w, uint sh, uint m) { return (uvec4(w) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & m; }
// Nibbles at shift sh of the four bytes of w, as floats.
vec4 nib4(uint w, uint sh) { return vec4(bytef(w, sh, 15u)); }
// Bits sh .. sh + 3 of w, as floats.
vec4 bits4(uint w, uint sh) { return vec4((uvec4(w) >> (uvec4(0u, 1u, 2u, 3u) + sh)) & 1u); }
// The four signed bytes of w.
vec4 i8x4(uint w) { return vec4((ivec4(w) << ivec4(24, 16, 8, 0)) >> 24); }
// IQ4_NL's levels of the nibbles at shift sh of the four bytes of w.
vec4 iq4x4(uint w, uint sh)
{
    uvec4 i = bytef(w, sh, 15u);
    return vec4(iq4nl_value(i.x), iq4nl_value(i.y), iq4nl_value(i.z), iq4nl_value(i.w));
}
// The two bf16 halves of each of two words.
vec4 bf16x4(uint a, uint b)
{
    return uintBitsToFloat(uvec4(a << 16, a & 0xffff0000u, b << 16, b & 0xffff0000u));
}

// Group g (0, 1) of step p: elements e .. e + 7 (e = groups(p)[g]) of the row.
void wdec(uvec4 q, uvec4 q2, vec4 s, uint g, uint p, uint row, uint e, out vec4 lo, out vec4 hi)
{
    // 256 blocks: sub-block 2c + g (Q5_K's qh bit, Q3_K's hmask bit) and
    // the shift of 2-bit field 2 (c % 2) + g (Q2_K, Q3_K).
    uint kb = 2u * ((p >> 2) & 3u) + g, f2 = 2u * (2u * ((p >> 2) & 1u) + g);
    if (WTYPE == T_Q4_0) {
        lo = (nib4(q.x, 4u * g) - 8.0) * s.x;
        hi = (nib4(q.y, 4u * g) - 8.0) * s.x;
    } else if (WTYPE == T_Q4_1) {
        lo = nib4(q.x, 4u * g) * s.x + s.y;
        hi = nib4(q.y, 4u * g) * s.x + s.y;
    } else if (WTYPE == T_Q5_0) {
        lo = (nib4(q.x, 4u * g) + 16.0 * bits4(q.z, 16u * g) - 16.0) * s.x;
        hi = (nib4(q.y, 4u * g) + 16.0 * bits4(q.z, 16u * g + 4u) - 16.0) * s.x;
    } else if (WTYPE == T_Q5_1) {
        lo = (nib4(q.x, 4u * g) + 16.0 * bits4(q.z, 16u * g)) * s.x + s.y;
        hi = (nib4(q.y, 4u * g) + 16.0 * bits4(q.z, 16u * g + 4u)) * s.x + s.y;
    } else if (WTYPE == T_IQ4_NL || WTYPE == T_IQ4_XS) {
        lo = iq4x4(q.x, 4u * g) * s.x;
        hi = iq4x4(q.y, 4u * g) * s.x;
    } else if (WTYPE == T_Q8_0) {
        lo = i8x4(g == 0u ? q.x : q.z) * s.x;
        hi = i8x4(g == 0u ? q.y : q.w) * s.x;
    } else if (WTYPE == T_Q4_K || WTYPE == T_Q5_K) {
        float a = g == 0u ? s.x : s.z, b = g == 0u ? s.y : s.w;
        vec4 l = nib4(q.x, 4u * g), h = nib4(q.y, 4u * g);
        if (WTYPE == T_Q5_K) {
            l += 16.0 * vec4(bytef(q.z, kb, 1u));
            h += 16.0 * vec4(bytef(q.w, kb, 1u));
        }
        lo = l * a - b;
        hi = h * a - b;
    } else if (WTYPE == T_Q2_K) {
        float a = g == 0u ? s.x : s.z, b = g == 0u ? s.y : s.w;
        lo = vec4(bytef(q.x, f2, 3u)) * a - b;
        hi = vec4(bytef(q.y, f2, 3u)) * a - b;
    } else if (WTYPE == T_Q3_K) {
        // A clear hmask bit subtracts 4.
        float a = g == 0u ? s.x : s.y;
        lo = (vec4(bytef(q.x, f2, 3u)) + 4.0 * vec4(bytef(q.z, kb, 1u)) - 4.0) * a;
        hi = (vec4(bytef(q.y, f2, 3u)) + 4.0 * vec4(bytef(q.w, kb, 1u)) - 4.0) * a;
    } else if (WTYPE == T_Q6_K) {
        uint hs = 2u * ((p >> 2) & 1u) + 4u * g;
        float a = g == 0u ? s.x : s.y;
        uvec4 sh = uvec4(0u, 8u, 16u, 24u);
        uvec4 l0 = (uvec4(q.x) >> (sh + 4u * g)) & 15u, l1 = (uvec4(q.y) >> (sh + 4u * g)) & 15u;
        uvec4 h0 = (uvec4(q.z) >> (sh + hs)) & 3u, h1 = (uvec4(q.w) >> (sh + hs)) & 3u;
        lo = (vec4(l0 | (h0 << 4)) - 32.0) * a;
        hi = (vec4(l1 | (h1 << 4)) - 32.0) * a;
    } else if (WTYPE == T_F16) {
        uvec4 w = g == 0u ? q : q2;
        lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
        hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
    } else if (WTYPE == T_BF16) {
        uvec4 w = g == 0u ? q : q2;
        lo = bf16x4(w.x, w.y);
        hi = bf16x4(w.z, w.w);
    } else if (WTYPE == T_F32) {
        // Rows of F32 are word-aligned: the group's 8 words directly.
        uint w = (row >> 2) + e;
        lo = uintBitsToFloat(uvec4(rd(0u, w), rd(0u, w + 1u), rd(0u, w + 2u), rd(0u, w + 3u)));
        hi = uintBitsToFloat(uvec4(rd(0u, w + 4u), rd(0u, w + 5u), rd(0u, w + 6u), rd(0u, w + 7u)));
    } else {
        lo = vec4(welem(row, e), welem(row, e + 1u), welem(row, e + 2u), welem(row, e + 3u));
        hi = vec4(welem(row, e + 4u), welem(row, e + 5u), welem(row, e + 6u), welem(row, e + 7u));
    }
}

// One element i of a group: X element e + i of columns 0-3 (bA) and 4-7
// (bB) from lane i, times the rows' weights TL[j] (rows 0-3) and TH[j]
// (rows 4-7). A00[r] holds row r's four sums for columns 0-3.
#ifdef BP_MMC_ONE
#define ELEM(I, TL, TH, J)                                                                       \
    {                                                                                            \
        float b = subgroupBroadcast(xa, I);                                                      \
        R0 += TL[J] * b;                                                                         \
        R1 += TH[J] * b;                                                                         \
    }
#else
#define ELEM(I, TL, TH, J)                                                                       \
    {                                                                                            \
        vec4 bA = subgroupBroadcast(xa, I), bB = subgroupBroadcast(xb, I);                       \
        A00 += outerProduct(bA, TL[J]);                                                          \
        A01 += outerProduct(bB, TL[J]);                                                          \
        A10 += outerProduct(bA, TH[J]);                                                          \
        A11 += outerProduct(bB, TH[J]);                                                          \
    }
#endif

// Row r's step words and scales.
#define WSTEP(R) uvec4 q##R, v##R; vec4 s##R; wstep(row##R, p, q##R, v##R, s##R);
#define WDEC(R, G, E) vec4 l##R, h##R; wdec(q##R, v##R, s##R, G, p, row##R, E, l##R, h##R);

// Row n0 + lane + 8 R's sums for columns 0-3 (CA) and 4-7 (CB).
#define STORE(R, CA, CB)                                                                         \
    {                                                                                            \
        uint n = n0 + lane + 8u * R;                                                             \
        vec4 ca = CA, cb = CB;                                                                   \
        if (n < N)                                                                               \
            [[unroll]] for (uint c = 0u; c < 4u; c++) {                                          \
                if (c < nc) b4.d[(oa[c] + n * onb0) >> 2] = floatBitsToUint(ca[c]);              \
                if (4u + c < nc) b4.d[(ob[c] + n * onb0) >> 2] = floatBitsToUint(cb[c]);         \
            }                                                                                    \
    }
// Rows n0 .. n0 + 63 of the W matrix at byte wbase against the workgroup's
// columns: X column c starts at word xa[c] (c < 4) or xb[c - 4], its
// output (row 0) at byte oa[c] or ob[c - 4]. Columns nc and above repeat a
// stored column's X and are not stored (the build with BP_MMC_ONE has one
// column, xa.x -> oa.x).
void product(uint n0, uint N, uint wbase, uvec4 xa4, uvec4 xb4, uvec4 oa, uvec4 ob, uint nc)
{
    uint lane = gl_SubgroupInvocationID, K = tne(0u, 0u), onb0 = tnb(OUT, 0u);
    nb0_w = tnb(0u, 0u);
    uint wrs = tnb(0u, 1u);
    uint row0 = wbase + min(n0 + lane, N - 1u) * wrs;
    uint row1 = wbase + min(n0 + lane + 8u, N - 1u) * wrs;
    uint row2 = wbase + min(n0 + lane + 16u, N - 1u) * wrs;
    uint row3 = wbase + min(n0 + lane + 24u, N - 1u) * wrs;
    uint row4 = wbase + min(n0 + lane + 32u, N - 1u) * wrs;
    uint row5 = wbase + min(n0 + lane + 40u, N - 1u) * wrs;
    uint row6 = wbase + min(n0 + lane + 48u, N - 1u) * wrs;
    uint row7 = wbase + min(n0 + lane + 56u, N - 1u) * wrs;
    uint x0 = xa4.x, x1 = xa4.y, x2 = xa4.z, x3 = xa4.w, x4 = xb4.x, x5 = xb4.y, x6 = xb4.z, x7 = xb4.w;
#ifdef BP_MMC_ONE
    vec4 R0 = vec4(0.0), R1 = vec4(0.0);
#else
    mat4 A00 = mat4(0.0), A01 = mat4(0.0), A10 = mat4(0.0), A11 = mat4(0.0);
#endif
    for (uint p = 0u; p < K / 16u; p++) {
        uvec2 e = groups(p);
        WSTEP(0) WSTEP(1) WSTEP(2) WSTEP(3) WSTEP(4) WSTEP(5) WSTEP(6) WSTEP(7)
        [[unroll]] for (uint g = 0u; g < 2u; g++) {
            uint k = e[g] + lane;
#ifdef BP_MMC_ONE
            float xa = uintBitsToFloat(rd(1u, x0 + k));
#else
            vec4 xa = vec4(uintBitsToFloat(rd(1u, x0 + k)), uintBitsToFloat(rd(1u, x1 + k)),
                           uintBitsToFloat(rd(1u, x2 + k)), uintBitsToFloat(rd(1u, x3 + k)));
            vec4 xb = vec4(uintBitsToFloat(rd(1u, x4 + k)), uintBitsToFloat(rd(1u, x5 + k)),
                           uintBitsToFloat(rd(1u, x6 + k)), uintBitsToFloat(rd(1u, x7 + k)));
#endif
            WDEC(0, g, e[g]) WDEC(1, g, e[g]) WDEC(2, g, e[g]) WDEC(3, g, e[g])
            WDEC(4, g, e[g]) WDEC(5, g, e[g]) WDEC(6, g, e[g]) WDEC(7, g, e[g])
            // TL[i]: rows 0-3 at element i (i < 4), TH: rows 4-7; U for i >= 4.
            mat4 TL = transpose(mat4(l0, l1, l2, l3)), TH = transpose(mat4(l4, l5, l6, l7));
            mat4 UL = transpose(mat4(h0, h1, h2, h3)), UH = transpose(mat4(h4, h5, h6, h7));
            ELEM(0u, TL, TH, 0) ELEM(1u, TL, TH, 1) ELEM(2u, TL, TH, 2) ELEM(3u, TL, TH, 3)
            ELEM(4u, UL, UH, 0) ELEM(5u, UL, UH, 1) ELEM(6u, UL, UH, 2) ELEM(7u, UL, UH, 3)
        }
    }
#ifdef BP_MMC_ONE
    [[unroll]] for (uint r = 0u; r < 8u; r++) {
        uint n = n0 + lane + 8u * r;
        float v = r < 4u ? R0[r & 3u] : R1[r & 3u];
        if (n < N) b4.d[(oa.x + n * onb0) >> 2] = floatBitsToUint(v);
    }
#else
    STORE(0u, A00[0], A01[0]) STORE(1u, A00[1], A01[1]) STORE(2u, A00[2], A01[2])
    STORE(3u, A00[3], A01[3]) STORE(4u, A10[0], A11[0]) STORE(5u, A10[1], A11[1])
    STORE(6u, A10[2], A11[2]) STORE(7u, A10[3], A11[3])
#endif
}

#ifdef BP_MMC_ID
// MUL_MAT_ID: W [K, N, E] experts, X [K, X1, T], ids [U, T] (slot 2), the
// output [N, U, T]; column j = u + U t is slot u of token t, computed with
// expert ids[u, t] against X column (u % X1, t).
uint id_of(uint j, uint U) { return uint(ld_i32(2u, at(2u, j % U, j / U, 0u, 0u))); }
uint x_of(uint j, uint U) { return at(1u, 0u, (j % U) % tne(1u, 1u), j / U, 0u) >> 2; }
uint o_of(uint j, uint U) { return at(OUT, 0u, j % U, j / U, 0u); }
// Zeros in rows n0 .. n0 + 63 of the columns whose id is outside [0, E)
// (the host checks ids that are graph inputs; computed ones end here).
void zeros(uint n0, uint N, uvec4 oa, uvec4 ob, uint nc)
{
    uint lane = gl_SubgroupInvocationID, onb0 = tnb(OUT, 0u);
    for (uint r = 0u; r < 8u; r++) {
        uint n = n0 + lane + 8u * r;
        if (n < N)
            for (uint c = 0u; c < nc; c++)
                b4.d[((c < 4u ? oa[c] : ob[c - 4u]) + n * onb0) >> 2] = 0u;
    }
}
#endif

void main()
{
    uint N = tne(OUT, 0u), n0 = gl_WorkGroupID.x * VK_MMC_ROWS;
#if defined(BP_MMC_ID) && defined(BP_MMC_ONE)
    // One column per workgroup: j = y + Y z (ops.c spreads the U T columns
    // over y and z within the grid's limits).
    uint U = tne(OUT, 1u), E = tne(0u, 2u);
    uint j = gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z;
    if (j >= U * tne(OUT, 2u)) return;
    uint e = id_of(j, U);
    uvec4 o = uvec4(o_of(j, U), 0u, 0u, 0u);
    if (e >= E) zeros(n0, N, o, o, 1u);
    else product(n0, N, at(0u, 0u, 0u, e, 0u), uvec4(x_of(j, U)), uvec4(0u), o, uvec4(0u), 1u);
#elif defined(BP_MMC_ID)
    // Workgroup z < E: the columns routed to expert z, in order, eight at a
    // time, so each of its rows is read once per eight columns rather than
    // once per column; z = E: the columns whose id is out of range. The
    // lanes test eight ids at once and a ballot hands every lane the hits.
    uint U = tne(OUT, 1u), E = tne(0u, 2u), total = U * tne(OUT, 2u), want = gl_WorkGroupID.z;
    uint lane = gl_SubgroupInvocationID, wbase = at(0u, 0u, 0u, min(want, E - 1u), 0u);
    uint next = 0u, batch = 0u, hits = 0u;
    for (;;) {
        uvec4 xa = uvec4(0u), xb = uvec4(0u), oa = uvec4(0u), ob = uvec4(0u);
        uint nc = 0u;
        while (nc < 8u) {
            if (hits == 0u) {
                if (next >= total) break;
                uint j = next + lane;
                bool hit = false;
                if (j < total) {
                    uint e = id_of(j, U);
                    hit = want == E ? e >= E : e == want;
                }
                hits = subgroupBallot(hit).x;
                batch = next;
                next += 8u;
                continue;
            }
            uint j = batch + uint(findLSB(hits));
            hits &= hits - 1u;
            if (nc < 4u) {
                xa[nc] = x_of(j, U);
                oa[nc] = o_of(j, U);
            } else {
                xb[nc - 4u] = x_of(j, U);
                ob[nc - 4u] = o_of(j, U);
            }
            nc++;
        }
        if (nc == 0u) break;
        for (uint c = nc; c < 8u; c++) { // padding: column 0's X again
            if (c < 4u) xa[c] = xa.x;
            else xb[c - 4u] = xa.x;
        }
        if (want == E) zeros(n0, N, oa, ob, nc);
        else product(n0, N, wbase, xa, xb, oa, ob, nc);
    }
#else
    uint M = tne(OUT, 1u), z = gl_WorkGroupID.z, i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint wbase = at(0u, 0u, 0u, i2 / r2, i3 / r3);
    // X columns as word indices of element 0 (clamped to M - 1: computed, not stored).
    uint xw = at(1u, 0u, 0u, i2, i3) >> 2, xcs = tnb(1u, 1u) >> 2;
    uint ow = at(OUT, 0u, 0u, i2, i3), onb1 = tnb(OUT, 1u);
#ifdef BP_MMC_ONE
    uint m0 = gl_WorkGroupID.y;
    product(n0, N, wbase, uvec4(xw + m0 * xcs), uvec4(0u), uvec4(ow + m0 * onb1), uvec4(0u), 1u);
#else
    uint m0 = gl_WorkGroupID.y * VK_MMC_COLS;
    uvec4 ca = min(uvec4(m0) + uvec4(0u, 1u, 2u, 3u), uvec4(M - 1u));
    uvec4 cb = min(uvec4(m0 + 4u) + uvec4(0u, 1u, 2u, 3u), uvec4(M - 1u));
    product(n0, N, wbase, uvec4(xw) + ca * xcs, uvec4(xw) + cb * xcs, uvec4(ow) + ca * onb1,
            uvec4(ow) + cb * onb1, min(M - m0, 8u));
#endif
#endif
}
