/*
 * test_quant.c — the reference conversions behind bp_quantize and
 * bp_dequantize, checked against values worked out independently here:
 * hand-built blocks decoded element by element from the layout, bytes of
 * small inputs computed by hand for the formats whose quantizer must equal
 * ggml's, round-trip error bounds, the accuracy of Q4_K/Q6_K against a port
 * of ggml's search written in this file, argument errors, and the path by
 * which plugins reach the functions (host services, via a probe plugin).
 *
 * The ABI 1.2 types (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS)
 * are held to ggml itself: tests/data/quant/ has fixed inputs, the bytes
 * ggml's quantizer made of them and the floats its dequantizer made of
 * those bytes (scripts/quant-reference.sh); both directions must match
 * bit for bit. Their layouts are also decoded here element by element from
 * the description in bp_quant.h.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "suite_main.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static double rng_unit(void) /* (0, 1) */
{
    return ((double)(rng_next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static float rng_gauss(void)
{
    return (float)(sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit()));
}

enum dist { DIST_GAUSS, DIST_STUDENT3, DIST_OUTLIERS };
static const char *const dist_name[] = {"gaussian", "student-t(3)", "gaussian+outliers"};

static void fill(float *x, size_t n, enum dist d, uint64_t seed)
{
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        float g = rng_gauss();
        switch (d) {
        case DIST_STUDENT3: {
            /* t with 3 degrees of freedom: heavy tails, finite variance. */
            float a = rng_gauss(), b = rng_gauss(), c = rng_gauss();
            x[i] = g / sqrtf((a * a + b * b + c * c) / 3.0f);
            break;
        }
        case DIST_OUTLIERS:
            /* A few values 30x the rest, as in real weight rows. */
            x[i] = (rng_next() % 97 == 0) ? 30.0f * g : g;
            break;
        default: x[i] = g; break;
        }
    }
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void assert_floats_bitwise(const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fbits(got[i]) == fbits(want[i]), "element %zu: got %.9g (0x%08x), want %.9g (0x%08x)",
                      i, (double)got[i], fbits(got[i]), (double)want[i], fbits(want[i]));
}

static double sq_err(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        e += d * d;
    }
    return e;
}

/* --------------------------------------------- dequantization of hand-built blocks */

START_TEST(test_dequantize_q4_0_hand_built_blocks_including_subnormal_scale)
{
    struct bp_block_q4_0 b[2];
    b[0].d = 0x3800; /* 0.5 */
    b[1].d = 0x8001; /* -2^-24, the smallest negative subnormal */
    for (int j = 0; j < 16; j++) {
        b[0].qs[j] = (uint8_t)(j | ((15 - j) << 4));
        b[1].qs[j] = (uint8_t)((j * 7) & 0xFF);
    }
    float got[64], want[64];
    const float d0 = 0.5f, d1 = -1.0f / 16777216.0f;
    for (int e = 0; e < 32; e++) {
        int nib0 = e < 16 ? (e & 15) : ((15 - (e - 16)) & 15);
        want[e] = (float)(nib0 - 8) * d0;
        int byte1 = ((e % 16) * 7) & 0xFF;
        int nib1 = e < 16 ? byte1 & 15 : byte1 >> 4;
        want[32 + e] = (float)(nib1 - 8) * d1;
    }
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q4_0, b, got, 64), BP_OK);
    assert_floats_bitwise(got, want, 64);
    ck_assert(got[0] == -4.0f && got[15] == 3.5f && got[16] == 3.5f && got[31] == -4.0f);
}
END_TEST

START_TEST(test_dequantize_q8_0_hand_built_block_with_largest_subnormal_scale)
{
    struct bp_block_q8_0 b;
    b.d = 0x03FF; /* 1023 * 2^-24 */
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j * 8 - 128);
    float got[32];
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, &b, got, 32), BP_OK);
    for (int j = 0; j < 32; j++)
        ck_assert_msg(got[j] == (float)(j * 8 - 128) * (1023.0f / 16777216.0f), "element %d", j);
}
END_TEST

/* Sub-block scales and mins chosen so that sub-blocks 4..7 use both high
 * bits; the 12 bytes below were packed by hand from the layout in
 * bp_quant.h (see the comment beside each). */
static const uint8_t q4k_sc[8] = {1, 2, 3, 63, 17, 33, 48, 63};
static const uint8_t q4k_m[8] = {0, 5, 10, 40, 20, 47, 1, 63};
static const uint8_t q4k_packed[12] = {
    0x41, /* sc0=1  | high bits of sc4=17 (01) << 6 */
    0x82, /* sc1=2  | sc5=33 (10) */
    0xC3, /* sc2=3  | sc6=48 (11) */
    0xFF, /* sc3=63 | sc7=63 (11) */
    0x40, /* m0=0   | m4=20 (01) */
    0x85, /* m1=5   | m5=47 (10) */
    0x0A, /* m2=10  | m6=1 (00) */
    0xE8, /* m3=40  | m7=63 (11) */
    0x41, /* low nibbles: sc4 1, m4 4 */
    0xF1, /* sc5 1, m5 15 */
    0x10, /* sc6 0, m6 1 */
    0xFF, /* sc7 15, m7 15 */
};

START_TEST(test_dequantize_q4_K_unpacks_6_bit_scales_of_all_sub_blocks)
{
    struct bp_block_q4_K b;
    b.d = 0x3555;    /* 1365/4096 */
    b.dmin = 0x0203; /* subnormal: 515 * 2^-24 */
    memcpy(b.scales, q4k_packed, 12);
    rng_state = 42;
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)rng_next();
    const float d = 1365.0f / 4096.0f, dmin = 515.0f / 16777216.0f;
    float want[256], got[256];
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32, g = j / 2;
        uint8_t byte = b.qs[32 * g + l];
        int q = (j % 2) ? byte >> 4 : byte & 15;
        float d1 = d * (float)q4k_sc[j];
        want[e] = d1 * (float)q - dmin * (float)q4k_m[j];
    }
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q4_K, &b, got, 256), BP_OK);
    assert_floats_bitwise(got, want, 256);
}
END_TEST

