/*
 * dot_q8_1.cuh — the dot product of one unit of a quantized weight row with
 * the q8_1 activation blocks under it, for MUL_MAT's matrix-vector kernel
 * (matmul.cu). A unit covers whole weight blocks and whole q8_1 blocks of 32
 * (dot_unit_elems), chosen so that each weight byte is loaded once; inner
 * products are dp4a on 4 packed int8 pairs, as the CPU plugin does, and the
 * block scales, mins and zero points are applied once per 16 or 32 elements.
 *
 * Everything here is __host__ __device__, the three intrinsics it uses having
 * plain integer twins for the host, so that tests/test_cuda_quant.c checks
 * every type's bit placement against bp_quant_ref.h without a GPU.
 */
#ifndef BP_CUDA_DOT_Q8_1_CUH
#define BP_CUDA_DOT_Q8_1_CUH

#include "dequant.cuh"

/* Sum of the 4 signed byte products of a and b, plus c. */
BP_HD int dp4a(int a, int b, int c)
{
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 32; i += 8) c += (int8_t)(a >> i) * (int8_t)(b >> i);
    return c;
#endif
}

/* Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes y:x; s uses
 * selectors 0..7 only (no sign replication). */
BP_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    const uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
#endif
}

/* 4 bytes from a 2-byte aligned address (every block here is 2-aligned). */
BP_HD uint32_t ld_u32_2(const uint8_t *p)
{
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

BP_HD int ld_qs(const cuda_block_q8_1 *a, int i)
{
    return ((const int *)a->qs)[i];
}

/* Bits 0..3 of b moved to bit 0 of bytes 0..3. */
BP_HD uint32_t bits_to_bytes(uint32_t b)
{
    return (b & 1) | ((b & 2) << 7) | ((b & 4) << 14) | ((b & 8) << 21);
}

/* The IQ4_NL levels of the 4 indices (0..15) in the bytes of q, as packed
 * int8: each index's low 3 bits pick a byte from the lower or the upper 8
 * levels, its bit 3 picks between the two. */
BP_HD int iq4nl_levels4(uint32_t q)
{
    const uint32_t t = q | (q >> 4);
    const uint32_t sel = ((t & 0xFF) | ((t >> 8) & 0xFF00)) & 0x7777;
    const uint32_t lo = byte_perm(IQ4NL_W0, IQ4NL_W1, sel), hi = byte_perm(IQ4NL_W2, IQ4NL_W3, sel);
    const uint32_t upper = ((q >> 3) & 0x01010101u) * 0xFF;
    return (int)((hi & upper) | (lo & ~upper));
}

/* q in 0..7 per byte (the two low bits and the high bit << 2 of Q3_K) minus
 * 4, per byte: the top bit of each byte set first keeps borrows in it. */
BP_HD int sub4_bytes(uint32_t q)
{
    return (int)(((q | 0x80808080u) - 0x04040404u) ^ 0x80808080u);
}

/* ---- blocks of 32: unit u is block u, q8_1 block u ---- */

BP_HD float dot_q4_0(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 18;
    const cuda_block_q8_1 *a = xa + u;
    int sumi = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t v = ld_u32_2(blk + 2 + 4 * j);
        sumi = dp4a(v & 0x0F0F0F0F, ld_qs(a, j), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F0F0F, ld_qs(a, j + 4), sumi);
    }
    return ld_half(blk) * a->d * (float)(sumi - 8 * a->s);
}

/* x = d * q + m: the min multiplies the activations' quant sum. */
BP_HD float dot_q4_1(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 20;
    const cuda_block_q8_1 *a = xa + u;
    int sumi = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t v = ld_u32_2(blk + 4 + 4 * j);
        sumi = dp4a(v & 0x0F0F0F0F, ld_qs(a, j), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F0F0F, ld_qs(a, j + 4), sumi);
    }
    return a->d * (ld_half(blk) * (float)sumi + ld_half(blk + 2) * (float)a->s);
}

