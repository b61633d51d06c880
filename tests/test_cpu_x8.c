/*
 * test_cpu_x8.c — the x8 (repacked) gemm kernels of one ISA build at their
 * edges, against a double-precision dot of the dequantized operands
 * computed here. Plain C with no test library, built once per x86-64
 * variant like test_cpu_kernels.c (exit 0 pass, 1 mismatch, 77 this CPU
 * cannot run the build's ISA).
 *
 * test_cpu_kernels.c holds every build's x8 dot to the scalar reference on
 * random positive scales; this adds what SIMD widths and int16
 * intermediates get wrong:
 *  - negative scales (Q4_0 / Q8_0 / Q6_K d, Q4_K d and dmin): sign
 *    handling of the float part;
 *  - extreme quants: every weight at its largest magnitude (nibble 15 or 0,
 *    Q8_0 -128 and 127, Q4_K scales and mins 63, Q6_K quants 63 or 0 with
 *    scales -128 or 127) against activations that
 *    all quantize to +-127 with the same sign pattern: the int16 sums of
 *    the AVX2 kernels and the AVX-512 Q6_K one (maddubs saturates) reach
 *    their bound;
 *  - long rows (up to 65 blocks, K = 16640 for the K-quants) and every
 *    ncols from 1 to the kernel's most (4, or 8 for the wide ones);
 *  - an output stride bs > 8, with guard values that must stay untouched;
 *  - each column equal to the bit to the same column computed alone;
 *  - where GFNI moves bits (every type but Q8_0 and Q4_K; avx512 build),
 *    the output equal to the bit to the shift-and-mask path's;
 *  - Q4_1 and Q5_1, and Q2_K (avx512 build) or Q3_K (avx2 build), equal
 *    to the bit to the plain dot of each row.
 *
 * With --amx (avx512 build; exit 77 where the CPU or OS has no AMX-INT8)
 * the AMX tile kernels (kernels/gemm_amx.h) get the same edges: 16 weight
 * rows from two x8 groups with a gap between them, 1..4 activation tiles
 * with padded rows, against the double dot and the VNNI x8 kernel; every
 * row equal to the bit to the same row computed in a single tile; Q4_K
 * equal to the bit to a scalar model of its exact integer arithmetic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_amx.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"
#include "cpu_features.h"

static unsigned long long seed = 0x9E3779B97F4A7C15ull;
static unsigned long long rnd64(void)
{
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return seed;
}
static float rndf(void) { return (float)((double)(rnd64() >> 11) / 9007199254740992.0 * 2 - 1); }

enum fill { RANDOM, EXTREME };

/* A random scale of either sign, never zero. */
static uint16_t scale16(float mag)
{
    const float v = mag * (0.1f + 0.9f * fabsf(rndf()));
    return bp_f32_to_f16(rnd64() & 1 ? -v : v);
}