START_TEST(test_dequantize_q6_K_decodes_interleaved_bits_and_negative_scales)
{
    struct bp_block_q6_K b[2];
    static const int8_t sc[16] = {-128, -1, 0, 1, 127, -77, 5, -5, 64, -64, 3, 100, -100, 2, -2, 33};
    rng_state = 7;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 128; i++) b[k].ql[i] = (uint8_t)rng_next();
        for (int i = 0; i < 64; i++) b[k].qh[i] = (uint8_t)rng_next();
        memcpy(b[k].scales, sc, 16);
    }
    b[0].d = 0x2E66; /* 1638/16384 */
    b[1].d = 0x0010; /* subnormal 2^-20 */
    const float dd[2] = {1638.0f / 16384.0f, 1.0f / 1048576.0f};
    float want[512], got[512];
    for (int k = 0; k < 2; k++) {
        for (int e = 0; e < 256; e++) {
            /* Element e: half h, quarter s within it, lane l. The low four
             * bits sit in nibble s/2 of ql[64h + 32(s%2) + l], the high two
             * in bits 2s, 2s+1 of qh[32h + l]; the scale is sub-block e/16. */
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            uint8_t lo_byte = b[k].ql[64 * h + 32 * (s % 2) + l];
            int lo = (s / 2) ? lo_byte >> 4 : lo_byte & 15;
            int hi = (b[k].qh[32 * h + l] >> (2 * s)) & 3;
            int q = (lo | (hi << 4)) - 32;
            want[256 * k + e] = dd[k] * (float)sc[e / 16] * (float)q;
        }
    }
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q6_K, b, got, 512), BP_OK);
    assert_floats_bitwise(got, want, 512);
}
END_TEST

START_TEST(test_dequantize_q8_K_hand_built_block)
{
    struct bp_block_q8_K b;
    memset(&b, 0, sizeof b);
    b.d = -0.375f;
    for (int j = 0; j < 256; j++) b.qs[j] = (int8_t)(j - 128);
    float got[256];
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_K, &b, got, 256), BP_OK);
    for (int j = 0; j < 256; j++) ck_assert(got[j] == -0.375f * (float)(j - 128));
}
END_TEST

START_TEST(test_dequantize_all_zero_blocks_gives_zeros)
{
    static const enum bp_type types[] = {BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                         BP_TYPE_Q8_K, BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1,
                                         BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q5_K, BP_TYPE_IQ4_NL,
                                         BP_TYPE_IQ4_XS};
    unsigned char zeros[2 * 292] = {0};
    float out[513];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        int64_t n = 2 * bp_type_block_size(types[t]);
        for (int i = 0; i < 513; i++) out[i] = 1.0f;
        ck_assert_int_eq(bp_dequantize(types[t], zeros, out, n), BP_OK);
        for (int64_t i = 0; i < n; i++) ck_assert_msg(out[i] == 0.0f, "%s element %lld", bp_type_name(types[t]), (long long)i);
        ck_assert(out[n] == 1.0f); /* nothing past n is written */
    }
}
END_TEST

START_TEST(test_plain_float_types_pass_through)
{
    const float x[4] = {1.0f, -2.5f, 65504.0f, 1.0f / 3.0f};
    uint16_t h[4];
    float back[4];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_F16, x, h, 1, 4), 8);
    ck_assert_uint_eq(h[0], 0x3C00);
    ck_assert_uint_eq(h[1], 0xC100);
    ck_assert_uint_eq(h[2], 0x7BFF);
    ck_assert_uint_eq(h[3], 0x3555); /* 1/3 rounds to 1365/4096 */
    ck_assert_int_eq(bp_dequantize(BP_TYPE_F16, h, back, 4), BP_OK);
    ck_assert(back[3] == 1365.0f / 4096.0f);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_BF16, x, h, 2, 2), 8);
    ck_assert_uint_eq(h[0], 0x3F80);
    ck_assert_uint_eq(h[1], 0xC020);
    ck_assert_uint_eq(h[3], 0x3EAB); /* 0x3EAAAAAB rounds up */
    float f[4];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_F32, x, f, 4, 1), 16);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_F32, f, back, 4), BP_OK);
    assert_floats_bitwise(back, x, 4);
}
END_TEST

/* ------------------------------------------- quantization bytes, worked by hand */

START_TEST(test_quantize_q4_0_bytes_match_hand_computation)
{
    /* Block 0: the largest magnitude is -8 (first), so d = 1 and each q is
     * trunc(x + 8.5) capped at 15. Block 1: +4 and -4 tie; the first (+4)
     * wins, d = -0.5, q = trunc(-2x + 8.5). */
    float x[64] = {-8, -7.5f, -3.5f, 0, 0.49f, 2.5f, 7, 7.9f,
                   -1, 1, -2, 2, -0.5f, 0.5f, 6.5f, -6.6f,
                   3, -3, 4.4f, -4.4f, 5.5f, -5.5f, 0.1f, -0.1f,
                   7.49f, -7.49f, 1.5f, -1.5f, 2.6f, -2.6f, 7.99f, -7.99f};
    x[32 + 3] = 4;
    x[32 + 20] = -4;
    x[32 + 10] = 1;
    x[32 + 25] = -1.25f;
    static const uint8_t want0[16] = {0xB0, 0x51, 0xC5, 0x48, 0xE8, 0x3B, 0x8F, 0x8F,
                                      0xF7, 0x19, 0xA6, 0x7A, 0xB8, 0x59, 0xFF, 0x01};
    uint8_t want1[16];
    memset(want1, 0x88, 16);
    want1[3] = 0x80;  /* q3 = 0 (x=4), q19 = 8 */
    want1[4] = 0xF8;  /* q20 = 16 capped to 15 (x=-4) */
    want1[9] = 0xB8;  /* q25 = 11 (x=-1.25) */
    want1[10] = 0x86; /* q10 = 6 (x=1) */
    struct bp_block_q4_0 b[2];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q4_0, x, b, 2, 32), 36);
    ck_assert_uint_eq(b[0].d, 0x3C00);
    ck_assert_uint_eq(b[1].d, 0xB800);
    ck_assert_mem_eq(b[0].qs, want0, 16);
    ck_assert_mem_eq(b[1].qs, want1, 16);
}
END_TEST

