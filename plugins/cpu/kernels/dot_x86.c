/*
 * dot_x86.c — AVX2 / AVX-512 dot products (built into the avx2 and avx512
 * variants only). Signed x signed int8 products go through maddubs with
 * the sign moved onto the second operand (|a| * sign(b, a)), or through
 * vpdpbusd when AVX-512 VNNI is compiled in; the block scales multiply the
 * integer sums once per block.
 */
#include "simd.h"

#if defined(CPU_HAVE_X86_SIMD)
#include <immintrin.h>
#include <string.h>

static inline float hsum_ps(__m256 x)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline int hsum_epi32(__m256i x)
{
    __m128i r = _mm_add_epi32(_mm256_extracti128_si256(x, 1), _mm256_castsi256_si128(x));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(r);
}

/* Per block: amax over |x| (order does not matter for a max), the f16
 * scale of amax / 127 as the scalar path makes it, then x * (127 / amax)
 * rounded half to even: the IEEE products and rounding of the scalar
 * reference, so the bytes are the same. */
void cpu_quantize_row_q8_0_x86(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / BP_QK8_0; i++, x += BP_QK8_0) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        y[i].d = bp_f32_to_f16(amax / 127.0f);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* int32 -> int16 -> int8 packs work per 128-bit half: undo the interleave */
        const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(void *)y[i].qs, _mm256_permutevar8x32_epi32(b, order));
    }
}

/* The 16 block sums of one Q8_K block, from its stored quants: maddubs by 1
 * and madd by 1 give sums of 4 bytes, two rounds of hadd sums of 16 (the
 * groups of the two 128-bit halves come out interleaved, which the last
 * unpack undoes). |sum| <= 2048, so no step saturates. */
static inline void q8_K_bsums(struct bp_block_q8_K *y)
{
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    __m256i p[8];
    for (int k = 0; k < 8; k++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(y->qs + 32 * k));
        p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, q), one16);
    }
    /* halves: low [g0 g2 g4 g6], high [g1 g3 g5 g7]; then the same for g8.. */
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    const __m256i s = _mm256_packs_epi32(a, b);
    const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
    _mm_storeu_si128((__m128i *)(void *)y->bsums, _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128((__m128i *)(void *)(y->bsums + 8), _mm_unpackhi_epi16(lo, hi));
}

/* bp_nearest_int on vectors: the same float add and the same bit masks,
 * so the same value for every input (NaN and infinity included). */
#define Q8K_MAGIC 12582912.0f

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* One block in 16 zmm registers. The maximum takes |x| as the first operand
 * so that a NaN lane keeps the running maximum (maxps returns its second
 * operand then), as the reference's `>` skips NaN; the signed extreme is the
 * first lane equal to it, as the reference keeps the first of a tie. The
 * clamp to [-128, 127] is vpmovsdb's saturation. */
void cpu_quantize_row_q8_K_x86(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_K *y = vy;
    const __m512i mant = _mm512_set1_epi32(0x007fffff), half = _mm512_set1_epi32(0x00400000);
    for (int64_t i = 0; i < n / BP_QK_K; i++, x += BP_QK_K) {
        __m512 v[16], m = _mm512_setzero_ps();
        for (int k = 0; k < 16; k++) {
            v[k] = _mm512_loadu_ps(x + 16 * k);
            m = _mm512_max_ps(_mm512_abs_ps(v[k]), m);
        }
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m512 va = _mm512_set1_ps(amax);
        int first = 0;
        for (int k = 0; k < 16; k++) {
            const __mmask16 e = _mm512_cmp_ps_mask(_mm512_abs_ps(v[k]), va, _CMP_EQ_OQ);
            if (e) {
                first = 16 * k + __builtin_ctz(e);
                break;
            }
        }
        const float iscale = -127.0f / x[first];
        const __m512 is = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(Q8K_MAGIC);
        for (int k = 0; k < 16; k++) {
            const __m512 f = _mm512_add_ps(_mm512_mul_ps(is, v[k]), magic);
            const __m512i q = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), mant), half);
            _mm_storeu_si128((__m128i *)(void *)(y[i].qs + 16 * k), _mm512_cvtsepi32_epi8(q));
        }
        q8_K_bsums(&y[i]);
        y[i].d = 1 / iscale;
    }
}
#else
/* 32 ymm vectors a block, loaded again from L1 in each pass. The packs'
 * signed saturation is the clamp to [-128, 127]; they work per 128-bit
 * half, which the permute undoes (as in the Q8_0 quantizer above). */
