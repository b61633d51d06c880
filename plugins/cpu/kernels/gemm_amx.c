/*
 * gemm_amx.c — the AMX-INT8 prefill kernels (gemm_amx.h). Tile registers,
 * two blocks at a time: 0 and 1 the int32 results, 4 and 7 the activation
 * (A: 16 rows x 32 bytes, loaded in place from the converted rows with
 * their own stride), 5 and 6 the weight (B: 8 rows x 64 bytes, the VNNI
 * form of 16 weight rows x 32 k). One 32-element block per tile product
 * for Q4_0 / Q8_0, because every block has its own scale: the tile
 * results go through L1 and are scaled there with AVX-512, as in the x8
 * kernels. (Q4_K and Q6_K fold their sub-block scales into B instead:
 * their own tile configuration and sections below.)
 *
 * B is built per block from the two x8 groups: an x8 piece holds 8 bytes
 * of each of 8 rows, i.e. dwords (2r, 2r + 1) = row r's k-quads (2c, 2c+1);
 * B row 2c takes the even dwords of both groups' piece, row 2c + 1 the odd
 * ones (one two-source permute each). Q4_0 goes in as signed q - 8 and
 * Q8_0 as it is (TDPBSSD: signed x signed); Q4_K's nibbles as unsigned
 * bytes (TDPBSUD: signed activation x unsigned weight).
 *
 * The tile configuration is loaded at the start of every call and released
 * at its end: a call is 16 x 64 outputs over all of K, and another library
 * in the process (a second engine, a BLAS) may use the tiles between calls.
 */
#include "simd.h"
#include "gemm_amx.h"

#include <pthread.h>
#include <stdatomic.h>

#include "../cpu_features.h"

/* How far ahead the prefill tiles ask for weight bytes (into L2; see
 * CPU_X8_L2_PREFETCH_BYTES in repack.h for the decode kernels). Each
 * weight block here meets a whole tile of activation rows, so the stream
 * is slow and the distance matters little; 16 KiB is what the x8 kernels
 * used when these were written. */
#ifndef CPU_AMX_PREFETCH_BYTES
#define CPU_AMX_PREFETCH_BYTES 16384
#endif

#if defined(CPU_HAVE_X86_GEMM) && defined(__x86_64__) && \
    (defined(__clang__) || __GNUC__ >= 11)
#define CPU_HAVE_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_FN __attribute__((target("amx-tile,amx-int8")))
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* A constant in memory: GCC's _tile_loadconfig tells the compiler it reads
 * 8 bytes only, so a config built on the stack lost its stores. */
static const struct amx_cfg amx_cfg = {
    .palette = 1,
    .colsb = { 64, 64, 64, 64, 32, 64, 64, 32 },
    .rows = { 16, 16, 16, 16, 16, 8, 8, 16 },
};

AMX_FN static void amx_config(void)
{
    _tile_loadconfig(&amx_cfg);
}

/* GCC's tileloadd does not tell the compiler that it reads memory: this
 * barrier keeps the stores of the B panel before the loads of it. */
#define AMX_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

/* B rows 2p, 2p + 1 from 64-byte pieces a (rows 0..7) and b (rows 8..15). */
static inline void b_rows(uint8_t bt[8][64], int p, __m512i a, __m512i b)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    _mm512_store_si512(bt[2 * p], _mm512_permutex2var_epi32(a, even, b));
    _mm512_store_si512(bt[2 * p + 1], _mm512_permutex2var_epi32(a, odd, b));
}

/* 16 f16 row scales: 8 at p, 8 at q. */
static inline __m512 scales16(const uint8_t *p, const uint8_t *q)
{
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)),
        _mm_loadu_si128((const __m128i *)(const void *)q), 1);
    return _mm512_cvtph_ps(h);
}

