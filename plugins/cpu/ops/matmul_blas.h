/*
 * matmul_blas.h — the optional OpenBLAS path of F32 x F32 MUL_MAT (built
 * when CMake finds OpenBLAS; CPU_HAVE_BLAS). Each thread hands its own
 * slice of weight rows to a single-threaded cblas_sgemm, so the pool's
 * threads are the only threads and the split matches the rest of the op.
 */
#ifndef BP_CPU_MATMUL_BLAS_H
#define BP_CPU_MATMUL_BLAS_H

#include "../ops.h"

/* True when the node was computed (this thread's share) by BLAS. */
bool cpu_mul_mat_blas(const struct cpu_compute_params *p, struct bp_tensor *t,
                      const int64_t *nr0, const int64_t *nr1);
/* Make OpenBLAS run each call on the calling thread (plugin init). */
void cpu_blas_init(void);
/* "openblas" or NULL. */
const char *cpu_blas_name(void);

#endif