static void fill_weights(enum bp_type t, unsigned char *w, int64_t nblocks, enum fill f)
{
    const size_t bs = bp_type_size(t);
    for (int64_t b = 0; b < nblocks; b++) {
        unsigned char *blk = w + (size_t)b * bs;
        for (size_t i = 0; i < bs; i++) blk[i] = (unsigned char)rnd64();
        const uint16_t d = scale16(0.01f), dmin = scale16(0.003f);
        if (t == BP_TYPE_Q4_0) {
            memcpy(blk, &d, 2);
            if (f == EXTREME) /* every nibble 15, or every nibble 0 */
                memset(blk + 2, rnd64() & 1 ? 0xFF : 0x00, 16);
        } else if (t == BP_TYPE_Q8_0) {
            memcpy(blk, &d, 2);
            if (f == EXTREME) /* -128 and 127: |w| up to 128 in the sign trick */
                for (int i = 0; i < 32; i++) blk[2 + i] = rnd64() & 1 ? 0x80 : 0x7F;
        } else if (t == BP_TYPE_Q4_K) {
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2);
            if (f == EXTREME) { /* all 6-bit scales and mins 63, all nibbles 15 */
                memset(blk + 4, 0xFF, 12);
                memset(blk + 16, 0xFF, 128);
            }
        } else if (t == BP_TYPE_Q5_0) {
            memcpy(blk, &d, 2);
            if (f == EXTREME) /* every quant 31, or every quant 0 */
                memset(blk + 2, rnd64() & 1 ? 0xFF : 0x00, 20);
        } else if (t == BP_TYPE_IQ4_NL) {
            memcpy(blk, &d, 2);
            if (f == EXTREME) /* every quant 113, or every quant -127 */
                memset(blk + 2, rnd64() & 1 ? 0xFF : 0x00, 16);
        } else if (t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) {
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2);
            if (f == EXTREME) /* every quant 15 (Q5_1: 31), or every quant 0 */
                memset(blk + 4, rnd64() & 1 ? 0xFF : 0x00, t == BP_TYPE_Q4_1 ? 16 : 20);
        } else if (t == BP_TYPE_Q5_K) {
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2);
            if (f == EXTREME) { /* all 6-bit scales and mins 63, all quants 31 */
                memset(blk + 4, 0xFF, 12);
                memset(blk + 16, 0xFF, 160);
            }
        } else if (t == BP_TYPE_Q2_K) {
            memcpy(blk + 80, &d, 2);
            memcpy(blk + 82, &dmin, 2);
            if (f == EXTREME) { /* every quant 3, every scale and min 15 */
                memset(blk, 0xFF, 80);
            }
        } else if (t == BP_TYPE_IQ4_XS) {
            memcpy(blk, &d, 2);
            if (f == EXTREME) { /* every quant -127 or 113, every scale 31 or -32 */
                memset(blk + 2, rnd64() & 1 ? 0xFF : 0x00, 6);
                memset(blk + 8, rnd64() & 1 ? 0xFF : 0x00, 128);
            }
        } else if (t == BP_TYPE_Q3_K) {
            memcpy(blk + 108, &d, 2);
            if (f == EXTREME) { /* every quant 3 or -4, every scale 31 or -32 */
                memset(blk, rnd64() & 1 ? 0xFF : 0x00, 96);
                memset(blk + 96, rnd64() & 1 ? 0xFF : 0x00, 12);
            }
        } else if (t == BP_TYPE_Q6_K) {
            memcpy(blk + 208, &d, 2);
            if (f == EXTREME) { /* every quant 63 or 0, scales -128 or 127 */
                memset(blk, rnd64() & 1 ? 0xFF : 0x00, 192);
                for (int i = 0; i < 16; i++) blk[192 + i] = rnd64() & 1 ? 0x80 : 0x7F;
            }
        }
    }
}

/* Activations: RANDOM is uniform with a long tail (a few values 300x the
 * rest, some 1000x smaller); EXTREME is +-1 in a sign pattern shared by
 * all activation rows (so every quant is +-127 and the products of one
 * weight row all add up, or all cancel with the pattern of signs). */
static void fill_x(float *x, int64_t n, enum fill f, unsigned long long pattern)
{
    for (int64_t i = 0; i < n; i++) {
        if (f == EXTREME) {
            x[i] = (pattern >> (i % 64)) & 1 ? -1.0f : 1.0f;
            continue;
        }
        x[i] = rndf();
        if (rnd64() % 61 == 0) x[i] *= 300.0f;
        if (rnd64() % 7 == 0) x[i] *= 1e-3f;
    }
}

static int failures, checks;

static void dequant_act(enum bp_type vdt, const unsigned char *y, float *yf, int64_t n)
{
    if (vdt == BP_TYPE_Q8_0) {
        cpu_dequantize_row_q8_0(y, yf, n);
        return;
    }
    const struct bp_block_q8_K *b = (const void *)y;
    for (int64_t i = 0; i < n; i++) yf[i] = b[i / 256].d * b[i / 256].qs[i % 256];
}

#if defined(__AVX2__)
/* The x86 x8 Q4_K kernels' own arithmetic, in scalar C: each row keeps
 * `lanes` float accumulators (AVX-512: two, the sums of bytes 0..3 and
 * 4..7 of every 8 quant bytes and of the mins of sub-blocks 0, 1, 4, 5 and
 * 2, 3, 6, 7; AVX2: one), and per super-block each lane gets its exact
 * integers sumi and summ by acc = fma(sumi, d * d_y, acc) then
 * acc = fma(-summ, dmin * d_y, acc); the lanes add at the end. The kernels
 * must match it to the bit, so a change to their integer path that is not
 * exact (an int16 sum that saturates, a scale taken from the wrong
 * sub-block with a small effect) shows here, not only beyond a tolerance. */
