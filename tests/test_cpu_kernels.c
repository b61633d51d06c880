/*
 * test_cpu_kernels.c — the CPU plugin's dot kernels of one ISA build
 * against the scalar references, linked straight to plugins/cpu/kernels/.
 * Plain C with no test library, so the same file runs natively for every
 * x86-64 variant and, cross-compiled for aarch64, under qemu-user for NEON.
 * Exit 0: pass, 1: a mismatch, 77: this machine cannot run the build's ISA.
 *
 * Weights are random valid blocks (random quants, random small scales;
 * every scale/min code and every high bit used, negative mins for Q4_1 and
 * Q5_1); activations random or long-tailed (a few huge values among small
 * ones), converted by the build's from_float. The integer parts of SIMD and
 * reference are equal by construction, so only float summation order may
 * differ: the bound is 1e-5 of the sum of |products| of the dequantized
 * operands. The reference itself is held to the same bound against a
 * double-precision dot of the dequantized weight and activation rows, for
 * rows of 1, 2, 3, 7 and 17 blocks.
 *
 * The activation quantizers (from_float of Q8_0 and Q8_K) give the
 * reference's bytes exactly, with ties (half-integers under a block maximum
 * of 127, where rounding half to even shows) and all-zero blocks among them.
 Q8_K also meets the cases listed at fill_q8_K_case (ties of |x| with
 * opposite signs, denormals, rounding boundaries, infinities, NaNs), alone
 * and in rows of up to 48 blocks.
 *
 * The x8 layout (repack.h): pack then unpack gives back every byte; the
 * reference x8 dot equals the plain reference row by row to the bit; the
 * build's x8 dot (1 to its kernel's most activation rows, 4 or 8) is held
 * to the same bound.
 *
 * The tiled float gemm (F32/F16/BF16 weights, builds that have one): every
 * output of nw x nx (edge tiles on both sides, K with and without a partial
 * vector) within 1e-5 of the sum of |products| of a double-precision
 * product; outputs outside the nw x nx block untouched; and each output
 * bit-identical to the same output computed alone (1 x 1 calls), since
 * MUL_MAT's results must not depend on how rows are cut into tiles.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "cpu_features.h"

static unsigned long long seed = 88172645463325252ull;
static unsigned long long rnd64(void)
{
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return seed;
}
static float rndf(void) { return (float)((double)(rnd64() >> 11) / 9007199254740992.0 * 2 - 1); }

static void fill_weights(enum bp_type t, unsigned char *w, size_t bytes, int64_t n)
{
    for (size_t i = 0; i < bytes; i++) w[i] = (unsigned char)rnd64();
    if (t == BP_TYPE_F32) { for (int64_t i = 0; i < n; i++) ((float *)(void *)w)[i] = rndf(); return; }
    if (t == BP_TYPE_F16) { for (int64_t i = 0; i < n; i++) ((uint16_t *)(void *)w)[i] = bp_f32_to_f16(rndf()); return; }
    if (t == BP_TYPE_BF16) { for (int64_t i = 0; i < n; i++) ((uint16_t *)(void *)w)[i] = bp_f32_to_bf16(rndf()); return; }
    const size_t bs = bp_type_size(t);
    for (size_t b = 0; b < bytes / bs; b++) {
        unsigned char *blk = w + b * bs;
        uint16_t d = bp_f32_to_f16(0.001f + 0.01f * fabsf(rndf())), d2 = bp_f32_to_f16(0.002f * fabsf(rndf()));
        if (t == BP_TYPE_Q4_0 || t == BP_TYPE_Q8_0 || t == BP_TYPE_Q5_0 || t == BP_TYPE_IQ4_NL ||
            t == BP_TYPE_IQ4_XS)
            memcpy(blk, &d, 2);
        if (t == BP_TYPE_Q4_K || t == BP_TYPE_Q5_K || t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) {
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &d2, 2);
        }
        if (t == BP_TYPE_Q6_K) memcpy(blk + 208, &d, 2);
        if (t == BP_TYPE_Q2_K) { memcpy(blk + 80, &d, 2); memcpy(blk + 82, &d2, 2); }
        if (t == BP_TYPE_Q3_K) memcpy(blk + 108, &d, 2);
        /* a negative scale or min half the time: the signs must reach the sum */
        if ((t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1) && (rnd64() & 1)) blk[3] |= 0x80;
        if (t == BP_TYPE_IQ4_NL && (rnd64() & 1)) blk[1] |= 0x80;
    }
}

