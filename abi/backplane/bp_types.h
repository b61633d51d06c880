/*
 * bp_types.h — element types and their storage traits.
 *
 * Block formats are byte-compatible with ggml's so that weights quantized by
 * the llama.cpp tools load unchanged. A block type stores `block_size`
 * elements in `type_size` bytes; dimension 0 of a tensor of a block type must
 * be a multiple of its block size.
 *
 * ABI: enum values are frozen once released; new types are appended before
 * BP_TYPE_COUNT. The static_asserts below fail the build of anyone who
 * reorders them.
 */
#ifndef BP_TYPES_H
#define BP_TYPES_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum bp_type {
    BP_TYPE_F32  = 0,
    BP_TYPE_F16  = 1,  /* IEEE 754 binary16 */
    BP_TYPE_BF16 = 2,  /* bfloat16: the top 16 bits of an f32 */
    BP_TYPE_I32  = 3,
    BP_TYPE_Q4_0 = 4,  /* 32 elements: f16 d, 16 bytes of 4-bit quants (x = d*(q-8)) */
    BP_TYPE_Q8_0 = 5,  /* 32 elements: f16 d, 32 int8 quants (x = d*q) */
    BP_TYPE_Q4_K = 6,  /* 256 elements: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of 4-bit quants */
    BP_TYPE_Q6_K = 7,  /* 256 elements: 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, f16 d */
    BP_TYPE_Q8_K = 8,  /* 256 elements: f32 d, 256 int8 quants, 16 int16 block sums (activations only) */
    /* ABI 1.2: the other weight types llama.cpp's presets and their
     * fallbacks for rows not a multiple of 256 write (layouts in bp_quant.h). */
    BP_TYPE_Q4_1 = 9,    /* 32 elements: f16 d, f16 m, 16 bytes of 4-bit quants (x = d*q + m) */
    BP_TYPE_Q5_0 = 10,   /* 32 elements: f16 d, 32 high bits, 16 bytes of low nibbles (x = d*(q-16)) */
    BP_TYPE_Q5_1 = 11,   /* 32 elements: f16 d, f16 m, 32 high bits, 16 bytes of low nibbles (x = d*q + m) */
    BP_TYPE_Q2_K = 12,   /* 256 elements: 16 4-bit scale/min pairs, 2-bit quants, f16 d, f16 dmin */
    BP_TYPE_Q3_K = 13,   /* 256 elements: high-bit mask, 2-bit quants, 16 6-bit scales, f16 d */
    BP_TYPE_Q5_K = 14,   /* 256 elements: f16 d, f16 dmin, Q4_K's 12 scale bytes, high bits, nibbles */
    BP_TYPE_IQ4_NL = 15, /* 32 elements: f16 d, 16 bytes of 4-bit indices into a non-linear table */
    BP_TYPE_IQ4_XS = 16, /* 256 elements: f16 d, 8 6-bit scales, IQ4_NL's indices */
    BP_TYPE_COUNT
};

static_assert(BP_TYPE_F32 == 0 && BP_TYPE_F16 == 1 && BP_TYPE_BF16 == 2 && BP_TYPE_I32 == 3,
              "bp_type values are frozen");
static_assert(BP_TYPE_Q4_0 == 4 && BP_TYPE_Q8_0 == 5 && BP_TYPE_Q4_K == 6 &&
              BP_TYPE_Q6_K == 7 && BP_TYPE_Q8_K == 8, "bp_type values are frozen");
static_assert(BP_TYPE_Q4_1 == 9 && BP_TYPE_Q5_0 == 10 && BP_TYPE_Q5_1 == 11 &&
              BP_TYPE_Q2_K == 12 && BP_TYPE_Q3_K == 13 && BP_TYPE_Q5_K == 14 &&
              BP_TYPE_IQ4_NL == 15 && BP_TYPE_IQ4_XS == 16, "bp_type values are frozen");

#define BP_QK4_0 32
#define BP_QK8_0 32
#define BP_QK4_1 32
#define BP_QK5_0 32
#define BP_QK5_1 32
#define BP_QK4_NL 32
#define BP_QK_K  256

/* Elements per block (1 for plain types); 0 for an unknown type. */
static inline int64_t bp_type_block_size(enum bp_type t)
{
    switch (t) {
    case BP_TYPE_F32: case BP_TYPE_F16: case BP_TYPE_BF16: case BP_TYPE_I32: return 1;
    case BP_TYPE_Q4_0: return BP_QK4_0;
    case BP_TYPE_Q8_0: return BP_QK8_0;
    case BP_TYPE_Q4_1: return BP_QK4_1;
    case BP_TYPE_Q5_0: return BP_QK5_0;
    case BP_TYPE_Q5_1: return BP_QK5_1;
    case BP_TYPE_IQ4_NL: return BP_QK4_NL;
    case BP_TYPE_Q4_K: case BP_TYPE_Q6_K: case BP_TYPE_Q8_K: return BP_QK_K;
    case BP_TYPE_Q2_K: case BP_TYPE_Q3_K: case BP_TYPE_Q5_K: case BP_TYPE_IQ4_XS: return BP_QK_K;
    default: return 0;
    }
}