static float q4_K_x8_exact(const struct bp_block_q4_K *x, const struct bp_block_q8_K *y, int64_t nb)
{
#if defined(__AVX512F__)
    enum { lanes = 2 };
#else
    enum { lanes = 1 };
#endif
    float acc[lanes] = { 0 };
    for (int64_t b = 0; b < nb; b++) {
        const float dd = bp_f16_to_f32(x[b].d) * y[b].d, dm = bp_f16_to_f32(x[b].dmin) * y[b].d;
        for (int lane = 0; lane < lanes; lane++) {
            int32_t sumi = 0, summ = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, m;
                bp_q4_K_scale_min(j, x[b].scales, &sc, &m);
                int32_t dot = 0;
                for (int l = 0; l < 32; l++) {
                    if (lanes == 2 && (l % 8) / 4 != lane)
                        continue;
                    const uint8_t q = x[b].qs[32 * (j / 2) + l];
                    dot += y[b].qs[32 * j + l] * (j % 2 ? q >> 4 : q & 0xF);
                }
                sumi += sc * dot;
                if (lanes == 1 || (j / 2) % 2 == lane)
                    summ += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
            }
            acc[lane] = fmaf((float)sumi, dd, acc[lane]);
            acc[lane] = fmaf(-(float)summ, dm, acc[lane]);
        }
    }
    float sum = acc[0];
    for (int lane = 1; lane < lanes; lane++) sum += acc[lane];
    return sum;
}
#endif

static void check(enum bp_type t, int64_t nb, int ncols, enum fill fw, enum fill fx)
{
    const struct cpu_type_kernels *k = cpu_kernels_for(t);
    if (!k->gemm_x8) /* a type this build does not repack */
        return;
    const int64_t n = nb * bp_type_block_size(t);
    const enum bp_type vdt = k->vec_dot_type;
    const size_t rs = bp_row_size(t, n), bs = 11; /* 3 guard outputs after each column */
    const size_t ys = vdt == BP_TYPE_Q8_0 ? cpu_q8_0_aux_row_size(nb) : bp_row_size(vdt, n);
    const bool q8_1 = cpu_type_q8_1(t);
    unsigned char *w = malloc(rs * 8), *x8 = malloc(rs * 8), *y = malloc(ys * (size_t)ncols);
    float *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 8 * 4), *yf = malloc((size_t)n * 4);
    float out[CPU_GEMM_WIDE_COLS * 11];
    fill_weights(t, w, nb * 8, fw);
    cpu_repack_pack(t, x8, w, rs, n);
    for (int r = 0; r < 8; r++) k->to_float(w + (size_t)r * rs, wf + (size_t)r * (size_t)n, n);
    const unsigned long long pattern = rnd64();
    for (int c = 0; c < ncols; c++) {
        fill_x(x, n, fx, pattern);
        cpu_kernels_for(vdt)->from_float(x, y + (size_t)c * ys, n);
        if (q8_1)
            cpu_q8_1_fill_s(x, y + (size_t)c * ys, n);
        else if (vdt == BP_TYPE_Q8_0)
            cpu_q8_0_fill_aux(y + (size_t)c * ys, n);
    }
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = -12345.0f;
    k->gemm_x8(n, out, bs, x8, 0, 1, y, ys, ncols);
#if defined(CPU_HAVE_X86_GEMM)
    if (t != BP_TYPE_Q8_0 && t != BP_TYPE_Q4_K &&
        cpu_x8_gfni_use(true)) {
        float shift[sizeof out / sizeof out[0]];
        memcpy(shift, out, sizeof out);
        cpu_x8_gfni_use(false);
        k->gemm_x8(n, shift, bs, x8, 0, 1, y, ys, ncols);
        cpu_x8_gfni_use(true);
        checks++;
        if (memcmp(shift, out, sizeof out) != 0) {
            failures++;
            printf("FAIL %s x8 %lld blocks, ncols %d: the GFNI and the shift-and-mask high nibbles "
                   "give different outputs\n", bp_type_name(t), (long long)nb, ncols);
        }
    }
