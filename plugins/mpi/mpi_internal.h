/* mpi_internal.h — what the files of the mpi plugin share. */
#ifndef BP_MPI_INTERNAL_H
#define BP_MPI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <mpi.h>

#include <backplane/bp_abi.h>
#include <backplane/bp_dist.h>
#include <backplane/bp_meta_abi.h>

#define DIST_NAME "mpi"
/* A meta device takes at most this many sub-devices, so a job this many ranks. */
#define DIST_MAX_RANKS 16

extern const struct bp_host_services *dist_host;
#define dist_log(level, ...) dist_host->log((level), DIST_NAME, __VA_ARGS__)

/* ---- group.c: the process group, its collectives and test hooks ---- */

struct bp_dist_group {
    MPI_Comm world, node;
    int32_t rank, nranks, local_rank, local_nranks;
    bool we_initialised;          /* MPI_Finalize at shutdown is ours to call */
    int64_t step;                 /* the application's, for sentences and hooks */
    uint64_t collectives;         /* started so far */
    int64_t die_step;             /* BACKPLANE_DIST_TEST_DIE_AT, -1: none */
    int32_t die_rank;
    bool die_hang;                /* hang instead of dying */
    const char *comm_path;        /* "device" or "host" */
    uint64_t reductions, bytes_reduced;  /* by slot communicators */
};

/* The group once bp_dist_init has succeeded, else NULL. */
struct bp_dist_group *dist_group(void);
bp_status dist_init(struct bp_dist_group **out);
bp_status dist_info(struct bp_dist_group *g, struct bp_dist_info *out);
bp_status dist_bcast(struct bp_dist_group *g, void *buf, size_t len, int32_t root);
bp_status dist_allreduce_f32(struct bp_dist_group *g, float *buf, size_t n);
bp_status dist_raw_allreduce_f32(struct bp_dist_group *g, float *buf, size_t n);
bp_status dist_agree(struct bp_dist_group *g, bool ok, char *msg, size_t cap, int32_t *first_failed);
void dist_set_step(struct bp_dist_group *g, int64_t step);
const char *dist_comm_path(struct bp_dist_group *g);
/* Integer minimum over ranks, for the plugin's own agreements. Collective. */
bp_status dist_allreduce_min_int(struct bp_dist_group *g, int *v, const char *what);
/* Elementwise maximum of v[0..n) over ranks, in place. Collective. */
bp_status dist_allreduce_max_f64(struct bp_dist_group *g, double *v, int n, const char *what);
/* MPI_Finalize when we initialised MPI (registry shutdown). */
void dist_finalize(void);

/* ---- watchdog.c: no collective waits forever ---- */

/* Arm before a collective (what: its name), disarm after. A collective
 * still armed after BACKPLANE_DIST_TIMEOUT seconds ends the process with a
 * sentence naming the rank, the collective and the step. */
void dist_watch_arm(const struct bp_dist_group *g, const char *what);
void dist_watch_disarm(void);
bp_status dist_watch_start(const struct bp_dist_group *g);
void dist_watch_stop(void);

/* ---- slots.c: one device per rank ---- */

bp_status dist_devices(struct bp_dist_group *g, struct bp_device *local, const char *params,
                       struct bp_device **out);
/* True for a placeholder's backend (another rank's slot). */
bool dist_is_placeholder_backend(const struct bp_backend *b);
void dist_slots_free_all(void);
/* The proc bp_weight_buffer_type of a slot: this rank's slot answers as its
 * real device does (the CPU's x8 layout), so the meta device keeps this
 * rank's weight slices there; a placeholder has none (NULL). */
struct bp_buffer_type *dist_slot_weight_buffer_type(struct bp_device *d, enum bp_type type);

/* ---- comm.c: the slot registry's bp_comm_* ---- */

enum dist_via { DIST_VIA_DEVICE, DIST_VIA_HOST, DIST_VIAS };

struct dist_comm {
    struct bp_dist_group *g;
    size_t local;                        /* index of this rank's backend */
    /* device path */
    void *dev_comm;
    bp_comm_allreduce_tensor_fn dev_allreduce;
    bp_comm_free_fn dev_free;
    /* host path: staging for a device whose memory the CPU cannot read */
    float *stage;
    size_t stage_cap;
    /* auto: the path per size class (-1: not measured yet), and the
     * tensor's contents while its memory serves the measurement */
    bool choose;
    int class_via[BP_META_ALLREDUCE_CLASSES];
    float *save;
    size_t save_cap;
};

bp_status dist_comm_init(struct bp_backend *const *backends, size_t n, void **out);
bp_status dist_comm_allreduce_tensor(void *comm, struct bp_tensor *const *tensors, size_t n);
void dist_comm_free(void *comm);
/* One path on this rank's tensor t, in place. Collective. */
bp_status dist_comm_device_reduce(struct dist_comm *c, struct bp_tensor *t);
bp_status dist_comm_host_reduce(struct dist_comm *c, struct bp_tensor *t);
/* *p holds at least n floats (realloc'd). */
bp_status dist_comm_grow(float **p, size_t *cap, size_t n);

/* ---- comm_auto.c: BACKPLANE_META_ALLREDUCE=auto across ranks ---- */

/* The path for t's size class, measured on t (contents kept) on the first
 * reduction of the class and the same on every rank. Collective. */
bp_status dist_comm_choose(struct dist_comm *c, struct bp_tensor *t, enum dist_via *via);

#endif /* BP_MPI_INTERNAL_H */
