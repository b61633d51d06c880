/*
 * repack.c — conversions between the plain rows and the x8 layout
 * (described in repack.h), and the scalar reference of the x8 dot.
 *
 * Every x8 layout is a list of segments: a field of the plain block
 * (plain offset p, length len) cut into chunks of g bytes, chunk c of row r
 * going to x8 offset x + step c + g r (step 8 g when the chunks of the
 * field follow each other; more when another field's chunks are
 * interleaved between them). So pack and unpack are one loop for every
 * type, and the layout is a byte permutation by construction.
 */
#include <math.h>
#include <string.h>

#include "simd.h"

struct x8_segment {
    uint16_t p, len, g, x, step;
};

/* len 0 ends the list. */
static const struct x8_segment *segments(enum bp_type t)
{
    static const struct x8_segment q4_0[] = { { 0, 2, 2, 0, 16 }, { 2, 16, 8, 16, 64 }, { 0, 0, 0, 0, 0 } };
    static const struct x8_segment q8_0[] = { { 0, 2, 2, 0, 16 }, { 2, 32, 8, 16, 64 }, { 0, 0, 0, 0, 0 } };
    static const struct x8_segment q4_K[] = {
        { 0, 2, 2, 0, 16 }, { 2, 2, 2, 16, 16 }, { 4, 12, 4, 32, 32 }, { 16, 128, 8, 128, 64 },
        { 0, 0, 0, 0, 0 }
    };
    /* Q6_K: d, scales, then per half h (768 bytes at 144 + 768 h) the
     * chunks in the order the kernel reads them: ql[64h + 8k] and qh[32h +
     * 8k] alternating for k = 0..3, then ql[64h + 32 + 8k]. */
    static const struct x8_segment q6_K[] = {
        { 208, 2, 2, 0, 16 }, { 192, 16, 4, 16, 32 },
        { 0, 32, 8, 144, 128 }, { 128, 32, 8, 208, 128 }, { 32, 32, 8, 656, 64 },
        { 64, 32, 8, 912, 128 }, { 160, 32, 8, 976, 128 }, { 96, 32, 8, 1424, 64 },
        { 0, 0, 0, 0, 0 }
    };
    /* Q5_0: d, then the fifth bits with byte k of the 8 rows' qh side by
     * side (one 64-bit load is the byte mask of 64 nibbles), then qs as
     * Q4_0's. */
    static const struct x8_segment q5_0[] = {
        { 0, 2, 2, 0, 16 }, { 2, 4, 1, 16, 8 }, { 6, 16, 8, 48, 64 }, { 0, 0, 0, 0, 0 }
    };
    /* Q5_K: Q4_K's d, dmin and scales, then qh as Q8_0's qs (4 pieces of
     * 64 bytes, each 8 bytes of every row), then qs as Q4_K's. */
    static const struct x8_segment q5_K[] = {
        { 0, 2, 2, 0, 16 }, { 2, 2, 2, 16, 16 }, { 4, 12, 4, 32, 32 }, { 16, 32, 8, 128, 64 },
        { 48, 128, 8, 384, 64 }, { 0, 0, 0, 0, 0 }
    };
    /* Q3_K: d, Q4_K-style scale words, then hmask as Q8_0's qs (4 pieces),
     * then qs (8 pieces). */
    static const struct x8_segment q3_K[] = {
        { 108, 2, 2, 0, 16 }, { 96, 12, 4, 16, 32 }, { 0, 32, 8, 112, 64 }, { 32, 64, 8, 368, 64 },
        { 0, 0, 0, 0, 0 }
    };
    /* IQ4_XS: d, scales_h, scales_l, then qs as Q4_K's. */
    static const struct x8_segment iq4_xs[] = {
        { 0, 2, 2, 0, 16 }, { 2, 2, 2, 16, 16 }, { 4, 4, 4, 32, 32 }, { 8, 128, 8, 64, 64 },
        { 0, 0, 0, 0, 0 }
    };
    /* Q2_K: d, dmin, the scale/min bytes as Q6_K's scales, qs as Q3_K's. */
    static const struct x8_segment q2_K[] = {
        { 80, 2, 2, 0, 16 }, { 82, 2, 2, 16, 16 }, { 0, 16, 4, 32, 32 }, { 16, 64, 8, 160, 64 },
        { 0, 0, 0, 0, 0 }
    };
    /* Q4_1: d, m, then qs as Q4_0's; Q5_1: d, m, then qh and qs as Q5_0's. */
    static const struct x8_segment q4_1[] = {
        { 0, 2, 2, 0, 16 }, { 2, 2, 2, 16, 16 }, { 4, 16, 8, 32, 64 }, { 0, 0, 0, 0, 0 }
    };
    static const struct x8_segment q5_1[] = {
        { 0, 2, 2, 0, 16 }, { 2, 2, 2, 16, 16 }, { 4, 4, 1, 32, 8 }, { 8, 16, 8, 64, 64 },
        { 0, 0, 0, 0, 0 }
    };
    switch (t) {
    case BP_TYPE_Q4_1: return q4_1;
    case BP_TYPE_Q5_1: return q5_1;
    case BP_TYPE_IQ4_NL: return q4_0; /* the same block shape */
    case BP_TYPE_Q2_K: return q2_K;
    case BP_TYPE_IQ4_XS: return iq4_xs;
    case BP_TYPE_Q3_K: return q3_K;
    case BP_TYPE_Q4_0: return q4_0;
    case BP_TYPE_Q5_0: return q5_0;
    case BP_TYPE_Q5_K: return q5_K;
    case BP_TYPE_Q8_0: return q8_0;
    case BP_TYPE_Q4_K: return q4_K;
    case BP_TYPE_Q6_K: return q6_K;
    default: return NULL;
    }
}

