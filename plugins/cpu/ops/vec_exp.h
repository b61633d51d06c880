/*
 * vec_exp.h — expf on a whole SIMD register: the SIMD variants' softmax
 * (attention.c) and SiLU (elementwise.c) called libm's expf one lane at a
 * time, which cost more than the arithmetic around it.
 *
 * exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts
 * (|r| <= ln2 / 2), exp(r) by Cephes' degree-7 polynomial in Horner form
 * with fused multiply-adds. Error: within 1.3 ulp of exp over the whole
 * finite range (test_cpu_vec_exp measures it per variant through SILU and
 * asserts the bound). Inputs below CPU_EXP_MIN give exactly 0 (so a
 * -INFINITY score weighs nothing), inputs above CPU_EXP_MAX are clamped (a
 * finite ~2^127 rather than inf; SiLU of x < -88 is then -0.0 instead of a
 * denormal). NaN inputs are not supported (no caller produces them).
 *
 * Header-only: attention.c is also compiled on its own for the NEON test.
 */
#ifndef BP_CPU_VEC_EXP_H
#define BP_CPU_VEC_EXP_H

#define CPU_EXP_MIN (-87.33654f) /* ln(2^-126): the smallest normal result */
#define CPU_EXP_MAX 88.0f /* n <= 127: 2^n stays a normal float */
#define CPU_EXP_LOG2E 1.44269504088896341f
#define CPU_EXP_LN2_HI 0.693359375f
#define CPU_EXP_LN2_LO (-2.12194440e-4f)
/* Cephes expf: exp(r) = 1 + r + r^2 (P0 + r P1 + ... + r^5 P5). */
#define CPU_EXP_P5 1.9875691500e-4f
#define CPU_EXP_P4 1.3981999507e-3f
#define CPU_EXP_P3 8.3334519073e-3f
#define CPU_EXP_P2 4.1665795894e-2f
#define CPU_EXP_P1 1.6666665459e-1f
#define CPU_EXP_P0 5.0000001201e-1f

#if defined(__AVX512F__)
#include <immintrin.h>
static inline __m512 cpu_exp_avx512(__m512 x)
{
    const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(CPU_EXP_MIN), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(CPU_EXP_MIN)), _mm512_set1_ps(CPU_EXP_MAX));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(CPU_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(CPU_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(CPU_EXP_LN2_LO), r);
    __m512 y = _mm512_set1_ps(CPU_EXP_P5);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(CPU_EXP_P4));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(CPU_EXP_P3));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(CPU_EXP_P2));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(CPU_EXP_P1));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(CPU_EXP_P0));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~zero, y);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
static inline __m256 cpu_exp_avx2(__m256 x)
{
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(CPU_EXP_MIN), _CMP_GE_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(CPU_EXP_MIN)), _mm256_set1_ps(CPU_EXP_MAX));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(CPU_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CPU_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CPU_EXP_LN2_LO), r);
    __m256 y = _mm256_set1_ps(CPU_EXP_P5);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(CPU_EXP_P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(CPU_EXP_P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(CPU_EXP_P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(CPU_EXP_P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(CPU_EXP_P0));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, keep);
}
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
static inline float32x4_t cpu_exp_neon(float32x4_t x)
{
    const uint32x4_t keep = vcgeq_f32(x, vdupq_n_f32(CPU_EXP_MIN));
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(CPU_EXP_MIN)), vdupq_n_f32(CPU_EXP_MAX));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(CPU_EXP_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(CPU_EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(CPU_EXP_LN2_LO));
    float32x4_t y = vdupq_n_f32(CPU_EXP_P5);
    y = vfmaq_f32(vdupq_n_f32(CPU_EXP_P4), y, r);
    y = vfmaq_f32(vdupq_n_f32(CPU_EXP_P3), y, r);
    y = vfmaq_f32(vdupq_n_f32(CPU_EXP_P2), y, r);
    y = vfmaq_f32(vdupq_n_f32(CPU_EXP_P1), y, r);
    y = vfmaq_f32(vdupq_n_f32(CPU_EXP_P0), y, r);
    y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), y, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    y = vmulq_f32(y, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), keep));
}
#endif

#endif
