/*
 * kernels.c — which kernel this build uses for each weight type. The ISA
 * is fixed when the variant is compiled; the loader's score decides which
 * variant runs, so nothing here tests the CPU.
 */
#include "simd.h"

#define REF_ENTRIES                                                                          \
    [BP_TYPE_F32] = { BP_TYPE_F32, cpu_vec_dot_f32_ref, cpu_f32_copy_row, cpu_f32_row_copy_out }, \
    [BP_TYPE_F16] = { BP_TYPE_F32, cpu_vec_dot_f16_ref, NULL, cpu_f16_to_f32_row },            \
    [BP_TYPE_BF16] = { BP_TYPE_F32, cpu_vec_dot_bf16_ref, NULL, cpu_bf16_to_f32_row },         \
    [BP_TYPE_Q4_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q4_0_q8_0_ref, NULL, cpu_dequantize_row_q4_0, \
                       cpu_gemm_q4_0_x8_ref },                                                \
    [BP_TYPE_Q8_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q8_0_q8_0_ref, cpu_quantize_row_q8_0_ref,     \
                       cpu_dequantize_row_q8_0, cpu_gemm_q8_0_x8_ref },                       \
    [BP_TYPE_Q4_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q4_K_q8_K_ref, NULL, cpu_dequantize_row_q4_K, \
                       cpu_gemm_q4_K_x8_ref },                                                \
    [BP_TYPE_Q6_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q6_K_q8_K_ref, NULL, cpu_dequantize_row_q6_K, \
                       cpu_gemm_q6_K_x8_ref },                                                \
    [BP_TYPE_Q8_K] = { BP_TYPE_Q8_K, NULL, cpu_quantize_row_q8_K_ref, NULL },                  \
    ABI_1_2_ENTRIES(ref, cpu_gemm_q5_0_x8_ref, cpu_gemm_q5_K_x8_ref, cpu_gemm_q3_K_x8_ref, \
                    cpu_gemm_iq4_xs_x8_ref, cpu_gemm_q2_K_x8_ref, cpu_gemm_iq4_nl_x8_ref, \
                    cpu_gemm_q4_1_x8_ref, cpu_gemm_q5_1_x8_ref)

/* The ABI 1.2 weight types, with the dots of kernel set sfx (ref, x86,
 * neon): the 32-element types against Q8_0, the 256-element ones against
 * Q8_K; Q5_0, Q5_K, Q3_K, IQ4_XS, Q2_K, IQ4_NL, Q4_1 and Q5_1 with the x8
 * gemms g50, g5K, g3K, gX4, g2K, gNL, g41 and g51 where the build repacks
 * them (NULL elsewhere). */
