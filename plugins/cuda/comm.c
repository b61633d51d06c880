/*
 * comm.c — collective communication through the proc addresses
 * bp_comm_init / bp_comm_allreduce_tensor / bp_comm_free.
 *
 * BACKPLANE_CUDA_ALLREDUCE picks the path (comm_policy.c decides, with the
 * fallback order nccl -> internal -> none):
 *   nccl     one communicator per device (ncclCommInitAll); libnccl.so.2 is
 *            opened with dlopen on the first comm_init that wants it. F32
 *            tensors of at least BACKPLANE_CUDA_ALLREDUCE_BF16_MIN elements
 *            (default 32768) travel in BF16: converted, reduced, converted
 *            back — halving the bytes on the wire where bandwidth dominates;
 *            below that, latency dominates and the conversions would cost
 *            more than they save, so they travel in F32.
 *   internal two participants: each copies the other's tensor into its own
 *            scratch (peer copy) and adds it; both compute a + b, so the
 *            results are bitwise equal.
 *   none     comm_init declines (BP_ERR_UNSUPPORTED); the caller uses its
 *            own path (the meta plugin's butterfly).
 * Across processes (bp_dist.h): bp_comm_get_unique_id / bp_comm_init_rank
 * make one rank's member of an NCCL communicator (ncclGetUniqueId on rank
 * 0, ncclCommInitRank everywhere); without NCCL they decline and the ranks
 * reduce through host memory.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include <backplane/bp_dist.h>

#include "comm_policy.h"
#include "cuda_internal.h"
#include "kernels/kernels.h"

/* The plugin, for the entries that get no backend or communicator to find
 * it through (cuda_comm_get_unique_id, comm_init's first checks). Set by
 * init before the registry is handed out and cleared by shutdown after it
 * is dead, so it never changes while an entry can run; atomic so that a
 * thread other than the loader's sees it published. Everything that has a
 * communicator uses c->pl. */
static struct cuda_plugin *g_pl;

void cuda_comm_set_plugin(struct cuda_plugin *pl)
{
    __atomic_store_n(&g_pl, pl, __ATOMIC_RELEASE);
}

static struct cuda_plugin *plugin(void)
{
    return __atomic_load_n(&g_pl, __ATOMIC_ACQUIRE);
}

/* ---- libnccl.so.2, loaded once ---- */

static struct {
    pthread_mutex_t mu;
    int tried;
    void *lib;
    ncclResult_t (*init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*destroy)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    /* multi-process: optional, NULL when this NCCL lacks them */
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
} g_nccl = { .mu = PTHREAD_MUTEX_INITIALIZER };

static bool nccl_load(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_nccl.mu);
    if (!g_nccl.tried) {
        g_nccl.tried = -1;
        g_nccl.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (g_nccl.lib) {
            void *p[6] = { dlsym(g_nccl.lib, "ncclCommInitAll"), dlsym(g_nccl.lib, "ncclAllReduce"),
                           dlsym(g_nccl.lib, "ncclGroupStart"), dlsym(g_nccl.lib, "ncclGroupEnd"),
                           dlsym(g_nccl.lib, "ncclCommDestroy"), dlsym(g_nccl.lib, "ncclGetErrorString") };
            bool all = true;
            for (int i = 0; i < 6; i++) all = all && p[i];
            if (all) {
                memcpy(&g_nccl.init_all, &p[0], sizeof p[0]);
                memcpy(&g_nccl.all_reduce, &p[1], sizeof p[1]);
                memcpy(&g_nccl.group_start, &p[2], sizeof p[2]);
                memcpy(&g_nccl.group_end, &p[3], sizeof p[3]);
                memcpy(&g_nccl.destroy, &p[4], sizeof p[4]);
                memcpy(&g_nccl.error_string, &p[5], sizeof p[5]);
                void *q[2] = { dlsym(g_nccl.lib, "ncclGetUniqueId"), dlsym(g_nccl.lib, "ncclCommInitRank") };
                if (q[0] && q[1]) {
                    memcpy(&g_nccl.get_unique_id, &q[0], sizeof q[0]);
                    memcpy(&g_nccl.init_rank, &q[1], sizeof q[1]);
                }
                g_nccl.tried = 1;
            }
        }
    }
    bool ok = g_nccl.tried > 0;
    pthread_mutex_unlock(&g_nccl.mu);
    return ok;
}

