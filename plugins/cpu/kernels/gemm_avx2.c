/*
 * gemm_avx2.c — the x8 (repacked, see repack.h) dot kernels for AVX2
 * without AVX-512: built into the avx2 variant only (the avx512 one has
 * gemm_avx512.c). One x8 block of 8 weight rows is loaded and unpacked once,
 * then meets up to four activation rows (Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K,
 * Q6_K, Q3_K, IQ4_XS; Q4_1 and Q5_1 take the columns one by one). Q2_K
 * stays on the plain dot (see q3_K_x8).
 *
 * A 256-bit register holds the same 8-byte group of 4 rows (rows 0-3 in
 * one, 4-7 in the other), so a 64-bit broadcast of 8 activation bytes
 * feeds 4 rows in one maddubs. maddubs multiplies unsigned by signed bytes
 * and adds pairs into SATURATING int16: nibbles (0..15) times int8 stay far
 * below the limit, so several products are summed in int16 before one madd
 * widens them; Q8_0 weights take ggml's sign trick (|w| * sign(x, w)), and
 * each product pair is widened at once. One hadd joins the two row halves,
 * leaving one int32 lane per row in the order 0 1 4 5 2 3 6 7 (ROW_ORDER):
 * the row scales are permuted into that order once per block and the
 * result permuted back once per call.
 */
#include "simd.h"

#if defined(CPU_HAVE_X86_GEMM_AVX2)
#include <immintrin.h>
#include <string.h>

/* The loops over sub-blocks are unrolled: their indices pick shuffle
 * masks, shift counts and offsets, which are constants only in unrolled
 * code (rolled, GCC built each mask at run time: Q4_K and Q6_K ran at half
 * speed for one activation row). The row-half loops stay rolled: unrolled
 * too, GCC spilled more and 4 activation rows ran about 20% slower. */
#define UNROLL _Pragma("GCC unroll 16")

/* Lane i of a joined sum holds row ROW_ORDER[i]; the permutation is its own
 * inverse, so it also puts the rows back. */
#define ROW_ORDER _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7)

static inline __m256i bcast8(const int8_t *p)
{
    return _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)p));
}

static inline __m256i load256(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* 8 f16 row scales, in ROW_ORDER. */
static inline __m256 row_scales(const uint8_t *d)
{
    return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)d)),
                                    ROW_ORDER);
}

static inline void store_rows(float *s, __m256 acc)
{
    _mm256_storeu_ps(s, _mm256_permutevar8x32_ps(acc, ROW_ORDER));
}

/* For kernels that keep the plain dot's 8 float lanes a row (x8_1,
 * q3_K_x8): 8 f16 row scales at d times dy, each row's scale in its two
 * lanes, rows 4h..4h+3. */
static inline __m256 row_pair_scales(__m256 d, int h, __m256 dy)
{
    const __m256i dup = h ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7) : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    return _mm256_mul_ps(_mm256_permutevar8x32_ps(d, dup), dy);
}

/* ...and their end: acc[k][h] holds lanes 2k, 2k + 1 of rows 4h..4h+3;
 * ggml's horizontal sum ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
 * is (acc0 + acc2) + (acc1 + acc3) and one hadd, which leaves the rows in
 * ROW_ORDER; then + late (in ROW_ORDER), into s[0..7]. */
static inline void store_lanes8(float *s, const __m256 (*acc)[2], __m256 late)
{
    __m256 g[2];
    for (int h = 0; h < 2; h++)
        g[h] = _mm256_add_ps(_mm256_add_ps(acc[0][h], acc[2][h]), _mm256_add_ps(acc[1][h], acc[3][h]));
    store_rows(s, _mm256_add_ps(_mm256_hadd_ps(g[0], g[1]), late));
}

/* acc[c] += (or -=, neg) the int32 sums of rows 0-3 (sumi[0]) and 4-7
 * (sumi[1]), two lanes a row, times the row scales w and the activation
 * block's d: the end of every 256-weight block. */
static inline __attribute__((always_inline)) void
x8_K_add(__m256 *acc, __m256i (*sumi)[CPU_GEMM_MAX_COLS], __m256 w,
         const struct bp_block_q8_K *const *yb, const int ncols, const int neg)
{
    for (int c = 0; c < ncols; c++) {
        const __m256 t = _mm256_cvtepi32_ps(_mm256_hadd_epi32(sumi[0][c], sumi[1][c]));
        const __m256 wd = _mm256_mul_ps(w, _mm256_set1_ps(yb[c]->d));
        acc[c] = neg ? _mm256_fnmadd_ps(t, wd, acc[c]) : _mm256_fmadd_ps(t, wd, acc[c]);
    }
}

/* Rows 0-3 (lo) and 4-7 (hi) of int16 sums, 4 int16 per row: one int32 per
 * row in ROW_ORDER. Both halves are at most 4 maddubs of nibbles (|x| <=
 * 15360), so the wrapping hadd of a pair cannot overflow. */