void cpu_quantize_row_q8_K_x86(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), half = _mm256_set1_epi32(0x00400000);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < n / BP_QK_K; i++, x += BP_QK_K) {
        __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
        for (int k = 0; k < 32; k += 2) {
            m0 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)), m0);
            m1 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k + 8)), m1);
        }
        const __m256 m = _mm256_max_ps(m0, m1);
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m256 va = _mm256_set1_ps(amax);
        int first = 0;
        for (int k = 0; k < 32; k++) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k));
            const int e = _mm256_movemask_ps(_mm256_cmp_ps(a, va, _CMP_EQ_OQ));
            if (e) {
                first = 8 * k + __builtin_ctz((unsigned)e);
                break;
            }
        }
        const float iscale = -127.0f / x[first];
        const __m256 is = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(Q8K_MAGIC);
        for (int k = 0; k < 32; k += 4) {
            __m256i q[4];
            for (int l = 0; l < 4; l++) {
                const __m256 f = _mm256_add_ps(_mm256_mul_ps(is, _mm256_loadu_ps(x + 8 * (k + l))), magic);
                q[l] = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), half);
            }
            const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(void *)(y[i].qs + 8 * k), _mm256_permutevar8x32_epi32(b, order));
        }
        q8_K_bsums(&y[i]);
        y[i].d = 1 / iscale;
    }
}
#endif

/* 32 signed bytes times 32 signed bytes, summed in groups of 4 into 8 int32. */
static inline __m256i dot_i8(__m256i x, __m256i y)
{
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
#endif
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles. */
static inline __m256i nibbles32(const uint8_t *p)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

static inline float f16(uint16_t h)
{
    return _cvtsh_ss(h);
}

void cpu_vec_dot_q4_0_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int64_t nb = n / BP_QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    /* Two blocks per iteration into two accumulators: the FMA latency of one
     * chain would otherwise bound the loop, not the loads. */
    for (; i + 1 < nb; i += 2) {
        const __m256i qx0 = _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8));
        const __m256i qx1 = _mm256_sub_epi8(nibbles32(x[i + 1].qs), _mm256_set1_epi8(8));
        const __m256i p0 = dot_i8(qx0, _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256i p1 = dot_i8(qx1, _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        const __m256i qx = _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8));
        const __m256i p = dot_i8(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p),
                               acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

void cpu_vec_dot_q8_0_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q8_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int64_t nb = n / BP_QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i p0 = dot_i8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                  _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256i p1 = dot_i8(_mm256_loadu_si256((const __m256i *)x[i + 1].qs),
                                  _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        const __m256i p = dot_i8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                 _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p),
                               acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* Q4_K on 512-bit registers: per super-block the 12 bytes of 6-bit scales
 * and mins are unpacked with three 32-bit word operations (no per-sub-block
 * scalar work); each 64-element chunk (sub-blocks 2j and 2j+1) is one
 * register of nibbles against one register of activation bytes, and one
 * vpermw places sub-block 2j's scale in the low half and 2j+1's in the high
 * half. The float accumulator is summed once per row, not per block. */
