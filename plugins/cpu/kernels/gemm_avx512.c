/*
 * gemm_avx512.c — the x8 (repacked, see repack.h) dot kernels for AVX-512 VNNI:
 * one x8 block of 8 weight rows is loaded and unpacked once, then meets up
 * to four activation rows (eight for Q4_0 and Q8_0). Each row owns two int32 lanes of a 512-bit
 * register (its bytes 0..3 and 4..7 of every 8-byte group), so a 64-bit
 * broadcast of the activation feeds all 8 rows in one vpdpbusd; the pairs
 * are added once per output, not once per block. vpdpbusd wants unsigned
 * weights: Q4_0 nibbles are (q - 8 offset), Q8_0 bytes get +128 by a XOR
 * 0x80 when loaded; the offset comes back out through the activation
 * block's quant sum.
 */
#include "simd.h"

#if defined(CPU_HAVE_X86_GEMM)
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "../cpu_features.h"

static inline __m512i bcast8(const int8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* 8 f16 row scales, each duplicated into its row's two lanes. */
static inline __m512 row_scales(const uint8_t *d)
{
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)d));
    return _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(f));
}

/* row_scales of two x8 blocks, the second `stride` bytes on: one vcvtph2ps
 * for both. */
static inline void row_scales2(const uint8_t *d, size_t stride, __m512 *d0, __m512 *d1)
{
    const __m512i dup0 = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i dup1 = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)d)),
        _mm_loadu_si128((const __m128i *)(const void *)(d + stride)), 1);
    const __m512 f = _mm512_cvtph_ps(h);
    *d0 = _mm512_permutexvar_ps(dup0, f);
    *d1 = _mm512_permutexvar_ps(dup1, f);
}

/* Lane pairs (2r, 2r+1) summed, plus lane 2r of `late`, into s[r]. */
static inline void store_rows_plus(float *s, __m512 acc, __m512 late)
{
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc, _mm512_permute_ps(acc, 0xB1)), late);
    const __m512i even = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0);
    _mm256_storeu_ps(s, _mm512_castps512_ps256(_mm512_permutexvar_ps(even, sum)));
}

/* Lane pairs (2r, 2r+1) summed into s[r]. */
static inline void store_rows(float *s, __m512 acc)
{
    store_rows_plus(s, acc, _mm512_setzero_ps());
}

/* The Q4_0 / Q8_0 kernels take blocks in chunks of X8_CHUNK: per chunk and
 * activation row, the weight-offset terms (-(quant sum << shift)) of all
 * its blocks come from two vector ops and wait on the stack, so a block's
 * integer chain starts from a broadcast load of its term (no ALU uop)
 * instead of a vpbroadcastd from a GPR (port 5) and a vpsubd. */
#define X8_CHUNK 16
/* The block functions reach x8_0_walk as pointers, which only the
 * optimiser folds back into direct calls; an unoptimised build (Debug)
 * cannot honour always_inline through a pointer and makes them plain. */
#ifdef __OPTIMIZE__
#define X8_BLOCK_INLINE __attribute__((always_inline))
#else
#define X8_BLOCK_INLINE
#endif
static inline void x8_offsets(int32_t *off, const char *yr, int64_t nb, int64_t b0, int64_t cnt,
                              const int shift)
{
    const __mmask16 m = (__mmask16)((1u << cnt) - 1);
    const __m512i sy = _mm512_maskz_loadu_epi32(m, yr + cpu_q8_0_aux_sums_offset(nb) + 4 * b0);
    _mm512_store_si512(off, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sy, shift)));
}

/* vgf2p8affineqb (GFNI) with imm8 0: for every byte x of v, result bit
 * i = parity(matrix.byte[7 - i] & x), the same 64-bit matrix in every
 * qword. One uop moves any bits of a byte to any others, where a 16-bit
 * shift (port 0 only at 512 bits) and a mask take two. Inline assembly:
 * GCC does not inline the GFNI intrinsic into code built without -mgfni,
 * and this build also runs where there is no GFNI (Cascade Lake): callers
 * take this path only when gfni_in_use(). */
static inline __attribute__((always_inline)) __m512i gf_affine(__m512i v, long long matrix)
{
    const __m512i a = _mm512_set1_epi64(matrix);
    __m512i r;
    __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(v), "v"(a));
    return r;
}

/* The high nibble of every byte in its low 4 bits. */
static inline __attribute__((always_inline)) __m512i hi_nibbles(__m512i v, const int gfni)
{
    if (!gfni)
        return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
    return gf_affine(v, 0x1020408000000000ll); /* bits 4..7 to 0..3 */
}

static atomic_int gfni_state; /* 0 not probed, 1 in use, 2 not */

bool cpu_x8_gfni_use(bool on)
{
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
    atomic_store_explicit(&gfni_state, on && isa.gfni ? 1 : 2, memory_order_relaxed);
    return on && isa.gfni;
}

static bool gfni_in_use(void)
{
    const int st = atomic_load_explicit(&gfni_state, memory_order_relaxed);
    return st ? st == 1 : cpu_x8_gfni_use(true);
}

/* The integer dot of one x8 block of a 32-weight type against ncols
 * activation rows, started from the column's offset term, then scaled:
 * u[k] holds elements 8k..8k+7 of every row (unsigned). */
static inline __attribute__((always_inline)) void
x8_0_dot(const __m512i *u, __m512 dw, const char *const *yr, int64_t nb, int64_t b,
         const int32_t (*off)[X8_CHUNK], __m512 *acc, const int ncols)
{
    for (int c = 0; c < ncols; c++) {
        const int8_t *q = ((const struct bp_block_q8_0 *)(const void *)yr[c])[b].qs;
        /* each of a row's two lanes carries half of the offset term */
        __m512i p = _mm512_set1_epi32(off[c][b % X8_CHUNK]);
        for (int k = 0; k < 4; k++) p = _mm512_dpbusd_epi32(p, u[k], bcast8(q + 8 * k));
        const __m512 dy = _mm512_set1_ps(cpu_q8_0_aux_d(yr[c], nb, b));
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, dy), acc[c]);
    }
}

/* One x8 block of Q4_0 (at xb, block b of the rows; dw its row scales)
 * against ncols activation rows: the -8 offset through the quant sum. */
static inline X8_BLOCK_INLINE void
q4_0_x8_block(const uint8_t *xb, __m512 dw, const char *const *yr, int64_t nb, int64_t b,
              const int32_t (*off)[X8_CHUNK], __m512 *acc, const int ncols, const int gfni)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i v0 = _mm512_loadu_si512(xb + 16), v1 = _mm512_loadu_si512(xb + 80);
    const __m512i u[4] = { _mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4), hi_nibbles(v0, gfni),
                           hi_nibbles(v1, gfni) };
    x8_0_dot(u, dw, yr, nb, b, off, acc, ncols);
}

/* One x8 block of Q8_0, as q4_0_x8_block (there is no GFNI step). */
static inline X8_BLOCK_INLINE void
q8_0_x8_block(const uint8_t *xb, __m512 dw, const char *const *yr, int64_t nb, int64_t b,
              const int32_t (*off)[X8_CHUNK], __m512 *acc, const int ncols, const int gfni)
{
    (void)gfni;
    /* weights read +128 */
    __m512i v[4];
    for (int k = 0; k < 4; k++)
        v[k] = _mm512_xor_si512(_mm512_loadu_si512(xb + 16 + 64 * k), _mm512_set1_epi8((char)0x80));
    x8_0_dot(v, dw, yr, nb, b, off, acc, ncols);
}