/* ---- the communicator ---- */

struct cuda_comm {
    struct cuda_plugin *pl;
    size_t n;
    enum cuda_allreduce_mode mode;
    int64_t bf16_min;
    struct cuda_backend *be[CUDA_MAX_DEVICES];
    ncclComm_t nccl[CUDA_MAX_DEVICES];
    void *scratch[CUDA_MAX_DEVICES];
    size_t scratch_size[CUDA_MAX_DEVICES];
    cudaEvent_t ev[CUDA_MAX_DEVICES];
};

/* The named paths (bp_comm_paths); the first is what bp_comm_init prefers. */
static const enum cuda_allreduce_mode named_paths[] = {CUDA_ALLREDUCE_NCCL, CUDA_ALLREDUCE_INTERNAL};
#define N_NAMED_PATHS (sizeof named_paths / sizeof named_paths[0])

size_t cuda_comm_paths(const char **names, size_t cap)
{
    for (size_t i = 0; i < N_NAMED_PATHS && i < cap; i++) names[i] = cuda_allreduce_mode_name(named_paths[i]);
    return N_NAMED_PATHS;
}

/* path NULL: BACKPLANE_CUDA_ALLREDUCE's mode with its fallbacks; a named
 * path: that mode or a decline, never another one in its place. */
static bp_status comm_open(struct bp_backend *const *backends, size_t n, const char *path, void **out_comm)
{
    struct cuda_plugin *pl = plugin();
    if (!out_comm)
        return BP_ERR_INVALID_ARGUMENT;
    *out_comm = NULL;
    if (!pl || pl->n_devices == 0) {
        cuda_log(pl, BP_LOG_INFO, "comm_init declines: there is no CUDA device.");
        return BP_ERR_UNSUPPORTED;
    }
    if (!backends || n == 0 || n > CUDA_MAX_DEVICES) {
        cuda_log(pl, BP_LOG_INFO, "comm_init declines: %zu participants (1 to %d expected).", n,
                 CUDA_MAX_DEVICES);
        return BP_ERR_UNSUPPORTED;
    }
    int ids[CUDA_MAX_DEVICES];
    for (size_t i = 0; i < n; i++) {
        if (!cuda_is_our_backend(backends[i])) {
            cuda_log(pl, BP_LOG_INFO, "comm_init declines: participant %zu is not a CUDA backend.", i);
            return BP_ERR_UNSUPPORTED;
        }
        ids[i] = ((struct cuda_backend *)backends[i]->context)->cd->id;
    }
    char why[256];
    enum cuda_allreduce_mode req = path ? cuda_parse_allreduce_env(path, why, sizeof why)
                                        : cuda_parse_allreduce_env(cuda_getenv(pl, "BACKPLANE_CUDA_ALLREDUCE"),
                                                                   why, sizeof why);
    if (why[0]) cuda_log(pl, BP_LOG_WARN, "%s", why);
    int64_t bf16_min = cuda_parse_bf16_min_env(cuda_getenv(pl, "BACKPLANE_CUDA_ALLREDUCE_BF16_MIN"),
                                               why, sizeof why);
    if (why[0]) cuda_log(pl, BP_LOG_WARN, "%s", why);
    enum cuda_allreduce_mode mode = cuda_choose_allreduce(req, ids, n, nccl_load, NULL, why, sizeof why);
    if (path && mode != req) {
        cuda_log(pl, BP_LOG_INFO, "all-reduce path %s declines these backends: %s", path, why);
        return BP_ERR_UNSUPPORTED;
    }
    if (why[0]) cuda_log(pl, mode == CUDA_ALLREDUCE_NONE ? BP_LOG_INFO : BP_LOG_WARN, "%s", why);
    if (mode == CUDA_ALLREDUCE_NONE) {
        if (req == CUDA_ALLREDUCE_NONE)
            cuda_log(pl, BP_LOG_INFO, "comm_init declines: BACKPLANE_CUDA_ALLREDUCE=none.");
        return BP_ERR_UNSUPPORTED;
    }
    struct cuda_comm *c = calloc(1, sizeof *c);
    if (!c)
        return BP_ERR_OUT_OF_MEMORY;
    c->pl = pl;
    c->n = n;
    c->mode = mode;
    c->bf16_min = bf16_min;
    for (size_t i = 0; i < n; i++)
        c->be[i] = backends[i]->context;
    if (mode == CUDA_ALLREDUCE_NCCL) {
        ncclResult_t r = g_nccl.init_all(c->nccl, (int)n, ids);
        if (r != ncclSuccess) {
            cuda_log(pl, BP_LOG_WARN, "ncclCommInitAll failed: %s; comm_init declines.",
                     g_nccl.error_string(r));
            free(c);
            return BP_ERR_UNSUPPORTED;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            (void)cudaSetDevice(ids[i]);
            if (cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming) != cudaSuccess) {
                (void)cudaGetLastError();
                cuda_comm_free(c);
                cuda_log(pl, BP_LOG_ERROR, "comm_init could not create an event.");
                return BP_ERR_INTERNAL;
            }
        }
        (void)cuda_enable_peer(pl, ids[0], ids[1]);
        (void)cuda_enable_peer(pl, ids[1], ids[0]);
    }
    cuda_log(pl, BP_LOG_INFO, "all-reduce over %zu CUDA backends uses %s.", n,
             cuda_allreduce_mode_name(mode));
    *out_comm = c;
    return BP_OK;
}

