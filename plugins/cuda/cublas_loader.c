/*
 * cublas_loader.c — libcublas is opened with dlopen on the first large
 * MUL_MAT, not linked: a machine without it (or with a mismatched one)
 * still loads the plugin, and MUL_MAT falls back to the plugin's own
 * kernels with one logged sentence. One handle per device, shared by the
 * device's backends under a lock (the handle's stream is set per call).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include <cublas_api.h>

#include "cuda_internal.h"

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                     int, const void *, const void *, cudaDataType, int,
                                     const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

static struct {
    pthread_mutex_t mu;
    int tried;            /* 0: not yet, 1: loaded, -1: failed */
    void *lib;
    create_fn create;
    destroy_fn destroy;
    set_stream_fn set_stream;
    gemm_ex_fn gemm_ex;
    cublasHandle_t handles[CUDA_MAX_DEVICES];
} g_cublas = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void *sym(const char *name)
{
    return dlsym(g_cublas.lib, name);
}

/* Call with the lock held. */
static bool load_locked(const struct cuda_plugin *pl)
{
    if (g_cublas.tried)
        return g_cublas.tried > 0;
    g_cublas.tried = -1;
    static const char *const names[] = { "libcublas.so.13", "libcublas.so.12", "libcublas.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_cublas.lib; i++)
        g_cublas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g_cublas.lib) {
        cuda_log(pl, BP_LOG_WARN, "libcublas could not be loaded (%s); large MUL_MAT uses the "
                 "plugin's own kernels, which are slower.", dlerror());
        return false;
    }
    void *c = sym("cublasCreate_v2"), *d = sym("cublasDestroy_v2"), *s = sym("cublasSetStream_v2"),
         *g = sym("cublasGemmEx");
    if (!c || !d || !s || !g) {
        cuda_log(pl, BP_LOG_WARN, "libcublas lacks cublasCreate_v2, cublasSetStream_v2 or "
                 "cublasGemmEx; large MUL_MAT uses the plugin's own kernels.");
        dlclose(g_cublas.lib);
        g_cublas.lib = NULL;
        return false;
    }
    memcpy(&g_cublas.create, &c, sizeof c);
    memcpy(&g_cublas.destroy, &d, sizeof d);
    memcpy(&g_cublas.set_stream, &s, sizeof s);
    memcpy(&g_cublas.gemm_ex, &g, sizeof g);
    g_cublas.tried = 1;
    return true;
}

bool cuda_cublas_available(const struct cuda_plugin *pl)
{
    pthread_mutex_lock(&g_cublas.mu);
    bool ok = load_locked(pl);
    pthread_mutex_unlock(&g_cublas.mu);
    return ok;
}

static cudaDataType data_type(int t)
{
    return t == BP_TYPE_F16 ? CUDA_R_16F : t == BP_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

bp_status cuda_cublas_gemm(struct cuda_backend *cb, int wtype, int N, int M, int K, const void *w,
                           long long ldw, const void *x, long long ldx, float *c, long long ldc)
{
    const struct cuda_plugin *pl = cb->cd->pl;
    const int id = cb->cd->id;
    bp_status st = BP_OK;
    pthread_mutex_lock(&g_cublas.mu);
    if (!load_locked(pl) || id < 0 || id >= CUDA_MAX_DEVICES) {
        st = BP_ERR_UNSUPPORTED;
        goto out;
    }
    (void)cudaSetDevice(id);
    if (!g_cublas.handles[id] && g_cublas.create(&g_cublas.handles[id]) != CUBLAS_STATUS_SUCCESS) {
        g_cublas.handles[id] = NULL;
        cuda_log(pl, BP_LOG_ERROR, "cublasCreate failed on %s; free device memory.", cb->cd->name);
        st = BP_ERR_INTERNAL;
        goto out;
    }
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t cs = g_cublas.set_stream(g_cublas.handles[id], cb->stream);
    if (cs == CUBLAS_STATUS_SUCCESS)
        /* Column-major: W is K x N (ldw), X is K x M; C = W^T X is N x M.
         * F32 accumulation for every input type. */
        cs = g_cublas.gemm_ex(g_cublas.handles[id], CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w,
                              data_type(wtype), (int)ldw, x, data_type(wtype), (int)ldx, &zero, c,
                              CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        cuda_log(pl, BP_LOG_ERROR, "cublasGemmEx failed with status %d on %s (N=%d M=%d K=%d).",
                 (int)cs, cb->cd->name, N, M, K);
        st = BP_ERR_INTERNAL;
    }
out:
    pthread_mutex_unlock(&g_cublas.mu);
    return st;
}

void cuda_cublas_unload(void)
{
    pthread_mutex_lock(&g_cublas.mu);
    for (int i = 0; i < CUDA_MAX_DEVICES; i++)
        if (g_cublas.handles[i]) {
            (void)cudaSetDevice(i);
            g_cublas.destroy(g_cublas.handles[i]);
            g_cublas.handles[i] = NULL;
        }
    /* The library stays mapped: cuBLAS registers exit handlers of its own. */
    pthread_mutex_unlock(&g_cublas.mu);
}