/* One x8 block of Q5_0, as q4_0_x8_block: the nibbles get their fifth bit
 * by one masked byte add of 16 each, the byte mask one 64-bit load of the
 * transposed qh (repack.h); the -16 offset comes out through the quant
 * sum as Q4_0's -8 does. */
static inline X8_BLOCK_INLINE void
q5_0_x8_block(const uint8_t *xb, __m512 dw, const char *const *yr, int64_t nb, int64_t b,
              const int32_t (*off)[X8_CHUNK], __m512 *acc, const int ncols, const int gfni)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    uint64_t qh[4];
    memcpy(qh, xb + 16, sizeof qh);
    const __m512i v0 = _mm512_loadu_si512(xb + 48), v1 = _mm512_loadu_si512(xb + 112);
    __m512i u[4] = { _mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4), hi_nibbles(v0, gfni),
                     hi_nibbles(v1, gfni) };
    for (int k = 0; k < 4; k++) u[k] = _mm512_mask_add_epi8(u[k], _cvtu64_mask64(qh[k]), u[k], b4);
    x8_0_dot(u, dw, yr, nb, b, off, acc, ncols);
}

/* The 16 IQ4_NL levels + 128 (1..241: unsigned for vpdpbusd), in every
 * 128-bit lane for vpshufb. */
static inline __m512i iq4_levels_u8(void)
{
    return _mm512_broadcast_i32x4(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129,
        (char)141, (char)153, (char)166, (char)181, (char)197, (char)217, (char)241));
}

/* One x8 block of IQ4_NL, as q4_0_x8_block: one vpshufb per nibble
 * register looks up the level + 128, and the +128 comes out through the
 * quant sum as Q8_0's does. */
static inline X8_BLOCK_INLINE void
iq4_nl_x8_block(const uint8_t *xb, __m512 dw, const char *const *yr, int64_t nb, int64_t b,
                const int32_t (*off)[X8_CHUNK], __m512 *acc, const int ncols, const int gfni)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), lut = iq4_levels_u8();
    const __m512i v0 = _mm512_loadu_si512(xb + 16), v1 = _mm512_loadu_si512(xb + 80);
    const __m512i u[4] = { _mm512_shuffle_epi8(lut, _mm512_and_si512(v0, m4)),
                           _mm512_shuffle_epi8(lut, _mm512_and_si512(v1, m4)),
                           _mm512_shuffle_epi8(lut, hi_nibbles(v0, gfni)),
                           _mm512_shuffle_epi8(lut, hi_nibbles(v1, gfni)) };
    x8_0_dot(u, dw, yr, nb, b, off, acc, ncols);
}

typedef void (*x8_0_block_fn)(const uint8_t *xb, __m512 dw, const char *const *yr, int64_t nb,
                              int64_t b, const int32_t (*off)[X8_CHUNK], __m512 *acc, int ncols,
                              int gfni);

/* The Q4_0, Q5_0, IQ4_NL and Q8_0 kernels' walk over the blocks (xs bytes
 * each, weight offsets shifted by `shift`): chunks of X8_CHUNK blocks whose
 * offset terms are made first, then blocks in pairs that share one scale
 * conversion.
 * Always inlined with a constant `block`, which GCC then inlines too (no
 * indirect call is left: see the disassembly). */
static inline __attribute__((always_inline)) void
x8_0_walk(int64_t nb, size_t xs, const int shift, const x8_0_block_fn block, float *s, size_t bs,
          const void *w, const void *y, size_t ys, const int ncols, const int gfni)
{
    const uint8_t *x = w;
    const char *yr[CPU_GEMM_WIDE_COLS];
    _Alignas(64) int32_t off[CPU_GEMM_WIDE_COLS][X8_CHUNK];
    __m512 acc[CPU_GEMM_WIDE_COLS];
    for (int c = 0; c < ncols; c++) acc[c] = _mm512_setzero_ps();
    for (int c = 0; c < ncols; c++) yr[c] = (const char *)y + (size_t)c * ys;
    for (int64_t b0 = 0; b0 < nb; b0 += X8_CHUNK) {
        const int64_t e = nb - b0 < X8_CHUNK ? nb : b0 + X8_CHUNK;
        for (int c = 0; c < ncols; c++) x8_offsets(off[c], yr[c], nb, b0, e - b0, shift);
        int64_t b = b0;
        for (; b + 2 <= e; b += 2) {
            const uint8_t *xb = x + (size_t)b * xs;
            __m512 dw0, dw1;
            row_scales2(xb, xs, &dw0, &dw1);
            /* one block's prefetches before each block: the 5 (Q4_0) or 9
             * of a pair at once streamed 3-8% slower from memory */
            cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
            cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
            block(xb, dw0, yr, nb, b, off, acc, ncols, gfni);
            cpu_x8_prefetch(xb + xs + CPU_X8_L2_PREFETCH_BYTES, xs);
            cpu_x8_prefetch_l1(xb + xs + CPU_X8_L1_PREFETCH_BYTES_32, xs);
            block(xb + xs, dw1, yr, nb, b + 1, off, acc, ncols, gfni);
        }
        if (b < e) {
            const uint8_t *xb = x + (size_t)b * xs;
            cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
            cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
            block(xb, row_scales(xb), yr, nb, b, off, acc, ncols, gfni);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

static inline __attribute__((always_inline)) void
q4_0_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    x8_0_walk(n / BP_QK4_0, CPU_REPACK_ROWS * sizeof(struct bp_block_q4_0), 2, q4_0_x8_block, s, bs,
              w, y, ys, ncols, gfni);
}

static inline __attribute__((always_inline)) void
q5_0_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    x8_0_walk(n / BP_QK5_0, CPU_REPACK_ROWS * sizeof(struct bp_block_q5_0), 3, q5_0_x8_block, s, bs,
              w, y, ys, ncols, gfni);
}

static inline __attribute__((always_inline)) void
iq4_nl_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
          const int gfni)
{
    x8_0_walk(n / BP_QK4_NL, CPU_REPACK_ROWS * sizeof(struct bp_block_iq4_nl), 6, iq4_nl_x8_block, s,
              bs, w, y, ys, ncols, gfni);
}

/* Q4_1 and Q5_1 x8 (d, m, then Q4_0's qs or Q5_0's qh and qs): unsigned
 * quants, no offset. ggml-cpu's dot of one row, to the bit: the 32 products
 * of a block in 8 int32 lanes of 4 (lanes 2r, 2r + 1 of the four vpdpbusd,
 * each from zero, are its lanes 0-1, 2-3, 4-5 and 6-7), each lane scaled by
 * d_w d_y into its own float sum; the min terms m * s (Q8_1's s, repack.h)
 * summed apart, in each row's even lane; at the end ggml's horizontal sum
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then + the min terms.
 * With the products in two lanes a row and the min terms added into them,
 * llama-256's Q5_1 logits stood up to 0.2 from llama.cpp's at 9 of 32
 * positions (then Q4_1's at 7 with the min terms apart). */