static inline __m512i load512(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

/* The weights are turned into B tiles a segment of K at a time (a panel on
 * the stack, read back from L1/L2 once per activation tile), so that each
 * activation tile keeps its 16 rows' accumulators in registers through the
 * segment: with the accumulators in memory (one pass over 64 rows per
 * block) the scaling's loads and stores cost more than the tiles. */
#define AMX_SEG 32   /* Q4_0 / Q8_0 blocks per panel: 16 KiB of B tiles */
#define AMX_SEG_K 2  /* Q4_K super-blocks per panel: 24 KiB of B tiles */

struct panel_0 {
    _Alignas(64) uint8_t bt[AMX_SEG][8][64];
    float dw[AMX_SEG][16];
};

/* Q4_0 (q4) or Q8_0: the B tile and the 16 row scales of block b. */
static inline __attribute__((always_inline)) void
panel_0_block(struct panel_0 *pn, int j, const uint8_t *x0, const uint8_t *x1, const bool q4)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), k8 = _mm512_set1_epi8(8);
    if (q4) {
        /* piece p: the low nibbles are k = 8p..8p+7, the high ones 16 more;
         * as signed q - 8, so no correction per activation row is needed */
        for (int p = 0; p < 2; p++) {
            const __m512i v0 = load512(x0 + 16 + 64 * p), v1 = load512(x1 + 16 + 64 * p);
            b_rows(pn->bt[j], p, _mm512_sub_epi8(_mm512_and_si512(v0, m4), k8),
                   _mm512_sub_epi8(_mm512_and_si512(v1, m4), k8));
            b_rows(pn->bt[j], p + 2, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v0, 4), m4), k8),
                   _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v1, 4), m4), k8));
        }
    } else {
        for (int p = 0; p < 4; p++)
            b_rows(pn->bt[j], p, load512(x0 + 16 + 64 * p), load512(x1 + 16 + 64 * p));
    }
    _mm512_storeu_ps(pn->dw[j], scales16(x0, x1));
}

/* Rows of tile c (stored at cb) of block b into the accumulators:
 * acc[m] += float(c[m]) * d_w * d_y[m]. */
static inline __attribute__((always_inline)) void
scale_0(__m512 acc[16], const int32_t cb[16][16], const __m512 dw, const char *yt, size_t ys,
        size_t aux, int64_t b)
{
    for (int m = 0; m < 16; m++) {
        float dy;
        memcpy(&dy, yt + (size_t)m * ys + aux + 4 * b, 4);
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[m])),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(dy)), acc[m]);
    }
}

AMX_FN static inline __attribute__((always_inline)) void
gemm_0_amx(int64_t n, float *s, const void *w, size_t gs, const void *y, size_t ys, int nt,
           const bool q4)
{
    const int64_t nb = n / BP_QK8_0;
    const size_t xbs = CPU_REPACK_ROWS * (q4 ? sizeof(struct bp_block_q4_0) : sizeof(struct bp_block_q8_0));
    const size_t aux = cpu_q8_0_aux_offset(nb), qb = sizeof(struct bp_block_q8_0);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    struct panel_0 pn;
    _Alignas(64) int32_t c[2][16][16];
    amx_config();
    for (int64_t b0 = 0; b0 < nb; b0 += AMX_SEG) {
        const int nseg = nb - b0 < AMX_SEG ? (int)(nb - b0) : AMX_SEG;
        for (int j = 0; j < nseg; j++) {
            const uint8_t *x0 = w0 + (size_t)(b0 + j) * xbs, *x1 = w1 + (size_t)(b0 + j) * xbs;
            cpu_x8_prefetch(x0 + CPU_AMX_PREFETCH_BYTES, xbs);
            cpu_x8_prefetch(x1 + CPU_AMX_PREFETCH_BYTES, xbs);
            panel_0_block(&pn, j, x0, x1, q4);
        }
        AMX_MEMORY_BARRIER();
        for (int i = 0; i < nt; i++) {
            const char *yt = (const char *)y + (size_t)(16 * i) * ys;
            float *st = s + 256 * i;
            __m512 acc[16];
            for (int m = 0; m < 16; m++) acc[m] = b0 ? _mm512_loadu_ps(st + 16 * m) : _mm512_setzero_ps();
            /* two blocks per step, in tiles 0 and 1: the second product
             * runs while the first is scaled */
            int j = 0;
            for (; j + 2 <= nseg; j += 2) {
                const int64_t b = b0 + j;
                _tile_loadd(5, pn.bt[j], 64);
                _tile_loadd(6, pn.bt[j + 1], 64);
                _tile_zero(0);
                _tile_zero(1);
                _tile_loadd(4, yt + b * qb + 2, ys);
                _tile_loadd(7, yt + (b + 1) * qb + 2, ys);
                _tile_dpbssd(0, 4, 5);
                _tile_dpbssd(1, 7, 6);
                _tile_stored(0, c[0], 64);
                _tile_stored(1, c[1], 64);
                scale_0(acc, c[0], _mm512_loadu_ps(pn.dw[j]), yt, ys, aux, b);
                scale_0(acc, c[1], _mm512_loadu_ps(pn.dw[j + 1]), yt, ys, aux, b + 1);
            }
            if (j < nseg) {
                const int64_t b = b0 + j;
                _tile_loadd(5, pn.bt[j], 64);
                _tile_zero(0);
                _tile_loadd(4, yt + b * qb + 2, ys);
                _tile_dpbssd(0, 4, 5);
                _tile_stored(0, c[0], 64);
                scale_0(acc, c[0], _mm512_loadu_ps(pn.dw[j]), yt, ys, aux, b);
            }
            for (int m = 0; m < 16; m++) _mm512_storeu_ps(st + 16 * m, acc[m]);
        }
    }
    _tile_release();
}

