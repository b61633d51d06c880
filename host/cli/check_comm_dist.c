/* check_comm_dist.c — `mpirun -np N backplane check --comm dist:X`: the
 * link preflight of a dist: device. Its cuts are closed across ranks by the
 * device plugin's multi-process communicator ("device", NCCL on CUDA) when
 * every rank can make one, or through host memory and MPI_Allreduce
 * ("host"). Every rank runs the same calls in the same order: each path at
 * 4 KB .. 16 MB, rounds alternating the paths, each call on integer-valued
 * inputs that differ per rank, so every rank can check its own sum exactly
 * and a wrong or missing contribution shows. The findings are summed over
 * ranks (each rank writes only its own block) and judged alike on every
 * rank; rank 0 prints the table of check --comm for meta devices. A rank
 * that dies or stalls is ended by the mpi plugin's watchdog
 * (BACKPLANE_DIST_TIMEOUT) with a sentence; the size classes are the steps
 * 1..4 that BACKPLANE_DIST_TEST_DIE_AT names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_dist.h>

#include "../run/dist.h"
#include "bench.h"
#include "check_harness.h"
#include "cli.h"

/* How a path reduces: the device's communicator on the rank's tensor, or
 * the group's F32 sum on host memory. */
enum path_kind { VIA_DEVICE, VIA_HOST };

struct path {
    const char *name;
    enum path_kind kind;
};

/* One rank's findings for one path and size, as floats for the gathering
 * sum: the median seconds, wrong calls, the largest error, the first
 * failing status. */
enum { F_SECONDS, F_WRONG, F_ERR, F_STATUS, N_FIELDS };
#define N_CELLS (COMM_MAX_PATHS * BP_META_ALLREDUCE_CLASSES * N_FIELDS)

struct probe {
    struct bp_run_dist *d;
    int32_t rank, nranks;
    struct path paths[2];
    size_t n_paths;
    struct bp_device *local;           /* the rank's real device */
    struct bp_backend *be;
    void *comm;                        /* the device's communicator, or NULL */
    bp_comm_allreduce_tensor_fn allreduce;
    bp_comm_free_fn comm_free;
    struct bp_tensor *t[BP_META_ALLREDUCE_CLASSES];
    float *host;                       /* the class's buffer for VIA_HOST and for checking */
};

/* Rank r's element i and the sum over n ranks: integers below 2^24 up to
 * 16 ranks, so F32 adds them exactly in any order. */
static float input(size_t i, int32_t r) { return (float)(i % 251 + 1 + 256 * (size_t)r); }
static float expected(size_t i, int32_t n)
{
    return (float)((size_t)n * (i % 251 + 1) + 128 * (size_t)n * (size_t)(n - 1));
}

static bp_status fill(struct probe *p, const struct path *path, int k, size_t count)
{
    for (size_t i = 0; i < count; i++) p->host[i] = input(i, p->rank);
    return path->kind == VIA_DEVICE ? bp_tensor_set(p->t[k], p->host, 0, count * sizeof(float)) : BP_OK;
}

static bp_status reduce(struct probe *p, const struct path *path, int k, size_t count)
{
    if (path->kind == VIA_HOST) return bp_run_dist_gather(p->d, p->host, count);
    struct bp_tensor *one[1] = { p->t[k] };
    return p->allreduce(p->comm, one, 1);
}

/* The largest error of this rank's sum; wrong when any element differs. */
static double verify(struct probe *p, const struct path *path, int k, size_t count, bool *wrong)
{
    if (path->kind == VIA_DEVICE && bp_tensor_get(p->t[k], p->host, 0, count * sizeof(float)) != BP_OK) {
        *wrong = true;
        return INFINITY;
    }
    double err = 0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)p->host[i] - (double)expected(i, p->nranks));
        if (e > err) err = e;
    }
    *wrong = err != 0;
    return err;
}

/* Every path at size class k, COMM_ROUNDS rounds alternating which path
 * goes first; this rank's findings into cell[path][k][field]. */