static inline __attribute__((always_inline)) void
x8_1(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
     const int q5, const int gfni)
{
    const int64_t nb = n / BP_QK4_1;
    const size_t xs = CPU_REPACK_ROWS * (q5 ? sizeof(struct bp_block_q5_1) : sizeof(struct bp_block_q4_1));
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    const __m512i dup_even = _mm512_set_epi32(0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0);
    const uint8_t *x = w;
    const char *yr[CPU_GEMM_MAX_COLS];
    __m512 acc[CPU_GEMM_MAX_COLS][4], accm[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < ncols; c++) {
        yr[c] = (const char *)y + (size_t)c * ys;
        acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = accm[c] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * xs;
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, xs);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES_32, xs);
        const __m512 dw = row_scales(xb);
        const __m512 mw = _mm512_maskz_permutexvar_ps(0x5555, dup_even, _mm512_castps256_ps512(
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(xb + 16)))));
        const uint8_t *qs = xb + (q5 ? 64 : 32);
        const __m512i v0 = _mm512_loadu_si512(qs), v1 = _mm512_loadu_si512(qs + 64);
        __m512i u[4] = { _mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4), hi_nibbles(v0, gfni),
                         hi_nibbles(v1, gfni) };
        if (q5) {
            uint64_t qh[4];
            memcpy(qh, xb + 32, sizeof qh);
            for (int k = 0; k < 4; k++) u[k] = _mm512_mask_add_epi8(u[k], _cvtu64_mask64(qh[k]), u[k], b4);
        }
        for (int c = 0; c < ncols; c++) {
            const int8_t *q = ((const struct bp_block_q8_0 *)(const void *)yr[c])[b].qs;
            const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(cpu_q8_0_aux_d(yr[c], nb, b)));
            for (int k = 0; k < 4; k++) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[k], bcast8(q + 8 * k));
                acc[c][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dd, acc[c][k]);
            }
            accm[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(cpu_q8_1_s(yr[c], nb, b)), accm[c]);
        }
    }
    for (int c = 0; c < ncols; c++)
        store_rows_plus(s + (size_t)c * bs,
                        _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][2]), _mm512_add_ps(acc[c][1], acc[c][3])),
                        accm[c]);
}

static inline __attribute__((always_inline)) void
q4_1_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    x8_1(n, s, bs, w, y, ys, ncols, 0, gfni);
}

static inline __attribute__((always_inline)) void
q5_1_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    x8_1(n, s, bs, w, y, ys, ncols, 1, gfni);
}

static inline __attribute__((always_inline)) void
q8_0_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols)
{
    x8_0_walk(n / BP_QK8_0, CPU_REPACK_ROWS * sizeof(struct bp_block_q8_0), 6, q8_0_x8_block, s, bs,
              w, y, ys, ncols, 0);
}

/* Q4_K x8: the 6-bit scales and mins of 8 rows come out of three 256-bit
 * words (ggml's packing, done on 8 rows at once). Sub-block pair g (the low
 * and high nibbles of the same 32 bytes) is 4 vpdpbusd per activation row
 * and per nibble half; the high nibbles go in place (byte & 0xF0, 16 times
 * their value: one op instead of a shift and a mask). Each lane sums 16
 * products of at most 15 * 128, so the low half's sums fit in int16, and
 * the high half's, shifted left by 12, land as int16 in the upper word:
 * one blend packs the pair and one vpdpwssd with the two sub-block scales
 * (int16 pairs) adds both to the int32 sums: the same integers as a
 * vpmulld (10 cycles, 2 uops) per sub-block. With the unrolled prefetch
 * (simd.h) it came to a fifth fewer uops per block; from L2 1.26x as fast
 * (1.46x with the per-piece prefetch), from 512 MiB 1.21x (one activation
 * row, one thread, against the previous kernel, alternating, under a load
 * of 5 from other sessions). Q6_K's int16 sums (vpmaddubsw) would cost more
 * here: the high nibbles in place saturate int16 (2 * 240 * 127), so they
 * would need a shift and a mask per piece. Each 64-byte piece asks for the
 * bytes one prefetch distance ahead as it is read (not all of a block's
 * at once: see CPU_X8_L2_PREFETCH_BYTES in repack.h).
 * The min term is dmin * sum_j m[j] (bsums[2j] + bsums[2j+1]): one
 * madd of the widened mins against broadcast bsum pairs, which lands in the
 * same two-lanes-per-row shape as the quant sums. */