static void fill_x(float *x, int64_t n, bool long_tail)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = rndf();
        if (long_tail && rnd64() % 61 == 0) x[i] *= 300.0f;
        if (long_tail && rnd64() % 7 == 0) x[i] *= 1e-3f;
    }
}

static int failures, checks;

static void check_type(enum bp_type t, int64_t n, bool long_tail)
{
    const struct cpu_type_kernels *k = cpu_kernels_for(t), *r = cpu_kernels_ref_for(t);
    const bool q8_1 = cpu_type_q8_1(t);
    const size_t wbytes = bp_row_size(t, n);
    const size_t xbytes = q8_1 ? cpu_q8_1_row_size(n / 32) : bp_row_size(k->vec_dot_type, n);
    unsigned char *w = malloc(wbytes), *xq = malloc(xbytes);
    float *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4), *xf = malloc((size_t)n * 4);
    fill_weights(t, w, wbytes, n);
    fill_x(x, n, long_tail);
    cpu_kernels_for(k->vec_dot_type)->from_float(x, xq, n);
    if (q8_1)
        cpu_q8_1_fill_s(x, xq, n);
    float got, want;
    k->vec_dot(n, &got, w, xq);
    r->vec_dot(n, &want, w, xq);
    r->to_float(w, wf, n);
    if (k->vec_dot_type == BP_TYPE_F32) memcpy(xf, x, (size_t)n * 4);
    else if (k->vec_dot_type == BP_TYPE_Q8_0) cpu_dequantize_row_q8_0(xq, xf, n);
    else { /* Q8_K */
        const struct bp_block_q8_K *b = (const void *)xq;
        for (int64_t i = 0; i < n; i++) xf[i] = b[i / 256].d * b[i / 256].qs[i % 256];
    }
    double mag = 0, exact = 0;
    for (int64_t i = 0; i < n; i++) {
        mag += fabs((double)wf[i] * xf[i]);
        exact += (double)wf[i] * xf[i];
    }
    /* Q8_1: the min term of each block is m * s (s = d * sum(qs) rounded to
     * f16), not m * f16(d) * sum(qs) */
    for (int64_t b = 0; q8_1 && b < n / 32; b++) {
        const unsigned char *wb = w + (size_t)b * bp_type_size(t);
        const struct bp_block_q8_0 *yb = (const void *)xq;
        uint16_t m16;
        memcpy(&m16, wb + 2, 2);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += yb[b].qs[j];
        const double m = bp_f16_to_f32(m16);
        exact += m * (double)cpu_q8_1_s(xq, n / 32, b) - m * bp_f16_to_f32(yb[b].d) * sum;
    }
    const double tol = 1e-5 * mag + 1e-6;
    checks += 2;
    if (!(fabs((double)got - want) <= tol)) {
        failures++;
        printf("FAIL %s n=%lld %s: %s kernel %.9g, reference %.9g (tolerance %.3g)\n",
               bp_type_name(t), (long long)n, long_tail ? "long-tailed" : "uniform",
               cpu_kernels_isa(), got, want, tol);
    }
    /* and the reference itself against the dequantized operands in double */
    if (!(fabs((double)want - exact) <= tol)) {
        failures++;
        printf("FAIL %s n=%lld %s: reference %.9g, double-precision dot %.9g (tolerance %.3g)\n",
               bp_type_name(t), (long long)n, long_tail ? "long-tailed" : "uniform", want, exact,
               tol);
    }
    free(w); free(xq); free(x); free(wf); free(xf);
}

