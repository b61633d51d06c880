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
void cpu_gemm_q8_0_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q4_K_x8_avx2(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q6_K_x8_avx2(CPU_GEMM_X8_PARAMS);
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