static inline __attribute__((always_inline)) void
q4_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k03 = _mm256_set1_epi32(0x03030303);
    __m512 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q4_K));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 128); /* d, dmin, scales */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 128);
        const __m512 dw = row_scales(xb), mw = row_scales(xb + 16);
        const __m256i u0 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 32));
        const __m256i u1 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 64));
        const __m256i u2 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 96));
        const __m256i sc_lo = _mm256_and_si256(u0, k3f), mn_lo = _mm256_and_si256(u1, k3f);
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k03), 4));
        const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k03), 4));
        /* row r's scales 0..3 (4..7) as int16 at 4r..4r+3: its 32-bit
         * lanes 2r, 2r+1 hold the pairs (0, 1), (2, 3); sc[g] has pair g in
         * both of the row's lanes */
        const __m512i s16lo = _mm512_cvtepu8_epi16(sc_lo), s16hi = _mm512_cvtepu8_epi16(sc_hi);
        const __m512i sc[4] = { _mm512_shuffle_epi32(s16lo, 0xA0), _mm512_shuffle_epi32(s16lo, 0xF5),
                                _mm512_shuffle_epi32(s16hi, 0xA0), _mm512_shuffle_epi32(s16hi, 0xF5) };
        /* row r's mins 0..3 (and 4..7) as int16 at positions 4r..4r+3 */
        const __m512i mins_lo = _mm512_cvtepu8_epi16(mn_lo), mins_hi = _mm512_cvtepu8_epi16(mn_hi);
        __m512i sumi[CPU_GEMM_MAX_COLS];
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
            sumi[c] = _mm512_setzero_si512();
        }
        for (int g = 0; g < 4; g++) {
            __m512i plo[CPU_GEMM_MAX_COLS], phi[CPU_GEMM_MAX_COLS];
            for (int c = 0; c < ncols; c++) plo[c] = phi[c] = _mm512_setzero_si512();
            for (int k = 0; k < 4; k++) {
                const uint8_t *piece = xb + 128 + 64 * (4 * g + k);
                _mm_prefetch((const char *)piece + CPU_X8_L2_PREFETCH_BYTES, _MM_HINT_T1);
                _mm_prefetch((const char *)piece + CPU_X8_L1_PREFETCH_BYTES, _MM_HINT_T0);
                const __m512i v = _mm512_loadu_si512(piece);
                const __m512i lo = _mm512_and_si512(v, m4);
                const __m512i hi = _mm512_andnot_si512(m4, v);
                for (int c = 0; c < ncols; c++) {
                    const int8_t *q = yb[c]->qs + 64 * g + 8 * k;
                    plo[c] = _mm512_dpbusd_epi32(plo[c], lo, bcast8(q));
                    phi[c] = _mm512_dpbusd_epi32(phi[c], hi, bcast8(q + 32));
                }
            }
            /* low word: the low nibbles' sum; high word: phi / 16 */
            for (int c = 0; c < ncols; c++)
                sumi[c] = _mm512_dpwssd_epi32(sumi[c],
                    _mm512_mask_blend_epi16(0xAAAAAAAA, plo[c], _mm512_slli_epi32(phi[c], 12)), sc[g]);
        }
        for (int c = 0; c < ncols; c++) {
            const __m256i bsv = _mm256_loadu_si256((const __m256i *)(const void *)yb[c]->bsums);
            const __m128i bp = _mm_hadd_epi16(_mm256_castsi256_si128(bsv), _mm256_extracti128_si256(bsv, 1));
            const __m512i summ = _mm512_add_epi32(
                _mm512_madd_epi16(mins_lo, _mm512_set1_epi64(_mm_cvtsi128_si64(bp))),
                _mm512_madd_epi16(mins_hi, _mm512_set1_epi64(_mm_extract_epi64(bp, 1))));
            const __m512 dy = _mm512_set1_ps(yb[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), _mm512_mul_ps(dw, dy), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mw, dy), acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q5_K x8 (layout in repack.h): Q4_K's kernel with the fifth bits. Piece
 * k of sub-block pair g takes bits 2g (low nibbles) and 2g + 1 (high
 * nibbles) of qh piece k, loaded once per block, moved to bit 4 of each
 * byte; the high nibbles are shifted down (with their fifth bit they do not
 * fit a byte in place, as Q4_K's do). Each lane sums 4 products of at most
 * 31 * 128 per piece, so two pieces (at most 31744) still fit int16: per
 * pair g, the pieces k = 0, 1 and k = 2, 3 each make one low/high word
 * pair for a vpdpwssd with the pair's two scales. */
static inline __attribute__((always_inline)) void
q5_K_x8_pair(const uint8_t *xb, const __m512i *qh, __m512i sc, const struct bp_block_q8_K *const *yb,
             __m512i *sumi, const int ncols, const int g, const int gfni)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    for (int half = 0; half < 2; half++) {
        __m512i plo[CPU_GEMM_MAX_COLS], phi[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) plo[c] = phi[c] = _mm512_setzero_si512();
        for (int k = 2 * half; k < 2 * half + 2; k++) {
            const uint8_t *piece = xb + 384 + 64 * (4 * g + k);
            _mm_prefetch((const char *)piece + CPU_X8_L2_PREFETCH_BYTES, _MM_HINT_T1);
            _mm_prefetch((const char *)piece + CPU_X8_L1_PREFETCH_BYTES, _MM_HINT_T0);
            const __m512i v = _mm512_loadu_si512(piece);
            /* bit 2g of qh to bit 4 (low nibbles), bit 2g + 1 (high); with
             * GFNI one uop each (matrix byte 3 picks the source bit) */
            const __m512i bl = gfni && g != 2 ? gf_affine(qh[k], (long long)(1ull << (2 * g + 24)))
                : _mm512_and_si512(g == 0 ? _mm512_slli_epi16(qh[k], 4) : g == 1 ? _mm512_slli_epi16(qh[k], 2)
                                   : g == 2 ? qh[k] : _mm512_srli_epi16(qh[k], 2), b4);
            const __m512i bh = gfni ? gf_affine(qh[k], (long long)(1ull << (2 * g + 25)))
                : _mm512_and_si512(g == 0 ? _mm512_slli_epi16(qh[k], 3) : g == 1 ? _mm512_slli_epi16(qh[k], 1)
                                   : g == 2 ? _mm512_srli_epi16(qh[k], 1) : _mm512_srli_epi16(qh[k], 3), b4);
            /* 0xEC: (a & c) | b */
            const __m512i lo = _mm512_ternarylogic_epi32(v, bl, m4, 0xEC);
            const __m512i hi = gfni ? _mm512_or_si512(hi_nibbles(v, 1), bh)
                : _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), bh, m4, 0xEC);
            for (int c = 0; c < ncols; c++) {
                const int8_t *q = yb[c]->qs + 64 * g + 8 * k;
                plo[c] = _mm512_dpbusd_epi32(plo[c], lo, bcast8(q));
                phi[c] = _mm512_dpbusd_epi32(phi[c], hi, bcast8(q + 32));
            }
        }
        /* low word: the low nibbles' sum; high word: the high nibbles' */
        for (int c = 0; c < ncols; c++)
            sumi[c] = _mm512_dpwssd_epi32(sumi[c],
                _mm512_mask_blend_epi16(0xAAAAAAAA, plo[c], _mm512_slli_epi32(phi[c], 16)), sc);
    }
}

