/*
 * bp_dist.h — tensor parallelism across processes (SPMD), as the host, the
 * "mpi" plugin and device plugins share it.
 *
 * The design. Every rank of an MPI job opens the same model and builds the
 * same graph on a meta device over N "slot" devices, one per rank, all of
 * the "mpi" registry (libbackplane-mpi.so): slot r of rank r forwards to the
 * rank's real device (cpu, cuda0, vulkan0, ...); every other slot is a
 * placeholder that holds no memory (writes vanish, reads give zeros) and
 * computes nothing. So the meta plugin's split rules run unchanged, rank r
 * holds and computes exactly what sub-device r would in one process, and
 * because every slot belongs to one registry the meta plugin closes each
 * PARTIAL cut with that registry's bp_comm_allreduce_tensor: the slot
 * communicator sums the local slice across ranks, device to device when
 * the real device's registry offers the multi-process procs below on every
 * rank (NCCL on CUDA), else through host memory and MPI_Allreduce. A tensor
 * read back from the meta device shows the rank's own slices and zeros
 * elsewhere (a mirrored one: rank 0's copy, zeros on the others); summing
 * it across ranks (bp_dist_allreduce_f32) gathers it whole, exactly
 * (x + 0 = x).
 *
 * MPI itself lives only in the mpi plugin; the host and device plugins
 * reach the process group through the proc-address names below, looked up
 * on the registry named BP_DIST_REGISTRY. Nesting (a rank's device being a
 * meta device itself) is refused: a meta device cannot contain a meta device.
 *
 * Collectives: every bp_dist_* call marked "collective" must be made by
 * every rank in the same order, from one thread at a time. A watchdog ends
 * the job with a sentence naming the rank and the step when one does not
 * complete within BACKPLANE_DIST_TIMEOUT seconds (default 60).
 */
#ifndef BP_DIST_H
#define BP_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bp_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_device;
struct bp_backend;

/* The registry (plugin family) that offers the process group. */
#define BP_DIST_REGISTRY "mpi"

/* The process group of this job; owned by the mpi plugin, one per process. */
struct bp_dist_group;

struct bp_dist_info {
    size_t  size;            /* sizeof as the caller compiled it */
    int32_t rank, nranks;    /* in the whole job */
    int32_t local_rank;      /* among the ranks on this node (MPI_COMM_TYPE_SHARED) */
    int32_t local_nranks;
    uint64_t reductions;     /* tensors the slot communicators have reduced so far */
    uint64_t bytes_reduced;  /* their bytes (one copy each) */
};

/* Join the job's process group (initialises MPI on the first call; later
 * calls return the same group). Not launched by mpirun/srun: returns
 * BP_ERR_UNSUPPORTED (logged at INFO: the caller tells its user to run
 * under mpirun -np N). Collective. */
#define BP_PROC_DIST_INIT "bp_dist_init"
typedef bp_status (*bp_dist_init_fn)(struct bp_dist_group **out);

/* Rank, size, node-local rank and reduction counters of the group
 * (out->size set by the caller). */
#define BP_PROC_DIST_INFO "bp_dist_info"
typedef bp_status (*bp_dist_info_fn)(struct bp_dist_group *g, struct bp_dist_info *out);

/* Copy len bytes at buf on rank root to buf on every rank. Collective. */
#define BP_PROC_DIST_BCAST "bp_dist_bcast"
typedef bp_status (*bp_dist_bcast_fn)(struct bp_dist_group *g, void *buf, size_t len, int32_t root);

/* In place: buf[0..n) becomes the elementwise sum over ranks (host memory).
 * Collective. */
#define BP_PROC_DIST_ALLREDUCE_F32 "bp_dist_allreduce_f32"
typedef bp_status (*bp_dist_allreduce_f32_fn)(struct bp_dist_group *g, float *buf, size_t n);

/* The reference for benchmarks: the same sum with MPI_Allreduce alone (no
 * watchdog, no hooks, no counters). Collective. */
#define BP_PROC_DIST_RAW_ALLREDUCE_F32 "bp_dist_raw_allreduce_f32"
typedef bp_status (*bp_dist_raw_allreduce_f32_fn)(struct bp_dist_group *g, float *buf, size_t n);

/* Whether every rank is fine. Each rank passes ok and, when not ok, its
 * sentence in msg. Afterwards *first_failed is the lowest failing rank (-1
 * when none) and msg holds that rank's sentence on every rank, so all ranks
 * stop together and one of them says why. Collective. */
#define BP_PROC_DIST_AGREE "bp_dist_agree"
typedef bp_status (*bp_dist_agree_fn)(struct bp_dist_group *g, bool ok, char *msg, size_t cap,
                                      int32_t *first_failed);

/* Name the application's current step (a decode step, say): the watchdog's
 * sentence names it and BACKPLANE_DIST_TEST_DIE_AT=STEP[:RANK] (a test hook)
 * kills rank RANK (default the last) at the first collective of that step. */
#define BP_PROC_DIST_SET_STEP "bp_dist_set_step"
typedef void (*bp_dist_set_step_fn)(struct bp_dist_group *g, int64_t step);

/* The slot devices of this job over local, this rank's real device: out
 * receives nranks devices, out[rank] forwarding to local, the others
 * placeholders (see the top). Pass them to bp_meta_device_new in this
 * order with equal ratios. backend_params (may be NULL) are given to
 * local's init_backend ("n_threads=1"). The devices belong to the plugin
 * and live until it unloads. A meta device as local is refused with
 * BP_ERR_INVALID_ARGUMENT. Not collective. */
#define BP_PROC_DIST_DEVICES "bp_dist_devices"
typedef bp_status (*bp_dist_devices_fn)(struct bp_dist_group *g, struct bp_device *local,
                                        const char *backend_params, struct bp_device **out);

/* Which path the slot communicator took for the last meta backend made on
 * slot devices: "device" (the device registry's multi-process comm) or
 * "host" (host memory + MPI_Allreduce); NULL before the first. (1.1)
 * "auto": every rank has the device comm and BACKPLANE_META_ALLREDUCE is
 * auto (or unset), so each size class takes the faster right one of the
 * two, measured on its first reduction and the same on every rank. */
#define BP_PROC_DIST_COMM_PATH "bp_dist_comm_path"
typedef const char *(*bp_dist_comm_path_fn)(struct bp_dist_group *g);

/* ---- multi-process communicators a device registry may offer ----
 * Bootstrapped the NCCL way: rank 0 makes an id, the mpi plugin broadcasts
 * it, and every rank makes its communicator from (nranks, rank, id). The
 * communicator is used with the registry's BP_PROC_COMM_ALLREDUCE_TENSOR,
 * given one tensor (this rank's, on the backend passed here), and freed
 * with BP_PROC_COMM_FREE. Absent or failing on any rank: the host path. */

#define BP_COMM_UNIQUE_ID_MAX 128

/* Write an id of at most cap bytes to id and its length to *len. */
#define BP_PROC_COMM_GET_UNIQUE_ID "bp_comm_get_unique_id"
typedef bp_status (*bp_comm_get_unique_id_fn)(void *id, size_t cap, size_t *len);

/* This rank's member of an nranks communicator over backend b's device.
 * Collective across the ranks that share the id. */
#define BP_PROC_COMM_INIT_RANK "bp_comm_init_rank"
typedef bp_status (*bp_comm_init_rank_fn)(struct bp_backend *b, int32_t nranks, int32_t rank,
                                          const void *id, size_t id_len, void **out_comm);

#ifdef __cplusplus
}
#endif
#endif /* BP_DIST_H */