AMX_FN static void gemm_q8_0_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    gemm_0_amx(n, s, w, gs, y, ys, nt, false);
}

AMX_FN static void gemm_q4_0_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    gemm_0_amx(n, s, w, gs, y, ys, nt, true);
}

/* Q4_K. The 6-bit sub-block scale goes into the weight: q * sc <= 15 * 63
 * needs 10 bits, so B is built twice, from its low byte and from its high
 * byte (0..3), and one activation tile of K = 64 (two sub-blocks) meets
 * both: sumi = lo + 256 * hi is the super-block's exact sum over j of
 * sc[j] * (sub-block j's dot), as in the VNNI kernel, with no per-sub-block
 * pass over the results. The min term sum_j m[j] * (sum of the
 * activation's sub-block j) is a third product, against B = each row's
 * mins repeated over their sub-block's k. Then, per super-block,
 * s += (float(sumi) * d - float(summ) * dmin) * d_y: the integers and
 * these float steps are those of a per-sub-block scaling, so the results do
 * not depend on how the tiles got there (test_cpu_x8.c models them). */
#define AMX_K_STEPS 4 /* K = 64 steps of a super-block */

struct panel_K {
    _Alignas(64) uint8_t lo[AMX_SEG_K][AMX_K_STEPS][16][64]; /* B tiles */
    uint8_t hi[AMX_SEG_K][AMX_K_STEPS][16][64];
    uint8_t mn[AMX_SEG_K][AMX_K_STEPS][16][64];
    float d[AMX_SEG_K][16], dmin[AMX_SEG_K][16];
};

/* Tile configuration of the K-quant kernels (Q4_K, Q6_K): all eight
 * 16 x 64 bytes. */
static const struct amx_cfg amx_cfg_full = {
    .palette = 1,
    .colsb = { 64, 64, 64, 64, 64, 64, 64, 64 },
    .rows = { 16, 16, 16, 16, 16, 16, 16, 16 },
};

/* Row r of the two scaled B tiles from the nibble row q: q * sc (sc in
 * both 16-bit halves of lane n; bytes multiplied as 16-bit words, even and
 * odd apart) split into its low and its high byte. */
static inline __attribute__((always_inline)) void
b_scaled(uint8_t lo[16][64], uint8_t hi[16][64], int r, __m512i q, __m512i scw)
{
    const __m512i kff = _mm512_set1_epi16(0xff);
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    const __m512i pe = _mm512_mullo_epi16(_mm512_and_si512(q, kff), scw);
    const __m512i po = _mm512_mullo_epi16(_mm512_srli_epi16(q, 8), scw);
    _mm512_store_si512(lo[r], _mm512_mask_blend_epi8(odd, pe, _mm512_slli_epi16(po, 8)));
    _mm512_store_si512(hi[r], _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(pe, 8), po));
}