#endif
    for (int c = 0; c < ncols; c++) {
        dequant_act(vdt, y + (size_t)c * ys, yf, n);
        for (int r = 0; r < 8; r++) {
            const float *wr = wf + (size_t)r * (size_t)n;
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                want += (double)wr[i] * yf[i];
                mag += fabs((double)wr[i] * yf[i]);
            }
            /* Q4_1, Q5_1: the min term of each block is m * s, Q8_1's s
             * (d * sum(qs) rounded to f16), where the dequantized dot has m
             * times the sum of the dequantized activation */
            for (int64_t b = 0; q8_1 && b < nb; b++) {
                uint16_t m16;
                memcpy(&m16, w + (size_t)r * rs + (size_t)b * bp_type_size(t) + 2, 2);
                double sum = 0;
                for (int i = 0; i < 32; i++) sum += yf[32 * b + i];
                const double m = bp_f16_to_f32(m16);
                want += m * (cpu_q8_1_s(y + (size_t)c * ys, nb, b) - sum);
                mag += fabs(m * cpu_q8_1_s(y + (size_t)c * ys, nb, b));
            }
            const double tol = 1e-5 * mag + 1e-6;
            const float got = out[(size_t)c * bs + (size_t)r];
#if defined(__AVX2__)
            if (t == BP_TYPE_Q4_K) {
                const float exact = q4_K_x8_exact((const void *)(w + (size_t)r * rs),
                                                  (const void *)(y + (size_t)c * ys), nb);
                checks++;
                if (memcmp(&got, &exact, sizeof got) != 0) {
                    failures++;
                    printf("FAIL q4_K x8 %s weights, %s activations, %lld blocks, row %d col %d of "
                           "%d: %s kernel %.9g, its scalar arithmetic %.9g\n",
                           fw == EXTREME ? "extreme" : "random", fx == EXTREME ? "+-1" : "long-tailed",
                           (long long)nb, r, c, ncols, cpu_kernels_isa(), got, exact);
                }
            }
#endif
#if defined(CPU_HAVE_X86_SIMD)
            /* these x8 kernels keep the plain dot's lanes */
#if defined(CPU_HAVE_X86_GEMM)
            if (t == BP_TYPE_Q2_K || t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) {
#else
            if (t == BP_TYPE_Q3_K || t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) {
#endif
                float plain;
                k->vec_dot(n, &plain, w + (size_t)r * rs, y + (size_t)c * ys);
                checks++;
                if (memcmp(&got, &plain, sizeof got) != 0) {
                    failures++;
                    printf("FAIL %s x8 %s weights, %s activations, %lld blocks, row %d col %d of "
                           "%d: x8 kernel %.9g, plain dot %.9g (must be equal to the bit)\n",
                           bp_type_name(t), fw == EXTREME ? "extreme" : "random", fx == EXTREME ? "+-1" : "long-tailed",
                           (long long)nb, r, c, ncols, got, plain);
                }
            }
#endif
            checks++;
            if (!(fabs((double)got - want) <= tol)) {
                failures++;
                printf("FAIL %s x8 %s weights, %s activations, %lld blocks, row %d col %d of %d: "
                       "%s kernel %.9g, double %.9g (tolerance %.3g)\n", bp_type_name(t),
                       fw == EXTREME ? "extreme" : "random", fx == EXTREME ? "+-1" : "long-tailed",
                       (long long)nb, r, c, ncols, cpu_kernels_isa(), got, want, tol);
            }
        }
    }
    /* One call over several x8 groups (here the same group twice, gs = 0)
     * gives each group's rows at 8 g in every column, to the bit. */
    float two[CPU_GEMM_WIDE_COLS * 16];
    k->gemm_x8(n, two, 16, x8, 0, 2, y, ys, ncols);
    for (int c = 0; c < ncols; c++)
        for (int g = 0; g < 2; g++) {
            checks++;
            if (memcmp(two + 16 * c + 8 * g, out + (size_t)c * bs, 8 * sizeof(float)) != 0) {
                failures++;
                printf("FAIL %s x8 %lld blocks, ncols %d: column %d, group %d of a two-group call "
                       "differs from the one-group call\n", bp_type_name(t), (long long)nb, ncols, c, g);
            }
        }
    /* MUL_MAT groups activation rows by chunk, and chunks follow the thread
     * count: a column must come out the same to the bit in any group. */
    for (int c = 0; c < ncols; c++) {
        float alone[8];
        k->gemm_x8(n, alone, 8, x8, 0, 1, y + (size_t)c * ys, ys, 1);
        checks++;
        if (memcmp(alone, out + (size_t)c * bs, sizeof alone) != 0) {
            failures++;
            printf("FAIL %s x8 %lld blocks: column %d of %d differs from the same column alone\n",
                   bp_type_name(t), (long long)nb, c, ncols);
        }
    }
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        const size_t c = i / bs, r = i % bs;
        if ((int)c < ncols && r < 8)
            continue;
        checks++;
        if (out[i] != -12345.0f) {
            failures++;
            printf("FAIL %s x8 ncols %d wrote output %zu of column %zu, outside its 8 rows\n",
                   bp_type_name(t), ncols, r, c);
        }
    }
    free(w); free(x8); free(y); free(x); free(wf); free(yf);
}