void cpu_vec_dot_q4_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i pick[4] = {
        _mm512_set_epi64(0x0001000100010001ll, 0x0001000100010001ll, 0x0001000100010001ll,
                         0x0001000100010001ll, 0, 0, 0, 0),
        _mm512_set_epi64(0x0003000300030003ll, 0x0003000300030003ll, 0x0003000300030003ll,
                         0x0003000300030003ll, 0x0002000200020002ll, 0x0002000200020002ll,
                         0x0002000200020002ll, 0x0002000200020002ll),
        _mm512_set_epi64(0x0005000500050005ll, 0x0005000500050005ll, 0x0005000500050005ll,
                         0x0005000500050005ll, 0x0004000400040004ll, 0x0004000400040004ll,
                         0x0004000400040004ll, 0x0004000400040004ll),
        _mm512_set_epi64(0x0007000700070007ll, 0x0007000700070007ll, 0x0007000700070007ll,
                         0x0007000700070007ll, 0x0006000600060006ll, 0x0006000600060006ll,
                         0x0006000600060006ll, 0x0006000600060006ll),
    };
    __m512 acc = _mm512_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        /* utmp bytes 0..7: scales of sub-blocks 0..7, bytes 8..15: mins */
        uint32_t u[4];
        memcpy(u, x[i].scales, 12);
        u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
        const uint32_t m1 = u[1] & 0x3f3f3f3f;
        u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
        u[2] = m1;
        u[0] &= 0x3f3f3f3f;
        /* from registers: a 16-byte load of four fresh 4-byte stores would
         * miss store forwarding and stall every super-block */
        const __m128i u128 = _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
        const __m128i sm = _mm_cvtepu8_epi16(u128);
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_srli_si128(u128, 8));
        /* min term: sum_j m[j] * (bsums[2j] + bsums[2j+1]) */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i bpair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        __m128i mm = _mm_madd_epi16(mins16, bpair);
        mm = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(1, 0, 3, 2)));
        mm = _mm_add_epi32(mm, _mm_shuffle_epi32(mm, _MM_SHUFFLE(2, 3, 0, 1)));
        summs += f16(x[i].dmin) * y[i].d * (float)_mm_cvtsi128_si32(mm);

        const __m512i sc = _mm512_castsi128_si512(sm);
        __m512i sumi = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m256i q4b = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m512i q4 = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(q4b), _mm256_srli_epi16(q4b, 4), 1), m4);
            const __m512i p = _mm512_maddubs_epi16(q4, _mm512_loadu_si512(y[i].qs + 64 * j));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p, _mm512_permutexvar_epi16(pick[j], sc)));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(f16(x[i].d) * y[i].d), _mm512_cvtepi32_ps(sumi), acc);
    }
    *s = _mm512_reduce_add_ps(acc) - summs;
}
#else
void cpu_vec_dot_q4_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) bp_q4_K_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        /* min term: sum_j m[j] * (bsums[2j] + bsums[2j+1]), no pass over quants */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m128i bpair = _mm_hadd_epi16(_mm256_castsi256_si128(bs),
                                             _mm256_extracti128_si256(bs, 1));
        int64_t mins64;
        memcpy(&mins64, mn, 8);
        const __m128i mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins64));
        const int summ = hsum_epi32(_mm256_set_m128i(_mm_setzero_si128(), _mm_madd_epi16(mins16, bpair)));
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q4b = _mm256_loadu_si256((const __m256i *)(q4 + 32 * j));
            const __m256i lo = _mm256_and_si256(q4b, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4b, 4), m4);
            const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j)));
            const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * j + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        const float d = f16(x[i].d) * y[i].d;
        const float dmin = f16(x[i].dmin) * y[i].d;
        sumf += d * (float)hsum_epi32(sumi) - dmin * (float)summ;
    }
    *s = sumf;
}

#endif