static bp_status measure_class(struct probe *p, int k, float *cell)
{
    const size_t count = bp_meta_allreduce_class_bytes(k) / sizeof(float);
    double sec[COMM_MAX_PATHS][COMM_ROUNDS];
    bp_run_dist_step(p->d, k + 1);
    for (int round = 0; round < COMM_ROUNDS; round++)
        for (size_t j = 0; j < p->n_paths; j++) {
            const size_t pi = round % 2 ? p->n_paths - 1 - j : j;
            const struct path *path = &p->paths[pi];
            float *c = cell + (pi * BP_META_ALLREDUCE_CLASSES + (size_t)k) * N_FIELDS;
            bp_status st = fill(p, path, k, count);
            /* Start together, so a call's time is the link's, not the
             * wait for a rank still filling. */
            float sync = 0;
            bp_status bst = bp_run_dist_gather(p->d, &sync, 1);
            if (bst != BP_OK) return bst;
            double t0 = bench_now();
            if (st == BP_OK) st = reduce(p, path, k, count);
            sec[pi][round] = bench_now() - t0;
            bool wrong = false;
            if (st == BP_OK) {
                double e = verify(p, path, k, count, &wrong);
                if (e > c[F_ERR]) c[F_ERR] = (float)e;
                c[F_WRONG] += wrong;
            } else if (c[F_STATUS] == 0) {
                c[F_STATUS] = (float)st;
            }
        }
    for (size_t pi = 0; pi < p->n_paths; pi++)
        cell[(pi * BP_META_ALLREDUCE_CLASSES + (size_t)k) * N_FIELDS + F_SECONDS] =
            (float)bench_median(sec[pi], COMM_ROUNDS);
    return BP_OK;
}

/* The table from the cells summed over ranks (rank r's block at r): a
 * path's time is its slowest rank's, its sum wrong if any rank's was. */
static void judge(const struct probe *p, const float *all, struct comm_table *t)
{
    t->n_paths = p->n_paths;
    for (size_t pi = 0; pi < p->n_paths; pi++)
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
            struct bp_meta_allreduce_probe *r = &t->r[k][pi];
            snprintf(r->path, sizeof r->path, "%s", p->paths[pi].name);
            for (int32_t rank = 0; rank < p->nranks; rank++) {
                const float *c = all + (size_t)rank * N_CELLS + (pi * BP_META_ALLREDUCE_CLASSES + (size_t)k) * N_FIELDS;
                if (c[F_SECONDS] > r->seconds) r->seconds = c[F_SECONDS];
                if (c[F_WRONG] > 0) r->wrong = 1;
                if (c[F_ERR] > r->max_abs_err) r->max_abs_err = c[F_ERR];
                if (c[F_STATUS] != 0 && r->status == BP_OK) r->status = (int32_t)c[F_STATUS];
            }
        }
}

/* The rank's real device, a backend on it and the probe's tensors in its
 * memory; false with err on failure. Not collective: the caller agrees on
 * the outcome. */
static bool set_up(struct probe *p, const char *name, struct bp_context **ctx, struct bp_buffer **buf,
                   char *err, size_t cap)
{
    struct bp_device *dev = NULL;
    char local_name[64];
    /* The dist device itself, so that a bad spec reads as it does for run. */
    if (bp_run_dist_device(p->d, name, 0, &dev, err, cap) != BP_OK) return false;
    if (!bp_run_dist_local_name(name + strlen(BP_RUN_DIST_PREFIX), bp_run_dist_info(p->d)->local_rank, local_name,
                                sizeof local_name) ||
        !(p->local = bp_device_by_name(local_name)) || bp_backend_init(p->local, NULL, &p->be) != BP_OK) {
        snprintf(err, cap, "%s", bp_last_error());
        return false;
    }
    if (bp_context_new(BP_META_ALLREDUCE_CLASSES, ctx) != BP_OK) {
        snprintf(err, cap, "out of host memory.");
        return false;
    }
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++)
        p->t[k] = bp_tensor_new_1d(*ctx, BP_TYPE_F32, (int64_t)(bp_meta_allreduce_class_bytes(k) / sizeof(float)));
    p->host = malloc(bp_meta_allreduce_class_bytes(BP_META_ALLREDUCE_CLASSES - 1));
    if (!p->host || bp_context_alloc_tensors(*ctx, bp_device_buffer_type(p->local), NULL, buf) != BP_OK) {
        snprintf(err, cap, "%s cannot hold the probe's tensors (4 KiB to 16 MiB): %s", local_name, bp_last_error());
        return false;
    }
    return true;
}

/* Whether a sum over ranks of flag is zero: the same answer everywhere. */
static bool none(struct bp_run_dist *d, bool flag, bool *mpi_ok)
{
    float v = flag;
    *mpi_ok = bp_run_dist_gather(d, &v, 1) == BP_OK;
    return *mpi_ok && v == 0;
}

/* The device's communicator, bootstrapped as the mpi plugin does (rank 0's
 * id to all); NULL on every rank unless every rank made one. Collective. */