static inline __attribute__((always_inline)) void
q5_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k03 = _mm256_set1_epi32(0x03030303);
    __m512 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q5_K));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 384); /* d, dmin, scales, qh */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 384);
        const __m512 dw = row_scales(xb), mw = row_scales(xb + 16);
        const __m256i u0 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 32));
        const __m256i u1 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 64));
        const __m256i u2 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 96));
        const __m256i sc_lo = _mm256_and_si256(u0, k3f), mn_lo = _mm256_and_si256(u1, k3f);
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k03), 4));
        const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k03), 4));
        const __m512i s16lo = _mm512_cvtepu8_epi16(sc_lo), s16hi = _mm512_cvtepu8_epi16(sc_hi);
        const __m512i mins_lo = _mm512_cvtepu8_epi16(mn_lo), mins_hi = _mm512_cvtepu8_epi16(mn_hi);
        __m512i qh[4];
        for (int k = 0; k < 4; k++) qh[k] = _mm512_loadu_si512(xb + 128 + 64 * k);
        __m512i sumi[CPU_GEMM_MAX_COLS];
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
            sumi[c] = _mm512_setzero_si512();
        }
        q5_K_x8_pair(xb, qh, _mm512_shuffle_epi32(s16lo, 0xA0), yb, sumi, ncols, 0, gfni);
        q5_K_x8_pair(xb, qh, _mm512_shuffle_epi32(s16lo, 0xF5), yb, sumi, ncols, 1, gfni);
        q5_K_x8_pair(xb, qh, _mm512_shuffle_epi32(s16hi, 0xA0), yb, sumi, ncols, 2, gfni);
        q5_K_x8_pair(xb, qh, _mm512_shuffle_epi32(s16hi, 0xF5), yb, sumi, ncols, 3, gfni);
        for (int c = 0; c < ncols; c++) {
            const __m256i bsv = _mm256_loadu_si256((const __m256i *)(const void *)yb[c]->bsums);
            const __m128i bp = _mm_hadd_epi16(_mm256_castsi256_si128(bsv), _mm256_extracti128_si256(bsv, 1));
            const __m512i summ = _mm512_add_epi32(
                _mm512_madd_epi16(mins_lo, _mm512_set1_epi64(_mm_cvtsi128_si64(bp))),
                _mm512_madd_epi16(mins_hi, _mm512_set1_epi64(_mm_extract_epi64(bp, 1))));
            const __m512 dy = _mm512_set1_ps(yb[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), _mm512_mul_ps(dw, dy), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mw, dy), acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q3_K x8 (layout in repack.h). A quant is u - 4 with u = its two low
 * bits | its hmask bit << 2 (0..7); the -4 comes out as Q6_K's -32 does,
 * 4 * sum_j scale[j] * bsums[j]. Sub-block j (16 quants) of half h and
 * shift p is two 64-byte qs pieces and two hmask pieces of every row: u is
 * a shift and a ternary op per piece (plus the hmask bit moved to bit 2;
 * with GFNI mostly one ternary op and one vgf2p8affineqb), two vpdpbusd
 * against the activation give each lane's int32 sum of the sub-block's
 * products, and one vpdpwssd per two sub-blocks (as Q4_K's) scales and
 * adds them to the int32 sums: the same lane sums as vpmaddubsw pairs
 * with an int16 add and one vpdpwssd per sub-block, which ran from L2 at
 * 0.88x this speed (13.3 against 15.1 GB/s, medians of 6 alternating
 * runs, one thread, load average 9). */
static inline __attribute__((always_inline)) void
q3_K_x8_step(const __m512i *qs, const __m512i *hm, const __m512i *scw,
             const struct bp_block_q8_K *const *yb, __m512i *sumi, const int ncols, const int h,
             const int p, const int gfni)
{
    const __m512i m3 = _mm512_set1_epi8(0x03), b2 = _mm512_set1_epi8(0x04);
    const int hb = 4 * h + p; /* the hmask bit, to bit 2 */
    /* sub-blocks 8h + 2p (pieces 0, 1) and 8h + 2p + 1 (pieces 2, 3): words
     * 2 (p % 2) and 2 (p % 2) + 1 of each row's qword of scw[2h + p / 2],
     * one dword copied to both of the row's dwords */
    const __m512i sc = p % 2 ? _mm512_shuffle_epi32(scw[2 * h + p / 2], 0xF5)
                             : _mm512_shuffle_epi32(scw[2 * h + p / 2], 0xA0);
    /* with GFNI and the plane's bits clear of bit hb, one vpternlogd takes
     * bits 2p, 2p + 1 from qs and the rest from hmask (0xE4: c ? a : b),
     * and one vgf2p8affineqb moves them to bits 0, 1 and bit hb to bit 2 */
    const int merge = gfni && p && hb != 2 * p && hb != 2 * p + 1;
    const __m512i mq = _mm512_set1_epi8((char)(3 << (2 * p)));
    const long long mat = (long long)((1ull << (2 * p + 56)) | (1ull << (2 * p + 1 + 48)) | (1ull << (hb + 40)));
    __m512i d[2][CPU_GEMM_MAX_COLS];
    for (int half = 0; half < 2; half++) {
        for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) d[half][c] = _mm512_setzero_si512();
        for (int k = 2 * half; k < 2 * half + 2; k++) {
            __m512i u;
            if (merge) {
                u = gf_affine(_mm512_ternarylogic_epi32(qs[4 * h + k], hm[k], mq, 0xE4), mat);
            } else {
                const __m512i q = p ? _mm512_srli_epi16(qs[4 * h + k], 2 * p) : qs[4 * h + k];
                /* with GFNI: bit hb to bit 2 (matrix byte 5), all else 0 */
                const __m512i hbit = gfni && hb != 2 ? gf_affine(hm[k], (long long)(1ull << (hb + 40)))
                    : _mm512_and_si512(hb < 2 ? _mm512_slli_epi16(hm[k], 2 - hb)
                                       : hb == 2 ? hm[k] : _mm512_srli_epi16(hm[k], hb - 2), b2);
                /* 0xEC: (a & c) | b */
                u = _mm512_ternarylogic_epi32(q, hbit, m3, 0xEC);
            }
            for (int c = 0; c < ncols; c++)
                d[half][c] = _mm512_dpbusd_epi32(d[half][c], u, bcast8(yb[c]->qs + 128 * h + 32 * p + 8 * k));
        }
    }
    /* each lane's two sums (at most 2 * 4 * 7 * 128) as int16: the first
     * sub-block's in the low word, the second's in the high word, one
     * vpdpwssd with the two scales */
    for (int c = 0; c < ncols; c++)
        sumi[c] = _mm512_dpwssd_epi32(sumi[c],
            _mm512_mask_blend_epi16(0xAAAAAAAA, d[0][c], _mm512_slli_epi32(d[1][c], 16)), sc);
}

static inline __attribute__((always_inline)) void
q3_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    __m512 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q3_K));
        /* the whole block (880 bytes) is read at once: its prefetches too,
         * into L1 only. The kernel computes about as fast as memory streams,
         * and the 14 L2 requests a block were 5% of its instructions: without
         * them the 1B Q3_K_M decode took 1-9% less time a token (6 of 6
         * alternating pairs, AMD family 1Ah), the kernel from 512 MiB 0.70,
         * 0.62, 0.71 -> 0.75, 0.68, 0.74 of the read; without any prefetch it
         * was slower again. (Q2_K's kernel lost from the same change.) */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 896);
        const __m512 dw = row_scales(xb);
        __m256i sv[4];
        cpu_q3_K_x8_scales(xb, sv);
        /* row r's 4 scales of word q as int16 at qword r */
        const __m512i scw[4] = { _mm512_cvtepi8_epi16(sv[0]), _mm512_cvtepi8_epi16(sv[1]),
                                 _mm512_cvtepi8_epi16(sv[2]), _mm512_cvtepi8_epi16(sv[3]) };
        __m512i hm[4], qs[8];
        for (int k = 0; k < 4; k++) hm[k] = _mm512_loadu_si512(xb + 112 + 64 * k);
        for (int k = 0; k < 8; k++) qs[k] = _mm512_loadu_si512(xb + 368 + 64 * k);
        __m512i sumi[CPU_GEMM_MAX_COLS];
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
            __m512i corr = _mm512_setzero_si512();
            for (int q = 0; q < 4; q++) {
                int64_t b4;
                memcpy(&b4, yb[c]->bsums + 4 * q, 8);
                corr = _mm512_add_epi32(corr, _mm512_madd_epi16(scw[q], _mm512_set1_epi64(b4)));
            }
            sumi[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 2));
        }
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 0, 0, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 0, 1, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 0, 2, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 0, 3, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 1, 0, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 1, 1, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 1, 2, gfni);
        q3_K_x8_step(qs, hm, scw, yb, sumi, ncols, 1, 3, gfni);
        for (int c = 0; c < ncols; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(yb[c]->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), d, acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* IQ4_XS x8 (layout in repack.h). One vpshufb per nibble half looks up
 * IQ4_NL's values + 128 (1..241, unsigned for vpdpbusd); the +128 comes
 * out as 128 * sum_j scale[j] * (the activation's sum over sub-block j),
 * from the bsums. Sub-block j (32 quants) is qs pieces 2j and 2j + 1:
 * four vpdpbusd give its int32 lane sums (up to 16 * 241 * 128, too wide
 * for the int16 scaling the K-quants use), which one vpmulld scales by
 * the row's signed 6-bit scale - 32. The high nibbles come down with GFNI
 * where there is GFNI (one uop instead of a shift and a mask). */
static inline __attribute__((always_inline)) void
iq4_xs_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
          const int gfni)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lut = iq4_levels_u8();
    const __m256i k0f = _mm256_set1_epi8(0x0F), k03 = _mm256_set1_epi8(0x03), k0c = _mm256_set1_epi8(0x0C);
    const __m256i k32 = _mm256_set1_epi8(32);
    /* the activation's 8 sub-block sums, even sub-blocks first */
    const __m128i eo = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m512 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_iq4_xs));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 64); /* d, scales */
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 64);
        const __m512 dw = row_scales(xb);
        /* row r's scales_h word to its dword as [low byte, low, high, high]:
         * nibble k of scales_h (the high bits of sub-blocks 2k, 2k + 1) to
         * byte k */
        const __m128i h16 = _mm_loadu_si128((const __m128i *)(const void *)(xb + 16));
        const __m256i hd = _mm256_shuffle_epi8(_mm256_cvtepu16_epi32(h16),
            _mm256_setr_epi8(0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13,
                             0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9, 12, 12, 13, 13));
        const __m256i nb8 = _mm256_mask_blend_epi8(0xAAAAAAAAu, _mm256_and_si256(hd, k0f),
                                                   _mm256_and_si256(_mm256_srli_epi16(hd, 4), k0f));
        const __m256i l = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 32));
        /* byte k of row r's dword: the scale of sub-block 2k (ev), 2k + 1 (od) */
        const __m256i ev = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l, k0f),
            _mm256_slli_epi16(_mm256_and_si256(nb8, k03), 4)), k32);
        const __m256i od = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), k0f),
            _mm256_slli_epi16(_mm256_and_si256(nb8, k0c), 2)), k32);
        const __m512i ev16 = _mm512_cvtepi8_epi16(ev), od16 = _mm512_cvtepi8_epi16(od);
        /* sub-block j's scale as int32 in both lanes of its row: word j / 2
         * of the row's qword to the high half of each dword, then an
         * arithmetic shift */
        __m512i sc[8];
        for (int j = 0; j < 8; j++) {
            const char k0 = (char)(2 * (j / 2)), k1 = (char)(2 * (j / 2) + 1);
            const char k8 = (char)(8 + 2 * (j / 2)), k9 = (char)(9 + 2 * (j / 2));
            const char z = (char)0x80;
            const __m512i idx = _mm512_broadcast_i32x4(_mm_setr_epi8(z, z, k0, k1, z, z, k0, k1,
                                                                     z, z, k8, k9, z, z, k8, k9));
            sc[j] = _mm512_srai_epi32(_mm512_shuffle_epi8(j % 2 ? od16 : ev16, idx), 16);
        }
        __m512i sumi[CPU_GEMM_MAX_COLS];
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
            const __m256i bsv = _mm256_loadu_si256((const __m256i *)(const void *)yb[c]->bsums);
            const __m128i bp = _mm_shuffle_epi8(
                _mm_hadd_epi16(_mm256_castsi256_si128(bsv), _mm256_extracti128_si256(bsv, 1)), eo);
            const __m512i corr = _mm512_add_epi32(
                _mm512_madd_epi16(ev16, _mm512_set1_epi64(_mm_cvtsi128_si64(bp))),
                _mm512_madd_epi16(od16, _mm512_set1_epi64(_mm_extract_epi64(bp, 1))));
            sumi[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 7));
        }
        for (int j = 0; j < 8; j++) {
            __m512i p[CPU_GEMM_MAX_COLS];
            for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) p[c] = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const uint8_t *piece = xb + 64 + 64 * (2 * j + h);
                _mm_prefetch((const char *)piece + CPU_X8_L2_PREFETCH_BYTES, _MM_HINT_T1);
                _mm_prefetch((const char *)piece + CPU_X8_L1_PREFETCH_BYTES, _MM_HINT_T0);
                const __m512i v = _mm512_loadu_si512(piece);
                const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
                const __m512i hi = _mm512_shuffle_epi8(lut, hi_nibbles(v, gfni));
                for (int c = 0; c < ncols; c++) {
                    const int8_t *q = yb[c]->qs + 32 * j + 8 * h;
                    p[c] = _mm512_dpbusd_epi32(p[c], lo, bcast8(q));
                    p[c] = _mm512_dpbusd_epi32(p[c], hi, bcast8(q + 16));
                }
            }
            for (int c = 0; c < ncols; c++)
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(p[c], sc[j]));
        }
        for (int c = 0; c < ncols; c++) {
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(yb[c]->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c]), d, acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* Q2_K x8 (layout in repack.h), to the bit the plain dot's result
 * (cpu_vec_dot_q2_K_q8_K_x86, which stays within 1e-4 of llama.cpp's
 * logits): 2-bit models amplify a last-bit difference in one layer's output into
 * another rounding of the next layer's activation quants, and a kernel
 * that summed each row in two float lanes, once per block, left llama.cpp's
 * Q2_K logits of the 1B model 0.15-0.30 away at 9 of 32 positions. So
 * each row keeps the plain dot's 8 float lanes: lane 2k + e sums bytes
 * 8k + 4e .. 8k + 4e + 3 of every 32-byte quant run and the mins of
 * sub-blocks 4k + 2e, 4k + 2e + 1, which is lane e of qs piece k (and of
 * scale word k), so acc[c][k] carries the row's lanes 2k, 2k + 1. Per
 * block each lane gets its exact int32 sums (vpmaddubsw pairs of at most
 * 2 * 3 * 128, one vpdpwssd per piece with the sub-block's scale) and the
 * plain dot's acc = fma(sumi, d, acc), then acc = fma(-summ, dmin, acc);
 * the lanes add in its horizontal order at the end.
 * Pieces k = 2m and 2m + 1 of a plane (half h, shift p) belong to the same
 * sub-block 8h + 2p + m, so the kernel walks m outermost and copies each
 * sub-block's scale to its row's words once for both pieces. With GFNI
 * one vgf2p8affineqb takes a plane's 2 bits down (a shift and a mask
 * without). The loops are unrolled by pragma: left as loops, GCC built
 * each shuffle index at run time, and with a vpshufb per piece that
 * kernel ran from L2 at 0.4x this one's speed (one thread, load 8-12). */
