/* dist.c — `--device dist:X`: the runner's use of the mpi plugin's process
 * group. Every rank makes the same meta device, over slot devices of which
 * only its own is real, so the split table (split.c) says once which slice
 * each rank holds. */
#include "dist.h"
#include "arch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/bp_meta.h>

#include "decoder.h"
#include "run_error.h"

struct bp_run_dist {
    struct bp_dist_group *g;
    struct bp_dist_info info;
    bp_dist_bcast_fn bcast;
    bp_dist_allreduce_f32_fn allreduce;
    bp_dist_agree_fn agree;
    bp_dist_set_step_fn set_step;
    bp_dist_devices_fn devices;
    bp_dist_comm_path_fn comm_path;
    bp_dist_info_fn get_info;
};

bool bp_run_dist_wanted(const char *name)
{
    return name && !strncmp(name, BP_RUN_DIST_PREFIX, strlen(BP_RUN_DIST_PREFIX));
}

static void *proc(struct bp_registry *r, const char *name)
{
    return r->iface->get_proc_address ? r->iface->get_proc_address(r, name) : NULL;
}

bp_status bp_run_dist_open(struct bp_run_dist **out, char *err, size_t cap)
{
    *out = NULL;
    struct bp_registry *r = bp_registry_by_name(BP_DIST_REGISTRY);
    if (!r)
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND, "a dist: device needs the mpi plugin "
                           "(libbackplane-mpi.so), which is not loaded; build backplane with MPI "
                           "installed (Debian: openmpi-bin libopenmpi-dev) and see 'backplane devices'.");
    struct bp_run_dist *d = calloc(1, sizeof *d);
    if (!d) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory.");
    bp_dist_init_fn init = (bp_dist_init_fn)proc(r, BP_PROC_DIST_INIT);
    bp_dist_info_fn info = d->get_info = (bp_dist_info_fn)proc(r, BP_PROC_DIST_INFO);
    d->bcast = (bp_dist_bcast_fn)proc(r, BP_PROC_DIST_BCAST);
    d->allreduce = (bp_dist_allreduce_f32_fn)proc(r, BP_PROC_DIST_ALLREDUCE_F32);
    d->agree = (bp_dist_agree_fn)proc(r, BP_PROC_DIST_AGREE);
    d->set_step = (bp_dist_set_step_fn)proc(r, BP_PROC_DIST_SET_STEP);
    d->devices = (bp_dist_devices_fn)proc(r, BP_PROC_DIST_DEVICES);
    d->comm_path = (bp_dist_comm_path_fn)proc(r, BP_PROC_DIST_COMM_PATH);
    if (!init || !info || !d->bcast || !d->allreduce || !d->agree || !d->set_step || !d->devices ||
        !d->comm_path) {
        free(d);
        return bp_run_fail(err, cap, BP_ERR_ABI, "the loaded mpi plugin lacks the bp_dist_* procs of "
                           "this backplane; install the matching libbackplane-mpi.so.");
    }
    bp_status st = init(&d->g);
    if (st != BP_OK) {
        free(d);
        /* The plugin logged the reason; repeat the remedy here for the user. */
        return bp_run_fail(err, cap, st, "a dist: device runs one process per rank; run under "
                           "mpirun -np N (or srun --mpi=pmix on Slurm).");
    }
    d->info.size = sizeof d->info;
    if ((st = info(d->g, &d->info)) != BP_OK) {
        free(d);
        return bp_run_fail(err, cap, st, "the mpi plugin did not report the rank.");
    }
    *out = d;
    return BP_OK;
}

void bp_run_dist_free(struct bp_run_dist *d) { free(d); }

const struct bp_dist_info *bp_run_dist_info(const struct bp_run_dist *d) { return &d->info; }

