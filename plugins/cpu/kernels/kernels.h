/*
 * kernels.h — the numeric kernels of the CPU plugin, one table per build.
 *
 * MUL_MAT with weight type W runs as: quantize (or convert) every activation
 * row once into the work buffer as `vec_dot_type`, then dot products
 * `vec_dot(k, out, w_row, x_row)` between weight rows and converted
 * activation rows. For the quantized types the dot runs on integers with the
 * block scales pulled out of the sum: sum_b d_w[b] * d_x[b] * sum_i q_w*q_x.
 *
 * Every function here exists as a scalar reference (`*_ref`, always
 * compiled, the behaviour the SIMD versions must match) and, per ISA build,
 * in the variant's own form; cpu_kernels_for() returns the best the build
 * has. The kernels never allocate and never fail: shapes are checked by the
 * op's `supports` before they run.
 */
#ifndef BP_CPU_KERNELS_H
#define BP_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>
#include <backplane/bp_quant.h>
#include <backplane/bp_quant_ref.h> /* bp_q4_K_scale_min and the reference rows */

#include "repack.h"

/* s[0] = dot of n elements of row a (weight type) and row b (vec_dot_type). */
typedef void (*cpu_vec_dot_fn)(int64_t n, float *s, const void *a, const void *b);
/* Convert n floats into vec_dot_type (n a multiple of its block size). */
typedef void (*cpu_from_float_fn)(const float *x, void *y, int64_t n);
/* Expand n elements of a row to floats. */
typedef void (*cpu_to_float_fn)(const void *x, float *y, int64_t n);
/* Float weights against many F32 activation rows (kernels/gemm_float_x86.c):
 * y[j][i] = dot of n elements of weight row i (rows ws bytes apart from w,
 * i < nw) and activation row x[j] (j < nx). */
typedef void (*cpu_gemm_float_fn)(int64_t n, const void *w, size_t ws, int64_t nw,
                                  const float *const *x, float *const *y, int nx);

struct cpu_type_kernels {
    enum bp_type vec_dot_type;   /* what the activation is converted to */
    cpu_vec_dot_fn vec_dot;      /* NULL: weight type not handled */
    cpu_from_float_fn from_float;/* into this type (used when it is a vec_dot_type) */
    cpu_to_float_fn to_float;    /* out of this type (GET_ROWS) */
    cpu_gemm_x8_fn gemm_x8;      /* weights in the x8 layout (repack.h); NULL: none */
    cpu_gemm_float_fn gemm_float;/* many activation rows at once (prefill); NULL: none */
    int gemm_x8_cols;            /* most ncols one gemm_x8 call takes; 0: CPU_GEMM_MAX_COLS */
};

/* The most activation rows one call of k's gemm_x8 takes. */
static inline int cpu_gemm_x8_cols(const struct cpu_type_kernels *k)
{
    return k->gemm_x8_cols ? k->gemm_x8_cols : CPU_GEMM_MAX_COLS;
}

/* This build's kernels for weight type t (vec_dot NULL when none). */
const struct cpu_type_kernels *cpu_kernels_for(enum bp_type t);
/* The scalar reference table, whatever the build (tests compare to it). */
const struct cpu_type_kernels *cpu_kernels_ref_for(enum bp_type t);
/* Name of the kernel set: "scalar", "avx2", "avx512", "neon". */
const char *cpu_kernels_isa(void);

/* ---- scalar references (kernels/quants_ref.c, dot_ref.c) ---- */
void cpu_quantize_row_q8_0_ref(const float *x, void *y, int64_t n);
void cpu_quantize_row_q8_K_ref(const float *x, void *y, int64_t n);
void cpu_f32_copy_row(const float *x, void *y, int64_t n);

void cpu_dequantize_row_q4_0(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q8_0(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q4_K(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q6_K(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q4_1(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q5_0(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q5_1(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q2_K(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q3_K(const void *x, float *y, int64_t n);
void cpu_dequantize_row_q5_K(const void *x, float *y, int64_t n);
void cpu_dequantize_row_iq4_nl(const void *x, float *y, int64_t n);
void cpu_dequantize_row_iq4_xs(const void *x, float *y, int64_t n);
void cpu_f16_to_f32_row(const void *x, float *y, int64_t n);
void cpu_bf16_to_f32_row(const void *x, float *y, int64_t n);
void cpu_f32_row_copy_out(const void *x, float *y, int64_t n);

void cpu_vec_dot_q4_0_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q8_0_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q4_K_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q6_K_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
/* The 32-element types against Q8_0 (Q4_1 and Q5_1 too: see dot_ref.c), the
 * 256-element ones against Q8_K. */
void cpu_vec_dot_q4_1_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_0_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_1_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_nl_q8_0_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q2_K_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q3_K_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_q5_K_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_iq4_xs_q8_K_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_f32_ref(int64_t n, float *s, const void *a, const void *b);
/* F16 / BF16 weight row against an F32 activation row. */
void cpu_vec_dot_f16_ref(int64_t n, float *s, const void *a, const void *b);
void cpu_vec_dot_bf16_ref(int64_t n, float *s, const void *a, const void *b);

/* The x8 dot through a plain vec_dot, one block at a time (the reference,
 * and the builds without x8 kernels). */
void cpu_gemm_x8_via_dot(enum bp_type t, cpu_vec_dot_fn dot, CPU_GEMM_X8_PARAMS);

/* f16 <-> f32 exactly as the ABI helpers do, without a branch per call site. */
static inline float cpu_fp16(uint16_t h)
{
    return bp_f16_to_f32(h);
}

#endif