static inline __attribute__((always_inline)) void
panel_K_block(struct panel_K *pn, int e, const uint8_t *x0, const uint8_t *x1)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i k03 = _mm512_set1_epi32(0x03030303), kff = _mm512_set1_epi32(0xff);
    const __m512i k0101 = _mm512_set1_epi32(0x01010101), k10001 = _mm512_set1_epi32(0x10001);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i oddi = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    /* the three packed scale words of 16 rows, row r in lane r */
    __m512i u[3];
    for (int q = 0; q < 3; q++)
        u[q] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(x0 + 32 + 32 * q))),
            _mm256_loadu_si256((const __m256i *)(const void *)(x1 + 32 + 32 * q)), 1);
    const __m512i sc_lo = _mm512_and_si512(u[0], k3f), mn_lo = _mm512_and_si512(u[1], k3f);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u[2], k0f),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[0], 6), k03), 4));
    const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u[2], 4), k0f),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[1], 6), k03), 4));
    _mm512_storeu_ps(pn->d[e], scales16(x0, x1));
    _mm512_storeu_ps(pn->dmin[e], scales16(x0 + 16, x1 + 16));
    /* step g: sub-block 2g (the low nibbles of pieces 4g..4g+3) in B rows
     * 0..7, 2g + 1 (the high nibbles) in rows 8..15 */
    for (int g = 0; g < AMX_K_STEPS; g++) {
        const __m512i scp = g < 2 ? sc_lo : sc_hi, mnp = g < 2 ? mn_lo : mn_hi;
        const int sh = 16 * (g & 1);
        const __m512i s0 = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(scp, sh), kff), k10001);
        const __m512i s1 = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(scp, sh + 8), kff), k10001);
        const __m512i n0 = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(mnp, sh), kff), k0101);
        const __m512i n1 = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(mnp, sh + 8), kff), k0101);
        for (int k = 0; k < 4; k++) {
            const __m512i v0 = load512(x0 + 128 + 64 * (4 * g + k));
            const __m512i v1 = load512(x1 + 128 + 64 * (4 * g + k));
            const __m512i l0 = _mm512_and_si512(v0, m4), l1 = _mm512_and_si512(v1, m4);
            const __m512i h0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
            const __m512i h1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
            uint8_t (*lo)[64] = pn->lo[e][g], (*hi)[64] = pn->hi[e][g];
            b_scaled(lo, hi, 2 * k, _mm512_permutex2var_epi32(l0, even, l1), s0);
            b_scaled(lo, hi, 2 * k + 1, _mm512_permutex2var_epi32(l0, oddi, l1), s0);
            b_scaled(lo, hi, 8 + 2 * k, _mm512_permutex2var_epi32(h0, even, h1), s1);
            b_scaled(lo, hi, 9 + 2 * k, _mm512_permutex2var_epi32(h0, oddi, h1), s1);
            _mm512_store_si512(pn->mn[e][g][2 * k], n0);
            _mm512_store_si512(pn->mn[e][g][2 * k + 1], n0);
            _mm512_store_si512(pn->mn[e][g][8 + 2 * k], n1);
            _mm512_store_si512(pn->mn[e][g][9 + 2 * k], n1);
        }
    }
}

AMX_FN static void gemm_q4_K_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    const int64_t nb = n / BP_QK_K;
    const size_t xbs = CPU_REPACK_ROWS * sizeof(struct bp_block_q4_K);
    const size_t qb = sizeof(struct bp_block_q8_K), qs = offsetof(struct bp_block_q8_K, qs);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    struct panel_K pn;
    _Alignas(64) int32_t c[3][16][16];
    _tile_loadconfig(&amx_cfg_full);
    for (int64_t b0 = 0; b0 < nb; b0 += AMX_SEG_K) {
        const int nseg = nb - b0 < AMX_SEG_K ? (int)(nb - b0) : AMX_SEG_K;
        for (int e = 0; e < nseg; e++) {
            const uint8_t *x0 = w0 + (size_t)(b0 + e) * xbs, *x1 = w1 + (size_t)(b0 + e) * xbs;
            cpu_x8_prefetch(x0 + CPU_AMX_PREFETCH_BYTES, xbs);
            cpu_x8_prefetch(x1 + CPU_AMX_PREFETCH_BYTES, xbs);
            panel_K_block(&pn, e, x0, x1);
        }
        AMX_MEMORY_BARRIER();
        for (int i = 0; i < nt; i++) {
            const char *yt = (const char *)y + (size_t)(16 * i) * ys;
            float *st = s + 256 * i;
            __m512 acc[16];
            for (int m = 0; m < 16; m++) acc[m] = b0 ? _mm512_loadu_ps(st + 16 * m) : _mm512_setzero_ps();
            for (int e = 0; e < nseg; e++) {
                const char *yb = yt + (size_t)(b0 + e) * qb;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                for (int g = 0; g < AMX_K_STEPS; g++) {
                    _tile_loadd(3, yb + qs + 64 * g, ys);
                    _tile_loadd(4, pn.lo[e][g], 64);
                    _tile_loadd(5, pn.hi[e][g], 64);
                    _tile_loadd(6, pn.mn[e][g], 64);
                    _tile_dpbsud(0, 3, 4);
                    _tile_dpbsud(1, 3, 5);
                    _tile_dpbsud(2, 3, 6);
                }
                _tile_stored(0, c[0], 64);
                _tile_stored(1, c[1], 64);
                _tile_stored(2, c[2], 64);
                const __m512 dw = _mm512_loadu_ps(pn.d[e]), mw = _mm512_loadu_ps(pn.dmin[e]);
                for (int m = 0; m < 16; m++) {
                    const __m512i sumi = _mm512_add_epi32(_mm512_load_si512(c[0][m]),
                                                          _mm512_slli_epi32(_mm512_load_si512(c[1][m]), 8));
                    const __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(sumi), dw,
                        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[2][m])), mw));
                    float dy;
                    memcpy(&dy, yb + (size_t)m * ys, 4);
                    acc[m] = _mm512_fmadd_ps(t, _mm512_set1_ps(dy), acc[m]);
                }
            }
            for (int m = 0; m < 16; m++) _mm512_storeu_ps(st + 16 * m, acc[m]);
        }
    }
    _tile_release();
}