START_TEST(test_quantize_q8_0_bytes_match_hand_computation)
{
    /* Block 0: amax 127, d = 1, roundf (halves away from zero). Block 1:
     * amax 63.5, d = 0.5, q = roundf(2x). */
    float x[64] = {-127, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, 1.49f, -1.51f,
                   0, 100, -100, 63.5f, 3.5f, -3.5f, 0.4999f, 10};
    static const int8_t want0_head[16] = {-127, 3, -3, 1, -1, 127, 1, -2, 0, 100, -100, 64, 4, -4, 0, 10};
    for (int j = 16; j < 32; j++) x[j] = (float)(j - 20);
    memset(x + 32, 0, 32 * sizeof(float));
    x[32] = 0.25f;
    x[33] = -0.25f;
    x[34] = 0.2f;
    x[35] = 31.75f;
    x[39] = -63.5f;
    struct bp_block_q8_0 b[2];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, x, b, 1, 64), 68);
    ck_assert_uint_eq(b[0].d, 0x3C00);
    ck_assert_mem_eq(b[0].qs, want0_head, 16);
    for (int j = 16; j < 32; j++) ck_assert_int_eq(b[0].qs[j], j - 20);
    ck_assert_uint_eq(b[1].d, 0x3800);
    static const int8_t want1[32] = {1, -1, 0, 64, 0, 0, 0, -127};
    ck_assert_mem_eq(b[1].qs, want1, 32);
}
END_TEST

START_TEST(test_quantize_q8_K_bytes_match_hand_computation)
{
    /* Block 0: the signed extreme is -127, iscale = -127/max = 1, halves
     * round to even. Block 1: extreme +63.5, iscale = -2, d = -0.5.
     * Block 2: all zero. */
    static float x[768];
    memset(x, 0, sizeof x);
    x[0] = -127;
    x[1] = 2.5f;
    x[2] = 3.5f;
    x[3] = -2.5f;
    x[4] = 126.6f;
    x[5] = 0.5f;
    x[6] = 1.5f;
    x[7] = -1.5f;
    for (int j = 8; j < 256; j++) x[j] = (float)((j % 7) - 3);
    x[256 + 5] = 1.25f;
    x[256 + 6] = -0.75f;
    x[256 + 7] = 0.25f;
    x[256 + 100] = 63.5f;
    int8_t want0[256] = {-127, 2, 4, -2, 127, 0, 2, -2};
    for (int j = 8; j < 256; j++) want0[j] = (int8_t)((j % 7) - 3);
    int8_t want1[256] = {0};
    want1[5] = -2;
    want1[6] = 2;
    want1[100] = -127;
    struct bp_block_q8_K b[3];
    memset(b, 0x5A, sizeof b);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_K, x, b, 3, 256), 3 * 292);
    ck_assert(b[0].d == 1.0f);
    ck_assert_mem_eq(b[0].qs, want0, 256);
    ck_assert(b[1].d == -0.5f);
    ck_assert_mem_eq(b[1].qs, want1, 256);
    for (int j = 0; j < 16; j++) {
        int s0 = 0;
        for (int l = 0; l < 16; l++) s0 += want0[16 * j + l];
        ck_assert_int_eq(b[0].bsums[j], s0);
        ck_assert_int_eq(b[1].bsums[j], j == 6 ? -127 : 0); /* 5+6+7: -2+2+0 */
        ck_assert_int_eq(b[2].bsums[j], 0);
    }
    ck_assert(b[2].d == 0.0f);
    for (int j = 0; j < 256; j++) ck_assert_int_eq(b[2].qs[j], 0);
}
END_TEST

/* ------------------- ggml's reference quantizers for Q4_0/Q8_0/Q8_K, ported */

static int ref_nearest_int(float f)
{
    float v = f + 12582912.f;
    int i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static void ggml_ref_q4_0(const float *x, struct bp_block_q4_0 *y, int nb)
{
    for (int i = 0; i < nb; i++) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[i * 32 + j])) {
                amax = fabsf(x[i * 32 + j]);
                max = x[i * 32 + j];
            }
        const float d = max / -8, id = d ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int8_t a = (int8_t)(x[i * 32 + j] * id + 8.5f), b = (int8_t)(x[i * 32 + 16 + j] * id + 8.5f);
            uint8_t q0 = (uint8_t)(a < 15 ? a : 15), q1 = (uint8_t)(b < 15 ? b : 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void ggml_ref_q8_0(const float *x, struct bp_block_q8_0 *y, int nb)
{
    for (int i = 0; i < nb; i++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(x[i * 32 + j]) ? amax : fabsf(x[i * 32 + j]);
        const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)roundf(x[i * 32 + j] * id);
    }
}

static void ggml_ref_q8_K(const float *x, struct bp_block_q8_K *y, int nb)
{
    for (int i = 0; i < nb; i++, x += 256) {
        float amax = 0, max = 0;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            int v = ref_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

START_TEST(test_quantize_q4_0_q8_0_q8_K_equal_ggml_reference_on_random_data)
{
    enum { NB = 64 };
    static float x[NB * 256];
    for (int d = 0; d < 3; d++) {
        fill(x, NB * 256, (enum dist)d, 100 + (uint64_t)d);
        static struct bp_block_q4_0 a4[NB * 8], r4[NB * 8];
        static struct bp_block_q8_0 a8[NB * 8], r8[NB * 8];
        static struct bp_block_q8_K ak[NB], rk[NB];
        ck_assert_uint_eq(bp_quantize(BP_TYPE_Q4_0, x, a4, NB, 256), sizeof a4);
        ggml_ref_q4_0(x, r4, NB * 8);
        ck_assert_mem_eq(a4, r4, sizeof a4);
        ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, x, a8, 8, NB * 32), sizeof a8);
        ggml_ref_q8_0(x, r8, NB * 8);
        ck_assert_mem_eq(a8, r8, sizeof a8);
        ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_K, x, ak, NB, 256), sizeof ak);
        ggml_ref_q8_K(x, rk, NB);
        ck_assert_mem_eq(ak, rk, sizeof ak);
    }
}
END_TEST

/* ------------------------------------------------------------ round trips */

