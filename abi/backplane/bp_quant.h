/*
 * bp_quant.h — byte layouts of the quantized block types, identical to
 * ggml's so that GGUF weights made by the llama.cpp tools are used as they
 * are. Every device reads and writes these layouts through the API; a device
 * may keep its own interleaved layout internally (converted in set/get).
 *
 * ABI: frozen. The static_asserts pin every size and offset.
 */
#ifndef BP_QUANT_H
#define BP_QUANT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "bp_status.h"
#include "bp_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Q4_0: x[i] = d * (q[i] - 8); element j < 16 in the low nibble of qs[j],
 * element j + 16 in the high nibble of qs[j]. */
struct bp_block_q4_0 {
    uint16_t d;                  /* f16 */
    uint8_t  qs[BP_QK4_0 / 2];
};

/* Q8_0: x[i] = d * qs[i]. */
struct bp_block_q8_0 {
    uint16_t d;                  /* f16 */
    int8_t   qs[BP_QK8_0];
};

/* Q4_K: 8 sub-blocks of 32; x = d * sc[j] * q - dmin * m[j], with 6-bit sc
 * and m packed in scales[12] (j < 4: scales[j] & 63 and scales[j+4] & 63;
 * j >= 4: (scales[j+4] & 0xF) | ((scales[j-4] >> 6) << 4) and
 * (scales[j+4] >> 4) | ((scales[j] >> 6) << 4)). qs holds 4 groups of 32
 * bytes: sub-block 2g in the low nibbles of group g, 2g+1 in the high. */
struct bp_block_q4_K {
    uint16_t d;                  /* f16 super-block scale of the scales */
    uint16_t dmin;               /* f16 super-block scale of the mins */
    uint8_t  scales[12];
    uint8_t  qs[BP_QK_K / 2];
};

/* Q6_K: 16 sub-blocks of 16; x = d * scales[j] * (q - 32) where the 6-bit
 * q is 4 low bits from ql and 2 high bits from qh (ggml's interleaving). */
struct bp_block_q6_K {
    uint8_t  ql[BP_QK_K / 2];
    uint8_t  qh[BP_QK_K / 4];
    int8_t   scales[BP_QK_K / 16];
    uint16_t d;                  /* f16 */
};

/* Q8_K: activations only. bsums[j] = sum of qs[16j .. 16j+15], so that the
 * min term of Q4_K dots needs no second pass over the quants. */
struct bp_block_q8_K {
    float    d;
    int8_t   qs[BP_QK_K];
    int16_t  bsums[BP_QK_K / 16];
};

/* ---- ABI 1.2 ---- */

/* Q4_1: x[i] = d * q[i] + m, q in 0..15, nibbles as in Q4_0. */
struct bp_block_q4_1 {
    uint16_t d;                  /* f16 */
    uint16_t m;                  /* f16, the block's minimum */
    uint8_t  qs[BP_QK4_1 / 2];
};

/* Q5_0: x[i] = d * (q[i] - 16), q = nibble | (bit of qh) << 4. Element
 * j < 16 is the low nibble of qs[j] with bit j of qh, element j + 16 the high
 * nibble of qs[j] with bit j + 16; qh is a little-endian u32 kept as bytes
 * because the 22-byte block is only 2-byte aligned. */
struct bp_block_q5_0 {
    uint16_t d;                  /* f16 */
    uint8_t  qh[4];
    uint8_t  qs[BP_QK5_0 / 2];
};

/* Q5_1: x[i] = d * q[i] + m, q in 0..31 packed as in Q5_0. */
struct bp_block_q5_1 {
    uint16_t d;                  /* f16 */
    uint16_t m;                  /* f16 */
    uint8_t  qh[4];
    uint8_t  qs[BP_QK5_1 / 2];
};

/* Q2_K: 16 sub-blocks of 16; x = d * (sc & 15) * q - dmin * (sc >> 4) with
 * sc = scales[sub-block] and q in 0..3. Each half of 128 elements uses 32
 * bytes of qs: element 128h + 32p + l is bits 2p..2p+1 of qs[32h + l], in
 * sub-block 8h + 2p + l / 16. */
struct bp_block_q2_K {
    uint8_t  scales[BP_QK_K / 16];
    uint8_t  qs[BP_QK_K / 4];
    uint16_t d;                  /* f16 super-block scale of the scales */
    uint16_t dmin;               /* f16 super-block scale of the mins */
};