bool bp_run_dist_local_name(const char *spec, int32_t local_rank, char *buf, size_t cap)
{
    if (strchr(spec, ',')) {
        /* An explicit list: entry i for node-local rank i. */
        const char *p = spec;
        for (int32_t i = 0; i < local_rank && p; i++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        if (!p || !*p || *p == ',') return false;
        size_t len = strcspn(p, ",");
        int w = snprintf(buf, cap, "%.*s", (int)len, p);
        return w >= 0 && (size_t)w < cap;
    }
    size_t n = strlen(spec), k = n;
    while (k > 0 && isdigit((unsigned char)spec[k - 1])) k--;
    int w;
    /* "cpu" and names without an index are the same device on every rank. */
    if (k == n || k == 0 || !strncmp(spec, "cpu", 3))
        w = snprintf(buf, cap, "%s", spec);
    else
        w = snprintf(buf, cap, "%.*s%ld", (int)k, spec, strtol(spec + k, NULL, 10) + (long)local_rank);
    return w >= 0 && (size_t)w < cap;
}

int bp_run_dist_cpu_threads(int32_t local_nranks, long ncpu, const char *env_threads)
{
    if (local_nranks <= 1 || (env_threads && *env_threads))
        return 0;
    const long share = ncpu / (long)local_nranks;
    return share > 1 ? (int)(share > 4096 ? 4096 : share) : 1;
}

bp_status bp_run_dist_device(struct bp_run_dist *d, const char *name, int n_threads,
                             struct bp_device **out, char *err, size_t cap)
{
    *out = NULL;
    const char *spec = name + strlen(BP_RUN_DIST_PREFIX);
    if (!strncmp(spec, "meta:", 5) || !strncmp(spec, "dist:", 5))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "'%s' nests tensor parallelism, which "
                           "a meta device cannot; run one rank per device instead (dist:cpu, "
                           "dist:cuda0).", name);
    char local_name[64];
    if (!*spec || !bp_run_dist_local_name(spec, d->info.local_rank, local_name, sizeof local_name))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "'%s' names no device for node-local "
                           "rank %d; write e.g. dist:cpu, dist:cuda0 or one device per rank of a "
                           "node, dist:vulkan0,vulkan1.", name, (int)d->info.local_rank);
    struct bp_device *local = bp_device_by_name(local_name);
    if (!local)
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND, "node-local rank %d has no device '%s' to "
                           "run on; run at most as many ranks per node as there are devices.",
                           (int)d->info.local_rank, local_name);
    struct bp_device *slots[BP_META_MAX_DEVICES];
    float ratios[BP_META_MAX_DEVICES];
    char params[32] = "";
    if (n_threads <= 0 && bp_device_type(local) == BP_DEVICE_TYPE_CPU)
        n_threads = bp_run_dist_cpu_threads(d->info.local_nranks, sysconf(_SC_NPROCESSORS_ONLN),
                                            getenv("BACKPLANE_CPU_THREADS"));
    if (n_threads > 0) snprintf(params, sizeof params, "n_threads=%d", n_threads);
    bp_status st = d->devices(d->g, local, params[0] ? params : NULL, slots);
    if (st != BP_OK)
        return bp_run_fail(err, cap, st, "the mpi plugin made no slot devices over '%s'; see its "
                           "message above.", local_name);
    /* Even shares: every rank must cut the tensors alike, whatever
     * BACKPLANE_META_SPLIT says in its own environment. */
    for (int32_t r = 0; r < d->info.nranks; r++) ratios[r] = 1.0f;
    if ((st = bp_meta_device_new(slots, (size_t)d->info.nranks, ratios, NULL, NULL, out)) != BP_OK)
        return bp_run_fail(err, cap, st, "%s", bp_last_error());
    return BP_OK;
}

bool bp_run_dist_agree(struct bp_run_dist *d, bool ok, char *err, size_t cap)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ok ? "" : err);
    int32_t first = -1;
    if (d->agree(d->g, ok, msg, sizeof msg, &first) != BP_OK) {
        snprintf(err, cap, "rank %d: the ranks could not agree (MPI failed; see above).",
                 (int)d->info.rank);
        return false;
    }
    if (first < 0) return true;
    /* A long sentence from the failing rank is clipped, and says so. */
    const int w = snprintf(err, cap, "rank %d: %s", (int)first, msg);
    if (w >= 0 && (size_t)w >= cap && cap > 4) memcpy(err + cap - 4, "...", 4);
    return false;
}

/* FNV-1a, 64 bits: a fingerprint, not a defence against a forger. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

uint64_t bp_run_dist_model_hash(const struct bp_run_model *m, uint64_t *file_size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    *file_size = 0;
    if (m->gguf && m->gguf->base) {
        *file_size = m->gguf->size;
        size_t head = m->gguf->data_offset < m->gguf->size ? (size_t)m->gguf->data_offset : m->gguf->size;
        return fnv(h, m->gguf->base, head);
    }
    /* A built-in model: its name says kind and type; the table says shapes.
     * Same seed and options give the same weights on every rank. */
    h = fnv(h, m->name, strlen(m->name));
    /* The architecture by name: its table's address differs between processes. */
    struct bp_run_hparams hp = m->hp;
    const char *arch = hp.arch ? hp.arch->name : "llama";
    hp.arch = NULL;
    h = fnv(h, arch, strlen(arch));
    h = fnv(h, &hp, sizeof hp);
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        h = fnv(h, w->name, strlen(w->name));
        h = fnv(h, &w->type, sizeof w->type);
        h = fnv(h, w->ne, sizeof w->ne);
        /* the first bytes tell seeds apart */
        h = fnv(h, w->data, w->size < 64 ? w->size : 64);
    }
    return h;
}