START_TEST(test_round_trip_error_is_within_half_a_step)
{
    enum { N = 4096 };
    static float x[N], y[N];
    static unsigned char q[N * 2];
    fill(x, N, DIST_GAUSS, 5);
    /* Q8_0: |err| <= d/2 (+ rounding of d to f16, at most 2^-11 relative of amax). */
    ck_assert_uint_gt(bp_quantize(BP_TYPE_Q8_0, x, q, 1, N), 0);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, q, y, N), BP_OK);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        for (int j = 0; j < 32; j++)
            ck_assert_float_le(fabsf(y[32 * b + j] - x[32 * b + j]), amax / 254 + amax * 1e-3f);
    }
    /* Q4_0: |err| <= |d| (one step where the far side is clamped at +7). */
    ck_assert_uint_gt(bp_quantize(BP_TYPE_Q4_0, x, q, 2, N / 2), 0);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q4_0, q, y, N), BP_OK);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        for (int j = 0; j < 32; j++)
            ck_assert_float_le(fabsf(y[32 * b + j] - x[32 * b + j]), amax / 8 * 1.002f);
    }
    /* Q8_K: |err| <= d/2, d = amax/127 in f32. */
    ck_assert_uint_gt(bp_quantize(BP_TYPE_Q8_K, x, q, N / 256, 256), 0);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_K, q, y, N), BP_OK);
    for (int b = 0; b < N / 256; b++) {
        float amax = 0;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[256 * b + j]));
        for (int j = 0; j < 256; j++)
            ck_assert_float_le(fabsf(y[256 * b + j] - x[256 * b + j]), amax / 254 * 1.0001f);
    }
    /* F16: relative error <= 2^-11 in the normal range. */
    ck_assert_uint_eq(bp_quantize(BP_TYPE_F16, x, q, 1, N), 2 * N);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_F16, q, y, N), BP_OK);
    for (int i = 0; i < N; i++)
        if (fabsf(x[i]) > 1e-4f) ck_assert_float_le(fabsf(y[i] - x[i]), fabsf(x[i]) * 0x1p-11f);
}
END_TEST

START_TEST(test_round_trip_rmse_of_k_quants_is_small)
{
    enum { N = 256 * 32 };
    static float x[N], y[N];
    static unsigned char q[N];
    fill(x, N, DIST_GAUSS, 9);
    double norm = sq_err(x, (float[N]){0}, N);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q4_K, x, q, 4, N / 4), N / 256 * 144);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q4_K, q, y, N), BP_OK);
    double r4 = sqrt(sq_err(x, y, N) / norm);
    ck_assert_msg(r4 < 0.09, "q4_K relative rmse %g", r4);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q6_K, x, q, 4, N / 4), N / 256 * 210);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q6_K, q, y, N), BP_OK);
    double r6 = sqrt(sq_err(x, y, N) / norm);
    ck_assert_msg(r6 < 0.022, "q6_K relative rmse %g", r6);
}
END_TEST

START_TEST(test_quantize_all_zero_input_gives_zero_blocks)
{
    static const enum bp_type types[] = {BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_K, BP_TYPE_Q6_K,
                                         BP_TYPE_Q8_K};
    static float x[512], y[512];
    unsigned char q[2 * 292];
    static const unsigned char zeros[2 * 292];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        memset(q, 0x77, sizeof q);
        size_t n = bp_quantize(types[t], x, q, 2, 256);
        ck_assert_uint_eq(n, 2 * 256 / bp_type_block_size(types[t]) * bp_type_size(types[t]));
        if (types[t] == BP_TYPE_Q4_0) {
            /* d = 0 / -8 = -0 and every quant the middle level 8, as ggml writes it. */
            const struct bp_block_q4_0 *b = (const void *)q;
            for (int i = 0; i < 16; i++) {
                ck_assert_uint_eq(b[i].d, 0x8000);
                for (int j = 0; j < 16; j++) ck_assert_uint_eq(b[i].qs[j], 0x88);
            }
        } else {
            ck_assert_msg(!memcmp(q, zeros, n), "%s of zeros is not all zero bytes",
                          bp_type_name(types[t]));
        }
        ck_assert_int_eq(bp_dequantize(types[t], q, y, 512), BP_OK);
        for (int i = 0; i < 512; i++) ck_assert(y[i] == 0.0f);
    }
}
END_TEST

/* ------------- accuracy of Q4_K and Q6_K against ggml's algorithm (baseline) */

/* The ggml-algorithm baseline: a straightforward port of ggml's
 * quantize_row_q4_K_ref / quantize_row_q6_K_ref with make_qkx2_quants and
 * make_qx_quants, written for this test. bp_quantize must do at least as well. */
static float base_qkx2(const float *x, const float *w, uint8_t *L, float *the_min)
{
    const int n = 32, nmax = 15, nstep = 20;
    const float rmin = -1.0f, rdelta = 0.1f;
    uint8_t Laux[32];
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        int l = ref_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * L[i] + min - x[i];
        best += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = ref_nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        float D = sum_w * sl2 - sl * sl;
        if (D > 0) {
            float s = (sum_w * sxl - sum_x * sl) / D, m = (sl2 * sum_x - sl * sxl) / D;
            if (m > 0) {
                m = 0;
                s = sxl / sl2;
            }
            float e = 0;
            for (int i = 0; i < n; i++) {
                float diff = s * Laux[i] + m - x[i];
                e += w[i] * diff * diff;
            }
            if (e < best) {
                memcpy(L, Laux, (size_t)n);
                best = e;
                scale = s;
                min = m;
            }
        }
    }
    *the_min = -min;
    return scale;
}

static void baseline_q4_K(const float *x, struct bp_block_q4_K *y)
{
    uint8_t L[256], ls[8], lm[8];
    float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float s2 = 0;
        for (int l = 0; l < 32; l++) s2 += x[32 * j + l] * x[32 * j + l];
        float av = sqrtf(s2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av + fabsf(x[32 * j + l]);
        scales[j] = base_qkx2(x + 32 * j, w, L + 32 * j, &mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float is = max_scale > 0 ? 63.f / max_scale : 0.f, im = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        int a = ref_nearest_int(is * scales[j]), b = ref_nearest_int(im * mins[j]);
        ls[j] = (uint8_t)(a > 63 ? 63 : a);
        lm[j] = (uint8_t)(b > 63 ? 63 : b);
    }
    memset(y->scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            y->scales[j] = ls[j];
            y->scales[j + 4] = lm[j];
        } else {
            y->scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            y->scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            y->scales[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    y->d = bp_f32_to_f16(max_scale / 63.f);
    y->dmin = bp_f32_to_f16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        float d = bp_f16_to_f32(y->d) * ls[j];
        if (!d) continue;
        float dm = bp_f16_to_f32(y->dmin) * lm[j];
        for (int i = 0; i < 32; i++) {
            int l = ref_nearest_int((x[32 * j + i] + dm) / d);
            L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l);
        }
    }
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) y->qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
}

