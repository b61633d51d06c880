/*
 * gemm_float_x86.c — MUL_MAT with F32 / F16 / BF16 weights against F32
 * activation rows, many rows at a time (prefill), in the style of
 * llamafile's tinyBLAS: a register tile of RM weight rows x RN activation
 * rows walks K one vector at a time; each step converts RM weight vectors
 * once (vcvtph2ps for F16, a 16-bit shift for BF16) and meets them with RN
 * activation vectors in RM*RN FMA accumulators. A plain vec_dot per output
 * converts each weight element once per activation row and keeps one row
 * pair in registers; here every converted weight vector feeds RN FMAs and
 * every activation vector RM.
 *
 * Summation order is the same for every output whichever tile computes it
 * (full, edge, any RM/RN): lane l accumulates k = l, l+VW, ... in order; the
 * last partial vector is zero-padded (not a scalar tail) so it is one more
 * step of the same kind; then one fixed horizontal sum. So MUL_MAT results
 * do not depend on how rows are cut into chunks and tiles, i.e. on the
 * thread count. It is NOT the order of the vec_dot kernels: the op chooses
 * one or the other per node, from the node's shape only.
 *
 * AVX-512: 4 x 6 tile (24 accumulators + 4 weight vectors + 1 activation of
 * 32 zmm); AVX2: 3 x 4 (12 + 3 + 1 of 16 ymm).
 */
#include "simd.h"

#if defined(CPU_HAVE_X86_SIMD)
#include <immintrin.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

enum wtype { W_F32, W_F16, W_BF16 };