#define ABI_1_2_ENTRIES(sfx, g50, g5K, g3K, gX4, g2K, gNL, g41, g51)                                     \
    [BP_TYPE_Q4_1] = { BP_TYPE_Q8_0, cpu_vec_dot_q4_1_q8_0_##sfx, NULL, cpu_dequantize_row_q4_1, g41 },     \
    [BP_TYPE_Q5_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q5_0_q8_0_##sfx, NULL, cpu_dequantize_row_q5_0, g50 },     \
    [BP_TYPE_Q5_1] = { BP_TYPE_Q8_0, cpu_vec_dot_q5_1_q8_0_##sfx, NULL, cpu_dequantize_row_q5_1, g51 },     \
    [BP_TYPE_IQ4_NL] = { BP_TYPE_Q8_0, cpu_vec_dot_iq4_nl_q8_0_##sfx, NULL, cpu_dequantize_row_iq4_nl, gNL }, \
    [BP_TYPE_Q2_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q2_K_q8_K_##sfx, NULL, cpu_dequantize_row_q2_K, g2K },     \
    [BP_TYPE_Q3_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q3_K_q8_K_##sfx, NULL, cpu_dequantize_row_q3_K, g3K },     \
    [BP_TYPE_Q5_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q5_K_q8_K_##sfx, NULL, cpu_dequantize_row_q5_K, g5K },     \
    [BP_TYPE_IQ4_XS] = { BP_TYPE_Q8_K, cpu_vec_dot_iq4_xs_q8_K_##sfx, NULL, cpu_dequantize_row_iq4_xs, gX4 }

static const struct cpu_type_kernels ref_table[BP_TYPE_COUNT] = { REF_ENTRIES };

/* Builds without an 8-row kernel for a type still read the x8 layout: a
 * gemm that walks it through the variant's vec_dot, one block at a time. */
#define GEMM_VIA(name, type, dot)                                                        \
    static void name(CPU_GEMM_X8_PARAMS)                                                 \
    {                                                                                    \
        cpu_gemm_x8_via_dot(type, dot, n, s, bs, w, gs, ng, y, ys, ncols);               \
    }

#if defined(CPU_HAVE_X86_SIMD)
#if defined(CPU_HAVE_X86_GEMM)
#define GEMM_Q4_0 cpu_gemm_q4_0_x8_x86
#define GEMM_Q8_0 cpu_gemm_q8_0_x8_x86
#define GEMM_Q4_K cpu_gemm_q4_K_x8_x86
#define GEMM_Q6_K cpu_gemm_q6_K_x8_x86
#define GEMM_Q5_0 cpu_gemm_q5_0_x8_x86
#define GEMM_Q5_K cpu_gemm_q5_K_x8_x86
#define GEMM_Q3_K cpu_gemm_q3_K_x8_x86
#define GEMM_IQ4_XS cpu_gemm_iq4_xs_x8_x86
#define GEMM_Q2_K cpu_gemm_q2_K_x8_x86
#define GEMM_IQ4_NL cpu_gemm_iq4_nl_x8_x86
#define GEMM_Q4_1 cpu_gemm_q4_1_x8_x86
#define GEMM_Q5_1 cpu_gemm_q5_1_x8_x86
#define GEMM_WIDE CPU_GEMM_WIDE_COLS /* Q4_0's and Q8_0's gemm_x8 columns */
#else
#define GEMM_Q4_0 cpu_gemm_q4_0_x8_avx2
#define GEMM_Q8_0 cpu_gemm_q8_0_x8_avx2
#define GEMM_Q4_K cpu_gemm_q4_K_x8_avx2
#define GEMM_Q6_K cpu_gemm_q6_K_x8_avx2
#define GEMM_Q5_0 cpu_gemm_q5_0_x8_avx2
#define GEMM_Q5_K cpu_gemm_q5_K_x8_avx2
#define GEMM_Q3_K cpu_gemm_q3_K_x8_avx2
#define GEMM_IQ4_XS cpu_gemm_iq4_xs_x8_avx2
#define GEMM_Q2_K NULL /* its plain dot: see q3_K_x8 in gemm_avx2.c */
#define GEMM_IQ4_NL cpu_gemm_iq4_nl_x8_avx2
#define GEMM_Q4_1 cpu_gemm_q4_1_x8_avx2
#define GEMM_Q5_1 cpu_gemm_q5_1_x8_avx2
#define GEMM_WIDE 0
#endif
static const struct cpu_type_kernels best_table[BP_TYPE_COUNT] = {
    [BP_TYPE_Q8_K] = { BP_TYPE_Q8_K, NULL, cpu_quantize_row_q8_K_x86, NULL },
    [BP_TYPE_F32] = { BP_TYPE_F32, cpu_vec_dot_f32_x86, cpu_f32_copy_row, cpu_f32_row_copy_out,
                      .gemm_float = cpu_gemm_f32_x86 },
    [BP_TYPE_F16] = { BP_TYPE_F32, cpu_vec_dot_f16_x86, NULL, cpu_f16_to_f32_row,
                      .gemm_float = cpu_gemm_f16_x86 },
    [BP_TYPE_BF16] = { BP_TYPE_F32, cpu_vec_dot_bf16_x86, NULL, cpu_bf16_to_f32_row,
                       .gemm_float = cpu_gemm_bf16_x86 },
    [BP_TYPE_Q4_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q4_0_q8_0_x86, NULL, cpu_dequantize_row_q4_0,
                       GEMM_Q4_0, .gemm_x8_cols = GEMM_WIDE },
    [BP_TYPE_Q8_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q8_0_q8_0_x86, cpu_quantize_row_q8_0_x86,
                       cpu_dequantize_row_q8_0, GEMM_Q8_0, .gemm_x8_cols = GEMM_WIDE },
    [BP_TYPE_Q4_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q4_K_q8_K_x86, NULL, cpu_dequantize_row_q4_K,
                       GEMM_Q4_K },
    [BP_TYPE_Q6_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q6_K_q8_K_x86, NULL, cpu_dequantize_row_q6_K,
                       GEMM_Q6_K },
    ABI_1_2_ENTRIES(x86, GEMM_Q5_0, GEMM_Q5_K, GEMM_Q3_K, GEMM_IQ4_XS, GEMM_Q2_K, GEMM_IQ4_NL,
                    GEMM_Q4_1, GEMM_Q5_1),
};
#if defined(__AVX512F__)
#define ISA_NAME "avx512"
#else
#define ISA_NAME "avx2"
#endif
#elif defined(CPU_HAVE_NEON_SIMD)
GEMM_VIA(gemm_q4_0_via, BP_TYPE_Q4_0, cpu_vec_dot_q4_0_q8_0_neon)
GEMM_VIA(gemm_q8_0_via, BP_TYPE_Q8_0, cpu_vec_dot_q8_0_q8_0_neon)
GEMM_VIA(gemm_q4_K_via, BP_TYPE_Q4_K, cpu_vec_dot_q4_K_q8_K_neon)
GEMM_VIA(gemm_q6_K_via, BP_TYPE_Q6_K, cpu_vec_dot_q6_K_q8_K_neon)
static const struct cpu_type_kernels best_table[BP_TYPE_COUNT] = {
    [BP_TYPE_Q8_K] = { BP_TYPE_Q8_K, NULL, cpu_quantize_row_q8_K_neon, NULL },
    [BP_TYPE_F32] = { BP_TYPE_F32, cpu_vec_dot_f32_neon, cpu_f32_copy_row, cpu_f32_row_copy_out },
    [BP_TYPE_F16] = { BP_TYPE_F32, cpu_vec_dot_f16_ref, NULL, cpu_f16_to_f32_row },
    [BP_TYPE_BF16] = { BP_TYPE_F32, cpu_vec_dot_bf16_ref, NULL, cpu_bf16_to_f32_row },
    [BP_TYPE_Q4_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q4_0_q8_0_neon, NULL, cpu_dequantize_row_q4_0,
                       gemm_q4_0_via },
    [BP_TYPE_Q8_0] = { BP_TYPE_Q8_0, cpu_vec_dot_q8_0_q8_0_neon, cpu_quantize_row_q8_0_ref,
                       cpu_dequantize_row_q8_0, gemm_q8_0_via },
    [BP_TYPE_Q4_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q4_K_q8_K_neon, NULL, cpu_dequantize_row_q4_K,
                       gemm_q4_K_via },
    [BP_TYPE_Q6_K] = { BP_TYPE_Q8_K, cpu_vec_dot_q6_K_q8_K_neon, NULL, cpu_dequantize_row_q6_K,
                       gemm_q6_K_via },
    ABI_1_2_ENTRIES(neon, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
};
#define ISA_NAME "neon"
#else
#define best_table ref_table
#define ISA_NAME "scalar"
#endif

static const struct cpu_type_kernels none = { .vec_dot_type = BP_TYPE_COUNT };

const struct cpu_type_kernels *cpu_kernels_for(enum bp_type t)
{
    return (unsigned)t < BP_TYPE_COUNT ? &best_table[t] : &none;
}

const struct cpu_type_kernels *cpu_kernels_ref_for(enum bp_type t)
{
    return (unsigned)t < BP_TYPE_COUNT ? &ref_table[t] : &none;
}

const char *cpu_kernels_isa(void)
{
    return ISA_NAME;
}