static float base_qx(const float *x, int8_t *L)
{
    const int n = 16, nmax = 32;
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = -nmax / max, slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        int l = ref_nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    float scale = sl2 ? slx / sl2 : 0.0f, best = scale * slx;
    for (int is = -9; is <= 9; is++) {
        if (!is) continue;
        iscale = -(nmax + 0.1f * is) / max;
        slx = sl2 = 0;
        for (int i = 0; i < n; i++) {
            int l = ref_nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            float w = x[i] * x[i];
            slx += w * x[i] * l;
            sl2 += w * l * l;
        }
        if (sl2 > 0 && slx * slx > best * sl2) {
            for (int i = 0; i < n; i++) {
                int l = ref_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + (l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l));
            }
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    return scale;
}

static void baseline_q6_K(const float *x, struct bp_block_q6_K *y)
{
    int8_t L[256];
    float scales[16], max_scale = 0, max_abs = 0;
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = base_qx(x + 16 * ib, L + 16 * ib);
        if (fabsf(scales[ib]) > max_abs) {
            max_abs = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    memset(y, 0, sizeof *y);
    if (max_abs < 1e-15f) return;
    float iscale = -128.f / max_scale;
    y->d = bp_f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ib++) {
        int v = ref_nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; j++) {
        float d = bp_f16_to_f32(y->d) * y->scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; i++) {
            int l = ref_nearest_int(x[16 * j + i] / d);
            L[16 * j + i] = (int8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
        }
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *Lh = L + 128 * h;
            y->ql[64 * h + l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
            y->ql[64 * h + l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
            y->qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                          ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
}

enum { ACC_BLOCKS = 96 };

/* Returns ours/baseline RMSE; asserts no block is worse than the baseline. */
static double compare_with_baseline(enum bp_type type, enum dist d, double *rmse_ours,
                                    double *rmse_base)
{
    static float x[ACC_BLOCKS * 256], y_ours[ACC_BLOCKS * 256], y_base[ACC_BLOCKS * 256];
    static unsigned char q[ACC_BLOCKS * 210], qb[ACC_BLOCKS * 210];
    fill(x, ACC_BLOCKS * 256, d, 1000 + (uint64_t)d);
    size_t bsz = bp_type_size(type);
    ck_assert_uint_eq(bp_quantize(type, x, q, ACC_BLOCKS, 256), ACC_BLOCKS * bsz);
    for (int b = 0; b < ACC_BLOCKS; b++) {
        if (type == BP_TYPE_Q4_K) baseline_q4_K(x + 256 * b, (struct bp_block_q4_K *)(qb + bsz * (size_t)b));
        else baseline_q6_K(x + 256 * b, (struct bp_block_q6_K *)(qb + bsz * (size_t)b));
    }
    ck_assert_int_eq(bp_dequantize(type, q, y_ours, ACC_BLOCKS * 256), BP_OK);
    ck_assert_int_eq(bp_dequantize(type, qb, y_base, ACC_BLOCKS * 256), BP_OK);
    double eo = 0, eb = 0;
    for (int b = 0; b < ACC_BLOCKS; b++) {
        double o = sq_err(x + 256 * b, y_ours + 256 * b, 256);
        double g = sq_err(x + 256 * b, y_base + 256 * b, 256);
        ck_assert_msg(o <= g, "%s %s block %d: squared error %.6g above the ggml baseline's %.6g",
                      bp_type_name(type), dist_name[d], b, o, g);
        eo += o;
        eb += g;
    }
    *rmse_ours = sqrt(eo / (ACC_BLOCKS * 256));
    *rmse_base = sqrt(eb / (ACC_BLOCKS * 256));
    fprintf(stderr, "%-5s %-18s rmse %.6f  ggml-algorithm baseline %.6f  ratio %.4f\n",
            bp_type_name(type), dist_name[d], *rmse_ours, *rmse_base, *rmse_ours / *rmse_base);
    return *rmse_ours / *rmse_base;
}

START_TEST(test_q4_K_rmse_is_at_most_the_ggml_algorithm_baseline)
{
    for (int d = 0; d < 3; d++) {
        double o, b;
        double ratio = compare_with_baseline(BP_TYPE_Q4_K, (enum dist)d, &o, &b);
        ck_assert_msg(ratio <= 1.0, "q4_K on %s: rmse %g vs baseline %g", dist_name[d], o, b);
    }
}
END_TEST

START_TEST(test_q6_K_rmse_is_at_most_the_ggml_algorithm_baseline)
{
    for (int d = 0; d < 3; d++) {
        double o, b;
        double ratio = compare_with_baseline(BP_TYPE_Q6_K, (enum dist)d, &o, &b);
        ck_assert_msg(ratio <= 1.0, "q6_K on %s: rmse %g vs baseline %g", dist_name[d], o, b);
    }
}
END_TEST

/* bp_quantize_ggml keeps ggml's encoding: Q4_K and Q6_K come out as the
 * port of ggml's algorithm above writes them, block for block, and every
 * other type as bp_quantize writes it (those are ggml's already). */
START_TEST(test_quantize_ggml_writes_ggml_algorithms_bytes)
{
    static float x[ACC_BLOCKS * 256];
    static unsigned char q[ACC_BLOCKS * 512], qb[ACC_BLOCKS * 512]; /* f16 is the largest */
    for (int d = 0; d < 3; d++) {
        fill(x, ACC_BLOCKS * 256, (enum dist)d, 2000 + (uint64_t)d);
        const enum bp_type k_types[] = {BP_TYPE_Q4_K, BP_TYPE_Q6_K};
        for (size_t t = 0; t < 2; t++) {
            const size_t bsz = bp_type_size(k_types[t]);
            ck_assert_uint_eq(bp_quantize_ggml(k_types[t], x, q, ACC_BLOCKS, 256), ACC_BLOCKS * bsz);
            for (int b = 0; b < ACC_BLOCKS; b++) {
                unsigned char *blk = qb + bsz * (size_t)b;
                if (k_types[t] == BP_TYPE_Q4_K) baseline_q4_K(x + 256 * b, (struct bp_block_q4_K *)blk);
                else baseline_q6_K(x + 256 * b, (struct bp_block_q6_K *)blk);
                ck_assert_msg(!memcmp(q + bsz * (size_t)b, qb + bsz * (size_t)b, bsz), "%s %s block %d differs "
                              "from ggml's algorithm", bp_type_name(k_types[t]), dist_name[d], b);
            }
        }
        const enum bp_type same[] = {BP_TYPE_F16, BP_TYPE_BF16, BP_TYPE_Q4_0, BP_TYPE_Q8_0, BP_TYPE_Q4_1,
                                     BP_TYPE_Q5_0, BP_TYPE_Q5_1, BP_TYPE_Q2_K, BP_TYPE_Q3_K, BP_TYPE_Q5_K,
                                     BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS, BP_TYPE_Q8_K};
        for (size_t t = 0; t < sizeof same / sizeof same[0]; t++) {
            const size_t n = bp_quantize(same[t], x, q, ACC_BLOCKS, 256);
            ck_assert_uint_gt(n, 0);
            ck_assert_uint_eq(bp_quantize_ggml(same[t], x, qb, ACC_BLOCKS, 256), n);
            ck_assert_msg(!memcmp(q, qb, n), "%s: bp_quantize_ggml differs from bp_quantize", bp_type_name(same[t]));
        }
    }
    /* its errors name it */
    ck_assert_uint_eq(bp_quantize_ggml(BP_TYPE_Q4_K, x, q, 1, 300), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "bp_quantize_ggml"));
}
END_TEST

/* ------------------------------- ABI 1.2 types: ggml's own vectors */

static const enum bp_type new_types[] = {BP_TYPE_Q4_1, BP_TYPE_Q5_0,   BP_TYPE_Q5_1,  BP_TYPE_Q2_K,
                                         BP_TYPE_Q3_K, BP_TYPE_Q5_K,   BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS};
#define N_NEW_TYPES (sizeof new_types / sizeof new_types[0])

enum { MAX_CASES = 16, MAX_CASE_FLOATS = 1024 };

/* One case of tests/data/quant/: its inputs and, per type, ggml's bytes and floats. */
struct vec_case {
    char name[32];
    int rows, n_per_row;
    float x[MAX_CASE_FLOATS];
    unsigned char q[MAX_CASE_FLOATS]; /* no type takes more than a byte per element */
    size_t nq;
    float y[MAX_CASE_FLOATS];
    size_t nx, ny;
};

static struct vec_case vec_cases[MAX_CASES];
static int n_vec_cases;

/* Reads tests/data/quant/<file>: "case NAME ROWS N" starts a case (inputs.txt
 * defines the cases, a type's file repeats them in the same order), "x" and
 * "y" lines hold f32 bit patterns, "q" lines hex bytes. */
static void read_vectors(const char *file)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/tests/data/quant/%s", BP_TEST_SOURCE_DIR, file);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s (scripts/quant-reference.sh writes it)", path);
    const bool inputs = !strcmp(file, "inputs.txt");
    struct vec_case *c = NULL;
    int at = 0;
    if (inputs) n_vec_cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "case ", 5)) {
            char name[32];
            int rows, n;
            ck_assert_int_eq(sscanf(line + 5, "%31s %d %d", name, &rows, &n), 3);
            if (inputs) {
                ck_assert_int_lt(n_vec_cases, MAX_CASES);
                c = &vec_cases[n_vec_cases++];
                snprintf(c->name, sizeof c->name, "%s", name);
                c->rows = rows;
                c->n_per_row = n;
                c->nx = 0;
                ck_assert_int_le(rows * n, MAX_CASE_FLOATS);
            } else {
                ck_assert_int_lt(at, n_vec_cases);
                c = &vec_cases[at++];
                ck_assert_str_eq(c->name, name);
                c->nq = c->ny = 0;
            }
            continue;
        }
        ck_assert_msg(c != NULL, "%s: data before the first case", path);
        char *p = line + 2;
        if (line[0] == 'q') {
            unsigned v;
            int used;
            while (sscanf(p, "%2x%n", &v, &used) == 1) {
                ck_assert_uint_lt(c->nq, sizeof c->q);
                c->q[c->nq++] = (unsigned char)v;
                p += used;
            }
        } else {
            ck_assert_msg(line[0] == 'x' || line[0] == 'y', "%s: unknown line '%s'", path, line);
            float *dst = line[0] == 'x' ? c->x : c->y;
            size_t *n = line[0] == 'x' ? &c->nx : &c->ny;
            char *end;
            for (unsigned long u = strtoul(p, &end, 16); end != p; u = strtoul(p, &end, 16)) {
                ck_assert_uint_lt(*n, MAX_CASE_FLOATS);
                const uint32_t b = (uint32_t)u;
                memcpy(&dst[(*n)++], &b, 4);
                p = end;
            }
        }
    }
    fclose(f);
    if (!inputs) ck_assert_int_eq(at, n_vec_cases);
}