static inline __attribute__((always_inline)) __m512i q2_plane(__m512i v, const int p, const int gfni)
{
    const __m512i m3 = _mm512_set1_epi8(0x03);
    if (p == 0)
        return _mm512_and_si512(v, m3);
    if (!gfni)
        return _mm512_and_si512(_mm512_srli_epi16(v, 2 * p), m3);
    /* bits 2p, 2p + 1 to 0, 1 (matrix bytes 7 and 6), all else 0 */
    return gf_affine(v, (long long)((1ull << (2 * p + 56)) | (1ull << (2 * p + 1 + 48))));
}

static inline __attribute__((always_inline)) void
q2_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    const __m256i k0f = _mm256_set1_epi8(0x0F);
    __m512 acc[CPU_GEMM_MAX_COLS][4];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++)
        for (int k = 0; k < 4; k++) acc[c][k] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q2_K));
        /* the whole block (672 bytes) is read at once: its prefetches too */
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 704);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 704);
        const __m512 dw = row_scales(xb), mw = row_scales(xb + 16);
        /* row r's 4 scales of word q as int16 at qword r */
        __m512i scw[4];
        for (int q = 0; q < 4; q++) {
            const __m256i sv = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 32 + 32 * q));
            scw[q] = _mm512_cvtepu8_epi16(_mm256_and_si256(sv, k0f));
        }
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++)
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
        _Pragma("GCC unroll 2")
        for (int m = 0; m < 2; m++) {
            /* pieces 2m, 2m + 1 of each half */
            const __m512i qv[2][2] = {
                { _mm512_loadu_si512(xb + 160 + 64 * (2 * m)), _mm512_loadu_si512(xb + 160 + 64 * (2 * m + 1)) },
                { _mm512_loadu_si512(xb + 160 + 64 * (4 + 2 * m)), _mm512_loadu_si512(xb + 160 + 64 * (5 + 2 * m)) },
            };
            __m512i sumi[CPU_GEMM_MAX_COLS][2];
            for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) sumi[c][0] = sumi[c][1] = _mm512_setzero_si512();
            _Pragma("GCC unroll 2")
            for (int h = 0; h < 2; h++)
                _Pragma("GCC unroll 4")
                for (int p = 0; p < 4; p++) {
                    const int sub = 8 * h + 2 * p + m;
                    /* word sub % 4 of each row's qword copied to its 4 words */
                    const char b0 = (char)(2 * (sub % 4)), b1 = (char)(2 * (sub % 4) + 1);
                    const char b8 = (char)(8 + 2 * (sub % 4)), b9 = (char)(9 + 2 * (sub % 4));
                    const __m512i idx = _mm512_broadcast_i32x4(_mm_setr_epi8(
                        b0, b1, b0, b1, b0, b1, b0, b1, b8, b9, b8, b9, b8, b9, b8, b9));
                    const __m512i sc = _mm512_shuffle_epi8(scw[sub / 4], idx);
                    for (int j = 0; j < 2; j++) {
                        const __m512i u = q2_plane(qv[h][j], p, gfni);
                        for (int c = 0; c < ncols; c++) {
                            const int8_t *q = yb[c]->qs + 128 * h + 32 * p + 8 * (2 * m + j);
                            sumi[c][j] = _mm512_dpwssd_epi32(sumi[c][j], _mm512_maddubs_epi16(u, bcast8(q)), sc);
                        }
                    }
                }
            for (int j = 0; j < 2; j++) {
                const int k = 2 * m + j;
                /* row r's mins 4k..4k+3 as int16 at qword r */
                const __m512i mn = _mm512_cvtepu8_epi16(_mm256_and_si256(
                    _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(xb + 32 + 32 * k)), 4),
                    k0f));
                for (int c = 0; c < ncols; c++) {
                    int64_t b4;
                    memcpy(&b4, yb[c]->bsums + 4 * k, 8);
                    const __m512i summ = _mm512_madd_epi16(mn, _mm512_set1_epi64(b4));
                    const __m512 dy = _mm512_set1_ps(yb[c]->d);
                    acc[c][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[c][j]), _mm512_mul_ps(dw, dy), acc[c][k]);
                    acc[c][k] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mw, dy), acc[c][k]);
                }
            }
        }
    }
    /* the plain dot's horizontal sum: ((l0 + l4) + (l2 + l6)) + ((l1 + l5)
     * + (l3 + l7)), lanes 2k + e in acc[c][k] */
    for (int c = 0; c < ncols; c++)
        store_rows(s + (size_t)c * bs, _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][2]),
                                                     _mm512_add_ps(acc[c][1], acc[c][3])));
}
/* Q6_K x8 (layout in repack.h). Quants are rebuilt unsigned (0..63); the
 * -32 offset is 32 * sum_j scale[j] * bsums[j], one madd per scale word
 * against the broadcast bsums. One step (half h, low/high ql piece ab,
 * sub-block pair s) reads ql and qh pieces k = 2s, 2s+1: the low nibbles
 * make sub-block 8h + 2ab + s, the high nibbles that + 4, each with its 2
 * high bits moved to bits 4..5 of qh. With GFNI (gfni_in_use) one
 * vgf2p8affineqb moves the low nibbles' qh bits and, for ab = 1, the high
 * nibbles' (ab = 0: they are at 4..5 already), and one more takes the high
 * nibble of ql down (hi_nibbles): 4 (ab = 0) or 5 (ab = 1) ALU uops per
 * 64-byte piece and no shift, where shifts and masks took 6 or 7, 2-3 of
 * them 512-bit shifts (port 0 only). Without GFNI the shift path makes the
 * same bytes. vpmaddubsw multiplies each piece by the activation into
 * int16 pairs, the two pieces of a sub-block add in int16 (at most
 * 4 * 63 * 128 = 32256: exact, no saturation), and one vpdpwssd with the
 * sub-block's scale (int16, copied to its row's 4 words by one vpshufb:
 * they are one qword) adds it to the int32 sums, the low nibbles'
 * sub-blocks into one accumulator and the high nibbles' into another,
 * added once per block.
 * With vpmaddwd + vpaddd per sub-block instead, this streamed 512 MiB at
 * 0.96 of a plain read against 0.92 with vpdpbusd + vpmulld (one
 * activation row, one thread), and one vpdpwssd accumulator for all 16
 * sub-blocks at 0.88.
 * On a Granite Rapids-class VM (2 vCPUs shared with other
 * work; one thread, alternating pairs, from L2 at one activation row
 * unless said): GFNI against shifts 1.22x (31.0-32.2 GB/s against
 * 25.4-26.3); then two vpdpwssd accumulators against vpmaddwd + vpaddd
 * 1.03x (8 of 8 pairs faster; at four activation rows 1.01-1.08x); then
 * vpshufb against vpermw for the scales 1.025x (12 of 12; 4 of 4 at four
 * rows). All three against the kernel without them: 1.26-1.31x (34.4-35.5
 * GB/s against 26.5-28.3), at four rows 1.12-1.15x, from DRAM 0.79-0.85
 * of the read bandwidth against 0.76-0.80. No gain: the scale words
 * widened once per block for both uses; a shift and a ternlog for the ab = 1
 * high nibbles' bits in place of vgf2p8affineqb + or was 0.88x.
 * Every step is written out with constant offsets (the compiler does not
 * unroll the loops, and then builds the shuffle indices at run time). */
