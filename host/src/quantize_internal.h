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

#include <backplane/bp_quant_ref.h>

#include "internal.h"

/* The Q8_0/Q8_K quantizers and every dequantizer are the block-level
 * reference in <backplane/bp_quant_ref.h>, shared with the CPU plugin. */

/* quantize_q4_0.c */
BP_HIDDEN void bp__quantize_q4_0(const float *x, struct bp_block_q4_0 *y, int64_t k);

/* quantize_k.c (search and refinement) */
BP_HIDDEN void bp__quantize_q4_K(const float *x, struct bp_block_q4_K *y, int64_t k);
BP_HIDDEN void bp__quantize_q6_K(const float *x, struct bp_block_q6_K *y, int64_t k);
/* ggml's search alone (quantize_row_q4_K_ref / _q6_K_ref to the bit): the
 * bytes llama.cpp's quantizer writes without an importance matrix. */
BP_HIDDEN void bp__quantize_q4_K_ggml(const float *x, struct bp_block_q4_K *y, int64_t k);
BP_HIDDEN void bp__quantize_q6_K_ggml(const float *x, struct bp_block_q6_K *y, int64_t k);

/* quantize_legacy.c (ggml's reference, to the bit) */
BP_HIDDEN void bp__quantize_q4_1(const float *x, struct bp_block_q4_1 *y, int64_t k);
BP_HIDDEN void bp__quantize_q5_0(const float *x, struct bp_block_q5_0 *y, int64_t k);
BP_HIDDEN void bp__quantize_q5_1(const float *x, struct bp_block_q5_1 *y, int64_t k);

/* quantize_k_ref.c (ggml's reference, to the bit) */
BP_HIDDEN void bp__quantize_q2_K(const float *x, struct bp_block_q2_K *y, int64_t k);
BP_HIDDEN void bp__quantize_q3_K(const float *x, struct bp_block_q3_K *y, int64_t k);
BP_HIDDEN void bp__quantize_q5_K(const float *x, struct bp_block_q5_K *y, int64_t k);

/* quantize_iq4.c (ggml's search without an importance matrix, to the bit) */
BP_HIDDEN void bp__quantize_iq4_nl(const float *x, struct bp_block_iq4_nl *y, int64_t k);
BP_HIDDEN void bp__quantize_iq4_xs(const float *x, struct bp_block_iq4_xs *y, int64_t k);

#endif /* BP_QUANTIZE_INTERNAL_H */
