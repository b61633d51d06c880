/* rankcomm.c — a test plugin standing in for a GPU plugin with a
 * multi-process communicator (as CUDA with NCCL): family "rankcomm", one
 * device "rankcommcpu" that forwards to the CPU, and the procs
 * bp_comm_get_unique_id / bp_comm_init_rank / bp_comm_allreduce_tensor /
 * bp_comm_free. The id is the name of a POSIX shared-memory segment made
 * by rank 0 and broadcast by the mpi plugin; the all-reduce sums every
 * rank's slot in rank order, so all ranks get bitwise the same result.
 * RANKCOMM_FAIL_RANK=r makes init_rank fail on rank r (every rank must then
 * fall back to the host path); RANKCOMM_WRONG_RANK=r makes rank r add its
 * contribution plus one (a wrong path for check --comm to catch). Built
 * into build/tests/dist_plugins, reached only through BACKPLANE_PLUGIN_PATH. */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <backplane/bp_abi.h>
#include <backplane/bp_dist.h>

#define SLOT_FLOATS (1u << 20)

static const struct bp_host_services *host;
static struct bp_registry reg;
static struct bp_device dev;

static struct bp_device *cpu(void) { return host->device_by_name("cpu"); }

/* ---- the device: the CPU's, under this registry ---- */

static const char *d_name(struct bp_device *d) { (void)d; return "rankcommcpu"; }
static const char *d_desc(struct bp_device *d) { (void)d; return "CPU with a shared-memory rank communicator (test)"; }
static enum bp_device_type d_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_CPU; }
static void d_memory(struct bp_device *d, size_t *f, size_t *t) { (void)d; cpu()->iface->get_memory(cpu(), f, t); }
static void d_caps(struct bp_device *d, struct bp_device_caps *c) { (void)d; cpu()->iface->get_caps(cpu(), c); }
static struct bp_buffer_type *d_buft(struct bp_device *d) { (void)d; return cpu()->iface->get_buffer_type(cpu()); }
static bool d_supports_op(struct bp_device *d, const struct bp_tensor *n) { (void)d; return cpu()->iface->supports_op(cpu(), n); }
static bool d_supports_buft(struct bp_device *d, struct bp_buffer_type *b) { (void)d; return cpu()->iface->supports_buft(cpu(), b); }

/* A backend of this device around the CPU's, so that its device (and so
 * the registry the mpi plugin asks for a communicator) is ours. */
static struct bp_backend *inner(struct bp_backend *b) { return b->context; }
static const char *b_name(struct bp_backend *b) { return inner(b)->iface->get_name(inner(b)); }
static void b_free(struct bp_backend *b) { inner(b)->iface->free(inner(b)); free(b); }
static bp_status b_sync(struct bp_backend *b) { return inner(b)->iface->synchronize(inner(b)); }
static bp_status b_compute(struct bp_backend *b, struct bp_graph *g) { return inner(b)->iface->graph_compute(inner(b), g); }
static const struct bp_backend_iface b_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = b_name, .free = b_free, .synchronize = b_sync, .graph_compute = b_compute,
};

static bp_status d_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    struct bp_backend *in = NULL, *b = calloc(1, sizeof *b);
    if (!b) return BP_ERR_OUT_OF_MEMORY;
    bp_status st = cpu()->iface->init_backend(cpu(), params, &in);
    if (st != BP_OK) { free(b); return st; }
    *b = (struct bp_backend){ .iface = &b_iface, .device = d, .context = in };
    *out = b;
    return BP_OK;
}

static const struct bp_device_iface dev_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = d_name, .get_description = d_desc, .get_type = d_type, .get_memory = d_memory,
    .get_caps = d_caps, .init_backend = d_backend, .get_buffer_type = d_buft,
    .supports_op = d_supports_op, .supports_buft = d_supports_buft,
};

/* ---- the communicator ---- */

struct shm {
    _Atomic uint64_t arrived, departed;
    float slot[];                       /* nranks x SLOT_FLOATS */
};

struct comm {
    struct shm *m;
    size_t bytes;
    int32_t nranks, rank;
    uint64_t calls;
    char name[64];
};

static bp_status get_unique_id(void *id, size_t cap, size_t *len)
{
    char name[64];
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    int n = snprintf(name, sizeof name, "/bp-rankcomm-%d-%ld", (int)getpid(), (long)t.tv_nsec);
    if ((size_t)n + 1 > cap) return BP_ERR_INVALID_ARGUMENT;
    memcpy(id, name, (size_t)n + 1);
    *len = (size_t)n + 1;
    return BP_OK;
}