/* Bytes per block (per element for plain types); 0 for an unknown type. */
static inline size_t bp_type_size(enum bp_type t)
{
    switch (t) {
    case BP_TYPE_F32: return 4;
    case BP_TYPE_F16: return 2;
    case BP_TYPE_BF16: return 2;
    case BP_TYPE_I32: return 4;
    case BP_TYPE_Q4_0: return 2 + BP_QK4_0 / 2;                   /* 18 */
    case BP_TYPE_Q8_0: return 2 + BP_QK8_0;                       /* 34 */
    case BP_TYPE_Q4_K: return 2 + 2 + 12 + BP_QK_K / 2;           /* 144 */
    case BP_TYPE_Q6_K: return BP_QK_K / 2 + BP_QK_K / 4 + BP_QK_K / 16 + 2; /* 210 */
    case BP_TYPE_Q8_K: return 4 + BP_QK_K + BP_QK_K / 16 * 2;     /* 292 */
    case BP_TYPE_Q4_1: return 2 + 2 + BP_QK4_1 / 2;               /* 20 */
    case BP_TYPE_Q5_0: return 2 + 4 + BP_QK5_0 / 2;               /* 22 */
    case BP_TYPE_Q5_1: return 2 + 2 + 4 + BP_QK5_1 / 2;           /* 24 */
    case BP_TYPE_Q2_K: return BP_QK_K / 16 + BP_QK_K / 4 + 2 + 2; /* 84 */
    case BP_TYPE_Q3_K: return BP_QK_K / 8 + BP_QK_K / 4 + 12 + 2; /* 110 */
    case BP_TYPE_Q5_K: return 2 + 2 + 12 + BP_QK_K / 8 + BP_QK_K / 2; /* 176 */
    case BP_TYPE_IQ4_NL: return 2 + BP_QK4_NL / 2;                /* 18 */
    case BP_TYPE_IQ4_XS: return 2 + 2 + BP_QK_K / 64 + BP_QK_K / 2; /* 136 */
    default: return 0;
    }
}

/* Lower-case name ("f32", "q4_K" as ggml spells it); "unknown" otherwise. */
static inline const char *bp_type_name(enum bp_type t)
{
    switch (t) {
    case BP_TYPE_F32: return "f32";
    case BP_TYPE_F16: return "f16";
    case BP_TYPE_BF16: return "bf16";
    case BP_TYPE_I32: return "i32";
    case BP_TYPE_Q4_0: return "q4_0";
    case BP_TYPE_Q8_0: return "q8_0";
    case BP_TYPE_Q4_K: return "q4_K";
    case BP_TYPE_Q6_K: return "q6_K";
    case BP_TYPE_Q8_K: return "q8_K";
    case BP_TYPE_Q4_1: return "q4_1";
    case BP_TYPE_Q5_0: return "q5_0";
    case BP_TYPE_Q5_1: return "q5_1";
    case BP_TYPE_Q2_K: return "q2_K";
    case BP_TYPE_Q3_K: return "q3_K";
    case BP_TYPE_Q5_K: return "q5_K";
    case BP_TYPE_IQ4_NL: return "iq4_nl";
    case BP_TYPE_IQ4_XS: return "iq4_xs";
    default: return "unknown";
    }
}

static inline int bp_type_is_quantized(enum bp_type t)
{
    return bp_type_block_size(t) > 1;
}

/* Bytes taken by one row of n elements; 0 when n is not a whole number of blocks. */
static inline size_t bp_row_size(enum bp_type t, int64_t n)
{
    int64_t bs = bp_type_block_size(t);
    if (bs <= 0 || n < 0 || n % bs != 0) return 0;
    return (size_t)(n / bs) * bp_type_size(t);
}

/* ---- f16 / bf16 scalar conversions (exact, round-to-nearest-even) ---- */

static inline uint32_t bp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float bp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bp_bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return bp_bits_f32(sign | 0x7f800000u | (man << 13));
    return bp_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t bp_f32_to_f16(float f)
{
    uint32_t x = bp_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan; keep nan quiet */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign; /* < 2^-25 rounds to 0 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = 1u << (shift - 1);
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static inline float bp_bf16_to_f32(uint16_t h) { return bp_bits_f32((uint32_t)h << 16); }

static inline uint16_t bp_f32_to_bf16(float f)
{
    uint32_t x = bp_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#ifdef __cplusplus
}
#endif
#endif /* BP_TYPES_H */
