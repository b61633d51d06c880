/*
 * quants_ref.c — activation quantizers and row expanders, in plain C.
 *
 * The activation quantizers here are the references: the SIMD variants'
 * (dot_x86.c, dot_neon.c) write the same bytes, so a SIMD variant differs
 * from the scalar one only by the summation order inside a float dot: the
 * integer parts are identical. The expanders are
 * bit-identical to ggml's dequantizers (same operation order): both are
 * the shared reference in <backplane/bp_quant_ref.h>.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

/* The Q8_K quantizer and the expanders are the shared block-level
 * reference (<backplane/bp_quant_ref.h>, the same code behind bp_quantize
 * and bp_dequantize); these wrappers give them the kernel tables'
 * signatures. The Q8_0 activation quantizer is ggml-cpu's, below. */
/* ggml-cpu's activation quantizer on x86 (quantize_row_q8_0 in
 * arch/x86/quants.c, the path llama.cpp's prebuilt x86 libraries take), not
 * ggml's reference quantize_row_q8_0_ref, which llama-quantize uses for
 * weights and <backplane/bp_quant_ref.h> follows: the multiplier is 127 / amax
 * (one rounding, not 1 / (amax / 127)) and halves round to even (_mm256_
 * round_ps), not away from zero (roundf). Both move some quants by one,
 * enough to move a 1B-class model's logits away from llama.cpp's. */
void cpu_quantize_row_q8_0_ref(const float *x, void *vy, int64_t n)
{
    struct bp_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / BP_QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < BP_QK8_0; j++) {
            float v = fabsf(x[i * BP_QK8_0 + j]);
            amax = v > amax ? v : amax;
        }
        y[i].d = bp_f32_to_f16(amax / 127.0f);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < BP_QK8_0; j++)
            y[i].qs[j] = (int8_t)bp_nearest_int(x[i * BP_QK8_0 + j] * id);
    }
}

void cpu_quantize_row_q8_K_ref(const float *x, void *y, int64_t n)
{
    bp_quantize_q8_K_ref(x, y, n);
}

void cpu_f32_copy_row(const float *x, void *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void cpu_dequantize_row_q4_0(const void *x, float *y, int64_t n)
{
    bp_dequantize_q4_0_ref(x, y, n);
}

void cpu_dequantize_row_q8_0(const void *x, float *y, int64_t n)
{
    bp_dequantize_q8_0_ref(x, y, n);
}

void cpu_dequantize_row_q4_K(const void *x, float *y, int64_t n)
{
    bp_dequantize_q4_K_ref(x, y, n);
}

void cpu_dequantize_row_q6_K(const void *x, float *y, int64_t n)
{
    bp_dequantize_q6_K_ref(x, y, n);
}

#define EXPANDER(t)                                                 \
    void cpu_dequantize_row_##t(const void *x, float *y, int64_t n) \
    {                                                               \
        bp_dequantize_##t##_ref(x, y, n);                           \
    }
EXPANDER(q4_1)
EXPANDER(q5_0)
EXPANDER(q5_1)
EXPANDER(q2_K)
EXPANDER(q3_K)
EXPANDER(q5_K)
EXPANDER(iq4_nl)
EXPANDER(iq4_xs)
#undef EXPANDER

void cpu_f16_to_f32_row(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = bp_f16_to_f32(x[i]);
}

void cpu_bf16_to_f32_row(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = bp_bf16_to_f32(x[i]);
}

void cpu_f32_row_copy_out(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}