void cpu_vec_dot_q6_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q6_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        const int8_t *sc = x[i].scales;
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            /* q in 0..63 (unsigned); the -32 comes from the block sums below */
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(b1, m4),
                                               _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(b2, m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
            const __m256i qs[4] = { q0, q1, q2, q3 };
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(qs[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scv));
            }
        }
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const __m256i corr = _mm256_madd_epi16(scales16, _mm256_loadu_si256((const __m256i *)y[i].bsums));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
        sumf += f16(x[i].d) * y[i].d * (float)hsum_epi32(sumi);
    }
    *s = sumf;
}

/* ---- the ABI 1.2 weight types ----
 *
 * One register holds a 32-element run: the 32-element blocks whole, and a
 * sub-block of 32 (Q5_K, IQ4_XS) or two sub-blocks of 16 (Q2_K, Q3_K, one
 * per 128-bit half) of the super-blocks. Unsigned quants (Q4_1, Q5_1, Q2_K,
 * Q5_K) meet the signed activation bytes in maddubs directly (or vpdpbusd
 * where it needs no scale); signed ones go through dot_i8 or its sign
 * trick. Sub-block scales multiply the int16 pair sums in madd, so each
 * super-block's integer sum is exact and meets the float scales once. */

/* Unsigned times signed bytes, summed in groups of 4 into 8 int32. Neither
 * maddubs pair can saturate: every caller's unsigned side is below 64. */
static inline __m256i udot_u8(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* The 32 fifth bits of a Q5_0 / Q5_1 block as bytes: 0xFF where set. */
static inline __m256i high_bits32(const uint8_t qh[4])
{
    uint32_t w;
    memcpy(&w, qh, 4);
    /* byte k takes byte k / 8 of the word, then tests bit k % 8 */
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w),
        _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

/* The 16 IQ4_NL levels in both 128-bit halves, for pshufb. */
static inline __m256i iq4nl_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bp_iq4nl_values()));
}

/* Q4_1 and Q5_1 against Q8_1 (repack.h): d_x d_y sum(q_x q_y) in a vector
 * accumulator, plus m_x s_y summed apart and added at the end, as ggml-cpu
 * does. The sum of m_x s_y is fused multiply-adds, written out: the x8
 * kernels (gemm_avx2.c, gemm_avx512.c) give these bits, and a compiler
 * contracts `summs += a * b` or not as its options say. */

void cpu_vec_dot_q4_1_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q4_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const int64_t nb = n / BP_QK8_0;
    __m256 acc_d = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i qy = _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs);
        const __m256i p = udot_u8(nibbles32(x[i].qs), qy);
        acc_d = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc_d);
        summs = fmaf(f16(x[i].m), cpu_q8_1_s(vb, nb, i), summs);
    }
    *s = hsum_ps(acc_d) + summs;
}

void cpu_vec_dot_q5_1_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_1 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const __m256i b4 = _mm256_set1_epi8(0x10);
    const int64_t nb = n / BP_QK8_0;
    __m256 acc_d = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = _mm256_or_si256(nibbles32(x[i].qs), _mm256_and_si256(high_bits32(x[i].qh), b4));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs);
        const __m256i p = udot_u8(q, qy);
        acc_d = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc_d);
        summs = fmaf(f16(x[i].m), cpu_q8_1_s(vb, nb, i), summs);
    }
    *s = hsum_ps(acc_d) + summs;
}

/* Q5_0: q - 16 is the nibble with the top four bits set where the fifth bit
 * is clear (nibble - 16 in two's complement) and the nibble where it is set. */
