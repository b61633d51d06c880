/*
 * simd.h — the SIMD dot products of the variant being built (declared only
 * when the build's ISA flags make them available). kernels.c picks them.
 */
#ifndef BP_CPU_SIMD_H
#define BP_CPU_SIMD_H

#include "kernels.h"
#include "repack.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_HAVE_X86_SIMD 1
#include <immintrin.h>
/* Ask for the cache lines of [p, p + bytes) in L2 (see CPU_X8_L2_PREFETCH_BYTES).
 * Always inlined: GCC 12 otherwise finds this void function "const" (a
 * prefetch has no effect it models), and the calls are deleted as dead
 * code in the kernels that do not inline it early; it did so in every
 * x8 kernel until this was noticed in the disassembly. Unrolled (bytes is
 * a constant in every kernel): as a loop, each line cost three uops, a
 * fifth of the Q4_K kernel's at decode. */
static inline __attribute__((always_inline)) void cpu_x8_prefetch(const uint8_t *p, size_t bytes)
{
    _Pragma("GCC unroll 32")
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T1);
}
/* The same into L1 (see CPU_X8_L1_PREFETCH_BYTES). */
static inline __attribute__((always_inline)) void cpu_x8_prefetch_l1(const uint8_t *p, size_t bytes)
{
    _Pragma("GCC unroll 32")
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}
/* The 6-bit scales less 32 of an x8 Q3_K block's 8 rows (ggml's unpacking
 * of its three packed words, on 8 rows at once): sv[q] holds, in row r's
 * dword, the scales of sub-blocks 4q..4q+3, one signed byte each. */
static inline __attribute__((always_inline)) void cpu_q3_K_x8_scales(const uint8_t *xb, __m256i sv[4])
{
    const __m256i k0f = _mm256_set1_epi32(0x0f0f0f0f), k03 = _mm256_set1_epi32(0x03030303);
    const __m256i k32 = _mm256_set1_epi8(32);
    const __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 16));
    const __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 48));
    const __m256i a2 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 80));
    sv[0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a0, k0f),
        _mm256_slli_epi32(_mm256_and_si256(a2, k03), 4)), k32);
    sv[1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a1, k0f),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 2), k03), 4)), k32);
    sv[2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a0, 4), k0f),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 4), k03), 4)), k32);
    sv[3] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a1, 4), k0f),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a2, 6), k03), 4)), k32);
}
void cpu_vec_dot_q4_0_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q8_0_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
/* cpu_quantize_row_q8_0_ref's arithmetic 8 lanes at a time: the same bytes. */
void cpu_quantize_row_q8_0_x86(const float *x, void *y, int64_t n);
/* cpu_quantize_row_q8_K_ref's arithmetic 16 (AVX-512) or 8 (AVX2) lanes at a
 * time: the same bytes for every input. */
void cpu_quantize_row_q8_K_x86(const float *x, void *y, int64_t n);
void cpu_vec_dot_q4_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q6_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
/* The ABI 1.2 weight types (dot_x86.c): the reference's integer sums. */
void cpu_vec_dot_q4_1_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_0_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_1_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_nl_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q2_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q3_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_xs_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f32_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f16_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_bf16_x86(int64_t n, float *s, const void *a, const void *b);
/* Register-tiled float weights x F32 rows (gemm_float_x86.c). */
void cpu_gemm_f32_x86(int64_t n, const void *w, size_t ws, int64_t nw, const float *const *x,
                      float *const *y, int nx);
void cpu_gemm_f16_x86(int64_t n, const void *w, size_t ws, int64_t nw, const float *const *x,
                      float *const *y, int nx);
void cpu_gemm_bf16_x86(int64_t n, const void *w, size_t ws, int64_t nw, const float *const *x,
                       float *const *y, int nx);
#endif

/* The x8 kernels need 512-bit registers and vpdpbusd (gemm_avx512.c); other
 * builds run the x8 layout through their vec_dot, block by block. */
#if defined(CPU_HAVE_X86_SIMD) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VNNI__)
#define CPU_HAVE_X86_GEMM 1
void cpu_gemm_q4_0_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q8_0_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q4_K_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q6_K_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_0_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_K_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q3_K_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_xs_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q2_K_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_nl_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q4_1_x8_x86(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_1_x8_x86(CPU_GEMM_X8_PARAMS);
/* Whether the x8 kernels (x86) move bits with GFNI (the high nibbles of
 * the 32-weight types, Q6_K and IQ4_XS, the Q6_K, Q3_K and Q5_K high bits, the Q2_K
 * planes): where the CPU has it, unless turned off here (tests compare
 * both paths). Returns the state after the call. */
bool cpu_x8_gfni_use(bool on);
#endif

/* The avx2 variant's x8 kernels (gemm_avx2.c): maddubs, 256-bit. */
#if defined(CPU_HAVE_X86_SIMD) && !defined(CPU_HAVE_X86_GEMM)
#define CPU_HAVE_X86_GEMM_AVX2 1
void cpu_gemm_q4_0_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_0_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q3_K_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_K_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_xs_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_nl_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q8_0_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q4_K_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q6_K_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q4_1_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_1_x8_avx2(CPU_GEMM_X8_PARAMS);
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)
#define CPU_HAVE_NEON_SIMD 1
/* cpu_quantize_row_q8_K_ref's arithmetic 4 lanes at a time: the same bytes. */
void cpu_quantize_row_q8_K_neon(const float *x, void *y, int64_t n);
void cpu_vec_dot_q4_0_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q8_0_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q4_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q6_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q4_1_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_0_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_1_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_nl_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q2_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q3_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_xs_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f32_neon(int64_t n, float *s, const void *a, const void *b);
#endif

#endif