/* A type is repacked only where this build has a real x8 kernel for it and
 * that kernel beats the plain dot at decode, which is what a model spends
 * its time on: through the block-by-block fallback (cpu_gemm_x8_via_dot)
 * the x8 layout ran several times slower than the plain layout. The avx2
 * Q8_0 x8 kernel needs the L1 prefetch (repack.h): with L2 prefetches
 * alone it is 15-30% slower at decode; with both it streams at
 * 0.91-0.95 of the read against the plain dot's 0.44-0.48 (bench mul_mat,
 * K=2048 N=5632, 1 and 2 threads, on an AVX-512 Xeon running the avx2
 * variant), and the 1B Q8_0 model ran 115 prefill / 27.9 decode tokens/s
 * instead of 47 / 13.9. The scalar reference repacks every type through
 * its reference kernels, so that the layout conversion runs under
 * valgrind; NEON has no x8 kernels yet. The avx512 Q2_K x8 kernel gives
 * the plain dot's bits (see gemm_avx512.c); in avx2 such a kernel was no
 * faster than the plain dot at decode, so Q2_K stays plain there (see
 * q3_K_x8 in gemm_avx2.c). The avx2 kernels of the ABI 1.2 types against
 * the plain dot: docs/performance.md, "The avx2 variant". */
bool cpu_repack_type_ok(enum bp_type t)
{
#if defined(CPU_HAVE_NEON_SIMD)
    (void)t;
    return false;
#elif defined(CPU_HAVE_X86_GEMM_AVX2)
    return t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q4_K || t == BP_TYPE_Q6_K ||
           t == BP_TYPE_Q5_0 || t == BP_TYPE_Q3_K || t == BP_TYPE_Q5_K || t == BP_TYPE_IQ4_XS ||
           t == BP_TYPE_IQ4_NL || t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1;
#else
    return t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q4_K || t == BP_TYPE_Q6_K ||
           t == BP_TYPE_Q5_0 || t == BP_TYPE_Q5_K || t == BP_TYPE_Q3_K ||
           t == BP_TYPE_IQ4_XS || t == BP_TYPE_Q2_K || t == BP_TYPE_IQ4_NL || t == BP_TYPE_Q4_1 ||
           t == BP_TYPE_Q5_1;
#endif
}

