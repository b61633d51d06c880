/*
 * cuda_internal.h — what the C files of the CUDA plugin share: the plugin,
 * device, buffer and backend structs, and the lazily loaded libraries.
 * Kernels (the .cu files under kernels/) see only kernels/kernels.h.
 */
#ifndef BP_CUDA_INTERNAL_H
#define BP_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include <backplane/bp_abi.h>

#define CUDA_FAMILY "cuda"
#define CUDA_MAX_DEVICES 64
#define CUDA_BUFFER_ALIGNMENT 256 /* cudaMalloc's own alignment; also fits every vector load */

struct cuda_plugin;

struct cuda_device {
    struct bp_device dev;
    struct cuda_plugin *pl;
    int id;                         /* CUDA ordinal (after CUDA_VISIBLE_DEVICES) */
    char name[16];                  /* "cuda0" */
    char description[320];          /* "NVIDIA H200 (sm_90, 132 SMs)" */
    int cc_major, cc_minor;
    size_t total_mem;
    struct bp_buffer_type buft;     /* device memory */
    struct bp_buffer_type host_buft;/* pinned host memory */
    char buft_name[24], host_buft_name[32];
    bool has_uuid;                  /* identity.c */
    uint8_t uuid[BP_UUID_BYTES];
    char pci_bus_id[BP_PCI_BUS_ID_LEN];
};

struct cuda_plugin {
    const struct bp_host_services *host;
    struct bp_registry reg;
    struct cuda_device *devices;
    size_t n_devices;
    char no_device_reason[256];     /* why there are zero devices, else "" */
    struct bp_feature features[8];
    char n_dev_str[16], cc_str[64], arch_str[64];
};

struct cuda_backend {
    struct bp_backend be;
    struct cuda_device *cd;
    cudaStream_t stream;
    void *scratch;                  /* device scratch for converted operands */
    size_t scratch_size;
    int *err_flag;                  /* device: [0] node index + 1, [1] bad id, [2] position */
    int *err_host;                  /* pinned mirror of err_flag */
};

struct cuda_event {
    struct bp_event ev;
    cudaEvent_t event;
    int device_id;
};

/* ---- plugin.c ---- */
void cuda_log(const struct cuda_plugin *pl, enum bp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *cuda_getenv(const struct cuda_plugin *pl, const char *name);
/* Logs "<what> failed: <CUDA error sentence>" and maps the error to a status. */
bp_status cuda_check(const struct cuda_plugin *pl, cudaError_t err, const char *what);
static inline struct cuda_device *cuda_device_of(struct bp_device *dev)
{
    return (struct cuda_device *)dev->context;
}

/* ---- buffer.c ---- */
/* identity.c: UUID and PCI address read once at init; the proc. */
void cuda_identity_probe(struct cuda_device *cd, const struct cudaDeviceProp *prop);
bp_status cuda_device_identity(struct bp_device *dev, struct bp_device_identity *out);
extern const struct bp_buffer_type_iface cuda_buffer_type_iface;
extern const struct bp_buffer_type_iface cuda_host_buffer_type_iface;
/* The CUDA device of a tensor in one of our device buffers, or NULL. */
struct cuda_device *cuda_tensor_device(const struct bp_tensor *t);
bool cuda_tensor_is_host(const struct bp_tensor *t);
bp_status cuda_enable_peer(const struct cuda_plugin *pl, int from, int to);

/* ---- backend.c ---- */
bp_status cuda_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out);
bool cuda_is_our_backend(const struct bp_backend *b);
bool cuda_supports_node(const struct cuda_device *cd, const struct bp_tensor *node);
bp_status cuda_event_new(struct bp_device *dev, struct bp_event **out);
/* Grow the backend's device scratch to at least bytes (synchronizes when it grows). */
bp_status cuda_backend_scratch(struct cuda_backend *cb, size_t bytes, void **out);

/* ---- ops.c ---- */
bp_status cuda_compute_node(struct cuda_backend *cb, struct bp_tensor *node, int node_index);

/* ---- cublas_loader.c: libcublas.so loaded on first use ---- */
struct cuda_cublas;
/* The cuBLAS handle of this backend's device, bound to its stream; NULL when
 * libcublas cannot be loaded (logged once). */
bool cuda_cublas_available(const struct cuda_plugin *pl);
/* C[N, M] (F32, ldc) = W^T X with W [K, N] (ldw), X [K, M] (ldx), both of
 * type wtype (F32, F16 or BF16). */
bp_status cuda_cublas_gemm(struct cuda_backend *cb, int wtype, int N, int M, int K,
                           const void *w, long long ldw, const void *x, long long ldx,
                           float *c, long long ldc);
void cuda_cublas_unload(void);

/* ---- comm.c ---- */
bp_status cuda_comm_init(struct bp_backend *const *backends, size_t n, void **out_comm);
/* bp_comm_paths / bp_comm_init_path: "nccl" and "internal" by name. */
size_t cuda_comm_paths(const char **names, size_t cap);
bp_status cuda_comm_init_path(struct bp_backend *const *backends, size_t n, const char *path, void **out_comm);
bp_status cuda_comm_allreduce_tensor(void *comm, struct bp_tensor *const *tensors, size_t n);
void cuda_comm_free(void *comm);
/* bp_dist.h's multi-process communicator (NCCL only). */
bp_status cuda_comm_get_unique_id(void *id, size_t cap, size_t *len);
bp_status cuda_comm_init_rank(struct bp_backend *b, int32_t nranks, int32_t rank, const void *id,
                              size_t id_len, void **out_comm);
void cuda_comm_set_plugin(struct cuda_plugin *pl);

/* ---- bench.c ---- */
/* Proc "bp_cuda_bench_reference": device-to-device copy bandwidth (GB/s,
 * counting bytes read + written), cuBLAS F16 GEMM rate (GFLOP/s) and the
 * median host time of a launch + stream synchronize (microseconds) on
 * device `index`, measured now. For scripts/gpu-check.sh (through
 * tools/bp_cuda_reference.c, which declares the same type). */
#define CUDA_PROC_BENCH_REFERENCE "bp_cuda_bench_reference"
typedef bp_status (*cuda_bench_reference_fn)(struct bp_registry *reg, size_t index, int K, int N,
                                             int M, double *d2d_gbps, double *hgemm_gflops,
                                             double *sync_us);
bp_status cuda_bench_reference(struct bp_registry *reg, size_t index, int K, int N, int M,
                               double *d2d_gbps, double *hgemm_gflops, double *sync_us);

#endif /* BP_CUDA_INTERNAL_H */