static inline __m256i join16(__m256i lo, __m256i hi)
{
    return _mm256_madd_epi16(_mm256_hadd_epi16(lo, hi), _mm256_set1_epi16(1));
}

/* Q4_0 x8: byte j of group c holds element 8c + j (low nibble) and
 * 16 + 8c + j (high nibble); the -8 offset comes out as 8 * the activation
 * block's quant sum. Those terms are made 16 blocks at a time per
 * activation row (Q4_0_CHUNK) and wait on the stack, so a block subtracts
 * a broadcast load (no ALU uop) instead of a term moved from a GPR and
 * broadcast (two port-5 uops). */
#define Q4_0_CHUNK 16

/* Q5_0's fifth bits for one register of nibbles (4 rows x 8 elements): the
 * 4 qh bytes at p (one per row, bit j for element j), each spread over its
 * row's 8 bytes, tested bit by bit and made 16 where set. */
static inline __m256i fifth_bits(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(v),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

/* Q4_0 and (q5) Q5_0 x8: Q5_0's qh sits between d and qs (repack.h), its
 * byte 4 i + r the fifth bits of register i's row r (registers in the
 * order l0a l0b l1a l1b h0a h0b h1a h1b), and its offset is -16. The
 * quants stay at most 31, so four maddubs still add in int16. On AMD
 * family 1Ah (the avx2 variant forced), one thread: from L2 24 GB/s
 * against Q4_0's 41, from 512 MiB 0.67 of the read against the plain
 * dot's 0.44. */
static inline __attribute__((always_inline)) void
q4_0_q5_0_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,
             const int ncols, const int q5)
{
    const int64_t nb = n / BP_QK4_0;
    const size_t xs = CPU_REPACK_ROWS * (q5 ? sizeof(struct bp_block_q5_0) : sizeof(struct bp_block_q4_0));
    const uint8_t *x = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    _Alignas(32) int32_t off[CPU_GEMM_MAX_COLS][Q4_0_CHUNK];
    __m256 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        if (b % Q4_0_CHUNK == 0)
            for (int c = 0; c < ncols; c++) {
                const char *sums = (const char *)y + (size_t)c * ys + cpu_q8_0_aux_sums_offset(nb);
                for (int h = 0; h < Q4_0_CHUNK; h += 8) {
                    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                    /* lanes past the last block are not read */
                    const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nb - b - h)), lane);
                    const __m256i sy = _mm256_maskload_epi32((const int *)(const void *)(sums + 4 * (b + h)), in);
                    _mm256_store_si256((__m256i *)(void *)&off[c][h], _mm256_slli_epi32(sy, q5 ? 4 : 3));
                }
            }
        const uint8_t *xb = x + (size_t)b * xs;
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
        const uint8_t *qs = xb + (q5 ? 48 : 16);
        const __m256i v0a = load256(qs), v0b = load256(qs + 32);
        const __m256i v1a = load256(qs + 64), v1b = load256(qs + 96);
        __m256i l0a = _mm256_and_si256(v0a, m4), l0b = _mm256_and_si256(v0b, m4);
        __m256i l1a = _mm256_and_si256(v1a, m4), l1b = _mm256_and_si256(v1b, m4);
        __m256i h0a = _mm256_and_si256(_mm256_srli_epi16(v0a, 4), m4);
        __m256i h0b = _mm256_and_si256(_mm256_srli_epi16(v0b, 4), m4);
        __m256i h1a = _mm256_and_si256(_mm256_srli_epi16(v1a, 4), m4);
        __m256i h1b = _mm256_and_si256(_mm256_srli_epi16(v1b, 4), m4);
        if (q5) {
            l0a = _mm256_or_si256(l0a, fifth_bits(xb + 16));
            l0b = _mm256_or_si256(l0b, fifth_bits(xb + 20));
            l1a = _mm256_or_si256(l1a, fifth_bits(xb + 24));
            l1b = _mm256_or_si256(l1b, fifth_bits(xb + 28));
            h0a = _mm256_or_si256(h0a, fifth_bits(xb + 32));
            h0b = _mm256_or_si256(h0b, fifth_bits(xb + 36));
            h1a = _mm256_or_si256(h1a, fifth_bits(xb + 40));
            h1b = _mm256_or_si256(h1b, fifth_bits(xb + 44));
        }
        const __m256 dw = row_scales(xb);
        for (int c = 0; c < ncols; c++) {
            const char *yr = (const char *)y + (size_t)c * ys;
            const int8_t *q = ((const struct bp_block_q8_0 *)(const void *)yr)[b].qs;
            const __m256i y0 = bcast8(q), y1 = bcast8(q + 8), y2 = bcast8(q + 16), y3 = bcast8(q + 24);
            const __m256i sa = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_maddubs_epi16(l0a, y0), _mm256_maddubs_epi16(l1a, y1)),
                _mm256_add_epi16(_mm256_maddubs_epi16(h0a, y2), _mm256_maddubs_epi16(h1a, y3)));
            const __m256i sb = _mm256_add_epi16(
                _mm256_add_epi16(_mm256_maddubs_epi16(l0b, y0), _mm256_maddubs_epi16(l1b, y1)),
                _mm256_add_epi16(_mm256_maddubs_epi16(h0b, y2), _mm256_maddubs_epi16(h1b, y3)));
            const float dy = cpu_q8_0_aux_d(yr, nb, b);
            /* Q5_0's halves reach 4 * 2 * 31 * 127 each: their pair would
             * not fit the int16 of join16's hadd, so each widens first */
            const __m256i j = q5 ? _mm256_hadd_epi32(_mm256_madd_epi16(sa, _mm256_set1_epi16(1)),
                                                     _mm256_madd_epi16(sb, _mm256_set1_epi16(1)))
                                 : join16(sa, sb);
            const __m256i p = _mm256_sub_epi32(j, _mm256_set1_epi32(off[c][b % Q4_0_CHUNK]));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_set1_ps(dy)),
                                     acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q8_0 and (nl) IQ4_NL x8 (Q4_0's layout; its levels looked up per
 * register): |w| once per block; sign(x, w) per activation row. Each group
 * of 8 weight bytes is loaded once and meets every activation row before
 * the next, so only 2 * ncols int32 sums stay live. A pair of int8 products
 * (up to 2 * 128 * 127) fills int16, so each maddubs is widened by its own
 * madd. Like the plain kernel this assumes no -128 in the activation
 * (from_float gives -127..127). */
