/* group.c — the job's process group over MPI: joining it, rank and node
 * rank, the small collectives the host needs, and the fault-injection hook
 * the tests use. Every collective runs under the watchdog. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"

static struct bp_dist_group g_group;
static bool g_ready;

struct bp_dist_group *dist_group(void) { return g_ready ? &g_group : NULL; }

/* A launcher (mpirun, srun, hydra) leaves its mark in the environment.
 * Rank and size still come from MPI; this only avoids a singleton
 * MPI_Init, which would run a job of one and hide the user's mistake. */
static bool launched(void)
{
    static const char *const marks[] = { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE" };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (getenv(marks[i])) return true;
    return false;
}

/* BACKPLANE_DIST_TEST_DIE_AT=STEP[:RANK[:hang]] */
static void read_test_hook(struct bp_dist_group *g)
{
    g->die_step = -1;
    g->die_rank = g->nranks - 1;
    const char *v = dist_host->get_env("BACKPLANE_DIST_TEST_DIE_AT");
    if (!v || !*v) return;
    char *end;
    long long s = strtoll(v, &end, 10);
    long r = g->die_rank;
    if (end != v && *end == ':') r = strtol(end + 1, &end, 10);
    if (*end == ':' && !strcmp(end + 1, "hang")) { g->die_hang = true; end += strlen(end); }
    if (end == v || *end || s < 0 || r < 0 || r >= g->nranks) {
        dist_log(BP_LOG_WARN, "BACKPLANE_DIST_TEST_DIE_AT='%s' is not STEP[:RANK[:hang]] with RANK "
                 "below %d; ignoring it.", v, (int)g->nranks);
        return;
    }
    g->die_step = s;
    g->die_rank = (int32_t)r;
}

bp_status dist_init(struct bp_dist_group **out)
{
    if (!out) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (g_ready) { *out = &g_group; return BP_OK; }
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) {
        dist_log(BP_LOG_ERROR, "MPI was finalised in this process already; a dist: device needs it open.");
        return BP_ERR_UNSUPPORTED;
    }
    struct bp_dist_group *g = &g_group;
    memset(g, 0, sizeof *g);
    if (!inited) {
        if (!launched()) {
            /* INFO: the caller tells its user; the status says which case. */
            dist_log(BP_LOG_INFO, "a dist: device needs a job of several processes; run under "
                     "mpirun -np N (or srun --mpi=pmix on Slurm).");
            return BP_ERR_UNSUPPORTED;
        }
        int provided = 0;
        /* SERIALIZED: the meta backend's caller makes every MPI call, but not
         * always from the process's first thread. */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            dist_log(BP_LOG_ERROR, "MPI_Init_thread failed; check that mpirun launched this process.");
            return BP_ERR_UNSUPPORTED;
        }
        g->we_initialised = true;
    }
    g->world = MPI_COMM_WORLD;
    int r = 0, n = 0, lr = 0, ln = 0;
    MPI_Comm_rank(g->world, &r);
    MPI_Comm_size(g->world, &n);
    if (MPI_Comm_split_type(g->world, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &g->node) != MPI_SUCCESS) {
        dist_log(BP_LOG_ERROR, "MPI_Comm_split_type(SHARED) failed; cannot tell ranks on this node.");
        return BP_ERR_PLUGIN;
    }
    MPI_Comm_rank(g->node, &lr);
    MPI_Comm_size(g->node, &ln);
    g->rank = r, g->nranks = n, g->local_rank = lr, g->local_nranks = ln;
    read_test_hook(g);
    bp_status st = dist_watch_start(g);
    if (st != BP_OK) return st;
    g_ready = true;
    *out = g;
    return BP_OK;
}

bp_status dist_info(struct bp_dist_group *g, struct bp_dist_info *out)
{
    if (!g || !out || out->size < sizeof(size_t)) return BP_ERR_INVALID_ARGUMENT;
    struct bp_dist_info i = { .size = out->size < sizeof i ? out->size : sizeof i, .rank = g->rank,
                              .nranks = g->nranks, .local_rank = g->local_rank,
                              .local_nranks = g->local_nranks, .reductions = g->reductions,
                              .bytes_reduced = g->bytes_reduced };
    memcpy(out, &i, i.size);
    return BP_OK;
}