/* Q5_0 and Q5_1: qs at qs_off, the 32 fifth bits at qs_off - 4; the sum of
 * the 5-bit quants times the activations. */
BP_HD int sumi_q5(const uint8_t *blk, int qs_off, const cuda_block_q8_1 *a)
{
    const uint32_t qh = ld_u32_2(blk + qs_off - 4);
    int sumi = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t v = ld_u32_2(blk + qs_off + 4 * j);
        const uint32_t lo = (v & 0x0F0F0F0F) | (bits_to_bytes(qh >> (4 * j)) << 4);
        const uint32_t hi = ((v >> 4) & 0x0F0F0F0F) | (bits_to_bytes(qh >> (4 * j + 16)) << 4);
        sumi = dp4a((int)lo, ld_qs(a, j), sumi);
        sumi = dp4a((int)hi, ld_qs(a, j + 4), sumi);
    }
    return sumi;
}

BP_HD float dot_q5_0(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 22;
    const cuda_block_q8_1 *a = xa + u;
    return ld_half(blk) * a->d * (float)(sumi_q5(blk, 6, a) - 16 * a->s);
}

BP_HD float dot_q5_1(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 24;
    const cuda_block_q8_1 *a = xa + u;
    return a->d * (ld_half(blk) * (float)sumi_q5(blk, 8, a) + ld_half(blk + 2) * (float)a->s);
}

BP_HD float dot_q8_0(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 34;
    const cuda_block_q8_1 *a = xa + u;
    int sumi = 0;
    for (int j = 0; j < 8; j++) sumi = dp4a((int)ld_u32_2(blk + 2 + 4 * j), ld_qs(a, j), sumi);
    return ld_half(blk) * a->d * (float)sumi;
}

/* 16 bytes of IQ4_NL indices (Q4_0's nibble order) times one q8_1 block. */
BP_HD int sumi_iq4(const uint8_t *qs, const cuda_block_q8_1 *a)
{
    int sumi = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t v = ld_u32_2(qs + 4 * j);
        sumi = dp4a(iq4nl_levels4(v & 0x0F0F0F0F), ld_qs(a, j), sumi);
        sumi = dp4a(iq4nl_levels4((v >> 4) & 0x0F0F0F0F), ld_qs(a, j + 4), sumi);
    }
    return sumi;
}

BP_HD float dot_iq4_nl(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + u * 18;
    const cuda_block_q8_1 *a = xa + u;
    return ld_half(blk) * a->d * (float)sumi_iq4(blk + 2, a);
}

/* Unit u: sub-block s = u % 8 (32 elements) of super-block u / 8. */
BP_HD float dot_iq4_xs(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const uint8_t *blk = row + (u / 8) * 136;
    const int s = (int)(u % 8);
    const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 0xF) | (((ld_u16(blk + 2) >> (2 * s)) & 3) << 4);
    const cuda_block_q8_1 *a = xa + u;
    return ld_half(blk) * a->d * (float)((ls - 32) * sumi_iq4(blk + 8 + 16 * s, a));
}

/* ---- K-quants with 8 sub-blocks of 32 and 6-bit scale/min pairs ---- */

/* Unit u: group g = u % 4 of super-block u / 4 (sub-blocks 2g and 2g+1:
 * 32 bytes, low nibbles then high). */
BP_HD float dot_q4_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 4;
    const int g = (int)(u % 4);
    const uint8_t *blk = row + sb * 144;
    const cuda_block_q8_1 *a0 = xa + sb * 8 + 2 * g, *a1 = a0 + 1;
    const uint8_t *qs = blk + 16 + 32 * g;
    int s0 = 0, s1 = 0;
    for (int j = 0; j < 8; j++) {
        const uint32_t v = ld_u32_2(qs + 4 * j);
        s0 = dp4a(v & 0x0F0F0F0F, ld_qs(a0, j), s0);
        s1 = dp4a((v >> 4) & 0x0F0F0F0F, ld_qs(a1, j), s1);
    }
    int sc0, m0, sc1, m1;
    q4k_scale_min(blk + 4, 2 * g, &sc0, &m0);
    q4k_scale_min(blk + 4, 2 * g + 1, &sc1, &m1);
    const float d = ld_half(blk), dmin = ld_half(blk + 2);
    return d * (a0->d * (float)(sc0 * s0) + a1->d * (float)(sc1 * s1)) -
           dmin * (a0->d * (float)(m0 * a0->s) + a1->d * (float)(m1 * a1->s));
}

