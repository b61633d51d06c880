/* commtest.c — a test plugin for the meta device's comm path: family
 * "commtest" with devices commtest0..3 that forward everything to the CPU
 * device, and a registry that offers comm_init / comm_allreduce_tensor /
 * comm_free. Every second all-reduce call is declined (BP_ERR_UNSUPPORTED)
 * so that the meta plugin must fall back to its butterfly for that call.
 * Calls are counted; "commtest_counts" reads the counters. Built into
 * build/tests/meta_plugins, never into the real plugin directory.
 *
 * Built with COMMTEST_PATHS it is family "commpaths" (commpaths0..3), whose
 * registry names three paths (BP_PROC_COMM_PATHS / BP_PROC_COMM_INIT_PATH)
 * for the all-reduce preflight and BACKPLANE_META_ALLREDUCE=auto: "slow"
 * (right, 2 ms a call), "wrong" (fast, one element of the last device off
 * by one) and "declines" (declines every call); "commpaths_calls" reads the
 * calls per path. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <backplane/bp_abi.h>

#define N_DEV 4
#ifdef COMMTEST_PATHS
#define FAMILY "commpaths"
#else
#define FAMILY "commtest"
#endif

static const struct bp_host_services *host;
static struct bp_registry commtest_registry;
static struct bp_device devs[N_DEV];
static char names[N_DEV][16];
static unsigned long long n_init, n_calls, n_declined, n_summed, n_free;
/* Backends of several threads call in at once (the TSan suite): the new count. */
#define COUNT(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)

typedef void (*commtest_counts_fn)(unsigned long long *init, unsigned long long *calls,
                                   unsigned long long *declined, unsigned long long *summed,
                                   unsigned long long *freed);

static struct bp_device *cpu(void) { return host->device_by_name("cpu"); }

static const char *d_name(struct bp_device *d) { return names[(size_t)(d - devs)]; }
static const char *d_desc(struct bp_device *d) { (void)d; return "CPU with a counting collective (test)"; }
static enum bp_device_type d_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_CPU; }
static void d_memory(struct bp_device *d, size_t *f, size_t *t)
{
    (void)d;
    struct bp_device *c = cpu();
    if (c) c->iface->get_memory(c, f, t);
    else *f = *t = 0;
}
static void d_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    struct bp_device *c = cpu();
    if (c && c->iface->get_caps) c->iface->get_caps(c, caps);
}
static bp_status d_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)d;
    struct bp_device *c = cpu();
    if (!c) return BP_ERR_NOT_FOUND;
    return c->iface->init_backend(c, params, out);
}
static struct bp_buffer_type *d_buft(struct bp_device *d)
{
    (void)d;
    struct bp_device *c = cpu();
    return c ? c->iface->get_buffer_type(c) : NULL;
}
static bool d_supports_op(struct bp_device *d, const struct bp_tensor *node)
{
    (void)d;
    struct bp_device *c = cpu();
    return c && c->iface->supports_op(c, node);
}
static bool d_supports_buft(struct bp_device *d, struct bp_buffer_type *b)
{
    (void)d;
    struct bp_device *c = cpu();
    return c && c->iface->supports_buft(c, b);
}

static const struct bp_device_iface dev_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = d_name,
    .get_description = d_desc,
    .get_type = d_type,
    .get_memory = d_memory,
    .get_caps = d_caps,
    .init_backend = d_backend,
    .get_buffer_type = d_buft,
    .supports_op = d_supports_op,
    .supports_buft = d_supports_buft,
};

enum path { PATH_ALTERNATE = -1, PATH_SLOW, PATH_WRONG, PATH_DECLINES, N_PATHS };
static unsigned long long path_calls[N_PATHS];

struct comm { size_t n; int path; };

static bp_status comm_init(struct bp_backend *const *backends, size_t n, void **out)
{
    if (!backends || n == 0 || !out) return BP_ERR_INVALID_ARGUMENT;
    struct comm *c = calloc(1, sizeof *c);
    if (!c) return BP_ERR_OUT_OF_MEMORY;
    c->n = n;
#ifdef COMMTEST_PATHS
    c->path = PATH_SLOW;
#else
    c->path = PATH_ALTERNATE;
#endif
    COUNT(n_init);
    *out = c;
    return BP_OK;
}

#ifdef COMMTEST_PATHS
static const char *const path_names[N_PATHS] = {"slow", "wrong", "declines"};