/* Q6_K: a scale per 16 elements would cut each tile product to K = 16 (a
 * quarter of a tile's work, and a store and a vpmulld pass per sub-block).
 * Instead the scale goes into B: v = (q - 32) * sc, |v| <= 4096, is split
 * into v = 128 * hi + lo with lo in 0..127 and hi in -32..32, both int8;
 * B_lo and B_hi are full K = 64 tiles, and the two products of a
 * super-block sum in the tiles, so sumi = C_lo + 128 * C_hi is the VNNI
 * kernel's integer (|sumi| < 2^27) with no per-sub-block work at all:
 * s += float(sumi) * (d_w * d_y) once per super-block. The -32 sits in B
 * too (no bsums). q * sc comes from two vpmaddubsw against the scale in
 * the even or the odd bytes, which leaves each product in its own byte's
 * int16: lo and hi go back into place with one byte blend each.
 * Tiles: 0/1 C_lo/C_hi and 2/3 of a second activation tile (4 and 5 its
 * A), 6/7 B_lo/B_hi: each B tile load meets two activation tiles. */
/* Q6_K super-blocks per panel: 8 KiB of B tiles. Kernel alone (thread CPU
 * time, 64 activation rows, alternating runs) 1 was 5-10% faster than 2 and
 * 2 was ~10% faster than 4: the panel and the 64 rows' activations share L1. */
#define AMX_SEG_6 1

struct panel_6 {
    _Alignas(64) uint8_t bt[AMX_SEG_6][4][2][16][64]; /* super-block, 64 k, lo/hi, B tile */
    float d[AMX_SEG_6][16];
};

/* B row q (16 weight rows x 4 k, unsigned 6-bit quants) times the scale
 * word sw (row n's sub-block scale in bytes 4n..4n+3), minus 32 * scale,
 * as lo and hi B rows. */
static inline __attribute__((always_inline)) void
b_rows_6(uint8_t *lo, uint8_t *hi, __m512i q, __m512i sw)
{
    const __m512i even = _mm512_set1_epi32(0x00FF00FF), k7f = _mm512_set1_epi8(0x7F);
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    const __m512i t32 = _mm512_slli_epi16(_mm512_srai_epi16(sw, 8), 5);
    const __m512i ve = _mm512_sub_epi16(_mm512_maddubs_epi16(q, _mm512_and_si512(sw, even)), t32);
    const __m512i vo = _mm512_sub_epi16(_mm512_maddubs_epi16(q, _mm512_andnot_si512(even, sw)), t32);
    /* an odd product's bits 0..6 and 7..14 land in its high byte */
    _mm512_store_si512(lo, _mm512_and_si512(_mm512_mask_blend_epi8(odd, ve, _mm512_slli_epi16(vo, 8)), k7f));
    _mm512_store_si512(hi, _mm512_mask_blend_epi8(odd, _mm512_srai_epi16(ve, 7), _mm512_slli_epi16(vo, 1)));
}

/* Super-block e of the panel from the x8 blocks x0 (rows 0..7) and x1
 * (8..15). K window t = 2h + u holds elements 64t..64t+63: the low (u = 0)
 * or high (u = 1) nibbles of half h; its B rows 2p, 2p + 1 come from piece
 * L(p) (p < 4) or L'(p - 4), and its sub-block p / 2 is 4t + p / 2. */
