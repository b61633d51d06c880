/*
 * matmul_blas.c — see matmul_blas.h. Large M only: below it the dot
 * kernels win (no packing cost) and the decode path never comes here.
 */
#include "matmul_blas.h"

#if defined(CPU_HAVE_BLAS)
#include <cblas.h>

/* Below 64 rows the tiled float kernel (kernels/gemm_float_x86.c) wins:
 * K = N = 4096, one thread, M = 32: 61 vs 38 GFLOP/s (AVX-512), 50 vs 38
 * (AVX2); M = 64 about even; M >= 128 OpenBLAS ahead. */
#define BLAS_MIN_M 64
#define BLAS_MIN_K 64

void openblas_set_num_threads(int n);

void cpu_blas_init(void)
{
    openblas_set_num_threads(1);
}

const char *cpu_blas_name(void)
{
    return "openblas";
}

bool cpu_mul_mat_blas(const struct cpu_compute_params *p, struct bp_tensor *t,
                      const int64_t *nr0, const int64_t *nr1)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    (void)nr1;
    if (w->type != BP_TYPE_F32 || x->type != BP_TYPE_F32 || x->nb[0] != 4 || w->nb[0] != 4 ||
        t->nb[0] != 4 || x->ne[1] < BLAS_MIN_M || w->ne[0] < BLAS_MIN_K ||
        w->nb[1] % 4 || x->nb[1] % 4 || t->nb[1] % 4)
        return false;
    const int64_t N = *nr0, M = x->ne[1], K = w->ne[0];
    const int64_t n0 = N * p->ith / p->nth, n1 = N * (p->ith + 1) / p->nth;
    if (n1 <= n0)
        return true;
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            const float *wp = (const float *)(const void *)cpu_at(w, 0, n0, i2 / r2, i3 / r3);
            const float *xp = (const float *)(const void *)cpu_at(x, 0, 0, i2, i3);
            float *cp = (float *)(void *)cpu_at(t, n0, 0, i2, i3);
            /* C[M x n] = X[M x K] * W[n x K]^T, all row-major */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)(n1 - n0), (int)K,
                        1.0f, xp, (int)(x->nb[1] / 4), wp, (int)(w->nb[1] / 4), 0.0f, cp,
                        (int)(t->nb[1] / 4));
        }
    return true;
}
#else
void cpu_blas_init(void) {}

const char *cpu_blas_name(void)
{
    return NULL;
}

bool cpu_mul_mat_blas(const struct cpu_compute_params *p, struct bp_tensor *t,
                      const int64_t *nr0, const int64_t *nr1)
{
    (void)p; (void)t; (void)nr0; (void)nr1;
    return false;
}
#endif
