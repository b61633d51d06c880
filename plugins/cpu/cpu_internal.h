/*
 * cpu_internal.h — what the files of the CPU plugin share among themselves.
 * Nothing here is installed; the plugin talks to the host only through abi/.
 */
#ifndef BP_CPU_INTERNAL_H
#define BP_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>

#define CPU_FAMILY "cpu"
#define CPU_BUFFER_ALIGNMENT 64

struct cpu_pool;

/* Live objects the registry must free at shutdown if the application did not. */
struct cpu_live {
    struct cpu_live *prev, *next;
};

/* The plugin's root: one per successful bp_plugin_init. */
struct cpu_plugin {
    struct bp_registry reg;
    struct bp_device dev;
    struct bp_buffer_type buft;
    struct bp_buffer_type repack_buft;  /* CPU_REPACK, through BP_CPU_PROC_REPACK_BUFFER_TYPE */
    const struct bp_host_services *host;
    char description[128];
    char threads_str[16];
    char poll_str[16];
    struct bp_feature features[32];
    bool huge_pages;            /* large buffers ask for THP (host_memory.c) */
    /* a bad BACKPLANE_CPU_THREADS / _POLL is said once, not per backend */
    atomic_bool threads_warned, poll_warned;
    char huge_pages_str[96];
    char prefetch_str[96];

    pthread_mutex_t live_mu;
    struct cpu_live live_backends;  /* sentinel of a ring */
    struct cpu_live live_buffers;
};

/* host_memory.c: buffers of CPU_HUGE_MIN bytes or more come 2 MiB aligned
 * with transparent huge pages asked for (unless BACKPLANE_CPU_HUGEPAGES=0
 * or THP is off); smaller ones CPU_BUFFER_ALIGNMENT aligned. NULL when out
 * of memory; free() releases it. */
#define CPU_HUGE_MIN ((size_t)4 << 20)
void cpu_host_memory_init(struct cpu_plugin *pl);
void *cpu_host_alloc(const struct cpu_plugin *pl, size_t size);

/* plugin.c */
void cpu_log(const struct cpu_plugin *pl, enum bp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *cpu_getenv(const struct cpu_plugin *pl, const char *name);
/* BACKPLANE_CPU_THREADS when set and valid, else the number of online CPUs. */
int cpu_default_threads(struct cpu_plugin *pl);
/* BACKPLANE_CPU_POLL (microseconds) when set and valid, else
 * CPU_POOL_DEFAULT_POLL_US. */
int cpu_default_poll_us(struct cpu_plugin *pl);
/* false when BACKPLANE_CPU_POLL_ADAPT is 0: the spin stays fixed. */
bool cpu_poll_adapts(struct cpu_plugin *pl);
/* How long a waiting worker spins before it sleeps. A sleeping worker's
 * wake-up took 3 us to 4 ms on a 2-vCPU VM (median tens of us), and one op's
 * threads can wait on each other for a chunk's time (50-200 us at decode),
 * so a budget of 21 us (the former 2000 pauses there) left the second of 2
 * threads asleep through most of a back-to-back 6 MB MUL_MAT (0.41 of the
 * read bandwidth against 0.84-0.88 with 1 ms). ggml spins longer still. */
#define CPU_POOL_DEFAULT_POLL_US 1000
void cpu_live_add(struct cpu_plugin *pl, struct cpu_live *node, struct cpu_live *ring);
void cpu_live_remove(struct cpu_plugin *pl, struct cpu_live *node);

static inline struct cpu_plugin *cpu_plugin_of_device(struct bp_device *dev)
{
    return (struct cpu_plugin *)dev->reg->context;
}

/* buffer.c */
extern const struct bp_buffer_type_iface cpu_buffer_type_iface;
extern const struct bp_buffer_type_iface cpu_repack_buffer_type_iface;

/* repack_io.c — set (to_tensor) or get bytes [offset, offset + size) of t,
 * a tensor in a CPU_REPACK buffer, converting the rows it touches. */
bp_status cpu_repack_io(const struct cpu_plugin *pl, struct bp_tensor *t, void *host, size_t offset,
                        size_t size, bool to_tensor);
/* Free every buffer the application left behind (registry shutdown). */
void cpu_buffers_free_all(struct cpu_plugin *pl);

/* backend.c */
/* BP_PROC_DEVICE_IDENTITY (identity.c): package and NUMA node from sysfs. */
bp_status cpu_device_identity(struct bp_device *dev, struct bp_device_identity *out);

bp_status cpu_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out);
bp_status cpu_backend_set_n_threads(struct bp_backend *b, int n_threads);
/* The BP_CPU_PROC_SET_ABORT_CALLBACK proc (bp_cpu.h). */
bp_status cpu_backend_set_abort_callback(struct bp_backend *b, bp_status (*cb)(void *data),
                                         void *data);
/* The BP_PROC_SET_PROFILE proc (bp_profile.h), also under its 1.0 name
 * BP_CPU_PROC_SET_PROFILE (bp_cpu.h). */
bp_status cpu_backend_set_profile(struct bp_backend *b, struct bp_profile *p);
/* The BP_CPU_PROC_PLAN_STATS proc (bp_cpu.h). */
struct bp_cpu_plan_stats;
bp_status cpu_backend_plan_stats(struct bp_backend *b, struct bp_cpu_plan_stats *out);
/* Free every backend the application left behind (registry shutdown). */
void cpu_backends_free_all(struct cpu_plugin *pl);

/* threadpool.c — a persistent pool; the calling thread takes part as thread 0. */
typedef void (*cpu_job_fn)(void *arg, int ith, int nth);
/* Start n_threads - 1 workers (n_threads >= 1); waiting threads spin for
 * poll_us microseconds before they sleep, and with adapt skip the spin for
 * a while after they see the process's threads descheduled. */
bp_status cpu_pool_new(int n_threads, int poll_us, bool adapt, struct cpu_pool **out);
/* Change the thread count of the next jobs (starts workers when it grows). */
bp_status cpu_pool_set_n_threads(struct cpu_pool *pool, int n_threads);
/* Join the workers and free the pool (NULL is a no-op). */
void cpu_pool_free(struct cpu_pool *pool);
int cpu_pool_n_threads(const struct cpu_pool *pool);
/* Run fn(arg, ith, nth) on every thread and return when all have finished.
 * Between graphs only: one thread drives a pool at a time. */
void cpu_pool_run(struct cpu_pool *pool, cpu_job_fn fn, void *arg);
/* Wait until every thread of the running job has reached the barrier. */
void cpu_pool_barrier(struct cpu_pool *pool);
/* Wait (spin, then sleep) until *word differs from old; return its value.
 * Whoever changes a word that someone may wait on calls cpu_pool_wake. */
uint64_t cpu_pool_wait_word(struct cpu_pool *pool, _Atomic uint64_t *word, uint64_t old);
void cpu_pool_wake(struct cpu_pool *pool);

#endif /* BP_CPU_INTERNAL_H */