static inline __attribute__((always_inline)) void
q8_0_iq4_nl_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,
               const int ncols, const int nl)
{
    const int64_t nb = n / BP_QK8_0;
    const size_t xs = CPU_REPACK_ROWS * (nl ? sizeof(struct bp_block_iq4_nl) : sizeof(struct bp_block_q8_0));
    const uint8_t *x = w;
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bp_iq4nl_values()));
    __m256 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * xs;
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
        const __m256 dw = row_scales(xb);
        const int8_t *q[CPU_GEMM_MAX_COLS];
        __m256i pa[CPU_GEMM_MAX_COLS], pb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            q[c] = ((const struct bp_block_q8_0 *)(const void *)((const char *)y + (size_t)c * ys))[b].qs;
            pa[c] = pb[c] = _mm256_setzero_si256();
        }
        /* group k of rows 0-3 (va) and 4-7 (vb): each weight byte loaded once */
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m256i va, vb;
            if (nl) { /* elements 8k..: the low (k < 2) or high nibbles of group k % 2 */
                const __m256i na = load256(xb + 16 + 64 * (k % 2)), nbv = load256(xb + 48 + 64 * (k % 2));
                va = _mm256_shuffle_epi8(lut, _mm256_and_si256(k < 2 ? na : _mm256_srli_epi16(na, 4), m4));
                vb = _mm256_shuffle_epi8(lut, _mm256_and_si256(k < 2 ? nbv : _mm256_srli_epi16(nbv, 4), m4));
            } else {
                va = load256(xb + 16 + 64 * k);
                vb = load256(xb + 48 + 64 * k);
            }
            const __m256i aa = _mm256_abs_epi8(va), ab = _mm256_abs_epi8(vb);
            for (int c = 0; c < ncols; c++) {
                const __m256i yk = bcast8(q[c] + 8 * k);
                pa[c] = _mm256_add_epi32(pa[c], _mm256_madd_epi16(
                    _mm256_maddubs_epi16(aa, _mm256_sign_epi8(yk, va)), ones));
                pb[c] = _mm256_add_epi32(pb[c], _mm256_madd_epi16(
                    _mm256_maddubs_epi16(ab, _mm256_sign_epi8(yk, vb)), ones));
            }
        }
        for (int c = 0; c < ncols; c++) {
            const float dy = cpu_q8_0_aux_d((const char *)y + (size_t)c * ys, nb, b);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_hadd_epi32(pa[c], pb[c])),
                                     _mm256_mul_ps(dw, _mm256_set1_ps(dy)), acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q4_1 and (q5) Q5_1 x8 (d, m, then Q4_0's qs or Q5_0's qh and qs): the
 * plain dot's arithmetic (dot_x86.c), which is ggml-cpu's, to the bit. Its
 * 8 int32 lanes of 4 products a block (lane j: elements 4j..4j+3) each take
 * d_w d_y into a float sum of their own, so a register of 4 rows x 8 bytes
 * gives two lanes of each row: 8 float sums a column (acc[k][h] below,
 * ended by store_lanes8), and m * s summed apart. Sixteen float sums do
 * not fit in registers beside the quants, so the columns take a chunk of
 * X8_1_CHUNK blocks one after the other, each unpacking the nibbles again
 * (cheaper than storing and loading them: 117 against 95 GFLOP/s at 64
 * columns); Q5_1's fifth bits cost more, so the first column keeps its
 * quants in `u` for the others (62 -> 79 GFLOP/s). */