static void check_x8(enum bp_type t, int64_t nb, int ncols, bool long_tail)
{
    const struct cpu_type_kernels *k = cpu_kernels_for(t), *r = cpu_kernels_ref_for(t);
    if (!k->gemm_x8) /* a type this build does not repack */
        return;
    const int64_t n = nb * bp_type_block_size(t);
    const enum bp_type vdt = k->vec_dot_type;
    const size_t rs = bp_row_size(t, n);
    const size_t ys = vdt == BP_TYPE_Q8_0 ? cpu_q8_0_aux_row_size(nb) : bp_row_size(vdt, n);
    unsigned char *w = malloc(rs * 8), *x8 = malloc(rs * 8), *back = malloc(rs * 8);
    unsigned char *y = malloc(ys * (size_t)ncols);
    float *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4), *yf = malloc((size_t)n * 4);
    fill_weights(t, w, rs * 8, n * 8);
    cpu_repack_pack(t, x8, w, rs, n);
    cpu_repack_unpack(t, back, x8, rs, n);
    checks++;
    if (memcmp(w, back, rs * 8) != 0) {
        failures++;
        printf("FAIL %s x8 with %lld blocks: unpack(pack(rows)) differs from the rows\n",
               bp_type_name(t), (long long)nb);
    }
    for (int c = 0; c < ncols; c++) {
        fill_x(x, n, long_tail);
        cpu_kernels_for(vdt)->from_float(x, y + (size_t)c * ys, n);
        if (cpu_type_q8_1(t))
            cpu_q8_1_fill_s(x, y + (size_t)c * ys, n);
        else if (vdt == BP_TYPE_Q8_0)
            cpu_q8_0_fill_aux(y + (size_t)c * ys, n);
    }
    float got[CPU_GEMM_WIDE_COLS * 8], ref[CPU_GEMM_WIDE_COLS * 8];
    k->gemm_x8(n, got, 8, x8, 0, 1, y, ys, ncols);
    r->gemm_x8(n, ref, 8, x8, 0, 1, y, ys, ncols);
    for (int c = 0; c < ncols; c++) {
        if (vdt == BP_TYPE_Q8_0) {
            cpu_dequantize_row_q8_0(y + (size_t)c * ys, yf, n);
        } else {
            const struct bp_block_q8_K *yb = (const void *)(y + (size_t)c * ys);
            for (int64_t i = 0; i < n; i++) yf[i] = yb[i / 256].d * yb[i / 256].qs[i % 256];
        }
        for (int row = 0; row < 8; row++) {
            float want;
            r->vec_dot(n, &want, w + (size_t)row * rs, y + (size_t)c * ys);
            r->to_float(w + (size_t)row * rs, wf, n);
            double mag = 0;
            for (int64_t i = 0; i < n; i++) mag += fabs((double)wf[i] * yf[i]);
            const double tol = 1e-5 * mag + 1e-6;
            checks += 2;
            if (memcmp(&ref[c * 8 + row], &want, 4) != 0) {
                failures++;
                printf("FAIL %s x8 reference row %d col %d: %.9g, plain reference %.9g\n",
                       bp_type_name(t), row, c, ref[c * 8 + row], want);
            }
            if (!(fabs((double)got[c * 8 + row] - want) <= tol)) {
                failures++;
                printf("FAIL %s x8 %lld blocks row %d col %d of %d: %s kernel %.9g, reference "
                       "%.9g (tolerance %.3g)\n", bp_type_name(t), (long long)nb, row, c, ncols,
                       cpu_kernels_isa(), got[c * 8 + row], want, tol);
            }
        }
    }
    free(w); free(x8); free(back); free(y); free(x); free(wf); free(yf);
}