static inline __attribute__((always_inline)) void
q6_K_x8_step(const uint8_t *half, __m512i sc_lo, __m512i sc_hi,
             const struct bp_block_q8_K *const *yb, int yoff, __m512i *sumi, const int ncols,
             const int ab, const int s, const int gfni)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const short j = (short)(2 * ab + s);
    /* row r's words are qword r: word j of each qword copied to its 4 words
     * stays inside the 128-bit lanes */
    const char b0 = (char)(2 * j), b1 = (char)(2 * j + 1);
    const char b8 = (char)(8 + 2 * j), b9 = (char)(9 + 2 * j);
    const __m512i idx = _mm512_broadcast_i32x4(_mm_setr_epi8(b0, b1, b0, b1, b0, b1, b0, b1,
                                                             b8, b9, b8, b9, b8, b9, b8, b9));
    const __m512i slo = _mm512_shuffle_epi8(sc_lo, idx);
    const __m512i shi = _mm512_shuffle_epi8(sc_hi, idx);
    __m512i plo[CPU_GEMM_MAX_COLS], phi[CPU_GEMM_MAX_COLS];
    for (int k = 2 * s; k < 2 * s + 2; k++) {
        const int lo_off = ab ? 512 + 64 * k : 128 * k;
        /* each piece read for the first time asks for the bytes one
         * prefetch distance further */
        _mm_prefetch((const char *)half + CPU_X8_L2_PREFETCH_BYTES + lo_off, _MM_HINT_T1);
        _mm_prefetch((const char *)half + CPU_X8_L1_PREFETCH_BYTES + lo_off, _MM_HINT_T0);
        if (!ab) {
            _mm_prefetch((const char *)half + CPU_X8_L2_PREFETCH_BYTES + 128 * k + 64, _MM_HINT_T1);
            _mm_prefetch((const char *)half + CPU_X8_L1_PREFETCH_BYTES + 128 * k + 64, _MM_HINT_T0);
        }
        const __m512i l = _mm512_loadu_si512(half + lo_off);
        const __m512i hb = _mm512_loadu_si512(half + 128 * k + 64);
        /* qh bits 2ab..2ab+1 (low nibbles) and 4+2ab.. (high) to bits 4..5;
         * 0xEC: (a & c) | b */
        __m512i lo, hi;
        if (gfni) {
            /* bits 0..1 (ab = 1: 2..3) to 4..5, all else 0 */
            const __m512i hl = gf_affine(hb, ab ? 0x04080000ll : 0x01020000ll);
            lo = _mm512_ternarylogic_epi32(l, hl, m4, 0xEC);
            if (ab) /* bits 6..7 to 4..5 */
                hi = _mm512_or_si512(hi_nibbles(l, 1), gf_affine(hb, 0x40800000ll));
            else
                hi = _mm512_ternarylogic_epi32(hb, hi_nibbles(l, 1), m30, 0xEC);
        } else {
            const __m512i hl =
                _mm512_and_si512(ab ? _mm512_slli_epi16(hb, 2) : _mm512_slli_epi16(hb, 4), m30);
            const __m512i hh = _mm512_and_si512(ab ? _mm512_srli_epi16(hb, 2) : hb, m30);
            lo = _mm512_ternarylogic_epi32(l, hl, m4, 0xEC);
            hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), hh, m4, 0xEC);
        }
        for (int c = 0; c < ncols; c++) {
            const int8_t *q = yb[c]->qs + yoff + 32 * ab + 8 * k;
            const __m512i pl = _mm512_maddubs_epi16(lo, bcast8(q));
            const __m512i ph = _mm512_maddubs_epi16(hi, bcast8(q + 64));
            plo[c] = k == 2 * s ? pl : _mm512_add_epi16(plo[c], pl);
            phi[c] = k == 2 * s ? ph : _mm512_add_epi16(phi[c], ph);
        }
    }
    for (int c = 0; c < ncols; c++) {
        sumi[2 * c] = _mm512_dpwssd_epi32(sumi[2 * c], plo[c], slo);
        sumi[2 * c + 1] = _mm512_dpwssd_epi32(sumi[2 * c + 1], phi[c], shi);
    }
}