static inline __attribute__((always_inline)) void
panel_6_block(struct panel_6 *pn, int e, const uint8_t *x0, const uint8_t *x1)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    /* byte 4 (n % 4) of each dword n: its dword's first byte in a lane */
    const __m512i dw4 = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
    __m512i w[4]; /* scale word c of 16 rows: row n's scales 4c..4c+3 in dword n */
    for (int c = 0; c < 4; c++)
        w[c] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(x0 + 16 + 32 * c))),
            _mm256_loadu_si256((const __m256i *)(const void *)(x1 + 16 + 32 * c)), 1);
    _mm512_storeu_ps(pn->d[e], scales16(x0, x1));
    for (int h = 0; h < 2; h++)
        for (int ab = 0; ab < 2; ab++)
            for (int k = 0; k < 4; k++) {
                const size_t lo = 144 + 768 * (size_t)h + (ab ? 512 + 64 * (size_t)k : 128 * (size_t)k);
                const size_t hb = 144 + 768 * (size_t)h + 128 * (size_t)k + 64;
                __m512i q[2][2]; /* [group][u] */
                for (int g = 0; g < 2; g++) {
                    const uint8_t *x = g ? x1 : x0;
                    const __m512i l = load512(x + lo), b = load512(x + hb);
                    const __m512i hl = _mm512_and_si512(ab ? _mm512_slli_epi16(b, 2) : _mm512_slli_epi16(b, 4), m30);
                    const __m512i hh = _mm512_and_si512(ab ? _mm512_srli_epi16(b, 2) : b, m30);
                    /* 0xEC: (a & c) | b */
                    q[g][0] = _mm512_ternarylogic_epi32(l, hl, m4, 0xEC);
                    q[g][1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), hh, m4, 0xEC);
                }
                const int p = 4 * ab + k;
                for (int u = 0; u < 2; u++) {
                    const int t = 2 * h + u, j = 4 * t + p / 2;
                    /* byte j % 4 of each dword of scale word j / 4 */
                    const __m512i sw = _mm512_shuffle_epi8(
                        w[j / 4], _mm512_add_epi8(dw4, _mm512_set1_epi8((char)(j % 4))));
                    uint8_t (*bt)[16][64] = pn->bt[e][t];
                    b_rows_6(bt[0][2 * p], bt[1][2 * p],
                             _mm512_permutex2var_epi32(q[0][u], even, q[1][u]), sw);
                    b_rows_6(bt[0][2 * p + 1], bt[1][2 * p + 1],
                             _mm512_permutex2var_epi32(q[0][u], odd, q[1][u]), sw);
                }
            }
}

/* The activation tile whose quants start at ya (and with pair the one 16
 * rows after it) against the panel's super-block e: tiles 0/1 (and 2/3)
 * hold C_lo/C_hi after the call. */
AMX_FN static inline __attribute__((always_inline)) void
tiles_6(const struct panel_6 *pn, int e, const char *ya, size_t ys, const bool pair)
{
    _tile_zero(0);
    _tile_zero(1);
    if (pair) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int t = 0; t < 4; t++) {
        _tile_loadd(6, pn->bt[e][t][0], 64);
        _tile_loadd(7, pn->bt[e][t][1], 64);
        _tile_loadd(4, ya + 64 * t, ys);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        if (pair) {
            _tile_loadd(5, ya + 16 * ys + 64 * t, ys);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    }
}

/* st[16 m + r] += float(C_lo + 128 C_hi) * (d_w[r] * d_y[m]). */
static inline __attribute__((always_inline)) void
scale_6(float *st, const int32_t cl[16][16], const int32_t ch[16][16], const __m512 dw,
        const char *yb, size_t ys)
{
    for (int m = 0; m < 16; m++) {
        const struct bp_block_q8_K *q = (const void *)(yb + (size_t)m * ys);
        const __m512i sumi = _mm512_add_epi32(_mm512_load_si512(cl[m]),
                                              _mm512_slli_epi32(_mm512_load_si512(ch[m]), 7));
        _mm512_storeu_ps(st + 16 * m, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi),
                                                      _mm512_mul_ps(dw, _mm512_set1_ps(q->d)),
                                                      _mm512_loadu_ps(st + 16 * m)));
    }
}