static void check_gemm_float(enum bp_type t, int64_t n, int64_t nw, int nx, bool long_tail)
{
    const struct cpu_type_kernels *k = cpu_kernels_for(t), *r = cpu_kernels_ref_for(t);
    const size_t rs = bp_row_size(t, n);
    const int64_t ys = nw + 3; /* 3 guard outputs after each row */
    unsigned char *w = malloc(rs * (size_t)nw);
    float *x = malloc((size_t)(n * nx) * 4), *y = malloc((size_t)(ys * nx) * 4);
    float *one = malloc((size_t)(ys * nx) * 4), *wf = malloc((size_t)n * 4);
    const float **xr = malloc((size_t)nx * sizeof *xr);
    float **yr = malloc((size_t)nx * sizeof *yr);
    fill_weights(t, w, rs * (size_t)nw, n * nw);
    fill_x(x, n * nx, long_tail);
    for (int64_t i = 0; i < ys * nx; i++) y[i] = one[i] = -12345.0f;
    for (int j = 0; j < nx; j++) { xr[j] = x + (size_t)(j * n); yr[j] = y + (size_t)(j * ys); }
    k->gemm_float(n, w, rs, nw, xr, yr, nx);
    for (int j = 0; j < nx; j++)
        for (int64_t i = 0; i < nw; i++) {
            float *out = one + (size_t)(j * ys + i);
            k->gemm_float(n, w + (size_t)i * rs, rs, 1, xr + j, &out, 1);
        }
    for (int64_t i = 0; i < nw; i++) {
        r->to_float(w + (size_t)i * rs, wf, n);
        for (int j = 0; j < nx; j++) {
            double want = 0, mag = 0;
            for (int64_t e = 0; e < n; e++) {
                want += (double)wf[e] * x[j * n + e];
                mag += fabs((double)wf[e] * x[j * n + e]);
            }
            const double tol = 1e-5 * mag + 1e-6;
            const float got = y[j * ys + i];
            checks += 2;
            if (!(fabs((double)got - want) <= tol)) {
                failures++;
                printf("FAIL %s gemm_float n=%lld %lld x %d, row %lld col %d: %s kernel %.9g, "
                       "double %.9g (tolerance %.3g)\n", bp_type_name(t), (long long)n,
                       (long long)nw, nx, (long long)i, j, cpu_kernels_isa(), got, want, tol);
            }
            if (memcmp(&got, &one[j * ys + i], 4) != 0) {
                failures++;
                printf("FAIL %s gemm_float n=%lld %lld x %d, row %lld col %d: %.9g in the "
                       "block, %.9g alone\n", bp_type_name(t), (long long)n, (long long)nw, nx,
                       (long long)i, j, got, one[j * ys + i]);
            }
        }
    }
    for (int j = 0; j < nx; j++)
        for (int64_t i = nw; i < ys; i++) {
            checks++;
            if (y[j * ys + i] != -12345.0f) {
                failures++;
                printf("FAIL %s gemm_float %lld x %d wrote output %lld of row %d, past the "
                       "block\n", bp_type_name(t), (long long)nw, nx, (long long)i, j);
            }
        }
    free(w); free(x); free(y); free(one); free(wf); free(xr); free(yr);
}

/* mode 0: uniform, 1: long-tailed, 2: half-integer ties with amax 127 and
 * one block of zeros. */
static void check_from_float(enum bp_type t, int64_t n, int mode)
{
    const size_t bytes = bp_row_size(t, n);
    unsigned char *got = malloc(bytes), *want = malloc(bytes);
    float *x = malloc((size_t)n * 4);
    fill_x(x, n, mode == 1);
    if (mode == 2) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(rnd64() % 254) - 127) + 0.5f;
        for (int64_t i = 0; i < n; i += 32) x[i] = (rnd64() & 1) ? 127.0f : -127.0f;
        for (int64_t i = 0; i < 32 && i < n; i++) x[i] = 0.0f;
    }
    cpu_kernels_for(t)->from_float(x, got, n);
    cpu_kernels_ref_for(t)->from_float(x, want, n);
    checks++;
    if (memcmp(got, want, bytes) != 0) {
        failures++;
        printf("FAIL from_float %s n=%lld mode %d: %s bytes differ from the reference\n",
               bp_type_name(t), (long long)n, mode, cpu_kernels_isa());
    }
    free(got); free(want); free(x);
}