static int check_one(float got, double want, double mag)
{
    checks++;
    const double tol = 1e-5 * mag + 1e-6;
    if (fabs((double)got - want) <= tol)
        return 0;
    failures++;
    return 1;
}

/* The Q4_K AMX kernel's own arithmetic, in scalar C: per super-block the
 * exact integers sumi = sum_j sc[j] * dot_j and summ = sum_j m[j] * (sum of
 * the activation's sub-block j), then s += (sumi * d - summ * dmin) * d_y
 * with the kernel's two fused multiply-adds. The kernel must match it to
 * the bit: any change to its integer path (the scales folded into the
 * tiles, the mins on tiles) shows here, not only beyond a tolerance. */
static float q4_K_amx_exact(const struct bp_block_q4_K *x, const struct bp_block_q8_K *y, int64_t nb)
{
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            bp_q4_K_scale_min(j, x[b].scales, &sc, &m);
            int32_t dot = 0, sum = 0;
            for (int l = 0; l < 32; l++) {
                const uint8_t q = x[b].qs[32 * (j / 2) + l];
                const int32_t a = y[b].qs[32 * j + l];
                dot += a * (j % 2 ? q >> 4 : q & 0xF);
                sum += a;
            }
            sumi += sc * dot;
            summ += m * sum;
        }
        const float t = fmaf((float)sumi, bp_f16_to_f32(x[b].d),
                             -((float)summ * bp_f16_to_f32(x[b].dmin)));
        acc = fmaf(t, y[b].d, acc);
    }
    return acc;
}

static void check_amx(enum bp_type t, int64_t nb, int nt, enum fill fw, enum fill fx)
{
    const struct cpu_type_kernels *k = cpu_kernels_for(t);
    const cpu_gemm_amx_fn amx = cpu_gemm_amx_for(t);
    if (!amx)
        return;
    const int64_t n = nb * bp_type_block_size(t), rows = 16 * nt;
    const enum bp_type vdt = k->vec_dot_type;
    const size_t rs = bp_row_size(t, n), gs = 8 * rs + 64; /* a gap between the groups */
    const size_t ys = (vdt == BP_TYPE_Q8_0 ? cpu_q8_0_aux_row_size(nb) : bp_row_size(vdt, n)) + 40;
    unsigned char *w = malloc(rs * 16), *x8 = calloc(1, gs + 8 * rs), *y = malloc(ys * (size_t)rows);
    float *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 16 * 4), *yf = malloc((size_t)n * 4);
    float out[CPU_AMX_ROWS * CPU_AMX_MAX_TILES * 16], one[16 * 16], vnni[CPU_GEMM_MAX_COLS * 8];
    fill_weights(t, w, nb * 16, fw);
    cpu_repack_pack(t, x8, w, rs, n);
    cpu_repack_pack(t, x8 + gs, w + 8 * rs, rs, n);
    for (int r = 0; r < 16; r++) k->to_float(w + (size_t)r * rs, wf + (size_t)r * (size_t)n, n);
    const unsigned long long pattern = rnd64();
    for (int c = 0; c < rows; c++) {
        fill_x(x, n, fx, pattern);
        cpu_kernels_for(vdt)->from_float(x, y + (size_t)c * ys, n);
        if (vdt == BP_TYPE_Q8_0)
            cpu_q8_0_fill_aux(y + (size_t)c * ys, n);
    }
    amx(n, out, x8, gs, y, ys, nt);
    for (int c = 0; c < rows; c++) {
        dequant_act(vdt, y + (size_t)c * ys, yf, n);
        /* both groups in one call (gs apart, a gap between them), and each
         * alone: the same bits */
        k->gemm_x8(n, vnni, 16, x8, gs, 2, y + (size_t)c * ys, ys, 1);
        for (int g = 0; g < 2; g++) {
            float alone[8];
            k->gemm_x8(n, alone, 8, x8 + g * gs, gs, 1, y + (size_t)c * ys, ys, 1);
            checks++;
            if (memcmp(alone, vnni + 8 * g, sizeof alone) != 0) {
                failures++;
                printf("FAIL %s x8 %lld blocks: group %d of a two-group call differs from the group "
                       "alone\n", bp_type_name(t), (long long)nb, g);
            }
        }
        for (int r = 0; r < 16; r++) {
            const float *wr = wf + (size_t)r * (size_t)n;
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                want += (double)wr[i] * yf[i];
                mag += fabs((double)wr[i] * yf[i]);
            }
            const float got = out[16 * c + r];
            if (t == BP_TYPE_Q4_K) {
                const float exact = q4_K_amx_exact((const void *)(w + (size_t)r * rs),
                                                   (const void *)(y + (size_t)c * ys), nb);
                checks++;
                if (memcmp(&got, &exact, sizeof got) != 0) {
                    failures++;
                    printf("FAIL q4_K amx %s weights, %s activations, %lld blocks, %d tiles: row "
                           "%d col %d: amx %.9g, its scalar arithmetic %.9g\n",
                           fw == EXTREME ? "extreme" : "random", fx == EXTREME ? "+-1" : "long-tailed",
                           (long long)nb, nt, c, r, got, exact);
                }
            }
            if (check_one(got, want, mag) | check_one(got, vnni[r], mag))
                printf("FAIL %s amx %s weights, %s activations, %lld blocks, %d tiles: row %d col "
                       "%d: amx %.9g, vnni %.9g, double %.9g\n", bp_type_name(t),
                       fw == EXTREME ? "extreme" : "random", fx == EXTREME ? "+-1" : "long-tailed",
                       (long long)nb, nt, c, r, got, vnni[r], want);
        }
    }
    /* a row comes out the same in any number of tiles (chunks follow the
     * thread count) */
    amx(n, one, x8, gs, y + (size_t)(rows - 16) * ys, ys, 1);
    checks++;
    if (memcmp(one, out + 16 * (rows - 16), sizeof one) != 0) {
        failures++;
        printf("FAIL %s amx %lld blocks: the last tile of %d differs from it alone\n",
               bp_type_name(t), (long long)nb, nt);
    }
    free(w); free(x8); free(y); free(x); free(wf); free(yf);
}