static bool device_comm(struct probe *p, bool *mpi_ok)
{
    struct bp_registry *r = p->local->reg;
    void *(*get)(struct bp_registry *, const char *) = r ? r->iface->get_proc_address : NULL;
    bp_comm_get_unique_id_fn get_id = get ? (bp_comm_get_unique_id_fn)get(r, BP_PROC_COMM_GET_UNIQUE_ID) : NULL;
    bp_comm_init_rank_fn init_rank = get ? (bp_comm_init_rank_fn)get(r, BP_PROC_COMM_INIT_RANK) : NULL;
    p->allreduce = get ? (bp_comm_allreduce_tensor_fn)get(r, BP_PROC_COMM_ALLREDUCE_TENSOR) : NULL;
    p->comm_free = get ? (bp_comm_free_fn)get(r, BP_PROC_COMM_FREE) : NULL;
    if (!none(p->d, !(get_id && init_rank && p->allreduce && p->comm_free), mpi_ok)) return false;
    struct { int32_t made; uint32_t len; unsigned char id[BP_COMM_UNIQUE_ID_MAX]; } blob = {0};
    if (p->rank == 0) {
        size_t len = 0;
        blob.made = get_id(blob.id, sizeof blob.id, &len) == BP_OK && len <= sizeof blob.id;
        blob.len = (uint32_t)len;
    }
    if (!(*mpi_ok = bp_run_dist_bcast(p->d, &blob, sizeof blob, 0) == BP_OK) || !blob.made) return false;
    bool made = init_rank(p->be, p->nranks, p->rank, blob.id, blob.len, &p->comm) == BP_OK && p->comm;
    if (none(p->d, !made, mpi_ok)) return true;
    if (p->comm) p->comm_free(p->comm);
    p->comm = NULL;
    return false;
}

int check_comm_dist(const char *name, bool json)
{
    char err[1024] = "";
    struct probe p = {0};
    bp_status st = bp_run_dist_open(&p.d, err, sizeof err);
    if (st != BP_OK) {
        /* Not launched by mpirun, or no mpi plugin: a usage error, as for
         * meta devices; exit 1 is kept for a path that summed wrong. */
        cli_error("%s", err);
        return st == BP_ERR_UNSUPPORTED || st == BP_ERR_NOT_FOUND ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    const struct bp_dist_info *info = bp_run_dist_info(p.d);
    p.rank = info->rank, p.nranks = info->nranks;
    struct bp_context *ctx = NULL;
    struct bp_buffer *buf = NULL;
    float *cells = NULL;
    int rc = CLI_EXIT_FAIL;
    bool ok = set_up(&p, name, &ctx, &buf, err, sizeof err);
    if (!bp_run_dist_agree(p.d, ok, err, sizeof err)) {
        if (p.rank == 0) cli_error("%s", err);
        goto out;
    }
    bool mpi_ok = true;
    if (device_comm(&p, &mpi_ok)) p.paths[p.n_paths++] = (struct path){ "device", VIA_DEVICE };
    p.paths[p.n_paths++] = (struct path){ "host", VIA_HOST };
    if (!mpi_ok) {
        cli_error("rank %d: the ranks lost each other while setting up (MPI failed; see above).", (int)p.rank);
        goto out;
    }
    const size_t n_cells = (size_t)p.nranks * N_CELLS;
    cells = calloc(n_cells, sizeof *cells);
    ok = cells != NULL;
    if (!ok) snprintf(err, sizeof err, "out of host memory for the measurements.");
    if (!bp_run_dist_agree(p.d, ok, err, sizeof err)) {
        if (p.rank == 0) cli_error("%s", err);
        goto out;
    }
    float *mine = cells + (size_t)p.rank * N_CELLS;
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++)
        if (measure_class(&p, k, mine) != BP_OK) {
            cli_error("rank %d: the ranks lost each other while measuring (MPI failed; see above).", (int)p.rank);
            goto out;
        }
    if (bp_run_dist_gather(p.d, cells, n_cells) != BP_OK) {
        cli_error("rank %d: gathering the measurements failed (MPI failed; see above).", (int)p.rank);
        goto out;
    }
    static struct comm_table t;
    memset(&t, 0, sizeof t);
    char description[160];
    snprintf(description, sizeof description, "%s on each rank, %s", bp_device_name(p.local),
             p.comm ? "with a device communicator" : "no device communicator");
    t.name = name;
    t.description = description;
    t.members = "ranks";
    t.on_wrong = "BACKPLANE_META_ALLREDUCE=auto (the default) never chooses it, =comm would";
    t.n_members = (size_t)p.nranks;
    judge(&p, cells, &t);
    rc = comm_report(&t, json, p.rank == 0);
out:
    if (p.comm) p.comm_free(p.comm);
    bp_backend_free(p.be);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    free(p.host);
    free(cells);
    bp_run_dist_free(p.d);
    return rc;
}