void dist_set_step(struct bp_dist_group *g, int64_t step)
{
    if (g) g->step = step;
}

const char *dist_comm_path(struct bp_dist_group *g) { return g ? g->comm_path : NULL; }

/* Every collective starts here: the test hook, then the watchdog. */
static void enter(struct bp_dist_group *g, const char *what)
{
    g->collectives++;
    dist_watch_arm(g, what);
    if (g->die_step >= 0 && g->step == g->die_step && g->rank == g->die_rank) {
        fprintf(stderr, "backplane: rank %d: BACKPLANE_DIST_TEST_DIE_AT: %s at step %lld.\n",
                (int)g->rank, g->die_hang ? "hanging" : "dying", (long long)g->step);
        fflush(stderr);
        if (!g->die_hang) raise(SIGKILL);
        for (;;) pause();
    }
}

static bp_status leave(const char *what, int rc)
{
    dist_watch_disarm();
    if (rc == MPI_SUCCESS) return BP_OK;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    dist_log(BP_LOG_ERROR, "%s failed: %s.", what, s);
    return BP_ERR_PLUGIN;
}

bp_status dist_bcast(struct bp_dist_group *g, void *buf, size_t len, int32_t root)
{
    if (!g || (!buf && len) || root < 0 || root >= g->nranks || len > (size_t)INT32_MAX)
        return BP_ERR_INVALID_ARGUMENT;
    enter(g, "broadcast");
    return leave("MPI_Bcast", MPI_Bcast(buf, (int)len, MPI_BYTE, root, g->world));
}

/* MPI counts are int: large buffers go in chunks. */
static int sum_f32(MPI_Comm c, float *buf, size_t n)
{
    int rc = MPI_SUCCESS;
    for (size_t o = 0; o < n && rc == MPI_SUCCESS;) {
        size_t k = n - o < (size_t)1 << 30 ? n - o : (size_t)1 << 30;
        rc = MPI_Allreduce(MPI_IN_PLACE, buf + o, (int)k, MPI_FLOAT, MPI_SUM, c);
        o += k;
    }
    return rc;
}

bp_status dist_allreduce_f32(struct bp_dist_group *g, float *buf, size_t n)
{
    if (!g || (!buf && n)) return BP_ERR_INVALID_ARGUMENT;
    enter(g, "all-reduce");
    return leave("MPI_Allreduce", sum_f32(g->world, buf, n));
}

bp_status dist_raw_allreduce_f32(struct bp_dist_group *g, float *buf, size_t n)
{
    if (!g || (!buf && n)) return BP_ERR_INVALID_ARGUMENT;
    return sum_f32(g->world, buf, n) == MPI_SUCCESS ? BP_OK : BP_ERR_PLUGIN;
}

bp_status dist_allreduce_min_int(struct bp_dist_group *g, int *v, const char *what)
{
    enter(g, what);
    return leave("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MIN, g->world));
}

bp_status dist_allreduce_max_f64(struct bp_dist_group *g, double *v, int n, const char *what)
{
    enter(g, what);
    return leave("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, g->world));
}

bp_status dist_agree(struct bp_dist_group *g, bool ok, char *msg, size_t cap, int32_t *first_failed)
{
    if (!g || !first_failed || (!ok && (!msg || !cap))) return BP_ERR_INVALID_ARGUMENT;
    int first = ok ? g->nranks : g->rank;
    bp_status st = dist_allreduce_min_int(g, &first, "agreement");
    if (st != BP_OK) return st;
    *first_failed = first < g->nranks ? first : -1;
    if (first >= g->nranks) return BP_OK;
    /* The sentence travels in a fixed-size block, so no length goes first. */
    char block[512] = "";
    if (g->rank == first) snprintf(block, sizeof block, "%s", msg);
    if ((st = dist_bcast(g, block, sizeof block, first)) != BP_OK) return st;
    if (msg && cap) snprintf(msg, cap, "%s", block);
    return BP_OK;
}

void dist_finalize(void)
{
    if (!g_ready) return;
    if (g_group.node != MPI_COMM_NULL && g_group.node) MPI_Comm_free(&g_group.node);
    if (g_group.we_initialised) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        dist_watch_arm(&g_group, "MPI_Finalize");
        if (!finalized) MPI_Finalize();
        dist_watch_disarm();
    }
    dist_watch_stop();
    g_ready = false;
}