static void read_type_vectors(enum bp_type t)
{
    char file[64];
    read_vectors("inputs.txt");
    snprintf(file, sizeof file, "ggml-%s.txt", bp_type_name(t));
    read_vectors(file);
}

START_TEST(test_quantize_new_types_writes_ggml_bytes)
{
    const enum bp_type t = new_types[_i];
    read_type_vectors(t);
    ck_assert_int_ge(n_vec_cases, 8);
    for (int c = 0; c < n_vec_cases; c++) {
        const struct vec_case *v = &vec_cases[c];
        const int64_t n = (int64_t)v->rows * v->n_per_row;
        ck_assert_uint_eq(v->nx, (size_t)n);
        ck_assert_uint_eq(v->nq, bp_row_size(t, n));
        unsigned char got[MAX_CASE_FLOATS];
        memset(got, 0xA5, sizeof got);
        ck_assert_uint_eq(bp_quantize(t, v->x, got, v->rows, v->n_per_row), v->nq);
        for (size_t i = 0; i < v->nq; i++)
            ck_assert_msg(got[i] == v->q[i], "%s case '%s': byte %zu (block %zu, offset %zu) is "
                          "0x%02x, ggml wrote 0x%02x", bp_type_name(t), v->name, i,
                          i / bp_type_size(t), i % bp_type_size(t), got[i], v->q[i]);
    }
}
END_TEST

START_TEST(test_dequantize_new_types_gives_ggml_floats)
{
    const enum bp_type t = new_types[_i];
    read_type_vectors(t);
    for (int c = 0; c < n_vec_cases; c++) {
        const struct vec_case *v = &vec_cases[c];
        const int64_t n = (int64_t)v->rows * v->n_per_row;
        ck_assert_uint_eq(v->ny, (size_t)n);
        float got[MAX_CASE_FLOATS + 1];
        got[n] = 12345.0f;
        ck_assert_int_eq(bp_dequantize(t, v->q, got, n), BP_OK);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(fbits(got[i]) == fbits(v->y[i]), "%s case '%s' element %lld: %.9g "
                          "(0x%08x), ggml %.9g (0x%08x)", bp_type_name(t), v->name, (long long)i,
                          (double)got[i], fbits(got[i]), (double)v->y[i], fbits(v->y[i]));
        ck_assert(got[n] == 12345.0f);
    }
}
END_TEST