bp_status cuda_comm_init(struct bp_backend *const *backends, size_t n, void **out_comm)
{
    return comm_open(backends, n, NULL, out_comm);
}

bp_status cuda_comm_init_path(struct bp_backend *const *backends, size_t n, const char *path, void **out_comm)
{
    for (size_t i = 0; path && i < N_NAMED_PATHS; i++)
        if (!strcmp(path, cuda_allreduce_mode_name(named_paths[i]))) return comm_open(backends, n, path, out_comm);
    if (out_comm) *out_comm = NULL;
    return BP_ERR_NOT_FOUND;
}

void cuda_comm_free(void *comm)
{
    struct cuda_comm *c = comm;
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        (void)cudaSetDevice(c->be[i]->cd->id);
        (void)cudaStreamSynchronize(c->be[i]->stream);
        if (c->nccl[i]) g_nccl.destroy(c->nccl[i]);
        if (c->scratch[i]) (void)cudaFree(c->scratch[i]);
        if (c->ev[i]) (void)cudaEventDestroy(c->ev[i]);
    }
    (void)cudaGetLastError();
    free(c);
}

static bp_status scratch(struct cuda_comm *c, size_t i, size_t bytes, void **out)
{
    if (c->scratch_size[i] < bytes) {
        (void)cudaSetDevice(c->be[i]->cd->id);
        (void)cudaStreamSynchronize(c->be[i]->stream);
        if (c->scratch[i]) (void)cudaFree(c->scratch[i]);
        c->scratch[i] = NULL;
        c->scratch_size[i] = 0;
        bp_status st = cuda_check(c->pl, cudaMalloc(&c->scratch[i], bytes), "allocating all-reduce scratch");
        if (st != BP_OK)
            return st;
        c->scratch_size[i] = bytes;
    }
    *out = c->scratch[i];
    return BP_OK;
}

static bp_status allreduce_nccl(struct cuda_comm *c, struct bp_tensor *const *t, int64_t ne)
{
    const int type = t[0]->type;
    const bool bf16 = type == BP_TYPE_F32 && cuda_reduce_in_bf16(ne, c->bf16_min);
    void *buf[CUDA_MAX_DEVICES];
    for (size_t i = 0; i < c->n; i++) {
        buf[i] = t[i]->data;
        if (!bf16)
            continue;
        bp_status st = scratch(c, i, (size_t)ne * 2, &buf[i]);
        if (st != BP_OK)
            return st;
        (void)cudaSetDevice(c->be[i]->cd->id);
        if (cuda_launch_f32_to_bf16(t[i]->data, buf[i], ne, c->be[i]->stream))
            return cuda_check(c->pl, cudaGetLastError(), "converting to bf16 for the all-reduce");
    }
    const ncclDataType_t dt = bf16 || type == BP_TYPE_BF16 ? ncclBfloat16
                              : type == BP_TYPE_F16 ? ncclFloat16 : ncclFloat32;
    g_nccl.group_start();
    ncclResult_t r = ncclSuccess;
    for (size_t i = 0; i < c->n && r == ncclSuccess; i++)
        r = g_nccl.all_reduce(buf[i], buf[i], (size_t)ne, dt, ncclSum, c->nccl[i], c->be[i]->stream);
    ncclResult_t r2 = g_nccl.group_end();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) {
        cuda_log(c->pl, BP_LOG_ERROR, "ncclAllReduce failed: %s.", g_nccl.error_string(r));
        return BP_ERR_INTERNAL;
    }
    for (size_t i = 0; bf16 && i < c->n; i++) {
        (void)cudaSetDevice(c->be[i]->cd->id);
        if (cuda_launch_bf16_to_f32(buf[i], t[i]->data, ne, c->be[i]->stream))
            return cuda_check(c->pl, cudaGetLastError(), "converting back from bf16");
    }
    return BP_OK;
}

