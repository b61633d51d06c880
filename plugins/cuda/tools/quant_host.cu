/*
 * quant_host.cu — the host build of the kernels' quantized-row readers
 * (quant_host.h). The readers are __host__ __device__; this file only gives
 * them C names, and pins common.cuh's type numbers to enum bp_type.
 */
#include <backplane/bp_types.h>

#include "kernels/common.cuh"
#include "kernels/dequant.cuh"
#include "kernels/dot_q8_1.cuh"
#include "quant_host.h"

static_assert(T_F32 == BP_TYPE_F32 && T_F16 == BP_TYPE_F16 && T_BF16 == BP_TYPE_BF16 &&
                  T_I32 == BP_TYPE_I32, "common.cuh's float type numbers are enum bp_type's");
static_assert(T_Q4_0 == BP_TYPE_Q4_0 && T_Q8_0 == BP_TYPE_Q8_0 && T_Q4_K == BP_TYPE_Q4_K &&
                  T_Q6_K == BP_TYPE_Q6_K && T_Q4_1 == BP_TYPE_Q4_1 && T_Q5_0 == BP_TYPE_Q5_0 &&
                  T_Q5_1 == BP_TYPE_Q5_1 && T_Q2_K == BP_TYPE_Q2_K && T_Q3_K == BP_TYPE_Q3_K &&
                  T_Q5_K == BP_TYPE_Q5_K && T_IQ4_NL == BP_TYPE_IQ4_NL && T_IQ4_XS == BP_TYPE_IQ4_XS,
              "common.cuh's quantized type numbers are enum bp_type's");

extern "C" float cuda_host_dequant(int type, const void *row, int64_t k)
{
    return dq_quant((const uint8_t *)row, type, k);
}

extern "C" int cuda_host_dot_unit_elems(int type)
{
    return dot_unit_elems(type);
}

extern "C" float cuda_host_dot_row(int type, const void *row, int64_t K, const struct cuda_block_q8_1 *xa)
{
    const int per = dot_unit_elems(type);
    float acc = 0.0f;
    for (int64_t u = 0; per > 0 && u < K / per; u++) acc += dot_unit(type, (const uint8_t *)row, u, xa);
    return acc;
}