/* Element e of a block of type t, decoded from bp_quant.h's description of
 * the layout (bytes, not the structs), in the operation order it gives. */
static float f16_at(const unsigned char *b, int off)
{
    return bp_f16_to_f32((uint16_t)(b[off] | b[off + 1] << 8));
}

static const int iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

static float decode_element(enum bp_type t, const unsigned char *b, int e)
{
    switch (t) {
    case BP_TYPE_Q4_1: {
        const int q = e < 16 ? b[4 + e] & 15 : b[4 + e - 16] >> 4;
        return f16_at(b, 0) * (float)q + f16_at(b, 2);
    }
    case BP_TYPE_Q5_0: case BP_TYPE_Q5_1: {
        const int qh_at = 2 + 2 * (t == BP_TYPE_Q5_1), qs_at = qh_at + 4;
        const int lo = e < 16 ? b[qs_at + e] & 15 : b[qs_at + e - 16] >> 4;
        const int q = lo | ((b[qh_at + e / 8] >> (e % 8)) & 1) << 4;
        return t == BP_TYPE_Q5_0 ? f16_at(b, 0) * (float)(q - 16) : f16_at(b, 0) * (float)q + f16_at(b, 2);
    }
    case BP_TYPE_Q2_K: case BP_TYPE_Q3_K: {
        const int h = e / 128, p = (e % 128) / 32, l = e % 32, sub = e / 16;
        const int qs_at = t == BP_TYPE_Q2_K ? 16 : 32;
        const int q = (b[qs_at + 32 * h + l] >> (2 * p)) & 3;
        if (t == BP_TYPE_Q2_K) {
            const int sc = b[sub];
            return f16_at(b, 80) * (float)(sc & 15) * (float)q - f16_at(b, 82) * (float)(sc >> 4);
        }
        const int hbit = (b[l] >> (4 * h + p)) & 1;
        const int s = ((b[96 + sub % 8] >> (4 * (sub / 8))) & 15) |
                      ((b[96 + 8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4;
        return f16_at(b, 108) * (float)(s - 32) * (float)(q - 4 * !hbit);
    }
    case BP_TYPE_Q5_K: {
        const int c = e / 64, hi = (e % 64) / 32, l = e % 32, j = e / 32;
        const int lo = hi ? b[48 + 32 * c + l] >> 4 : b[48 + 32 * c + l] & 15;
        const int q = lo | ((b[16 + l] >> (2 * c + hi)) & 1) << 4;
        const unsigned char *s = b + 4;
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        return f16_at(b, 0) * (float)sc * (float)q - f16_at(b, 2) * (float)m;
    }
    case BP_TYPE_IQ4_NL:
        return f16_at(b, 0) * (float)iq4nl_levels[e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4];
    case BP_TYPE_IQ4_XS: {
        const int sb = e / 32, j = e % 32;
        const int scales_h = b[2] | b[3] << 8;
        const int ls = ((b[4 + sb / 2] >> (4 * (sb % 2))) & 15) | ((scales_h >> (2 * sb)) & 3) << 4;
        const unsigned char *qs = b + 8 + 16 * sb;
        const int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
        return f16_at(b, 0) * (float)(ls - 32) * (float)iq4nl_levels[q];
    }
    default:
        return NAN;
    }
}

/* Random blocks with every f16 field set to a finite value, some negative,
 * some subnormal, so the decode of every bit position shows. */
START_TEST(test_dequantize_new_types_match_the_documented_layouts)
{
    const enum bp_type t = new_types[_i];
    const size_t bs = bp_type_size(t);
    const int64_t be = bp_type_block_size(t);
    enum { NB = 6 };
    unsigned char blocks[NB * 176];
    static const uint16_t halves[] = {0x3555, 0xB800, 0x0203, 0x8011, 0x2E66, 0x3C00};
    rng_state = 77 + (uint64_t)t;
    for (size_t i = 0; i < NB * bs; i++) blocks[i] = (unsigned char)rng_next();
    int f16_offsets[2] = {-1, -1};
    switch (t) {
    case BP_TYPE_Q4_1: case BP_TYPE_Q5_1: case BP_TYPE_Q5_K: f16_offsets[0] = 0; f16_offsets[1] = 2; break;
    case BP_TYPE_Q2_K: f16_offsets[0] = 80; f16_offsets[1] = 82; break;
    case BP_TYPE_Q3_K: f16_offsets[0] = 108; break;
    default: f16_offsets[0] = 0; break;
    }
    for (int k = 0; k < NB; k++)
        for (int f = 0; f < 2; f++)
            if (f16_offsets[f] >= 0) {
                const uint16_t h = halves[(k + 3 * f) % 6];
                blocks[k * bs + (size_t)f16_offsets[f]] = (unsigned char)h;
                blocks[k * bs + (size_t)f16_offsets[f] + 1] = (unsigned char)(h >> 8);
            }
    float got[NB * 256];
    ck_assert_int_eq(bp_dequantize(t, blocks, got, NB * be), BP_OK);
    for (int k = 0; k < NB; k++)
        for (int64_t e = 0; e < be; e++) {
            const float want = decode_element(t, blocks + k * bs, (int)e);
            ck_assert_msg(fbits(got[k * be + e]) == fbits(want), "%s block %d element %lld: %.9g, "
                          "the layout gives %.9g", bp_type_name(t), k, (long long)e,
                          (double)got[k * be + e], (double)want);
        }
}
END_TEST

/* Relative RMSE on Gaussian data, the 1.2 types: each limit is about 1.2 to
 * 1.5 times what ggml's quantizer gives on this data (q4_1 0.079, q5_0 0.044,
 * q5_1 0.038, q2_K 0.30, q3_K 0.15, q5_K 0.036, iq4_nl and iq4_xs 0.078); a
 * wrong level or scale costs far more. */
START_TEST(test_round_trip_rmse_of_new_types_is_small)
{
    static const struct { enum bp_type t; double limit; } bounds[] = {
        {BP_TYPE_Q4_1, 0.12}, {BP_TYPE_Q5_0, 0.06},   {BP_TYPE_Q5_1, 0.06},   {BP_TYPE_Q2_K, 0.45},
        {BP_TYPE_Q3_K, 0.22}, {BP_TYPE_Q5_K, 0.045},  {BP_TYPE_IQ4_NL, 0.11}, {BP_TYPE_IQ4_XS, 0.11},
    };
    enum { N = 256 * 16 };
    static float x[N], y[N];
    static unsigned char q[N];
    fill(x, N, DIST_GAUSS, 21);
    double norm = 0;
    for (int i = 0; i < N; i++) norm += (double)x[i] * x[i];
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        ck_assert_uint_eq(bp_quantize(bounds[b].t, x, q, 4, N / 4), bp_row_size(bounds[b].t, N));
        ck_assert_int_eq(bp_dequantize(bounds[b].t, q, y, N), BP_OK);
        const double r = sqrt(sq_err(x, y, N) / norm);
        fprintf(stderr, "%-6s gaussian relative rmse %.4f\n", bp_type_name(bounds[b].t), r);
        ck_assert_msg(r < bounds[b].limit, "%s relative rmse %g", bp_type_name(bounds[b].t), r);
    }
}
END_TEST

/* ------------------------------------------------------------------ errors */

START_TEST(test_quantize_refuses_a_row_that_is_not_whole_blocks)
{
    float x[300] = {0};
    unsigned char q[2048];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q4_K, x, q, 1, 300), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "multiple of 256"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "300"));
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, x, q, 2, 33), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "multiple of 32"));
    ck_assert_uint_eq(bp_quantize_size(BP_TYPE_Q6_K, 1, 100), 0);
    ck_assert_uint_eq(bp_quantize_size(BP_TYPE_Q6_K, 3, 512), 3 * 2 * 210);
    float y[64];
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q4_0, q, y, 48), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "multiple of 32"));
}
END_TEST

