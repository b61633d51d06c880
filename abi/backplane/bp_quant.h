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

static_assert(sizeof(struct bp_block_q4_0) == 18, "q4_0 block is 18 bytes");
static_assert(sizeof(struct bp_block_q8_0) == 34, "q8_0 block is 34 bytes");
static_assert(sizeof(struct bp_block_q4_K) == 144, "q4_K block is 144 bytes");
static_assert(sizeof(struct bp_block_q6_K) == 210, "q6_K block is 210 bytes");
static_assert(sizeof(struct bp_block_q8_K) == 292, "q8_K block is 292 bytes");
static_assert(offsetof(struct bp_block_q6_K, d) == 208, "q6_K d is last");

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