static int main_amx(void)
{
    if (!cpu_amx_enable(true)) {
        puts("SKIP: this CPU or OS has no AMX-INT8, or this build has no AMX kernels");
        return 77;
    }
    const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K };
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    const int64_t blocks[] = { 1, 2, 3, 8, 65 };
    int kernels = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        kernels += cpu_gemm_amx_for(types[ti]) != NULL;
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
            for (int nt = 1; nt <= CPU_AMX_MAX_TILES; nt++)
                for (int fw = 0; fw < 2; fw++)
                    for (int fx = 0; fx < 2; fx++)
                        check_amx(types[ti], blocks[bi], nt, (enum fill)fw, (enum fill)fx);
    }
    if (kernels != ntypes) {
        printf("FAIL: AMX is active but %d of %d types have an AMX kernel\n", kernels, ntypes);
        return 1;
    }
    printf("amx kernels: %d of %d edge checks passed\n", checks - failures, checks);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--amx") == 0)
        return main_amx();
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
#if defined(__AVX512F__)
    if (!cpu_variant_score(CPU_VARIANT_AVX512, &isa)) { puts("SKIP: no AVX-512 VNNI here"); return 77; }
#elif defined(__AVX2__)
    if (!cpu_variant_score(CPU_VARIANT_AVX2, &isa)) { puts("SKIP: no AVX2 here"); return 77; }
#endif
    const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                   BP_TYPE_Q5_0, BP_TYPE_Q5_K, BP_TYPE_Q3_K, BP_TYPE_IQ4_XS,
                                   BP_TYPE_Q2_K, BP_TYPE_IQ4_NL, BP_TYPE_Q4_1, BP_TYPE_Q5_1 };
    const int64_t blocks[] = { 1, 2, 3, 5, 8, 65 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
            for (int nc = 1; nc <= cpu_gemm_x8_cols(cpu_kernels_for(types[ti])); nc++)
                for (int fw = 0; fw < 2; fw++)
                    for (int fx = 0; fx < 2; fx++)
                        for (int rep = 0; rep < 3; rep++)
                            check(types[ti], blocks[bi], nc, (enum fill)fw, (enum fill)fx);
    printf("%s x8 kernels: %d of %d edge checks passed\n", cpu_kernels_isa(), checks - failures,
           checks);
    return failures ? 1 : 0;
}
