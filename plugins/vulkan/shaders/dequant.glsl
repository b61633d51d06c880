// dequant.glsl — element k of a weight row starting at byte `row` of slot 0,
// for every MUL_MAT and GET_ROWS weight type. Block layouts are ggml's
// (bp_quant.h); WTYPE is a specialisation constant, so each pipeline keeps
// one branch.
layout(constant_id = 1) const uint WTYPE = 0u;

float q4k_scale_min(uint blk, uint j, out float m)
{
    uint sc, mn;
    if (j < 4u) {
        sc = rd_u8(0u, blk + 4u + j) & 63u;
        mn = rd_u8(0u, blk + 4u + j + 4u) & 63u;
    } else {
        sc = (rd_u8(0u, blk + 4u + j + 4u) & 0xfu) | ((rd_u8(0u, blk + 4u + j - 4u) >> 6) << 4);
        mn = (rd_u8(0u, blk + 4u + j + 4u) >> 4) | ((rd_u8(0u, blk + 4u + j) >> 6) << 4);
    }
    m = float(mn);
    return float(sc);
}

// ---- the ABI 1.2 weight types, one function per block layout ----
// j is the element's index within its block. Every value is formed with the
// operations of bp_quant_ref.h's dequantizer, in its order; results that
// add to a product are `precise`, because a fused multiply-add rounds once
// where the reference rounds twice, and GET_ROWS must return its bits.

// Nibble j (0..31) of 16 bytes at qs: element j < 16 in the low nibble of
// byte j, element j + 16 in the high nibble (Q4_0's packing).
uint nib32(uint qs, uint j)
{
    uint q = rd_u8(0u, qs + (j & 15u));
    return j < 16u ? (q & 15u) : (q >> 4);
}

// Fifth bit of element j (0..31): bit j of the little-endian qh bytes.
uint q5_high(uint qh, uint j) { return (rd_u8(0u, qh + (j >> 3)) >> (j & 7u)) & 1u; }

// IQ4_NL's 16 signed levels (bp_iq4nl_values), four int8 per word. A vector
// indexed by a variable is a dynamic extract; glslang stores a constant
// array to a function variable before indexing it, which some drivers leave
// in per-invocation scratch memory.
const uvec4 IQ4NL_PACKED = uvec4(0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u);
float iq4nl_value(uint i)
{
    return float(bitfieldExtract(int(IQ4NL_PACKED[i >> 2]), int((i & 3u) * 8u), 8));
}

// Q4_1: d, m, qs[16]; x = q * d + m.
float wval_q4_1(uint blk, uint j)
{
    precise float v = float(nib32(blk + 4u, j)) * f16(rd_u16(0u, blk)) + f16(rd_u16(0u, blk + 2u));
    return v;
}

// Q5_0: d, qh[4], qs[16]; x = (q - 16) * d.
float wval_q5_0(uint blk, uint j)
{
    uint q = nib32(blk + 6u, j) | (q5_high(blk + 2u, j) << 4);
    return float(int(q) - 16) * f16(rd_u16(0u, blk));
}

// Q5_1: d, m, qh[4], qs[16]; x = q * d + m.
float wval_q5_1(uint blk, uint j)
{
    uint q = nib32(blk + 8u, j) | (q5_high(blk + 4u, j) << 4);
    precise float v = float(q) * f16(rd_u16(0u, blk)) + f16(rd_u16(0u, blk + 2u));
    return v;
}

// Q2_K: scales[16], qs[64], d, dmin. Element 128h + 32p + l is bits 2p..2p+1
// of qs[32h + l]; its sub-block of 16 is j / 16.
float wval_q2_k(uint blk, uint j)
{
    uint h = j >> 7, p = (j >> 5) & 3u, l = j & 31u;
    uint q = (rd_u8(0u, blk + 16u + h * 32u + l) >> (2u * p)) & 3u;
    uint sc = rd_u8(0u, blk + (j >> 4));
    precise float v = f16(rd_u16(0u, blk + 80u)) * float(sc & 15u) * float(q) -
                      f16(rd_u16(0u, blk + 82u)) * float(sc >> 4);
    return v;
}

