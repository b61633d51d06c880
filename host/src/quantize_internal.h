/*
 * quantize_internal.h — the per-format row converters behind bp_quantize and
 * bp_dequantize (quantize.c validates and dispatches; one file per family of
 * formats does the arithmetic). k is a whole number of blocks; nothing here
 * fails.
 */
#ifndef BP_QUANTIZE_INTERNAL_H
#define BP_QUANTIZE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "internal.h"

/* ggml's nearest_int: round half to even through the float mantissa. Exact
 * for |f| <= 2^22, which every caller guarantees for finite input; outside
 * that range it returns a wrong value but never invokes undefined behaviour. */
static inline int bp__nearest_int(float f)
{
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* quantize_q4_0.c */
BP_HIDDEN void bp__quantize_q4_0(const float *x, struct bp_block_q4_0 *y, int64_t k);
BP_HIDDEN void bp__dequantize_q4_0(const struct bp_block_q4_0 *x, float *y, int64_t k);

/* quantize_q8.c */
BP_HIDDEN void bp__quantize_q8_0(const float *x, struct bp_block_q8_0 *y, int64_t k);
BP_HIDDEN void bp__dequantize_q8_0(const struct bp_block_q8_0 *x, float *y, int64_t k);
BP_HIDDEN void bp__quantize_q8_K(const float *x, struct bp_block_q8_K *y, int64_t k);
BP_HIDDEN void bp__dequantize_q8_K(const struct bp_block_q8_K *x, float *y, int64_t k);

/* quantize_k.c (search and refinement) and dequantize_k.c */
BP_HIDDEN void bp__quantize_q4_K(const float *x, struct bp_block_q4_K *y, int64_t k);
BP_HIDDEN void bp__dequantize_q4_K(const struct bp_block_q4_K *x, float *y, int64_t k);
BP_HIDDEN void bp__quantize_q6_K(const float *x, struct bp_block_q6_K *y, int64_t k);
BP_HIDDEN void bp__dequantize_q6_K(const struct bp_block_q6_K *x, float *y, int64_t k);

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K block. */
static inline void bp__q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif /* BP_QUANTIZE_INTERNAL_H */
