/*
 * quantize_legacy.c — Q4_1, Q5_0 and Q5_1, ggml's 32-element formats beside
 * Q4_0 (quantize_q4_0.c): quantize_row_q4_1_ref, _q5_0_ref and _q5_1_ref,
 * the arithmetic in ggml's order so that the bytes are ggml's (checked on
 * the vectors of tests/data/quant/, made by ggml itself).
 *
 * ggml converts each scaled element to an integer by a plain cast, which is
 * undefined in C for NaN or out-of-range values. Here the cast happens only
 * on values inside the range where it is defined and agrees with ggml; the
 * rest (only NaN or infinite input, or a range that overflows a float,
 * reaches them) map to level 0, which is what ggml's x86 build writes for
 * NaN.
 */
#include <float.h>
#include <math.h>

#include "quantize_internal.h"

/* (int)v for v in [0, cap + 1), cap above it and 0 below it or for NaN: the
 * truncation ggml's casts perform on every value finite input produces. */
static inline int trunc_level(float v, int cap)
{
    if (v >= 0.0f && v < (float)(cap + 1)) return (int)v;
    return v >= (float)(cap + 1) ? cap : 0;
}

/* The block's minimum and maximum as ggml finds them (NaN compares false
 * and is skipped). */
static void min_max(const float *x, int n, float *mn, float *mx)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *mn = min;
    *mx = max;
}

/* Q4_1: an affine fit from the block's range, d = (max - min) / 15, each
 * element rounded to the nearest of the 16 levels above min. */
void bp__quantize_q4_1(const float *x, struct bp_block_q4_1 *y, int64_t k)
{
    const int64_t nb = k / BP_QK4_1;
    for (int64_t i = 0; i < nb; i++, x += BP_QK4_1) {
        float min, max;
        min_max(x, BP_QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        y[i].m = bp_f32_to_f16(min);
        for (int j = 0; j < BP_QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[j + BP_QK4_1 / 2] - min) * id;
            const int q0 = trunc_level(x0 + 0.5f, 15), q1 = trunc_level(x1 + 0.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* The fifth bits of the 32 levels into the block's little-endian qh. */
static void store_high_bits(uint8_t qh[4], uint32_t bits)
{
    for (int b = 0; b < 4; b++) qh[b] = (uint8_t)(bits >> (8 * b));
}

/* Q5_0: as Q4_0 with 32 levels: d from the element of largest magnitude
 * with its sign (d = max / -16), so that element lands exactly on level 0
 * and the other side gets the extra level. */
void bp__quantize_q5_0(const float *x, struct bp_block_q5_0 *y, int64_t k)
{
    const int64_t nb = k / BP_QK5_0;
    for (int64_t i = 0; i < nb; i++, x += BP_QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < BP_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < BP_QK5_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[j + BP_QK5_0 / 2] * id;
            const int q0 = trunc_level(x0 + 16.5f, 31), q1 = trunc_level(x1 + 16.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + BP_QK5_0 / 2);
        }
        store_high_bits(y[i].qh, qh);
    }
}

/* Q5_1: Q4_1's affine fit with 32 levels, d = (max - min) / 31. ggml does
 * not cap the level here; (max - min) * id + 0.5 stays below 32 for every
 * finite block, so the cap at 31 changes nothing there. */
void bp__quantize_q5_1(const float *x, struct bp_block_q5_1 *y, int64_t k)
{
    const int64_t nb = k / BP_QK5_1;
    for (int64_t i = 0; i < nb; i++, x += BP_QK5_1) {
        float min, max;
        min_max(x, BP_QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        y[i].m = bp_f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < BP_QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[j + BP_QK5_1 / 2] - min) * id;
            const int q0 = trunc_level(x0 + 0.5f, 31), q1 = trunc_level(x1 + 0.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + BP_QK5_1 / 2);
        }
        store_high_bits(y[i].qh, qh);
    }
}