#define X8_1_CHUNK 16
static inline __attribute__((always_inline)) void
x8_1(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
     const int q5)
{
    const int64_t nb = n / BP_QK4_1;
    const size_t xs = CPU_REPACK_ROWS * (q5 ? sizeof(struct bp_block_q5_1) : sizeof(struct bp_block_q4_1));
    const uint8_t *x = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[CPU_GEMM_MAX_COLS][4][2], accm[CPU_GEMM_MAX_COLS];
    _Alignas(32) uint8_t u[X8_1_CHUNK][4][2][32];
    for (int c = 0; c < ncols; c++) {
        accm[c] = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) acc[c][k][0] = acc[c][k][1] = _mm256_setzero_ps();
    }
    for (int64_t b0 = 0; b0 < nb; b0 += X8_1_CHUNK) {
        const int64_t e = nb - b0 < X8_1_CHUNK ? nb : b0 + X8_1_CHUNK;
        for (int c = 0; c < ncols; c++) {
            const char *yr = (const char *)y + (size_t)c * ys;
            for (int64_t b = b0; b < e; b++) {
                const uint8_t *xb = x + (size_t)b * xs;
                if (c == 0) {
                    cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
                    cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
                }
                const int8_t *q = ((const struct bp_block_q8_0 *)(const void *)yr)[b].qs;
                const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)xb));
                const __m256 dy = _mm256_set1_ps(cpu_q8_0_aux_d(yr, nb, b));
                const __m256 dd[2] = { row_pair_scales(d, 0, dy), row_pair_scales(d, 1, dy) };
                const uint8_t *qs = xb + (q5 ? 64 : 32);
                /* k = 0..3: elements 0-7, 8-15 (low nibbles of qs 0-7,
                 * 8-15), 16-23, 24-31 (their high nibbles); h: rows 0-3, 4-7 */
                UNROLL
                for (int k = 0; k < 4; k++) {
                    const __m256i yk = bcast8(q + 8 * k);
                    UNROLL
                    for (int h = 0; h < 2; h++) {
                        __m256i uk;
                        if (c == 0 || !q5) {
                            const __m256i v = load256(qs + 64 * (k % 2) + 32 * h);
                            uk = _mm256_and_si256(k < 2 ? v : _mm256_srli_epi16(v, 4), m4);
                            if (q5) /* byte k of the rows' qh: 4 bytes a row half */
                                uk = _mm256_or_si256(uk, fifth_bits(xb + 32 + 8 * k + 4 * h));
                            if (q5 && ncols > 1)
                                _mm256_store_si256((__m256i *)(void *)u[b - b0][k][h], uk);
                        } else {
                            uk = _mm256_load_si256((const __m256i *)(const void *)u[b - b0][k][h]);
                        }
                        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(uk, yk), ones);
                        acc[c][k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dd[h], acc[c][k][h]);
                    }
                }
                accm[c] = _mm256_fmadd_ps(row_scales(xb + 16), _mm256_set1_ps(cpu_q8_1_s(yr, nb, b)),
                                          accm[c]);
            }
        }
    }
    for (int c = 0; c < ncols; c++) store_lanes8(s + (size_t)c * bs, acc[c], accm[c]);
}

/* From v, one byte per row in each 32-bit lane (row r in lane r), the byte
 * at position j of rows 4h..4h+3 widened to int16 and repeated in the 4
 * int16 slots of its row (the shape of the maddubs sums of half h). */
static inline __m256i row_bytes16(__m256i v, int h, int j)
{
    const __m256i rows = h ? _mm256_permute4x64_epi64(v, 0xFA) : _mm256_permute4x64_epi64(v, 0x50);
    const char z = (char)0x80, j0 = (char)j, j1 = (char)(j + 4);
    const __m256i pick = _mm256_setr_epi8(j0, z, j0, z, j0, z, j0, z, j1, z, j1, z, j1, z, j1, z,
                                          j0, z, j0, z, j0, z, j0, z, j1, z, j1, z, j1, z, j1, z);
    return _mm256_shuffle_epi8(rows, pick);
}

/* Q4_K and (q5) Q5_K x8: the 6-bit scales and mins of 8 rows come out of
 * three 256-bit words (ggml's packing on 8 rows at once, as in
 * gemm_avx512.c). Rows 0-3 and 4-7 are done one after the other, so each
 * sub-block's int16 sums (4 maddubs of quants at most 31: |x| <= 31496)
 * take one register per activation row; one madd by the sub-block scale
 * widens them. Q5_K's fifth bit of sub-block j is bit j of the qh piece
 * beside the qs piece (repack.h). The min term
 * dmin * sum_j m[j] (bsums[2j] + bsums[2j+1]) is one madd per 4 mins. */
