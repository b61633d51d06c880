/*
 * quant_test_util.h — what the suites that write quantized weights by hand
 * share: for every quantized weight type, its reference dequantizer
 * (bp_quant_ref.h) and where its f16 scales sit in a block, since random
 * bytes there could be inf or NaN.
 */
#ifndef BP_QUANT_TEST_UTIL_H
#define BP_QUANT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

struct quant_layout {
    enum bp_type type;
    void (*ref)(const void *x, float *y, int64_t k); /* k elements of blocks x into y */
    int n_f16;                                        /* f16 fields a block has: d, and a min */
    size_t f16_at[2];                                 /* their byte offsets, d first */
};

/* Every quantized weight type (not Q8_K, activations only), in a fixed
 * order that loop tests index. */
extern const struct quant_layout quant_layouts[];
extern const int n_quant_layouts;

/* The row of quant_layouts for t; NULL when t has none (static storage). */
const struct quant_layout *quant_layout_of(enum bp_type t);

#endif