void cpu_vec_dot_q5_0_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_0 *x = va;
    const struct bp_block_q8_0 *y = vb;
    const __m256i top = _mm256_set1_epi8((char)0xF0);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < n / BP_QK8_0; i += 2) {
        const __m256i q0 = _mm256_or_si256(nibbles32(x[i].qs), _mm256_andnot_si256(high_bits32(x[i].qh), top));
        const __m256i q1 = _mm256_or_si256(nibbles32(x[i + 1].qs),
                                           _mm256_andnot_si256(high_bits32(x[i + 1].qh), top));
        const __m256i p0 = dot_i8(q0, _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs));
        const __m256i p1 = dot_i8(q1, _mm256_loadu_si256((const __m256i *)(const void *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)), _mm256_cvtepi32_ps(p1),
                               acc1);
    }
    for (; i < n / BP_QK8_0; i++) {
        const __m256i q = _mm256_or_si256(nibbles32(x[i].qs), _mm256_andnot_si256(high_bits32(x[i].qh), top));
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* IQ4_NL: the indices look their levels up with one pshufb. */
void cpu_vec_dot_iq4_nl_q8_0_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_nl *x = va;
    const struct bp_block_q8_0 *y = vb;
    const __m256i table = iq4nl_table();
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < n / BP_QK8_0; i += 2) {
        const __m256i q0 = _mm256_shuffle_epi8(table, nibbles32(x[i].qs));
        const __m256i q1 = _mm256_shuffle_epi8(table, nibbles32(x[i + 1].qs));
        const __m256i p0 = dot_i8(q0, _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs));
        const __m256i p1 = dot_i8(q1, _mm256_loadu_si256((const __m256i *)(const void *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(y[i + 1].d)), _mm256_cvtepi32_ps(p1),
                               acc1);
    }
    for (; i < n / BP_QK8_0; i++) {
        const __m256i q = _mm256_shuffle_epi8(table, nibbles32(x[i].qs));
        const __m256i p = dot_i8(q, _mm256_loadu_si256((const __m256i *)(const void *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* pshufb control that spreads int16 k0 of a 128-bit half over the low half
 * of a register and int16 k1 over the high half (the scales of the two
 * sub-blocks of 16 one 32-byte run of Q2_K / Q3_K covers). */
static inline __m256i pick_i16(int k0, int k1)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)(((2 * k1 + 1) << 8) | (2 * k1))),
                            _mm_set1_epi16((short)(((2 * k0 + 1) << 8) | (2 * k0))));
}

/* Q2_K: per half of 128 elements, 32 bytes of quants give 4 planes of 2 bits
 * (element 128h + 32p + l in bits 2p of byte l); the 4-bit scales ride in
 * madd as int16, the 4-bit mins meet the block sums in one madd. */
void cpu_vec_dot_q2_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q2_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const __m128i sm = _mm_loadu_si128((const __m128i *)(const void *)x[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
        const __m256i summ = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(const void *)y[i].bsums));
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
        const __m256i sc[2] = { _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc16)),
                                _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc16, 1)) };
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * h));
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int p = 0; p < 4; p++) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 32 * p));
                const __m256i p16 = _mm256_maddubs_epi16(q, qy);
                const __m256i scv = _mm256_shuffle_epi8(sc[h], pick_i16(2 * p, 2 * p + 1));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scv));
            }
        }
        const float d = f16(x[i].d) * y[i].d, dmin = f16(x[i].dmin) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(summ), acc);
    }
    *s = hsum_ps(acc);
}

/* The 16 six-bit Q3_K scales, minus 32, as bytes 0..15 of a register: three
 * words of 32 bits unpacked four scales at a time. */
static inline __m128i q3_K_scales_x86(const uint8_t packed[12])
{
    uint32_t a[3];
    memcpy(a, packed, 12);
    const uint32_t lo = 0x0F0F0F0Fu, hi = 0x03030303u;
    const __m128i sc = _mm_set_epi32((int)(((a[1] >> 4) & lo) | (((a[2] >> 6) & hi) << 4)),
                                     (int)(((a[0] >> 4) & lo) | (((a[2] >> 4) & hi) << 4)),
                                     (int)((a[1] & lo) | (((a[2] >> 2) & hi) << 4)),
                                     (int)((a[0] & lo) | ((a[2] & hi) << 4)));
    return _mm_sub_epi8(sc, _mm_set1_epi8(32));
}

