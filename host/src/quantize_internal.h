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

#endif /* BP_QUANTIZE_INTERNAL_H */