static bp_status init_rank(struct bp_backend *b, int32_t nranks, int32_t rank, const void *id, size_t len,
                           void **out)
{
    const char *fail = host->get_env("RANKCOMM_FAIL_RANK");
    if (!b || b->iface != &b_iface || !id || len < 2 || len > 64 || ((const char *)id)[len - 1]) return BP_ERR_INVALID_ARGUMENT;
    if (fail && atoi(fail) == rank) return BP_ERR_UNSUPPORTED;
    struct comm *c = calloc(1, sizeof *c);
    if (!c) return BP_ERR_OUT_OF_MEMORY;
    memcpy(c->name, id, len);
    c->nranks = nranks, c->rank = rank;
    c->bytes = sizeof(struct shm) + (size_t)nranks * SLOT_FLOATS * sizeof(float);
    int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->bytes) != 0) {
        if (fd >= 0) close(fd);
        free(c);
        return BP_ERR_UNSUPPORTED;
    }
    c->m = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->m == MAP_FAILED) { free(c); return BP_ERR_UNSUPPORTED; }
    host->log(BP_LOG_INFO, "rankcomm", "rank %d joined communicator %s.", (int)rank, c->name);
    *out = c;
    return BP_OK;
}

/* Wait for a counter, politely: the ranks share few cores. */
static void wait_for(_Atomic uint64_t *v, uint64_t target)
{
    for (unsigned spin = 0; atomic_load(v) < target; spin++) {
        if (spin < 64) sched_yield();
        else nanosleep(&(struct timespec){ 0, 20000 }, NULL);
    }
}

/* Sum over ranks in chunks of the shared slots, so tensors of any size
 * fit; RANKCOMM_WRONG_RANK=r makes rank r's contribution one too large. */
static bp_status allreduce(void *comm, struct bp_tensor *const *t, size_t n)
{
    struct comm *c = comm;
    if (!c || n != 1 || t[0]->type != BP_TYPE_F32) return BP_ERR_INVALID_ARGUMENT;
    const char *wrong = host->get_env("RANKCOMM_WRONG_RANK");
    const float bias = wrong && atoi(wrong) == c->rank ? 1.0f : 0.0f;
    const size_t count = (size_t)bp_nelements(t[0]);
    float *x = t[0]->data;
    for (size_t at = 0; at < count; at += SLOT_FLOATS) {
        const size_t m = count - at < SLOT_FLOATS ? count - at : SLOT_FLOATS;
        float *mine = c->m->slot + (size_t)c->rank * SLOT_FLOATS;
        c->calls++;
        for (size_t k = 0; k < m; k++) mine[k] = x[at + k] + bias;
        atomic_fetch_add(&c->m->arrived, 1);
        wait_for(&c->m->arrived, c->calls * (uint64_t)c->nranks);
        for (size_t k = 0; k < m; k++) {
            float s = 0;
            for (int32_t r = 0; r < c->nranks; r++) s += c->m->slot[(size_t)r * SLOT_FLOATS + k];
            x[at + k] = s;
        }
        atomic_fetch_add(&c->m->departed, 1);
        wait_for(&c->m->departed, c->calls * (uint64_t)c->nranks);
    }
    return BP_OK;
}

static void comm_free(void *comm)
{
    struct comm *c = comm;
    if (!c) return;
    munmap(c->m, c->bytes);
    if (c->rank == 0) shm_unlink(c->name);
    free(c);
}

static const char *r_name(struct bp_registry *r) { (void)r; return "rankcomm"; }
static size_t r_count(struct bp_registry *r) { (void)r; return 1; }
static struct bp_device *r_device(struct bp_registry *r, size_t i) { (void)r; return i == 0 ? &dev : NULL; }
static void *r_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    if (!name) return NULL;
    if (!strcmp(name, BP_PROC_COMM_GET_UNIQUE_ID)) return (void *)(bp_comm_get_unique_id_fn)get_unique_id;
    if (!strcmp(name, BP_PROC_COMM_INIT_RANK)) return (void *)(bp_comm_init_rank_fn)init_rank;
    if (!strcmp(name, BP_PROC_COMM_ALLREDUCE_TENSOR)) return (void *)(bp_comm_allreduce_tensor_fn)allreduce;
    if (!strcmp(name, BP_PROC_COMM_FREE)) return (void *)(bp_comm_free_fn)comm_free;
    return NULL;
}

static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = r_name, .get_device_count = r_count, .get_device = r_device, .get_proc_address = r_proc,
};

static bp_status rankcomm_init(const struct bp_host_services *h, struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(h, "rankcomm", out);
    if (st != BP_OK) return st;
    host = h;
    reg = (struct bp_registry){ .iface = &reg_iface, .abi_version = BP_ABI_VERSION };
    dev = (struct bp_device){ .iface = &dev_iface, .reg = &reg };
    *out = &reg;
    return BP_OK;
}

BP_PLUGIN_DEFINE(rankcomm_init)
