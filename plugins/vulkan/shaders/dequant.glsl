// dequant.glsl — element k of a weight row starting at byte `row` of slot 0,
// for every MUL_MAT weight type. Block layouts are ggml's (bp_quant.h);
// WTYPE is a specialisation constant, so each pipeline keeps one branch.
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

float wval(uint row, uint k)
{
    uint nb0 = tnb(0u, 0u);
    if (WTYPE == T_F32 || WTYPE == T_F16 || WTYPE == T_BF16)
        return ld(0u, row + k * nb0, WTYPE);
    if (WTYPE == T_Q4_0) {
        uint blk = row + (k >> 5) * nb0, j = k & 31u;
        uint q = rd_u8(0u, blk + 2u + (j & 15u));
        q = j < 16u ? (q & 15u) : (q >> 4);
        return f16(rd_u16(0u, blk)) * (float(q) - 8.0);
    }
    if (WTYPE == T_Q8_0) {
        uint blk = row + (k >> 5) * nb0, j = k & 31u;
        return f16(rd_u16(0u, blk)) * float(rd_i8(0u, blk + 2u + j));
    }
    if (WTYPE == T_Q4_K) {
        uint blk = row + (k >> 8) * nb0, j = k & 255u;
        uint sub = j >> 5, g = sub >> 1;
        uint q = rd_u8(0u, blk + 16u + g * 32u + (j & 31u));
        q = (sub & 1u) == 0u ? (q & 15u) : (q >> 4);
        float m;
        float sc = q4k_scale_min(blk, sub, m);
        return f16(rd_u16(0u, blk)) * sc * float(q) - f16(rd_u16(0u, blk + 2u)) * m;
    }
    // Q6_K: ql[128] qh[64] scales[16] d
    uint blk = row + (k >> 8) * nb0, j = k & 255u;
    uint h = j >> 7, r = j & 127u, qd = r >> 5, l = r & 31u;
    uint ql = rd_u8(0u, blk + h * 64u + l + (qd & 1u) * 32u);
    ql = (qd >> 1) == 0u ? (ql & 15u) : (ql >> 4);
    uint qh = (rd_u8(0u, blk + 128u + h * 32u + l) >> (qd * 2u)) & 3u;
    int q = int(ql | (qh << 4)) - 32;
    float sc = float(rd_i8(0u, blk + 192u + h * 8u + (l >> 4) + qd * 2u));
    return f16(rd_u16(0u, blk + 208u)) * sc * float(q);
}