static inline __attribute__((always_inline)) void
q4_K_q5_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,
             const int ncols, const int q5)
{
    const int64_t nb = n / BP_QK_K;
    const size_t xs = CPU_REPACK_ROWS * (q5 ? sizeof(struct bp_block_q5_K) : sizeof(struct bp_block_q4_K));
    const __m256i b4 = _mm256_set1_epi8(0x10);
    const uint8_t *x = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k03 = _mm256_set1_epi32(0x03030303);
    __m256 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * xs;
        /* d, dmin, scales (Q5_K: and qh) */
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, q5 ? 384 : 128);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, q5 ? 384 : 128);
        const uint8_t *qs = xb + (q5 ? 384 : 128);
        const __m256i u0 = load256(xb + 32), u1 = load256(xb + 64), u2 = load256(xb + 96);
        /* lane r: bytes j = scale (min) of sub-block j (lo) and 4 + j (hi) of row r */
        const __m256i sc_lo = _mm256_and_si256(u0, k3f), mn_lo = _mm256_and_si256(u1, k3f);
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k03), 4));
        const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k03), 4));
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        __m256i sumi[2][CPU_GEMM_MAX_COLS], summ[2][CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++)
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
        for (int h = 0; h < 2; h++) {
            /* rows 4h..4h+3: their 4 low (high) mins as int16, row r at 4r */
            const __m256i mins_lo = _mm256_cvtepu8_epi16(h ? _mm256_extracti128_si256(mn_lo, 1)
                                                           : _mm256_castsi256_si128(mn_lo));
            const __m256i mins_hi = _mm256_cvtepu8_epi16(h ? _mm256_extracti128_si256(mn_hi, 1)
                                                           : _mm256_castsi256_si128(mn_hi));
            for (int c = 0; c < ncols; c++) {
                const __m256i bsv = _mm256_loadu_si256((const __m256i *)(const void *)yb[c]->bsums);
                const __m128i bp = _mm_hadd_epi16(_mm256_castsi256_si128(bsv),
                                                  _mm256_extracti128_si256(bsv, 1));
                summ[h][c] = _mm256_add_epi32(
                    _mm256_madd_epi16(mins_lo, _mm256_broadcastq_epi64(bp)),
                    _mm256_madd_epi16(mins_hi, _mm256_broadcastq_epi64(_mm_unpackhi_epi64(bp, bp))));
                sumi[h][c] = _mm256_setzero_si256();
            }
            UNROLL
            for (int j = 0; j < 8; j++) { /* sub-block j: nibbles (j & 1) of chunk j / 2 */
                const __m256i scale = row_bytes16(j < 4 ? sc_lo : sc_hi, h, j % 4);
                __m256i p[CPU_GEMM_MAX_COLS];
                for (int c = 0; c < ncols; c++) p[c] = _mm256_setzero_si256();
                UNROLL
                for (int k = 0; k < 4; k++) {
                    const uint8_t *piece = qs + 64 * (4 * (j / 2) + k);
                    if (h == 0 && j % 2 == 0) { /* rows 0-3 meet each piece first */
                        _mm_prefetch((const char *)piece + CPU_X8_L2_PREFETCH_BYTES, _MM_HINT_T1);
                        _mm_prefetch((const char *)piece + CPU_X8_L1_PREFETCH_BYTES, _MM_HINT_T0);
                    }
                    const __m256i v = load256(piece + 32 * h);
                    __m256i q4 = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
                    if (q5) { /* bit j of qh piece k to bit 4 */
                        const __m256i hq = load256(xb + 128 + 64 * k + 32 * h);
                        q4 = _mm256_or_si256(q4, _mm256_and_si256(
                            j < 4 ? _mm256_slli_epi16(hq, 4 - j) : j == 4 ? hq : _mm256_srli_epi16(hq, j - 4), b4));
                    }
                    for (int c = 0; c < ncols; c++)
                        p[c] = _mm256_add_epi16(p[c], _mm256_maddubs_epi16(q4,
                            bcast8(yb[c]->qs + 64 * (j / 2) + 32 * (j & 1) + 8 * k)));
                }
                for (int c = 0; c < ncols; c++)
                    sumi[h][c] = _mm256_add_epi32(sumi[h][c], _mm256_madd_epi16(p[c], scale));
            }
        }
        x8_K_add(acc, sumi, row_scales(xb), yb, ncols, 0);
        x8_K_add(acc, summ, row_scales(xb + 16), yb, ncols, 1);
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q6_K x8: 6-bit quants rebuilt from ql nibbles and qh bit pairs (0..63,
 * unsigned for maddubs: two pairs of products stay below 2 * 2 * 63 * 128
 * in int16); the -32 offset is 32 * sum_j scale[j] * bsums[j], one madd
 * per 4 scales. Rows 0-3 and 4-7 one after the other, as Q4_K; each
 * sub-block's signed scales are widened once per half and spread over
 * their row's 4 int16 slots by one shuffle. */
