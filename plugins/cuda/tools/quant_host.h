/*
 * quant_host.h — the CUDA plugin's quantized-row readers (kernels/dequant.cuh,
 * kernels/dot_q8_1.cuh) compiled for the host and callable from C, so that
 * tests/test_cuda_quant.c holds them to bp_quant_ref.h without a GPU. The
 * code is the kernels' own, not a copy: tools/quant_host.cu includes the
 * same headers. Not part of the plugin.
 */
#ifndef BP_CUDA_QUANT_HOST_H
#define BP_CUDA_QUANT_HOST_H

#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element k of row (whole blocks of `type`) as GET_ROWS and the cuBLAS
 * path's dequantization read it; 0 for a type that is not quantized. */
float cuda_host_dequant(int type, const void *row, int64_t k);

/* Elements one unit of the matrix-vector dot covers (a multiple of 32);
 * 0 when the plugin's MUL_MAT and GET_ROWS do not take `type`. */
int cuda_host_dot_unit_elems(int type);

/* Row (K elements of `type`) times xa (its K / 32 q8_1 blocks), unit by
 * unit in order as the lanes of the matrix-vector kernel compute them. */
float cuda_host_dot_row(int type, const void *row, int64_t K, const struct cuda_block_q8_1 *xa);

#ifdef __cplusplus
}
#endif
#endif /* BP_CUDA_QUANT_HOST_H */