START_TEST(test_null_pointers_and_bad_types_are_errors_not_crashes)
{
    float x[32] = {0}, y[32];
    unsigned char q[64];
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, NULL, q, 1, 32), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "NULL"));
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, x, NULL, 1, 32), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "NULL"));
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, NULL, y, 32), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, q, NULL, 32), BP_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_I32, x, q, 1, 4), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "i32"));
    ck_assert_uint_eq(bp_quantize((enum bp_type)99, x, q, 1, 4), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "99"));
    ck_assert_int_eq(bp_dequantize((enum bp_type)-1, q, y, 4), BP_ERR_UNSUPPORTED);
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, x, q, -1, 32), 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "-1 rows"));
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, q, y, -32), BP_ERR_INVALID_ARGUMENT);
    /* Nothing to convert is not an error, and touches no pointer. */
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, NULL, NULL, 0, 32), 0);
    ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, NULL, NULL, 0), BP_OK);
}
END_TEST

/* ------------------------------------------------------- host services path */

START_TEST(test_plugins_get_bp_quantize_through_host_services)
{
    struct bp_registry *reg = bp_registry_by_name("quantprobe");
    ck_assert_msg(reg != NULL, "the quantprobe plugin did not load: %s", bp_last_error());
    void *q = reg->iface->get_proc_address(reg, "quantprobe_host_quantize");
    void *dq = reg->iface->get_proc_address(reg, "quantprobe_host_dequantize");
    ck_assert_ptr_eq(q, (void *)bp_quantize);
    ck_assert_ptr_eq(dq, (void *)bp_dequantize);
    /* And the function behaves through the pointer a plugin holds. */
    bp_quantize_fn fn = (bp_quantize_fn)q;
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16);
    struct bp_block_q8_0 b;
    ck_assert_uint_eq(fn(BP_TYPE_Q8_0, x, &b, 1, 32), 34);
    ck_assert_int_eq(b.qs[0], -127);
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("dequantize");
    tcase_add_test(tc, test_dequantize_q4_0_hand_built_blocks_including_subnormal_scale);
    tcase_add_test(tc, test_dequantize_q8_0_hand_built_block_with_largest_subnormal_scale);
    tcase_add_test(tc, test_dequantize_q4_K_unpacks_6_bit_scales_of_all_sub_blocks);
    tcase_add_test(tc, test_dequantize_q6_K_decodes_interleaved_bits_and_negative_scales);
    tcase_add_test(tc, test_dequantize_q8_K_hand_built_block);
    tcase_add_test(tc, test_dequantize_all_zero_blocks_gives_zeros);
    tcase_add_test(tc, test_plain_float_types_pass_through);
    suite_add_tcase(s, tc);
    tc = tcase_create("quantize");
    tcase_add_test(tc, test_quantize_q4_0_bytes_match_hand_computation);
    tcase_add_test(tc, test_quantize_q8_0_bytes_match_hand_computation);
    tcase_add_test(tc, test_quantize_q8_K_bytes_match_hand_computation);
    tcase_add_test(tc, test_quantize_q4_0_q8_0_q8_K_equal_ggml_reference_on_random_data);
    tcase_add_test(tc, test_round_trip_error_is_within_half_a_step);
    tcase_add_test(tc, test_round_trip_rmse_of_k_quants_is_small);
    tcase_add_test(tc, test_quantize_all_zero_input_gives_zero_blocks);
    suite_add_tcase(s, tc);
    tc = tcase_create("accuracy");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_q4_K_rmse_is_at_most_the_ggml_algorithm_baseline);
    tcase_add_test(tc, test_q6_K_rmse_is_at_most_the_ggml_algorithm_baseline);
    tcase_add_test(tc, test_quantize_ggml_writes_ggml_algorithms_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("ggml vectors");
    tcase_add_loop_test(tc, test_quantize_new_types_writes_ggml_bytes, 0, (int)N_NEW_TYPES);
    tcase_add_loop_test(tc, test_dequantize_new_types_gives_ggml_floats, 0, (int)N_NEW_TYPES);
    tcase_add_loop_test(tc, test_dequantize_new_types_match_the_documented_layouts, 0, (int)N_NEW_TYPES);
    tcase_add_test(tc, test_round_trip_rmse_of_new_types_is_small);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_quantize_refuses_a_row_that_is_not_whole_blocks);
    tcase_add_test(tc, test_null_pointers_and_bad_types_are_errors_not_crashes);
    tcase_add_test(tc, test_plugins_get_bp_quantize_through_host_services);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = run_suite(quant_suite());
    bp_unload();
    return rc;
}