static inline __m256i spread16(__m256i v, int m)
{
    const char a = (char)(2 * m), b = (char)(2 * m + 1), c = (char)(8 + 2 * m), d = (char)(9 + 2 * m);
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d,
                                                   a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d));
}

/* The 64-byte pieces of an x8 Q6_K block (repack.h) that hold, for
 * element group k = 0..7 of half h (elements 128 h + 8 k .. and + 64), the
 * ql bytes (ql[64 h + 8 k] for k < 4, ql[64 h + 32 + 8 (k - 4)] after) and
 * the qh bytes (qh[32 h + 8 (k % 4)]). */
static inline const uint8_t *q6_K_ql(const uint8_t *xb, int h, int k)
{
    return xb + 144 + 768 * h + (k < 4 ? 128 * k : 512 + 64 * (k - 4));
}
static inline const uint8_t *q6_K_qh(const uint8_t *xb, int h, int k)
{
    return xb + 144 + 768 * h + 64 + 128 * (k % 4);
}

static inline __attribute__((always_inline)) void
q6_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m256 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q6_K));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 144); /* d, scales */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 144);
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        __m256i sumi[2][CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++)
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
        for (int hr = 0; hr < 2; hr++) {
            /* rows 4hr..4hr+3: scales 4q..4q+3 as int16, row r at 4r */
            __m256i sc[4];
            UNROLL
            for (int q = 0; q < 4; q++)
                sc[q] = _mm256_cvtepi8_epi16(
                    _mm_loadu_si128((const __m128i *)(const void *)(xb + 16 + 32 * q + 16 * hr)));
            for (int c = 0; c < ncols; c++) {
                __m256i corr = _mm256_setzero_si256();
                for (int q = 0; q < 4; q++) {
                    int64_t b4;
                    memcpy(&b4, yb[c]->bsums + 4 * q, 8);
                    corr = _mm256_add_epi32(corr, _mm256_madd_epi16(sc[q], _mm256_set1_epi64x(b4)));
                }
                sumi[hr][c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
            }
            UNROLL
            for (int h = 0; h < 2; h++)
                UNROLL
                for (int t = 0; t < 4; t++)
                    UNROLL
                    for (int part = 0; part < 2; part++) { /* sub-block 8h + 4 part + t */
                        const int j = 8 * h + 4 * part + t;
                        const __m256i scale = spread16(sc[j / 4], j % 4);
                        __m256i p[CPU_GEMM_MAX_COLS];
                        for (int c = 0; c < ncols; c++) p[c] = _mm256_setzero_si256();
                        UNROLL
                        for (int k = 2 * t; k < 2 * t + 2; k++) {
                            if (hr == 0 && part == 0) { /* rows 0-3 meet each piece first */
                                const int ahead = CPU_X8_L2_PREFETCH_BYTES;
                                const int near = CPU_X8_L1_PREFETCH_BYTES;
                                _mm_prefetch((const char *)q6_K_ql(xb, h, k) + ahead, _MM_HINT_T1);
                                _mm_prefetch((const char *)q6_K_ql(xb, h, k) + near, _MM_HINT_T0);
                                if (k < 4) {
                                    _mm_prefetch((const char *)q6_K_qh(xb, h, k) + ahead, _MM_HINT_T1);
                                    _mm_prefetch((const char *)q6_K_qh(xb, h, k) + near, _MM_HINT_T0);
                                }
                            }
                            const __m256i l = load256(q6_K_ql(xb, h, k) + 32 * hr);
                            const __m256i hb = load256(q6_K_qh(xb, h, k) + 32 * hr);
                            const int sh = (k < 4 ? 0 : 2) + 4 * part;
                            const __m256i q6 = _mm256_or_si256(
                                _mm256_and_si256(part ? _mm256_srli_epi16(l, 4) : l, m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, sh), m3), 4));
                            for (int c = 0; c < ncols; c++)
                                p[c] = _mm256_add_epi16(p[c], _mm256_maddubs_epi16(q6,
                                    bcast8(yb[c]->qs + 128 * h + 64 * part + 8 * k)));
                        }
                        for (int c = 0; c < ncols; c++)
                            sumi[hr][c] = _mm256_add_epi32(sumi[hr][c], _mm256_madd_epi16(p[c], scale));
                    }
        }
        x8_K_add(acc, sumi, row_scales(xb), yb, ncols, 0);
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q3_K x8 (layout in repack.h), to the bit the plain dot's result
 * (cpu_vec_dot_q3_K_q8_K_x86): 2- and 3-bit models amplify a last-bit
 * difference in one layer into another rounding of the next layer's
 * activation quants, and with each row's block summed in one integer,
 * llama-256's Q2_K file (whose attention values are Q3_K) stood 0.3 from
 * llama.cpp's logits at 30 of 32 positions. So, as gemm_avx512.c does for
 * Q2_K, every row keeps the plain dot's 8 lanes: lane 2k + e sums bytes
 * 8k + 4e .. 8k + 4e + 3 of every 32-byte quant run, which is lane e of a
 * row in qs piece k, so sumi[c][k] and acc[c][k][hr] carry lanes 2k, 2k + 1
 * of rows 4hr..4hr+3. A run (half h, shift p) holds sub-block 8h + 2p in
 * pieces 0-1 and 8h + 2p + 1 in pieces 2-3: each piece's maddubs is
 * widened by one madd with its sub-block's scale (spread16). The quants go
 * in as the plain dot's, their two bits less 4 where the hmask bit is
 * clear, by the sign trick; store_lanes8 at the end. That costs
 * the kernel a third of its speed against summing each block in one
 * integer, and leaves it 1.2-1.4x the plain dot. (The same for Q2_K was
 * no faster than its plain dot at decode, so avx2 keeps Q2_K plain.) */