AMX_FN static void gemm_q6_K_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    const int64_t nb = n / BP_QK_K;
    const size_t xbs = CPU_REPACK_ROWS * sizeof(struct bp_block_q6_K);
    const size_t qb = sizeof(struct bp_block_q8_K), qs = offsetof(struct bp_block_q8_K, qs);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    struct panel_6 pn;
    _Alignas(64) int32_t c[4][16][16];
    memset(s, 0, sizeof(float) * 256 * (size_t)nt);
    _tile_loadconfig(&amx_cfg_full);
    for (int64_t b0 = 0; b0 < nb; b0 += AMX_SEG_6) {
        const int nseg = nb - b0 < AMX_SEG_6 ? (int)(nb - b0) : AMX_SEG_6;
        for (int e = 0; e < nseg; e++) {
            const uint8_t *x0 = w0 + (size_t)(b0 + e) * xbs, *x1 = w1 + (size_t)(b0 + e) * xbs;
            cpu_x8_prefetch(x0 + CPU_AMX_PREFETCH_BYTES, xbs);
            cpu_x8_prefetch(x1 + CPU_AMX_PREFETCH_BYTES, xbs);
            panel_6_block(&pn, e, x0, x1);
        }
        AMX_MEMORY_BARRIER();
        for (int i = 0; i < nt; i += 2) {
            const char *yt = (const char *)y + (size_t)(16 * i) * ys;
            for (int e = 0; e < nseg; e++) {
                const char *yb = yt + (size_t)(b0 + e) * qb;
                const __m512 dw = _mm512_loadu_ps(pn.d[e]);
                if (i + 1 < nt) {
                    tiles_6(&pn, e, yb + qs, ys, true);
                    _tile_stored(0, c[0], 64);
                    _tile_stored(1, c[1], 64);
                    _tile_stored(2, c[2], 64);
                    _tile_stored(3, c[3], 64);
                    scale_6(s + 256 * i, c[0], c[1], dw, yb, ys);
                    scale_6(s + 256 * (i + 1), c[2], c[3], dw, yb + 16 * ys, ys);
                } else {
                    tiles_6(&pn, e, yb + qs, ys, false);
                    _tile_stored(0, c[0], 64);
                    _tile_stored(1, c[1], 64);
                    scale_6(s + 256 * i, c[0], c[1], dw, yb, ys);
                }
            }
        }
    }
    _tile_release();
}

static bool amx_probe(void)
{
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
    if (!isa.amx_tile || !isa.amx_int8 || !isa.os_amx)
        return false;
    /* Linux keeps the 8 KiB tile data out of a process's state until it
     * asks; without this the first tile load faults. */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

static atomic_int amx_state; /* 0 not asked, 1 active, 2 off */
static atomic_bool amx_paused; /* cpu_amx_use(false) */
static pthread_mutex_t amx_mu = PTHREAD_MUTEX_INITIALIZER;

bool cpu_amx_enable(bool want)
{
    pthread_mutex_lock(&amx_mu);
    if (atomic_load(&amx_state) == 0) {
        bool ok = false;
#if defined(CPU_HAVE_AMX)
        ok = want && amx_probe();
#else
        (void)want;
#endif
        atomic_store(&amx_state, ok ? 1 : 2);
    }
    pthread_mutex_unlock(&amx_mu);
    return atomic_load(&amx_state) == 1;
}

bool cpu_amx_active(void)
{
    return atomic_load_explicit(&amx_state, memory_order_relaxed) == 1;
}

bool cpu_amx_use(bool on)
{
    if (on && !cpu_amx_active())
        return false;
    atomic_store(&amx_paused, !on);
    return true;
}

cpu_gemm_amx_fn cpu_gemm_amx_for(enum bp_type t)
{
    if (!cpu_amx_active() || atomic_load_explicit(&amx_paused, memory_order_relaxed))
        return NULL;
#if defined(CPU_HAVE_AMX)
    static const cpu_gemm_amx_fn table[BP_TYPE_COUNT] = {
        [BP_TYPE_Q4_0] = gemm_q4_0_amx,
        [BP_TYPE_Q8_0] = gemm_q8_0_amx,
        [BP_TYPE_Q4_K] = gemm_q4_K_amx,
        [BP_TYPE_Q6_K] = gemm_q6_K_amx,
    };
    return (unsigned)t < BP_TYPE_COUNT ? table[t] : NULL;
#else
    (void)t;
    return NULL;
#endif
}