/* Q3_K: 16 sub-blocks of 16; x = d * (s - 32) * (q - 4 * !hbit), q the two
 * bits placed as in Q2_K and hbit bit (4h + p) of hmask[l] for element
 * 128h + 32p + l. The 6-bit scale s of sub-block i has its low 4 bits in
 * nibble i / 8 of scales[i % 8] and its top 2 bits at bits 2 * (i / 4) of
 * scales[8 + i % 4]. */
struct bp_block_q3_K {
    uint8_t  hmask[BP_QK_K / 8];
    uint8_t  qs[BP_QK_K / 4];
    uint8_t  scales[12];
    uint16_t d;                  /* f16 */
};

/* Q5_K: 8 sub-blocks of 32 with Q4_K's scale/min packing; x = d * sc * q -
 * dmin * m, q in 0..31. For chunk c (0..3), element 64c + l is the low nibble
 * of qs[32c + l] with bit 2c of qh[l] as its fifth bit, element 64c + 32 + l
 * the high nibble with bit 2c + 1. */
struct bp_block_q5_K {
    uint16_t d;                  /* f16 */
    uint16_t dmin;               /* f16 */
    uint8_t  scales[12];
    uint8_t  qh[BP_QK_K / 8];
    uint8_t  qs[BP_QK_K / 2];
};

/* IQ4_NL: x[i] = d * bp_iq4nl_values[q[i]] (bp_quant_ref.h), indices packed
 * as the nibbles of Q4_0. */
struct bp_block_iq4_nl {
    uint16_t d;                  /* f16 */
    uint8_t  qs[BP_QK4_NL / 2];
};

/* IQ4_XS: 8 sub-blocks of 32; x = d * (ls - 32) * bp_iq4nl_values[q] with the
 * 6-bit ls of sub-block b = nibble b % 2 of scales_l[b / 2] | bits 2b..2b+1
 * of scales_h << 4; sub-block b's indices are qs[16b .. 16b + 15] packed as
 * in IQ4_NL. */
struct bp_block_iq4_xs {
    uint16_t d;                  /* f16 */
    uint16_t scales_h;
    uint8_t  scales_l[BP_QK_K / 64];
    uint8_t  qs[BP_QK_K / 2];
};

static_assert(sizeof(struct bp_block_q4_0) == 18, "q4_0 block is 18 bytes");
static_assert(sizeof(struct bp_block_q8_0) == 34, "q8_0 block is 34 bytes");
static_assert(sizeof(struct bp_block_q4_K) == 144, "q4_K block is 144 bytes");
static_assert(sizeof(struct bp_block_q6_K) == 210, "q6_K block is 210 bytes");
static_assert(sizeof(struct bp_block_q8_K) == 292, "q8_K block is 292 bytes");
static_assert(offsetof(struct bp_block_q6_K, d) == 208, "q6_K d is last");
static_assert(sizeof(struct bp_block_q4_1) == 20, "q4_1 block is 20 bytes");
static_assert(sizeof(struct bp_block_q5_0) == 22 && offsetof(struct bp_block_q5_0, qs) == 6,
              "q5_0 block is 22 bytes");
static_assert(sizeof(struct bp_block_q5_1) == 24 && offsetof(struct bp_block_q5_1, qs) == 8,
              "q5_1 block is 24 bytes");
static_assert(sizeof(struct bp_block_q2_K) == 84 && offsetof(struct bp_block_q2_K, d) == 80,
              "q2_K block is 84 bytes, d and dmin last");
static_assert(sizeof(struct bp_block_q3_K) == 110 && offsetof(struct bp_block_q3_K, d) == 108,
              "q3_K block is 110 bytes, d last");
static_assert(sizeof(struct bp_block_q5_K) == 176 && offsetof(struct bp_block_q5_K, qs) == 48,
              "q5_K block is 176 bytes");
static_assert(sizeof(struct bp_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
static_assert(sizeof(struct bp_block_iq4_xs) == 136 && offsetof(struct bp_block_iq4_xs, qs) == 8,
              "iq4_xs block is 136 bytes");

/* Reference conversions the host offers plugins through
 * host->get_proc_address(BP_HOST_PROC_QUANTIZE / _DEQUANTIZE); the same
 * functions are exported to applications as bp_quantize / bp_dequantize. */
#define BP_HOST_PROC_QUANTIZE   "bp_quantize"
#define BP_HOST_PROC_DEQUANTIZE "bp_dequantize"
/* Returns bytes written to dst, 0 on error (n_per_row not a multiple of the
 * block size, unknown type). */
typedef size_t (*bp_quantize_fn)(enum bp_type type, const float *src, void *dst, int64_t nrows,
                                 int64_t n_per_row);
typedef bp_status (*bp_dequantize_fn)(enum bp_type type, const void *src, float *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* BP_QUANT_H */