static inline __attribute__((always_inline)) void
q3_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols)
{
    const int64_t nb = n / BP_QK_K;
    const size_t xs = CPU_REPACK_ROWS * sizeof(struct bp_block_q3_K);
    const uint8_t *x = w;
    const __m256i m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
    __m256 acc[CPU_GEMM_MAX_COLS][4][2];
    for (int c = 0; c < ncols; c++)
        for (int k = 0; k < 4; k++) acc[c][k][0] = acc[c][k][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * xs;
        /* the whole block is read within the first row half: its prefetches
         * at once, into L1 only (as the avx512 kernel's) */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 896);
        const uint8_t *qs = xb + 368;
        __m256i sv[4];
        cpu_q3_K_x8_scales(xb, sv);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)xb));
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++)
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
        for (int hr = 0; hr < 2; hr++) {
            /* rows 4hr..4hr+3: scales of sub-blocks 4q..4q+3 as int16, row r at 4r */
            __m256i sc[4];
            UNROLL
            for (int q = 0; q < 4; q++)
                sc[q] = _mm256_cvtepi8_epi16(hr ? _mm256_extracti128_si256(sv[q], 1)
                                                : _mm256_castsi256_si128(sv[q]));
            __m256i sumi[CPU_GEMM_MAX_COLS][4];
            for (int c = 0; c < ncols; c++)
                for (int k = 0; k < 4; k++) sumi[c][k] = _mm256_setzero_si256();
            UNROLL
            for (int h = 0; h < 2; h++)
                UNROLL
                for (int p = 0; p < 4; p++)
                    UNROLL
                    for (int k = 0; k < 4; k++) {
                        const int j = 8 * h + 2 * p + k / 2, hb = 4 * h + p;
                        const __m256i scale = spread16(sc[j / 4], j % 4);
                        const __m256i qv = load256(qs + 64 * (4 * h + k) + 32 * hr);
                        const __m256i hv = load256(xb + 112 + 64 * k + 32 * hr);
                        /* the two bits less 4 where the hmask bit is clear */
                        const __m256i q = _mm256_sub_epi8(
                            _mm256_and_si256(p ? _mm256_srli_epi16(qv, 2 * p) : qv, m3),
                            _mm256_andnot_si256(hb < 2 ? _mm256_slli_epi16(hv, 2 - hb)
                                                : hb == 2 ? hv : _mm256_srli_epi16(hv, hb - 2), b2));
                        const __m256i a = _mm256_sign_epi8(q, q);
                        for (int c = 0; c < ncols; c++) {
                            const __m256i yk = bcast8(yb[c]->qs + 128 * h + 32 * p + 8 * k);
                            const __m256i pr = _mm256_maddubs_epi16(a, _mm256_sign_epi8(yk, q));
                            sumi[c][k] = _mm256_add_epi32(sumi[c][k], _mm256_madd_epi16(pr, scale));
                        }
                    }
            for (int c = 0; c < ncols; c++) {
                const __m256 dd = row_pair_scales(dw, hr, _mm256_set1_ps(yb[c]->d));
                for (int k = 0; k < 4; k++)
                    acc[c][k][hr] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sumi[c][k]), acc[c][k][hr]);
            }
        }
    }
    for (int c = 0; c < ncols; c++) store_lanes8(s + (size_t)c * bs, acc[c], _mm256_setzero_ps());
}

/* IQ4_XS x8 (layout in repack.h): rows 0-3 and 4-7 one after the other,
 * as Q4_K. Each 32-byte register of nibbles looks up IQ4_NL's levels
 * twice, as magnitudes and as signs: maddubs takes |level| (unsigned)
 * against the activation with the level's sign (ggml's trick), and since
 * a pair of those products fills int16 (2 * 127 * 127), each maddubs is
 * widened at once by a madd with its sub-block's scale. The 6-bit scales
 * of 8 rows come out of scales_l and scales_h in bytes (ggml's packing on
 * 8 rows at once): byte q of row r's dword of ev (od) is sub-block 2q's
 * (2q + 1's) scale less 32. */