bool bp_run_dist_check_model(struct bp_run_dist *d, const struct bp_run_model *m, char *err,
                             size_t cap)
{
    uint64_t mine[2], root[2];
    mine[0] = bp_run_dist_model_hash(m, &mine[1]);
    memcpy(root, mine, sizeof root);
    if (d->bcast(d->g, root, sizeof root, 0) != BP_OK) {
        snprintf(err, cap, "rank %d: broadcasting the model's fingerprint failed.", (int)d->info.rank);
        return false;
    }
    bool same = !memcmp(mine, root, sizeof mine);
    char msg[512] = "";
    if (!same)
        snprintf(msg, sizeof msg, "its model (%s, %llu bytes, header hash %016llx) differs from rank "
                 "0's (%llu bytes, header hash %016llx); give every rank the same file.", m->name,
                 (unsigned long long)mine[1], (unsigned long long)mine[0],
                 (unsigned long long)root[1], (unsigned long long)root[0]);
    if (!bp_run_dist_agree(d, same, msg, sizeof msg)) {
        snprintf(err, cap, "%s", msg);
        return false;
    }
    return true;
}

bp_status bp_run_dist_gather(struct bp_run_dist *d, float *v, size_t n)
{
    return d->allreduce(d->g, v, n);
}

bp_status bp_run_dist_bcast(struct bp_run_dist *d, void *buf, size_t len, int32_t root)
{
    return d->bcast(d->g, buf, len, root);
}

/* Each rank's value, gathered: per_rank[0..nranks). Floats carry 24 bits
 * exactly, so each value travels in two halves (2^48 bytes at most). */
static bp_status gather_u64(struct bp_run_dist *d, uint64_t mine, uint64_t *per_rank)
{
    const int32_t n = d->info.nranks;
    float v[2 * BP_META_MAX_DEVICES] = {0};
    v[2 * d->info.rank] = (float)(mine >> 24);
    v[2 * d->info.rank + 1] = (float)(mine & 0xffffff);
    bp_status st = d->allreduce(d->g, v, (size_t)(2 * n));
    for (int32_t r = 0; r < n && st == BP_OK; r++)
        per_rank[r] = ((uint64_t)v[2 * r] << 24) + (uint64_t)v[2 * r + 1];
    return st;
}

bp_status bp_run_dist_weight_bytes(struct bp_run_dist *d, const struct bp_run_session *s,
                                   const struct bp_run_model *m, uint64_t *per_rank)
{
    /* The session's weight buffers, each once. */
    struct bp_buffer *seen[8];
    size_t n_seen = 0;
    uint64_t mine = 0;
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_tensor *t = bp_run_session_weight(s, m->weights[i].name);
        struct bp_buffer *b = t ? t->buffer : NULL;
        size_t k = 0;
        while (k < n_seen && seen[k] != b) k++;
        if (!b || k < n_seen || n_seen == sizeof seen / sizeof seen[0]) continue;
        seen[n_seen++] = b;
        size_t bytes[BP_META_MAX_DEVICES] = {0};
        if (bp_meta_buffer_device_bytes(b, bytes) == BP_OK) mine += bytes[d->info.rank];
    }
    return gather_u64(d, mine, per_rank);
}

bp_status bp_run_dist_plan_memory(struct bp_run_dist *d, struct bp_run_plan *p)
{
    uint64_t free_b[BP_META_MAX_DEVICES], total_b[BP_META_MAX_DEVICES];
    /* Every slot answers with this rank's device: row `rank` is the truth here. */
    const size_t me = (size_t)d->info.rank;
    if (me >= p->n_subs) return BP_ERR_INVALID_ARGUMENT;
    bp_status st = gather_u64(d, p->sub[me].mem_free, free_b);
    if (st == BP_OK) st = gather_u64(d, p->sub[me].mem_total, total_b);
    for (int32_t r = 0; r < d->info.nranks && (size_t)r < p->n_subs && st == BP_OK; r++) {
        p->sub[r].mem_free = (size_t)free_b[r];
        p->sub[r].mem_total = (size_t)total_b[r];
    }
    return st;
}

void bp_run_dist_counters(struct bp_run_dist *d, uint64_t *reductions, uint64_t *bytes)
{
    struct bp_dist_info i = { .size = sizeof i };
    *reductions = *bytes = 0;
    if (d->get_info(d->g, &i) == BP_OK) *reductions = i.reductions, *bytes = i.bytes_reduced;
}

void bp_run_dist_step(struct bp_run_dist *d, int64_t step)
{
    if (d) d->set_step(d->g, step);
}

const char *bp_run_dist_comm_path(struct bp_run_dist *d) { return d->comm_path(d->g); }