static size_t comm_paths(const char **out, size_t cap)
{
    for (size_t i = 0; i < N_PATHS && i < cap; i++) out[i] = path_names[i];
    return N_PATHS;
}

static bp_status comm_init_path(struct bp_backend *const *backends, size_t n, const char *path, void **out)
{
    for (int p = 0; p < N_PATHS; p++) {
        if (!path || strcmp(path, path_names[p]) != 0) continue;
        bp_status st = comm_init(backends, n, out);
        if (st == BP_OK) ((struct comm *)*out)->path = p;
        return st;
    }
    return BP_ERR_NOT_FOUND;
}
#endif

/* The tensors live in CPU buffers (host memory): sum them in place. */
static bp_status comm_allreduce(void *comm, struct bp_tensor *const *t, size_t n)
{
    struct comm *c = comm;
    if (!c || n != c->n || t[0]->type != BP_TYPE_F32) return BP_ERR_INVALID_ARGUMENT;
    unsigned long long call = COUNT(n_calls);
    if (c->path >= 0) COUNT(path_calls[c->path]);
    if ((c->path == PATH_ALTERNATE && call % 2 == 0) || c->path == PATH_DECLINES) {
        COUNT(n_declined);
        return BP_ERR_UNSUPPORTED;
    }
    if (c->path == PATH_SLOW) nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    size_t count = bp_nbytes(t[0]) / sizeof(float);
    for (size_t i = 1; i < n; i++)
        if (bp_nbytes(t[i]) != bp_nbytes(t[0])) return BP_ERR_SHAPE;
    for (size_t k = 0; k < count; k++) {
        float s = 0;
        for (size_t i = 0; i < n; i++) s += ((const float *)t[i]->data)[k];
        for (size_t i = 0; i < n; i++) ((float *)t[i]->data)[k] = s;
    }
    if (c->path == PATH_WRONG) ((float *)t[n - 1]->data)[count / 2] += 1;
    COUNT(n_summed);
    return BP_OK;
}

static void comm_free(void *comm)
{
    if (comm) COUNT(n_free);
    free(comm);
}

static void counts(unsigned long long *init, unsigned long long *calls, unsigned long long *declined,
                   unsigned long long *summed, unsigned long long *freed)
{
    *init = n_init;
    *calls = n_calls;
    *declined = n_declined;
    *summed = n_summed;
    *freed = n_free;
}

static const char *r_name(struct bp_registry *r) { (void)r; return FAMILY; }
static size_t r_count(struct bp_registry *r) { (void)r; return N_DEV; }
static struct bp_device *r_device(struct bp_registry *r, size_t i) { (void)r; return i < N_DEV ? &devs[i] : NULL; }
static void *r_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    if (!name) return NULL;
    if (!strcmp(name, BP_PROC_COMM_INIT)) return (void *)(bp_comm_init_fn)comm_init;
    if (!strcmp(name, BP_PROC_COMM_ALLREDUCE_TENSOR)) return (void *)(bp_comm_allreduce_tensor_fn)comm_allreduce;
    if (!strcmp(name, BP_PROC_COMM_FREE)) return (void *)(bp_comm_free_fn)comm_free;
    if (!strcmp(name, "commtest_counts")) return (void *)(commtest_counts_fn)counts;
#ifdef COMMTEST_PATHS
    if (!strcmp(name, BP_PROC_COMM_PATHS)) return (void *)(bp_comm_paths_fn)comm_paths;
    if (!strcmp(name, BP_PROC_COMM_INIT_PATH)) return (void *)(bp_comm_init_path_fn)comm_init_path;
    if (!strcmp(name, "commpaths_calls")) return (void *)path_calls;
#endif
    return NULL;
}

static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = r_name,
    .get_device_count = r_count,
    .get_device = r_device,
    .get_proc_address = r_proc,
};

static bp_status commtest_init(const struct bp_host_services *h, struct bp_registry **out)
{
    host = h;
    commtest_registry = (struct bp_registry){.iface = &reg_iface, .abi_version = BP_ABI_VERSION};
    for (size_t i = 0; i < N_DEV; i++) {
        snprintf(names[i], sizeof names[i], FAMILY "%zu", i);
        devs[i] = (struct bp_device){.iface = &dev_iface, .reg = &commtest_registry, .context = NULL};
    }
    *out = &commtest_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(commtest_init)