/* Q3_K: the quant in -4..3 is the two low bits, minus 4 where the high bit
 * (bit 4h + p of hmask[l]) is clear; signed, so the sign moves onto the
 * activation as in dot_i8, and the signed scales ride in madd. */
void cpu_vec_dot_q3_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q3_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(q3_K_scales_x86(x[i].scales));
        const __m256i sc[2] = { _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc16)),
                                _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc16, 1)) };
        const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)x[i].hmask);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * h));
            const int8_t *q8 = y[i].qs + 128 * h;
            for (int p = 0; p < 4; p++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + p), one);
                /* lo + 4 * hb - 4 */
                const __m256i q = _mm256_sub_epi8(_mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3),
                                                                  _mm256_slli_epi16(hb, 2)), four);
                const __m256i qy = _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 32 * p));
                const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(qy, q));
                const __m256i scv = _mm256_shuffle_epi8(sc[h], pick_i16(2 * p, 2 * p + 1));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scv));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* Q5_K: Q4_K's AVX2 loop with the fifth bit of each quant (bit j of qh[l]
 * for sub-block j) or'ed in as 16. */
void cpu_vec_dot_q5_K_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_q5_K *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) bp_q4_K_scale_min(j, x[i].scales, &sc[j], &mn[j]);
        /* min term: sum_j m[j] * (bsums[2j] + bsums[2j+1]) */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)y[i].bsums);
        const __m128i bpair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        int64_t mins64;
        memcpy(&mins64, mn, 8);
        const __m128i mm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins64)), bpair);
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(x[i].qs + 32 * c));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one), 4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(b, m4), h0);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), h1);
            const int8_t *q8 = y[i].qs + 64 * c;
            const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(const void *)q8));
            const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(const void *)(q8 + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        const float d = f16(x[i].d) * y[i].d, dmin = f16(x[i].dmin) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_set_m128i(_mm_setzero_si128(), mm)),
                               acc);
    }
    *s = hsum_ps(acc);
}

/* IQ4_XS: IQ4_NL's lookup per sub-block of 32, its 6-bit scale in madd. */
void cpu_vec_dot_iq4_xs_q8_K_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const struct bp_block_iq4_xs *x = va;
    const struct bp_block_q8_K *y = vb;
    const __m256i table = iq4nl_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / BP_QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
        for (int b = 0; b < BP_QK_K / 32; b++) {
            const __m256i q = _mm256_shuffle_epi8(table, nibbles32(x[i].qs + 16 * b));
            const __m256i qy = _mm256_loadu_si256((const __m256i *)(const void *)(y[i].qs + 32 * b));
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(qy, q));
            const short ls = (short)(bp_iq4_xs_scale(&x[i], b) - 32);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

void cpu_vec_dot_f32_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const float *a = va, *b = vb;
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

void cpu_vec_dot_f16_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const uint16_t *a = va;
    const float *b = vb;
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * k)));
            acc[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + i + 8 * k), acc[k]);
        }
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))),
                                 _mm256_loadu_ps(b + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += f16(a[i]) * b[i];
    *s = sum;
}

/* bf16 is the top half of an f32: widening is a 16-bit shift. */
void cpu_vec_dot_bf16_x86(int64_t n, float *s, const void *va, const void *vb)
{
    const uint16_t *a = va;
    const float *b = vb;
    __m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 2; k++) {
            const __m256i w16 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(a + i + 8 * k)));
            const __m256 w = _mm256_castsi256_ps(_mm256_slli_epi32(w16, 16));
            acc[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + i + 8 * k), acc[k]);
        }
    float sum = hsum_ps(_mm256_add_ps(acc[0], acc[1]));
    for (; i < n; i++) sum += bp_bf16_to_f32(a[i]) * b[i];
    *s = sum;
}
#else
typedef int cpu_dot_x86_not_built; /* ISO C forbids an empty translation unit */
#endif