/* Each side waits for the other's pending work, pulls the other's tensor
 * into its scratch, and — after the other side has pulled — adds. */
static bp_status allreduce_internal(struct cuda_comm *c, struct bp_tensor *const *t, int64_t ne)
{
    const size_t bytes = bp_nbytes(t[0]);
    void *s[2];
    for (size_t i = 0; i < 2; i++) {
        bp_status st = scratch(c, i, bytes, &s[i]);
        if (st != BP_OK)
            return st;
    }
    struct cuda_backend *b0 = c->be[0], *b1 = c->be[1];
    const int d0 = b0->cd->id, d1 = b1->cd->id;
    cudaError_t e = cudaSuccess;
    (void)cudaSetDevice(d0); e = e ? e : cudaEventRecord(c->ev[0], b0->stream);
    (void)cudaSetDevice(d1); e = e ? e : cudaEventRecord(c->ev[1], b1->stream);
    e = e ? e : cudaStreamWaitEvent(b1->stream, c->ev[0], 0);
    e = e ? e : cudaMemcpyPeerAsync(s[1], d1, t[0]->data, d0, bytes, b1->stream);
    (void)cudaSetDevice(d0);
    e = e ? e : cudaStreamWaitEvent(b0->stream, c->ev[1], 0);
    e = e ? e : cudaMemcpyPeerAsync(s[0], d0, t[1]->data, d1, bytes, b0->stream);
    /* The pulls are queued; now each side must not write before the other
     * has read its tensor. */
    e = e ? e : cudaEventRecord(c->ev[0], b0->stream);
    (void)cudaSetDevice(d1);
    e = e ? e : cudaEventRecord(c->ev[1], b1->stream);
    e = e ? e : cudaStreamWaitEvent(b1->stream, c->ev[0], 0);
    (void)cudaSetDevice(d0);
    e = e ? e : cudaStreamWaitEvent(b0->stream, c->ev[1], 0);
    if (e != cudaSuccess)
        return cuda_check(c->pl, e, "queueing the internal all-reduce");
    int k = cuda_launch_add_inplace(t[0]->data, s[0], t[0]->type, ne, b0->stream);
    (void)cudaSetDevice(d1);
    if (!k) k = cuda_launch_add_inplace(t[1]->data, s[1], t[1]->type, ne, b1->stream);
    return k ? cuda_check(c->pl, (cudaError_t)k, "launching the all-reduce add") : BP_OK;
}

bp_status cuda_comm_allreduce_tensor(void *comm, struct bp_tensor *const *tensors, size_t n)
{
    struct cuda_comm *c = comm;
    if (!c || !tensors || n != c->n) {
        cuda_log(c ? c->pl : plugin(), BP_LOG_ERROR, "all-reduce was given %zu tensors for a communicator of %zu; "
                 "pass one tensor per backend of comm_init.", n, c ? c->n : (size_t)0);
        return BP_ERR_INVALID_ARGUMENT;
    }
    const struct bp_tensor *t0 = tensors[0];
    for (size_t i = 0; i < n; i++) {
        const struct bp_tensor *t = tensors[i];
        struct cuda_device *cd = t ? cuda_tensor_device(t) : NULL;
        bool ok = t && t->data && cd && cd->id == c->be[i]->cd->id && t->type == t0->type &&
                  bp_nelements(t) == bp_nelements(t0) && bp_is_contiguous(t) &&
                  (t->type == BP_TYPE_F32 || t->type == BP_TYPE_F16 || t->type == BP_TYPE_BF16);
        if (!ok) {
            cuda_log(c->pl, BP_LOG_INFO, "all-reduce declines tensor %zu ('%s'): it must be a "
                     "contiguous F32/F16/BF16 tensor in the memory of backend %zu, shaped like the "
                     "others.", i, t ? t->name : "(null)", i);
            return BP_ERR_UNSUPPORTED;
        }
    }
    const int64_t ne = bp_nelements(t0);
    if (ne == 0)
        return BP_OK;
    return c->mode == CUDA_ALLREDUCE_NCCL ? allreduce_nccl(c, tensors, ne)
                                          : allreduce_internal(c, tensors, ne);
}