#if defined(__AVX512F__)
#define VW 16
#define RM 4
#define RN 6
typedef __m512 vf;
ALWAYS_INLINE vf vzero(void) { return _mm512_setzero_ps(); }
ALWAYS_INLINE vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
ALWAYS_INLINE vf vload(const float *p) { return _mm512_loadu_ps(p); }
ALWAYS_INLINE vf vload_f16(const void *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
ALWAYS_INLINE vf vload_bf16(const void *p)
{
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
ALWAYS_INLINE __m256 half_sum(vf v)
{
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return _mm256_add_ps(_mm512_castps512_ps256(v), hi);
}
#else
#define VW 8
#define RM 3
#define RN 4
typedef __m256 vf;
ALWAYS_INLINE vf vzero(void) { return _mm256_setzero_ps(); }
ALWAYS_INLINE vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
ALWAYS_INLINE vf vload(const float *p) { return _mm256_loadu_ps(p); }
ALWAYS_INLINE vf vload_f16(const void *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
ALWAYS_INLINE vf vload_bf16(const void *p)
{
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
ALWAYS_INLINE __m256 half_sum(vf v) { return v; }
#endif

ALWAYS_INLINE float hsum(vf v)
{
    const __m256 h = half_sum(v);
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

ALWAYS_INLINE size_t wsize(enum wtype t) { return t == W_F32 ? 4 : 2; }

/* The accumulators only live in registers if every loop over the tile is
 * unrolled; GCC does that at -O3 but not at -O2 (RelWithDebInfo, the
 * default build), where they went through the stack on every FMA and the
 * kernel ran at a third of its speed. */
#define UNROLL _Pragma("GCC unroll 8")

/* VW weights of type t from p, as floats. */
ALWAYS_INLINE vf load_w(enum wtype t, const char *p)
{
    if (t == W_F16)
        return vload_f16(p);
    if (t == W_BF16)
        return vload_bf16(p);
    return vload((const float *)(const void *)p);
}

/* One K step of the tile: weight row i at w[i] + off*wsize, activation row j
 * at x[j] + off. */
ALWAYS_INLINE void step(enum wtype t, int rm, int rn, vf acc[RM][RN], const char *const *w,
                        const float *const *x, int64_t off)
{
    vf wv[RM];
    UNROLL for (int i = 0; i < rm; i++) wv[i] = load_w(t, w[i] + (size_t)off * wsize(t));
    UNROLL for (int j = 0; j < rn; j++) {
        const vf xv = vload(x[j] + off);
        UNROLL for (int i = 0; i < rm; i++) acc[i][j] = vfma(wv[i], xv, acc[i][j]);
    }
}

/* y[j][i] = dot(weight row i, activation row j), i < rm, j < rn. */
ALWAYS_INLINE void tile(enum wtype t, int rm, int rn, int64_t k, const char *w, size_t ws,
                        const float *const *x, float *const *y)
{
    vf acc[RM][RN];
    const char *wr[RM];
    UNROLL for (int i = 0; i < rm; i++) {
        wr[i] = w + (size_t)i * ws;
        UNROLL for (int j = 0; j < rn; j++) acc[i][j] = vzero();
    }
    const int64_t kv = k / VW * VW;
    for (int64_t l = 0; l < kv; l += VW) step(t, rm, rn, acc, wr, x, l);
    if (kv < k) {
        /* the partial vector, zero-padded: the same step as the others */
        _Alignas(64) char wpad[RM][VW * 4];
        _Alignas(64) float xpad[RN][VW];
        const char *wp[RM];
        const float *xp[RN];
        const size_t tail = (size_t)(k - kv);
        for (int i = 0; i < rm; i++) {
            memset(wpad[i], 0, sizeof wpad[i]);
            memcpy(wpad[i], wr[i] + (size_t)kv * wsize(t), tail * wsize(t));
            wp[i] = wpad[i];
        }
        for (int j = 0; j < rn; j++) {
            memset(xpad[j], 0, sizeof xpad[j]);
            memcpy(xpad[j], x[j] + kv, tail * sizeof(float));
            xp[j] = xpad[j];
        }
        step(t, rm, rn, acc, wp, xp, 0);
    }
    UNROLL for (int j = 0; j < rn; j++)
        UNROLL for (int i = 0; i < rm; i++) y[j][i] = hsum(acc[i][j]);
}

typedef void (*tile_fn)(int64_t k, const char *w, size_t ws, const float *const *x,
                        float *const *y);

/* One function per tile shape, so every loop above unrolls into registers. */
#define TILE(T, M, N)                                                                      \
    static void tile_##T##_##M##_##N(int64_t k, const char *w, size_t ws,                   \
                                     const float *const *x, float *const *y)                \
    {                                                                                      \
        tile(T, M, N, k, w, ws, x, y);                                                     \
    }
#if RN == 6
#define TILE_ROW(T, M)                                                                     \
    TILE(T, M, 1) TILE(T, M, 2) TILE(T, M, 3) TILE(T, M, 4) TILE(T, M, 5) TILE(T, M, 6)
#define TILE_PTRS(T, M)                                                                    \
    { tile_##T##_##M##_1, tile_##T##_##M##_2, tile_##T##_##M##_3, tile_##T##_##M##_4,     \
      tile_##T##_##M##_5, tile_##T##_##M##_6 }
#else
#define TILE_ROW(T, M) TILE(T, M, 1) TILE(T, M, 2) TILE(T, M, 3) TILE(T, M, 4)
#define TILE_PTRS(T, M)                                                                    \
    { tile_##T##_##M##_1, tile_##T##_##M##_2, tile_##T##_##M##_3, tile_##T##_##M##_4 }
#endif
#if RM == 4
#define TILES(T) TILE_ROW(T, 1) TILE_ROW(T, 2) TILE_ROW(T, 3) TILE_ROW(T, 4)
#define TILE_TABLE(T) { TILE_PTRS(T, 1), TILE_PTRS(T, 2), TILE_PTRS(T, 3), TILE_PTRS(T, 4) }
#else
#define TILES(T) TILE_ROW(T, 1) TILE_ROW(T, 2) TILE_ROW(T, 3)
#define TILE_TABLE(T) { TILE_PTRS(T, 1), TILE_PTRS(T, 2), TILE_PTRS(T, 3) }
#endif

TILES(W_F32)
TILES(W_F16)
TILES(W_BF16)

static const tile_fn tiles_f32[RM][RN] = TILE_TABLE(W_F32);
static const tile_fn tiles_f16[RM][RN] = TILE_TABLE(W_F16);
static const tile_fn tiles_bf16[RM][RN] = TILE_TABLE(W_BF16);

/* Activation tiles outside, weight tiles inside: the RN activation rows
 * stay in cache while the weight rows of the call stream past them. */
static void gemm(const tile_fn tab[RM][RN], int64_t k, const void *w, size_t ws, int64_t nw,
                 const float *const *x, float *const *y, int nx)
{
    for (int j0 = 0; j0 < nx; j0 += RN) {
        const int rn = nx - j0 < RN ? nx - j0 : RN;
        float *yt[RN];
        for (int64_t i0 = 0; i0 < nw; i0 += RM) {
            const int rm = nw - i0 < RM ? (int)(nw - i0) : RM;
            for (int j = 0; j < rn; j++) yt[j] = y[j0 + j] + i0;
            tab[rm - 1][rn - 1](k, (const char *)w + (size_t)i0 * ws, ws, x + j0, yt);
        }
    }
}

void cpu_gemm_f32_x86(int64_t k, const void *w, size_t ws, int64_t nw, const float *const *x,
                      float *const *y, int nx)
{
    gemm(tiles_f32, k, w, ws, nw, x, y, nx);
}

void cpu_gemm_f16_x86(int64_t k, const void *w, size_t ws, int64_t nw, const float *const *x,
                      float *const *y, int nx)
{
    gemm(tiles_f16, k, w, ws, nw, x, y, nx);
}

void cpu_gemm_bf16_x86(int64_t k, const void *w, size_t ws, int64_t nw, const float *const *x,
                       float *const *y, int nx)
{
    gemm(tiles_bf16, k, w, ws, nw, x, y, nx);
}
#else
typedef int cpu_gemm_float_x86_not_built; /* ISO C forbids an empty translation unit */
#endif