static void convert(enum bp_type t, uint8_t *dst, const uint8_t *src, size_t row_size, int64_t n,
                    bool pack)
{
    const struct x8_segment *seg = segments(t);
    const size_t bsz = bp_type_size(t), xsz = CPU_REPACK_ROWS * bsz;
    const int64_t nb = n / bp_type_block_size(t);
    if (!seg)
        return;
    for (int64_t b = 0; b < nb; b++)
        for (const struct x8_segment *s = seg; s->len; s++)
            for (int r = 0; r < CPU_REPACK_ROWS; r++) {
                const size_t plain = (size_t)r * row_size + (size_t)b * bsz + s->p;
                const size_t x8 = (size_t)b * xsz + s->x + (size_t)s->g * (size_t)r;
                for (int c = 0; c < s->len / s->g; c++) {
                    const size_t po = plain + (size_t)s->g * (size_t)c;
                    const size_t xo = x8 + (size_t)s->step * (size_t)c;
                    if (pack)
                        memcpy(dst + xo, src + po, s->g);
                    else
                        memcpy(dst + po, src + xo, s->g);
                }
            }
}

void cpu_repack_pack(enum bp_type t, void *dst, const void *src, size_t row_size, int64_t n)
{
    convert(t, dst, src, row_size, n, true);
}

void cpu_repack_unpack(enum bp_type t, void *dst, const void *src, size_t row_size, int64_t n)
{
    convert(t, dst, src, row_size, n, false);
}

void cpu_q8_0_fill_aux(void *row, int64_t n)
{
    const int64_t nb = n / BP_QK8_0;
    const struct bp_block_q8_0 *q = row;
    char *d_at = (char *)row + cpu_q8_0_aux_offset(nb), *sum_at = (char *)row + cpu_q8_0_aux_sums_offset(nb);
    for (int64_t b = 0; b < nb; b++) {
        const float d = bp_f16_to_f32(q[b].d);
        int32_t sum = 0;
        for (int j = 0; j < BP_QK8_0; j++) sum += q[b].qs[j];
        memcpy(d_at + 4 * b, &d, 4);
        memcpy(sum_at + 4 * b, &sum, 4);
    }
}

void cpu_q8_1_fill_s(const float *x, void *row, int64_t n)
{
    const int64_t nb = n / BP_QK8_0;
    const struct bp_block_q8_0 *q = row;
    char *d_at = (char *)row + cpu_q8_0_aux_offset(nb), *s_at = (char *)row + cpu_q8_0_aux_sums_offset(nb);
    for (int64_t b = 0; b < nb; b++) {
        const float dq = bp_f16_to_f32(q[b].d);
        memcpy(d_at + 4 * b, &dq, 4);
        float amax = 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < BP_QK8_0; j++) {
            const float a = fabsf(x[b * BP_QK8_0 + j]);
            amax = a > amax ? a : amax;
            sum += q[b].qs[j];
        }
        const float d = amax / 127.0f;
        const float sv = bp_f16_to_f32(bp_f32_to_f16(d * (float)sum));
        memcpy(s_at + 4 * b, &sv, 4);
    }
}

/* One plain block of each row rebuilt from x8 block b, then the plain dot
 * of that block; the per-block results are added in the plain reference's
 * order (its sum starts at 0 and adds one term per block), so the result is
 * the plain reference's to the bit. A Q8_1 row keeps its aux data after
 * all its blocks (repack.h), so each block's dot gets a one-block row made
 * here, with s = 0: the min terms m * s are summed apart in block order
 * and added at the end, as the reference does. */
