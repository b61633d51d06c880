/*
 * simd.h — the SIMD dot products of the variant being built (declared only
 * when the build's ISA flags make them available). kernels.c picks them.
 */
#ifndef BP_CPU_SIMD_H
#define BP_CPU_SIMD_H

#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_HAVE_X86_SIMD 1
void cpu_vec_dot_q4_0_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q8_0_q8_0_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q4_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q6_K_q8_K_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f32_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f16_x86(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_bf16_x86(int64_t n, float *s, const void *a, const void *b);
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD)
#define CPU_HAVE_NEON_SIMD 1
void cpu_vec_dot_q4_0_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q8_0_q8_0_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q4_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q6_K_q8_K_neon(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f32_neon(int64_t n, float *s, const void *a, const void *b);
#endif

#endif