/* The Q8_K activation quantizer on the inputs where a vector version could
 * part from the reference, one 256-element block per case: signed zeros;
 * one non-zero value; ties of |x| with opposite signs (the first decides the
 * sign of the scale); denormals (the smallest makes the scale infinite);
 * products landing on and next to the halves where rounding to even shows,
 * under scales of 1 and others; the extreme repeated everywhere; infinities
 * and NaNs; then random rows. A case index past the list gives random. */
#define Q8K_EDGE_CASES 20
static void fill_q8_K_case(float *b, int c)
{
    const int at = (int)(rnd64() % 256), at2 = at + 1 + (int)(rnd64() % (255 - (at < 255 ? at : 254)));
    const float M = (1.0f + fabsf(rndf())) * (float)(1 << (rnd64() % 12)) / 64.0f;
    const float sgn = (rnd64() & 1) ? 1.0f : -1.0f;
    for (int j = 0; j < 256; j++) b[j] = rndf() * 0.5f * M;
    switch (c) {
    case 0: for (int j = 0; j < 256; j++) b[j] = 0.0f; break;
    case 1: for (int j = 0; j < 256; j++) b[j] = (j & 1) ? -0.0f : 0.0f; break;
    case 2: for (int j = 0; j < 256; j++) b[j] = 0.0f; b[at] = sgn * M; break;
    case 3: b[at] = -M; b[at2 < 256 ? at2 : 255] = M; break;
    case 4: b[at] = M; b[at2 < 256 ? at2 : 255] = -M; break;
    case 5: for (int j = 0; j < 256; j += 1 + (int)(rnd64() % 9)) b[j] = (rnd64() & 1) ? M : -M; break;
    case 6: for (int j = 0; j < 256; j++) b[j] = sgn * (float)(rnd64() % 8388608) * 1.4e-45f; break;
    case 7: for (int j = 0; j < 256; j++) b[j] = 0.0f; b[at] = sgn * 1.4e-45f; b[255 - at] = 1.4e-45f; break;
    case 8: for (int j = 0; j < 256; j += 2) b[j] = rndf() * 1e-39f; break;
    case 9: case 10: {
        /* scale exactly -1 or 1 (extreme 127 or -127), or a random one */
        const float ext = c == 9 ? sgn * 127.0f : sgn * M, iscale = -127.0f / ext;
        for (int j = 0; j < 256; j++) {
            const float h = ((float)((int)(rnd64() % 254) - 127) + 0.5f) / iscale;
            const int side = (int)(rnd64() % 3);
            b[j] = side == 0 ? h : nextafterf(h, side == 1 ? INFINITY : -INFINITY);
            if (fabsf(b[j]) >= fabsf(ext)) b[j] = 0.0f;
        }
        b[at] = ext;
        break;
    }
    case 11: for (int j = 0; j < 256; j++) b[j] = (rnd64() & 1) ? M : -M; break;
    case 12: for (int j = 0; j < 256; j++) b[j] = nextafterf(sgn * M, 0.0f); b[at] = sgn * M; break;
    case 13: b[at] = sgn * INFINITY; break;
    case 14: b[at] = NAN; b[at2 < 256 ? at2 : 255] = -NAN; break;
    case 15: for (int j = 0; j < 256; j++) b[j] = NAN; break;
    case 16: b[at] = -INFINITY; b[at2 < 256 ? at2 : 255] = INFINITY; break;
    case 17: b[at] = sgn * 3.4028235e38f; break;
    case 18: b[0] = NAN; b[1] = sgn * M * 4; break;
    case 19: for (int j = 0; j < 256; j++) if (rnd64() % 61 == 0) b[j] *= 300.0f; break;
    default: break;
    }
}