static inline __attribute__((always_inline)) void
q6_K_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys, const int ncols,
        const int gfni)
{
    const int64_t nb = n / BP_QK_K;
    const uint8_t *x = w;
    __m512 acc[CPU_GEMM_MAX_COLS];
    for (int c = 0; c < CPU_GEMM_MAX_COLS; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = x + (size_t)b * (CPU_REPACK_ROWS * sizeof(struct bp_block_q6_K));
        cpu_x8_prefetch(xb + CPU_X8_L2_PREFETCH_BYTES, 144);
        cpu_x8_prefetch_l1(xb + CPU_X8_L1_PREFETCH_BYTES, 144);
        const __m512 dw = row_scales(xb);
        __m512i sumi[2 * CPU_GEMM_MAX_COLS];
        const struct bp_block_q8_K *yb[CPU_GEMM_MAX_COLS];
        for (int c = 0; c < ncols; c++) {
            yb[c] = (const struct bp_block_q8_K *)(const void *)((const char *)y + (size_t)c * ys) + b;
            __m512i corr = _mm512_setzero_si512();
            for (int q = 0; q < 4; q++) {
                int64_t b4;
                memcpy(&b4, yb[c]->bsums + 4 * q, 8);
                const __m256i sw = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 16 + 32 * q));
                corr = _mm512_add_epi32(corr, _mm512_madd_epi16(_mm512_cvtepi8_epi16(sw),
                                                                _mm512_set1_epi64(b4)));
            }
            sumi[2 * c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 5));
            sumi[2 * c + 1] = _mm512_setzero_si512();
        }
        for (int h = 0; h < 2; h++) {
            /* scale words 2h (sub-blocks 8h..8h+3) and 2h+1, all 8 rows, as
             * int16 at 4r + j */
            const uint8_t *sq = xb + 16 + 64 * h;
            const __m512i lo = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)sq));
            const __m512i hi = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(sq + 32)));
            const uint8_t *half = xb + 144 + 768 * h;
            q6_K_x8_step(half, lo, hi, yb, 128 * h, sumi, ncols, 0, 0, gfni);
            q6_K_x8_step(half, lo, hi, yb, 128 * h, sumi, ncols, 0, 1, gfni);
            q6_K_x8_step(half, lo, hi, yb, 128 * h, sumi, ncols, 1, 0, gfni);
            q6_K_x8_step(half, lo, hi, yb, 128 * h, sumi, ncols, 1, 1, gfni);
        }
        for (int c = 0; c < ncols; c++) {
            const __m512i si = _mm512_add_epi32(sumi[2 * c], sumi[2 * c + 1]);
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(yb[c]->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), d, acc[c]);
        }
    }
    for (int c = 0; c < ncols; c++) store_rows(s + (size_t)c * bs, acc[c]);
}

/* A kernel T##_x8 with a GFNI step, as cpu_gemm_T_x8_x86: its shift and its
 * GFNI copy (each with the ncols copies of DISPATCH, CPU_X8_DISPATCH or
 * CPU_X8_DISPATCH_WIDE), chosen per call by gfni_in_use(). */
#define X8_GFNI_DISPATCH(T) X8_GFNI_DISPATCH_WITH(T, CPU_X8_DISPATCH)
#define X8_GFNI_DISPATCH_WITH(T, DISPATCH)                                                     \
    static inline __attribute__((always_inline)) void                                         \
    T##_shift_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,      \
                 const int ncols)                                                             \
    {                                                                                         \
        T##_x8(n, s, bs, w, y, ys, ncols, 0);                                                 \
    }                                                                                         \
    static inline __attribute__((always_inline)) void                                         \
    T##_gfni_x8(int64_t n, float *s, size_t bs, const void *w, const void *y, size_t ys,       \
                const int ncols)                                                              \
    {                                                                                         \
        T##_x8(n, s, bs, w, y, ys, ncols, 1);                                                 \
    }                                                                                         \
    static DISPATCH(T##_shift, x86)                                                           \
    static DISPATCH(T##_gfni, x86)                                                            \
    void cpu_gemm_##T##_x8_x86(CPU_GEMM_X8_PARAMS)                                            \
    {                                                                                         \
        (gfni_in_use() ? cpu_gemm_##T##_gfni_x8_x86 : cpu_gemm_##T##_shift_x8_x86)(           \
            n, s, bs, w, gs, ng, y, ys, ncols);                                               \
    }

/* Q4_0 and Q8_0 take up to CPU_GEMM_WIDE_COLS activation rows a call (the
 * walk keeps a column's accumulator, offsets and row pointer per column:
 * with 8 columns 8 accumulators and the block's 4 unpacked registers fit
 * the 32 zmm registers). */
X8_GFNI_DISPATCH_WITH(q4_0, CPU_X8_DISPATCH_WIDE)
X8_GFNI_DISPATCH(q6_K)
X8_GFNI_DISPATCH(q5_0)
X8_GFNI_DISPATCH(iq4_nl)
X8_GFNI_DISPATCH(q4_1)
X8_GFNI_DISPATCH(q5_1)
X8_GFNI_DISPATCH(iq4_xs)
X8_GFNI_DISPATCH(q2_K)
X8_GFNI_DISPATCH(q3_K)
X8_GFNI_DISPATCH(q5_K)
CPU_X8_DISPATCH_WIDE(q8_0, x86)
CPU_X8_DISPATCH(q4_K, x86)
#else
typedef int cpu_gemm_avx512_not_built; /* ISO C forbids an empty translation unit */
#endif