static void via_dot_group(enum bp_type t, cpu_vec_dot_fn dot, int64_t n, float *s, size_t bs,
                          const void *w, const void *y, size_t ys, int ncols)
{
    const size_t bsz = bp_type_size(t), xsz = CPU_REPACK_ROWS * bsz;
    const int64_t qk = bp_type_block_size(t), nb = n / qk;
    const size_t ybsz = qk == BP_QK_K ? sizeof(struct bp_block_q8_K) : sizeof(struct bp_block_q8_0);
    const bool q8_1 = cpu_type_q8_1(t);
    uint8_t blk[CPU_REPACK_ROWS * sizeof(struct bp_block_q6_K)];
    _Alignas(8) uint8_t one[sizeof(struct bp_block_q8_0) + 64] = { 0 }; /* a 1-block Q8_1 row */
    float sum[CPU_GEMM_WIDE_COLS][CPU_REPACK_ROWS] = { { 0 } };
    float mins[CPU_GEMM_WIDE_COLS][CPU_REPACK_ROWS] = { { 0 } };
    if (bsz > sizeof(struct bp_block_q6_K) || cpu_q8_1_row_size(1) > sizeof one)
        return;
    for (int64_t b = 0; b < nb; b++) {
        /* unpack treats blk as 8 rows of one block each */
        cpu_repack_unpack(t, blk, (const uint8_t *)w + (size_t)b * xsz, bsz, qk);
        for (int c = 0; c < ncols; c++) {
            const char *yb = (const char *)y + (size_t)c * ys + (size_t)b * ybsz;
            if (q8_1) {
                const float d = cpu_q8_0_aux_d((const char *)y + (size_t)c * ys, nb, b);
                memcpy(one, yb, ybsz);
                memcpy(one + cpu_q8_0_aux_offset(1), &d, sizeof d);
                yb = (const char *)one;
            }
            for (int r = 0; r < CPU_REPACK_ROWS; r++) {
                float v;
                dot(qk, &v, blk + (size_t)r * bsz, yb);
                sum[c][r] += v;
                if (q8_1) { /* Q4_1's and Q5_1's m: the f16 after d */
                    uint16_t m;
                    memcpy(&m, blk + (size_t)r * bsz + 2, 2);
                    mins[c][r] += bp_f16_to_f32(m) * cpu_q8_1_s((const char *)y + (size_t)c * ys, nb, b);
                }
            }
        }
    }
    for (int c = 0; c < ncols; c++)
        for (int r = 0; r < CPU_REPACK_ROWS; r++)
            s[(size_t)c * bs + (size_t)r] = q8_1 ? sum[c][r] + mins[c][r] : sum[c][r];
}

void cpu_gemm_x8_via_dot(enum bp_type t, cpu_vec_dot_fn dot, CPU_GEMM_X8_PARAMS)
{
    for (int64_t g = 0; g < ng; g++)
        via_dot_group(t, dot, n, s + (size_t)8 * g, bs, (const uint8_t *)w + (size_t)g * gs, y, ys,
                      ncols);
}

void cpu_gemm_q4_0_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q4_0, cpu_vec_dot_q4_0_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q8_0_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q8_0, cpu_vec_dot_q8_0_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q4_K_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q4_K, cpu_vec_dot_q4_K_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q5_0_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q5_0, cpu_vec_dot_q5_0_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q5_K_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q5_K, cpu_vec_dot_q5_K_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q3_K_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q3_K, cpu_vec_dot_q3_K_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_iq4_xs_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_IQ4_XS, cpu_vec_dot_iq4_xs_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q2_K_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q2_K, cpu_vec_dot_q2_K_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q6_K_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q6_K, cpu_vec_dot_q6_K_q8_K_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_iq4_nl_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_IQ4_NL, cpu_vec_dot_iq4_nl_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q4_1_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q4_1, cpu_vec_dot_q4_1_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}

void cpu_gemm_q5_1_x8_ref(CPU_GEMM_X8_PARAMS)
{
    cpu_gemm_x8_via_dot(BP_TYPE_Q5_1, cpu_vec_dot_q5_1_q8_0_ref, n, s, bs, w, gs, ng, y, ys, ncols);
}