static void check_q8_K_edges(void)
{
    const cpu_from_float_fn got_fn = cpu_kernels_for(BP_TYPE_Q8_K)->from_float;
    const cpu_from_float_fn want_fn = cpu_kernels_ref_for(BP_TYPE_Q8_K)->from_float;
    /* every case alone, then rows of many blocks with the cases in any order */
    for (int rep = 0; rep < 40; rep++) {
        const int64_t nb = rep < Q8K_EDGE_CASES ? 1 : 1 + (int64_t)(rnd64() % 48);
        float *x = malloc((size_t)nb * 256 * sizeof *x);
        struct bp_block_q8_K *got = malloc((size_t)nb * sizeof *got), *want = malloc((size_t)nb * sizeof *want);
        for (int64_t i = 0; i < nb; i++)
            fill_q8_K_case(x + 256 * i, rep < Q8K_EDGE_CASES ? rep : (int)(rnd64() % (Q8K_EDGE_CASES + 4)));
        memset(got, 0x5a, (size_t)nb * sizeof *got);
        memset(want, 0xa5, (size_t)nb * sizeof *want);
        got_fn(x, got, nb * 256);
        want_fn(x, want, nb * 256);
        for (int64_t i = 0; i < nb; i++) {
            checks++;
            if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) {
                failures++;
                printf("FAIL from_float q8_K edge row %d block %lld of %lld: %s bytes differ from "
                       "the reference (d %.9g vs %.9g)\n", rep, (long long)i, (long long)nb,
                       cpu_kernels_isa(), got[i].d, want[i].d);
            }
        }
        free(x); free(got); free(want);
    }
}

/* --bench-q8k: the Q8_K activation quantizer of this build against the
 * scalar reference, in alternating rounds on this thread's CPU time (no
 * assertion: the figures are for the README and reports). Rows of the 1B
 * model's K = 2048 and 5632, 128 rows a round (one prefill's activation). */