/* ---- across processes ---- */

static bool nccl_rank_loadable(void *ctx)
{
    return nccl_load(ctx) && g_nccl.get_unique_id && g_nccl.init_rank;
}

/* NCCL for a multi-process communicator, or a sentence and false. */
static bool rank_comm_wanted(struct cuda_plugin *pl)
{
    if (!pl || pl->n_devices == 0) {
        cuda_log(pl, BP_LOG_INFO, "a multi-process communicator declines: there is no CUDA device.");
        return false;
    }
    char why[256];
    enum cuda_allreduce_mode req = cuda_parse_allreduce_env(cuda_getenv(pl, "BACKPLANE_CUDA_ALLREDUCE"),
                                                            why, sizeof why);
    enum cuda_allreduce_mode m = cuda_choose_rank_comm(req, nccl_rank_loadable, NULL, why, sizeof why);
    if (why[0]) cuda_log(pl, BP_LOG_INFO, "%s", why);
    return m == CUDA_ALLREDUCE_NCCL;
}

bp_status cuda_comm_get_unique_id(void *id, size_t cap, size_t *len)
{
    if (!id || !len || cap < sizeof(ncclUniqueId)) return BP_ERR_INVALID_ARGUMENT;
    if (!rank_comm_wanted(plugin())) return BP_ERR_UNSUPPORTED;
    ncclUniqueId u;
    ncclResult_t r = g_nccl.get_unique_id(&u);
    if (r != ncclSuccess) {
        cuda_log(plugin(), BP_LOG_WARN, "ncclGetUniqueId failed: %s.", g_nccl.error_string(r));
        return BP_ERR_UNSUPPORTED;
    }
    memcpy(id, &u, sizeof u);
    *len = sizeof u;
    return BP_OK;
}

bp_status cuda_comm_init_rank(struct bp_backend *b, int32_t nranks, int32_t rank, const void *id,
                              size_t id_len, void **out_comm)
{
    if (!out_comm) return BP_ERR_INVALID_ARGUMENT;
    *out_comm = NULL;
    if (!cuda_is_our_backend(b) || nranks < 1 || rank < 0 || rank >= nranks || !id ||
        id_len != sizeof(ncclUniqueId))
        return BP_ERR_INVALID_ARGUMENT;
    if (!rank_comm_wanted(plugin())) return BP_ERR_UNSUPPORTED;
    struct cuda_comm *c = calloc(1, sizeof *c);
    if (!c) return BP_ERR_OUT_OF_MEMORY;
    c->pl = ((struct cuda_backend *)b->context)->cd->pl;
    c->n = 1;
    c->mode = CUDA_ALLREDUCE_NCCL;
    char why[256];
    c->bf16_min = cuda_parse_bf16_min_env(cuda_getenv(c->pl, "BACKPLANE_CUDA_ALLREDUCE_BF16_MIN"), why,
                                          sizeof why);
    c->be[0] = b->context;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    (void)cudaSetDevice(c->be[0]->cd->id);
    ncclResult_t r = g_nccl.init_rank(&c->nccl[0], nranks, u, rank);
    if (r != ncclSuccess) {
        cuda_log(c->pl, BP_LOG_WARN, "ncclCommInitRank (rank %d of %d) failed: %s.", (int)rank,
                 (int)nranks, g_nccl.error_string(r));
        free(c);
        return BP_ERR_UNSUPPORTED;
    }
    cuda_log(c->pl, BP_LOG_INFO, "rank %d of %d reduces through NCCL on cuda%d.", (int)rank, (int)nranks,
             c->be[0]->cd->id);
    *out_comm = c;
    return BP_OK;
}