/* Unit u: chunk c = u % 4 of super-block u / 4, as Q4_K's group with the
 * fifth bits 2c (low nibbles) and 2c + 1 (high) of qh[l]. */
BP_HD float dot_q5_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 4;
    const int c = (int)(u % 4);
    const uint8_t *blk = row + sb * 176;
    const cuda_block_q8_1 *a0 = xa + sb * 8 + 2 * c, *a1 = a0 + 1;
    const uint8_t *qh = blk + 16, *qs = blk + 48 + 32 * c;
    int s0 = 0, s1 = 0;
    for (int j = 0; j < 8; j++) {
        const uint32_t v = ld_u32_2(qs + 4 * j), h = ld_u32_2(qh + 4 * j);
        const uint32_t lo = (v & 0x0F0F0F0F) | (((h >> (2 * c)) & 0x01010101) << 4);
        const uint32_t hi = ((v >> 4) & 0x0F0F0F0F) | (((h >> (2 * c + 1)) & 0x01010101) << 4);
        s0 = dp4a((int)lo, ld_qs(a0, j), s0);
        s1 = dp4a((int)hi, ld_qs(a1, j), s1);
    }
    int sc0, m0, sc1, m1;
    q4k_scale_min(blk + 4, 2 * c, &sc0, &m0);
    q4k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
    const float d = ld_half(blk), dmin = ld_half(blk + 2);
    return d * (a0->d * (float)(sc0 * s0) + a1->d * (float)(sc1 * s1)) -
           dmin * (a0->d * (float)(m0 * a0->s) + a1->d * (float)(m1 * a1->s));
}

/* ---- K-quants with 16 sub-blocks of 16: unit u is half h = u % 2 (128
 * elements) of super-block u / 2; element 32p + l of the half is q8_1 block
 * 4h + p, in sub-block 8h + 2p + l / 16 ---- */

/* Q2_K: bits 2p of qs[32h + l]; each sub-block's 4-bit min multiplies the
 * sum of its 16 activations, counted by dp4a against ones. */
BP_HD float dot_q2_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 2;
    const int h = (int)(u % 2);
    const uint8_t *blk = row + sb * 84;
    const uint8_t *sc = blk + 8 * h, *qs = blk + 16 + 32 * h;
    float acc_d = 0.0f, acc_m = 0.0f;
    for (int p = 0; p < 4; p++) {
        const cuda_block_q8_1 *a = xa + sb * 8 + 4 * h + p;
        int part[2] = { 0, 0 }, xsum[2] = { 0, 0 };
        for (int j = 0; j < 8; j++) {
            const uint32_t q = (ld_u32_2(qs + 4 * j) >> (2 * p)) & 0x03030303;
            part[j / 4] = dp4a((int)q, ld_qs(a, j), part[j / 4]);
            xsum[j / 4] = dp4a(0x01010101, ld_qs(a, j), xsum[j / 4]);
        }
        const int s0 = sc[2 * p], s1 = sc[2 * p + 1];
        acc_d += a->d * (float)((s0 & 0xF) * part[0] + (s1 & 0xF) * part[1]);
        acc_m += a->d * (float)((s0 >> 4) * xsum[0] + (s1 >> 4) * xsum[1]);
    }
    return ld_half(blk + 80) * acc_d - ld_half(blk + 82) * acc_m;
}