static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench_q8_K(void)
{
    const int64_t ks[] = { 2048, 5632 };
    enum { ROWS = 128, ROUNDS = 31 };
    for (size_t ki = 0; ki < 2; ki++) {
        const int64_t K = ks[ki];
        float *x = malloc((size_t)(K * ROWS) * sizeof *x);
        void *y = malloc(bp_row_size(BP_TYPE_Q8_K, K) * ROWS);
        fill_x(x, K * ROWS, true);
        const cpu_from_float_fn fn[2] = { cpu_kernels_ref_for(BP_TYPE_Q8_K)->from_float,
                                          cpu_kernels_for(BP_TYPE_Q8_K)->from_float };
        double t[2][ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            for (int v = 0; v < 2; v++) {
                const int which = (r & 1) ? 1 - v : v;  /* alternate which goes first */
                const double t0 = thread_ns();
                for (int i = 0; i < ROWS; i++)
                    fn[which]((const float *)x + (size_t)i * (size_t)K,
                              (char *)y + (size_t)i * bp_row_size(BP_TYPE_Q8_K, K), K);
                t[which][r] = (thread_ns() - t0) / ROWS;
            }
        qsort(t[0], ROUNDS, sizeof t[0][0], cmp_double);
        qsort(t[1], ROUNDS, sizeof t[1][0], cmp_double);
        const double ref = t[0][ROUNDS / 2], simd = t[1][ROUNDS / 2];
        printf("q8_K from_float K=%lld: reference %.0f ns/row (%.2f GB/s of floats), %s %.0f "
               "ns/row (%.2f GB/s), %.2fx (medians of %d alternating rounds, thread CPU time)\n",
               (long long)K, ref, (double)K * 4 / ref, cpu_kernels_isa(), simd,
               (double)K * 4 / simd, ref / simd, ROUNDS);
        free(x); free(y);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
#if defined(__AVX512F__)
    if (!cpu_variant_score(CPU_VARIANT_AVX512, &isa)) { puts("SKIP: no AVX-512 VNNI here"); return 77; }
#elif defined(__AVX2__)
    if (!cpu_variant_score(CPU_VARIANT_AVX2, &isa)) { puts("SKIP: no AVX2 here"); return 77; }
#elif defined(__ARM_FEATURE_DOTPROD)
    if (!cpu_variant_score(CPU_VARIANT_NEON, &isa)) { puts("SKIP: no NEON dotprod here"); return 77; }
#endif
    if (argc > 1 && strcmp(argv[1], "--bench-q8k") == 0)
        return bench_q8_K();
    if (argc > 1) { printf("usage: %s [--bench-q8k]\n", argv[0]); return 2; }
    const enum bp_type types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                   BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1, BP_TYPE_IQ4_NL,
                                   BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q5_K, BP_TYPE_IQ4_XS,
                                   BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int64_t bs = bp_type_block_size(types[ti]) > 1 ? bp_type_block_size(types[ti]) : 256;
        /* odd block counts exercise every tail of the unrolled loops */
        const int64_t blocks[] = { 1, 2, 3, 7, 17 };
        for (size_t b = 0; b < 5; b++)
            for (int lt = 0; lt < 2; lt++)
                for (int rep = 0; rep < 20; rep++) check_type(types[ti], bs * blocks[b], lt);
        /* float weights also take lengths that are no multiple of the vector */
        if (types[ti] == BP_TYPE_F32 || types[ti] == BP_TYPE_F16 || types[ti] == BP_TYPE_BF16)
            for (int64_t n = 1; n < 70; n += 3) check_type(types[ti], n, false);
    }
    for (int mode = 0; mode < 3; mode++)
        for (int rep = 0; rep < 20; rep++) {
            check_from_float(BP_TYPE_Q8_0, 32 * (1 + rep), mode);
            check_from_float(BP_TYPE_Q8_K, 256 * (1 + rep % 4), mode);
        }
    check_q8_K_edges();
    const enum bp_type x8_types[] = { BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                      BP_TYPE_Q5_0, BP_TYPE_Q5_K, BP_TYPE_Q3_K, BP_TYPE_IQ4_XS,
                                      BP_TYPE_Q2_K, BP_TYPE_IQ4_NL, BP_TYPE_Q4_1, BP_TYPE_Q5_1 };
    for (size_t ti = 0; ti < sizeof x8_types / sizeof x8_types[0]; ti++)
        for (int64_t nb = 1; nb <= 9; nb += 4)
            for (int nc = 1; nc <= cpu_gemm_x8_cols(cpu_kernels_for(x8_types[ti])); nc++)
                for (int lt = 0; lt < 2; lt++) check_x8(x8_types[ti], nb, nc, lt);
    /* every edge tile of the 4 x 6 and 3 x 4 tiles, K around the vector widths */
    const enum bp_type float_types[] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 };
    const int64_t gk[] = { 1, 7, 8, 15, 16, 17, 33, 100, 257 };
    const int64_t gnw[] = { 1, 2, 3, 4, 5, 7, 8, 13 };
    const int gnx[] = { 1, 2, 3, 4, 5, 6, 7, 13, 16, 33, 48 };
    for (size_t ti = 0; ti < 3 && cpu_kernels_for(float_types[ti])->gemm_float; ti++)
        for (size_t a = 0; a < sizeof gk / sizeof gk[0]; a++)
            for (size_t b = 0; b < sizeof gnw / sizeof gnw[0]; b++)
                for (size_t c = 0; c < sizeof gnx / sizeof gnx[0]; c++)
                    check_gemm_float(float_types[ti], gk[a], gnw[b], gnx[c], (a + b + c) % 2);
    printf("%s kernels: %d of %d checks against the scalar reference passed\n", cpu_kernels_isa(),
           checks - failures, checks);
    return failures ? 1 : 0;
}