static inline __attribute__((always_inline)) void
iq4_xs_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F), k03 = _mm256_set1_epi8(0x03), k0c = _mm256_set1_epi8(0x0C);
    const __m256i k32 = _mm256_set1_epi8(32);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bp_iq4nl_values()));
    const __m256i alut = _mm256_abs_epi8(lut);
    /* odd bytes of each dword: 0xFF */
    const __m256i odd = _mm256_set1_epi32((int)0xFF00FF00);
    __m256 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_iq4_xs));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 64); /* d, scales */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 64);
        /* row r's scales_h as [low byte, low, high, high] in its dword, then
         * nibble q of it in byte q */
        const __m256i hd = _mm256_shuffle_epi8(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(xb + 16))),
            _mm256_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13,
                             0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13));
        const __m256i nib = _mm256_blendv_epi8(_mm256_and_si256(hd, m4),
                                               _mm256_and_si256(_mm256_srli_epi16(hd, 4), m4), odd);
        const __m256i l = load256(xb + 32);
        const __m256i ev = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l, m4),
            _mm256_slli_epi16(_mm256_and_si256(nib, k03), 4)), k32);
        const __m256i od = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
            _mm256_slli_epi16(_mm256_and_si256(nib, k0c), 2)), k32);
        const uint8_t *qs = xb + 64;
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        __m256i sumi[2][CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++)
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
        for (int hr = 0; hr < 2; hr++) {
            /* rows 4hr..4hr+3: sub-blocks 0, 2, 4, 6 (1, 3, 5, 7) as int16, row r at 4r */
            const __m256i ev16 = _mm256_cvtepi8_epi16(hr ? _mm256_extracti128_si256(ev, 1) : _mm256_castsi256_si128(ev));
            const __m256i od16 = _mm256_cvtepi8_epi16(hr ? _mm256_extracti128_si256(od, 1) : _mm256_castsi256_si128(od));
            for (int c = 0; c < ncols; c++) sumi[hr][c] = _mm256_setzero_si256();
            UNROLL
            for (int ib = 0; ib < 8; ib++) {
                const __m256i scale = spread16(ib % 2 ? od16 : ev16, ib / 2);
                UNROLL
                for (int t = 0; t < 2; t++) { /* qs piece 2 ib + t: elements 32 ib + 8 t (+ 16) */
                    const uint8_t *piece = qs + 64 * (2 * ib + t);
                    if (hr == 0) { /* rows 0-3 meet each piece first */
                        _mm_prefetch((const char *)piece + CPU_X8_L2_PREFETCH_BYTES, _MM_HINT_T1);
                        _mm_prefetch((const char *)piece + CPU_X8_L1_PREFETCH_BYTES, _MM_HINT_T0);
                    }
                    const __m256i v = load256(piece + 32 * hr);
                    UNROLL
                    for (int hi = 0; hi < 2; hi++) {
                        const __m256i q4 = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
                        const __m256i mag = _mm256_shuffle_epi8(alut, q4), sgn = _mm256_shuffle_epi8(lut, q4);
                        for (int c = 0; c < ncols; c++) {
                            const __m256i yv = _mm256_sign_epi8(bcast8(yb[c]->qs + 32 * ib + 16 * hi + 8 * t), sgn);
                            sumi[hr][c] = _mm256_add_epi32(sumi[hr][c],
                                _mm256_madd_epi16(_mm256_maddubs_epi16(mag, yv), scale));
                        }
                    }
                }
            }
        }
        x8_K_add(acc, sumi, row_scales(xb), yb, ncols, 0);
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* T's x8 kernel: IMPL with its last argument V (which of the types it
 * serves), under CPU_X8_DISPATCH. */
#define X8_KERNEL(T, IMPL, V)                                                            \
    static inline __attribute__((always_inline)) void                                    \
    T##_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,      \
           const int ncols)                                                              \
    {                                                                                    \
        IMPL(n, s, bs, w, y, ys, ncols, V);                                              \
    }                                                                                    \
    CPU_X8_DISPATCH(T, avx2)

X8_KERNEL(q4_0, q4_0_q5_0_x8, 0)
X8_KERNEL(q5_0, q4_0_q5_0_x8, 1)
X8_KERNEL(q8_0, q8_0_iq4_nl_x8, 0)
X8_KERNEL(iq4_nl, q8_0_iq4_nl_x8, 1)
X8_KERNEL(q4_K, q4_K_q5_K_x8, 0)
X8_KERNEL(q5_K, q4_K_q5_K_x8, 1)
X8_KERNEL(q4_1, x8_1, 0)
X8_KERNEL(q5_1, x8_1, 1)
CPU_X8_DISPATCH(q6_K, avx2)
CPU_X8_DISPATCH(q3_K, avx2)
CPU_X8_DISPATCH(iq4_xs, avx2)
#else
typedef int cpu_gemm_avx2_not_built; /* ISO C forbids an empty translation unit */
#endif