/* Q3_K: Q2_K's two low bits, and bit 4h + p of hmask[l] clear subtracts 4. */
BP_HD float dot_q3_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 2;
    const int h = (int)(u % 2);
    const uint8_t *blk = row + sb * 110;
    const uint8_t *hm = blk, *qs = blk + 32 + 32 * h, *scales = blk + 96;
    float acc = 0.0f;
    for (int p = 0; p < 4; p++) {
        const cuda_block_q8_1 *a = xa + sb * 8 + 4 * h + p;
        int part[2] = { 0, 0 };
        for (int j = 0; j < 8; j++) {
            const uint32_t lo = (ld_u32_2(qs + 4 * j) >> (2 * p)) & 0x03030303;
            const uint32_t hb = (ld_u32_2(hm + 4 * j) >> (4 * h + p)) & 0x01010101;
            part[j / 4] = dp4a(sub4_bytes(lo | (hb << 2)), ld_qs(a, j), part[j / 4]);
        }
        const int s0 = q3k_scale(scales, 8 * h + 2 * p) - 32, s1 = q3k_scale(scales, 8 * h + 2 * p + 1) - 32;
        acc += a->d * (float)(s0 * part[0] + s1 * part[1]);
    }
    return ld_half(blk + 108) * acc;
}

/* Q6_K: ggml's interleaving: element l + 32c of the half takes 4 bits from
 * ql[l + 32(c&1)] (low nibble for c < 2) and 2 bits from qh[l] >> 2c. */
BP_HD float dot_q6_k(const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    const int64_t sb = u / 2;
    const int h = (int)(u % 2);
    const uint8_t *blk = row + sb * 210;
    const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192 + 8 * h);
    float acc = 0.0f;
    for (int c = 0; c < 4; c++) {
        const cuda_block_q8_1 *a = xa + sb * 8 + 4 * h + c;
        const uint8_t *qlc = ql + 32 * (c & 1);
        int part[2] = { 0, 0 };
        for (int j = 0; j < 8; j++) {
            int packed = 0;
            for (int b = 0; b < 4; b++) {
                const int l = 4 * j + b;
                const int lo = c < 2 ? (qlc[l] & 0xF) : (qlc[l] >> 4);
                const int q = (lo | (((qh[l] >> (2 * c)) & 3) << 4)) - 32;
                packed |= (q & 0xFF) << (8 * b);
            }
            part[j / 4] = dp4a(packed, ld_qs(a, j), part[j / 4]);
        }
        acc += a->d * (float)(sc[2 * c] * part[0] + sc[2 * c + 1] * part[1]);
    }
    return ld_half(blk + 208) * acc;
}

/* ---- by type ---- */

/* Elements of a row one dot_unit covers; 0 for a type it does not take. */
BP_HD int dot_unit_elems(int type)
{
    switch (type) {
    case T_Q4_0: case T_Q4_1: case T_Q5_0: case T_Q5_1: case T_Q8_0: case T_IQ4_NL: case T_IQ4_XS:
        return 32;
    case T_Q4_K: case T_Q5_K: return 64;
    case T_Q2_K: case T_Q3_K: case T_Q6_K: return 128;
    default: return 0;
    }
}

/* Unit u of a row of `type` times xa, the row's q8_1 blocks from the first. */
BP_HD float dot_unit(int type, const uint8_t *row, int64_t u, const cuda_block_q8_1 *xa)
{
    switch (type) {
    case T_Q4_0: return dot_q4_0(row, u, xa);
    case T_Q4_1: return dot_q4_1(row, u, xa);
    case T_Q5_0: return dot_q5_0(row, u, xa);
    case T_Q5_1: return dot_q5_1(row, u, xa);
    case T_Q8_0: return dot_q8_0(row, u, xa);
    case T_IQ4_NL: return dot_iq4_nl(row, u, xa);
    case T_IQ4_XS: return dot_iq4_xs(row, u, xa);
    case T_Q4_K: return dot_q4_k(row, u, xa);
    case T_Q5_K: return dot_q5_k(row, u, xa);
    case T_Q2_K: return dot_q2_k(row, u, xa);
    case T_Q3_K: return dot_q3_k(row, u, xa);
    case T_Q6_K: return dot_q6_k(row, u, xa);
    default: return 0.0f;
    }
}

#endif