// Q3_K: hmask[32], qs[64], scales[12], d. The two low bits as in Q2_K; a
// clear bit 4h + p of hmask[l] subtracts 4. The 6-bit scale of sub-block i
// (j / 16): low 4 bits in nibble i / 8 of scales[i % 8], top 2 bits at bit
// 2 * (i / 4) of scales[8 + i % 4].
float wval_q3_k(uint blk, uint j)
{
    uint h = j >> 7, p = (j >> 5) & 3u, l = j & 31u, i = j >> 4;
    int q = int((rd_u8(0u, blk + 32u + h * 32u + l) >> (2u * p)) & 3u);
    if (((rd_u8(0u, blk + l) >> (4u * h + p)) & 1u) == 0u) q -= 4;
    uint s = ((rd_u8(0u, blk + 96u + (i & 7u)) >> (4u * (i >> 3))) & 15u) |
             (((rd_u8(0u, blk + 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u) << 4);
    return f16(rd_u16(0u, blk + 108u)) * float(int(s) - 32) * float(q);
}

// Q5_K: d, dmin, Q4_K's 12 scale bytes, qh[32], qs[128]. Sub-block b = j / 32
// takes nibble b % 2 of qs[32 (b / 2) + l] and bit b of qh[l] (l = j % 32).
float wval_q5_k(uint blk, uint j)
{
    uint b = j >> 5, l = j & 31u;
    uint ql = rd_u8(0u, blk + 48u + (b >> 1) * 32u + l);
    uint hb = (rd_u8(0u, blk + 16u + l) >> b) & 1u;
    uint q = ((b & 1u) == 0u ? (ql & 15u) : (ql >> 4)) | (hb << 4);
    float m;
    float sc = q4k_scale_min(blk, b, m);
    precise float v = f16(rd_u16(0u, blk)) * sc * float(q) - f16(rd_u16(0u, blk + 2u)) * m;
    return v;
}

// IQ4_NL: d, qs[16] of indices packed as in Q4_0.
float wval_iq4_nl(uint blk, uint j)
{
    return f16(rd_u16(0u, blk)) * iq4nl_value(nib32(blk + 2u, j));
}

// IQ4_XS: d, scales_h, scales_l[4], qs[128]. Sub-block b = j / 32 has the
// 6-bit scale nibble b % 2 of scales_l[b / 2] | bits 2b..2b+1 of scales_h
// << 4, and its indices in qs[16b .. 16b + 15].
float wval_iq4_xs(uint blk, uint j)
{
    uint b = j >> 5;
    uint ls = ((rd_u8(0u, blk + 4u + (b >> 1)) >> (4u * (b & 1u))) & 15u) |
              (((rd_u16(0u, blk + 2u) >> (2u * b)) & 3u) << 4);
    float v = iq4nl_value(nib32(blk + 8u + 16u * b, j & 31u));
    return f16(rd_u16(0u, blk)) * float(int(ls) - 32) * v;
}

// Elements per block of WTYPE (1 for the float types).
uint wbs()
{
    if (WTYPE == T_F32 || WTYPE == T_F16 || WTYPE == T_BF16) return 1u;
    if (WTYPE == T_Q4_0 || WTYPE == T_Q8_0 || WTYPE == T_Q4_1 || WTYPE == T_Q5_0 ||
        WTYPE == T_Q5_1 || WTYPE == T_IQ4_NL)
        return 32u;
    return 256u;
}

// Element j of the quantized block at byte blk of slot 0.
float wblk(uint blk, uint j)
{
    if (WTYPE == T_Q4_0) {
        uint q = rd_u8(0u, blk + 2u + (j & 15u));
        q = j < 16u ? (q & 15u) : (q >> 4);
        return f16(rd_u16(0u, blk)) * (float(q) - 8.0);
    }
    if (WTYPE == T_Q8_0) return f16(rd_u16(0u, blk)) * float(rd_i8(0u, blk + 2u + j));
    if (WTYPE == T_Q4_K) {
        uint sub = j >> 5, g = sub >> 1;
        uint q = rd_u8(0u, blk + 16u + g * 32u + (j & 31u));
        q = (sub & 1u) == 0u ? (q & 15u) : (q >> 4);
        float m;
        float sc = q4k_scale_min(blk, sub, m);
        return f16(rd_u16(0u, blk)) * sc * float(q) - f16(rd_u16(0u, blk + 2u)) * m;
    }
    // The ABI 1.2 types: blocks of 32, then of 256 elements.
    if (WTYPE == T_Q4_1) return wval_q4_1(blk, j);
    if (WTYPE == T_Q5_0) return wval_q5_0(blk, j);
    if (WTYPE == T_Q5_1) return wval_q5_1(blk, j);
    if (WTYPE == T_IQ4_NL) return wval_iq4_nl(blk, j);
    if (WTYPE == T_Q2_K) return wval_q2_k(blk, j);
    if (WTYPE == T_Q3_K) return wval_q3_k(blk, j);
    if (WTYPE == T_Q5_K) return wval_q5_k(blk, j);
    if (WTYPE == T_IQ4_XS) return wval_iq4_xs(blk, j);
    // Q6_K: ql[128] qh[64] scales[16] d
    uint h = j >> 7, r = j & 127u, qd = r >> 5, l = r & 31u;
    uint ql = rd_u8(0u, blk + h * 64u + l + (qd & 1u) * 32u);
    ql = (qd >> 1) == 0u ? (ql & 15u) : (ql >> 4);
    uint qh = (rd_u8(0u, blk + 128u + h * 32u + l) >> (qd * 2u)) & 3u;
    int q = int(ql | (qh << 4)) - 32;
    float sc = float(rd_i8(0u, blk + 192u + h * 8u + (l >> 4) + qd * 2u));
    return f16(rd_u16(0u, blk + 208u)) * sc * float(q);
}

float wval(uint row, uint k)
{
    uint nb0 = tnb(0u, 0u);
    if (WTYPE == T_F32 || WTYPE == T_F16 || WTYPE == T_BF16)
        return ld(0u, row + k * nb0, WTYPE);
    uint bs = wbs();
    return wblk(row + (k / bs) * nb0, k % bs);
}
