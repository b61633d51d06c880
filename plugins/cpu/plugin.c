/*
 * plugin.c — the CPU plugin's entry, registry and its one device, "cpu".
 *
 * The same sources build every variant (CPU_VARIANT_NAME: scalar, avx2,
 * avx512, neon); only kernels/ differ by ISA. The scalar variant is the
 * reference: plain C, double-precision accumulation for float weights.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bp_cpu.h"
#include "cpu_features.h"
#include "cpu_internal.h"
#include "kernels/gemm_amx.h"
#include "kernels/kernels.h"
#include "kernels/repack.h"
#include "ops.h"
#include "ops/matmul_blas.h"

#ifndef CPU_VARIANT_NAME
#define CPU_VARIANT_NAME "scalar"
#endif

/* ---- services ---- */

void cpu_log(const struct cpu_plugin *pl, enum bp_log_level level, const char *fmt, ...)
{
    const struct bp_host_services *host = pl ? pl->host : NULL;
    if (!BP_IFACE_HAS(host, log) || !host->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->log(level, CPU_FAMILY, "%s", msg);
}

const char *cpu_getenv(const struct cpu_plugin *pl, const char *name)
{
    const struct bp_host_services *host = pl->host;
    if (!BP_IFACE_HAS(host, get_env) || !host->get_env)
        return NULL;
    return host->get_env(name);
}

int cpu_default_threads(struct cpu_plugin *pl)
{
    const char *s = cpu_getenv(pl, "BACKPLANE_CPU_THREADS");
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end == '\0' && n >= 1 && n <= 4096)
            return (int)n;
        if (!atomic_exchange(&pl->threads_warned, true))
            cpu_log(pl, BP_LOG_WARN,
                    "BACKPLANE_CPU_THREADS='%s' is not a thread count from 1 to 4096; using the "
                    "number of online CPUs instead.", s);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > 4096 ? 4096 : n) : 1;
}

int cpu_default_poll_us(struct cpu_plugin *pl)
{
    const char *s = cpu_getenv(pl, "BACKPLANE_CPU_POLL");
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end == '\0' && n >= 0 && n <= 1000000)
            return (int)n;
        if (!atomic_exchange(&pl->poll_warned, true))
            cpu_log(pl, BP_LOG_WARN,
                    "BACKPLANE_CPU_POLL='%s' is not a time in microseconds from 0 to 1000000; "
                    "using %d.", s, CPU_POOL_DEFAULT_POLL_US);
    }
    return CPU_POOL_DEFAULT_POLL_US;
}

bool cpu_poll_adapts(struct cpu_plugin *pl)
{
    const char *s = cpu_getenv(pl, "BACKPLANE_CPU_POLL_ADAPT");
    return !(s && !strcmp(s, "0"));
}

void cpu_live_add(struct cpu_plugin *pl, struct cpu_live *node, struct cpu_live *ring)
{
    pthread_mutex_lock(&pl->live_mu);
    node->next = ring->next;
    node->prev = ring;
    ring->next->prev = node;
    ring->next = node;
    pthread_mutex_unlock(&pl->live_mu);
}

void cpu_live_remove(struct cpu_plugin *pl, struct cpu_live *node)
{
    pthread_mutex_lock(&pl->live_mu);
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = node;
    pthread_mutex_unlock(&pl->live_mu);
}

/* ---- device ---- */

static const char *dev_get_name(struct bp_device *dev)
{
    (void)dev;
    return CPU_FAMILY;
}

static const char *dev_get_description(struct bp_device *dev)
{
    return cpu_plugin_of_device(dev)->description;
}

static enum bp_device_type dev_get_type(struct bp_device *dev)
{
    (void)dev;
    return BP_DEVICE_TYPE_CPU;
}

/* kB value of a /proc/meminfo field, or 0. */
static size_t meminfo_kb(const char *field)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t len = strlen(field), kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kb = (size_t)strtoull(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

static void dev_get_memory(struct bp_device *dev, size_t *free_b, size_t *total_b)
{
    (void)dev;
    long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);
    size_t total = meminfo_kb("MemTotal") * 1024;
    size_t avail = meminfo_kb("MemAvailable") * 1024;
    if (total == 0 && page > 0 && pages > 0)
        total = (size_t)page * (size_t)pages;
    if (avail == 0 || avail > total)
        avail = total;
    if (free_b) *free_b = avail;
    if (total_b) *total_b = total;
}

static void dev_get_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    (void)dev;
    if (!caps || caps->size < sizeof(size_t))
        return;
    struct bp_device_caps c = { .size = sizeof c };
    size_t n = caps->size < sizeof c ? caps->size : sizeof c;
    memcpy((char *)caps + sizeof(size_t), (const char *)&c + sizeof(size_t), n - sizeof(size_t));
}

static struct bp_buffer_type *dev_get_buffer_type(struct bp_device *dev)
{
    return &cpu_plugin_of_device(dev)->buft;
}

static bool dev_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    (void)dev;
    return cpu_supports_node(node);
}

/* Any buffer whose memory the CPU can dereference will do. */
static bool dev_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    if (!buft)
        return false;
    if (buft == &cpu_plugin_of_device(dev)->buft || buft == &cpu_plugin_of_device(dev)->repack_buft)
        return true;
    return buft->iface && BP_IFACE_HAS(buft->iface, is_host) && buft->iface->is_host &&
           buft->iface->is_host(buft);
}

static const struct bp_device_iface cpu_device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_get_name,
    .get_description = dev_get_description,
    .get_type = dev_get_type,
    .get_memory = dev_get_memory,
    .get_caps = dev_get_caps,
    .init_backend = cpu_backend_init,
    .get_buffer_type = dev_get_buffer_type,
    .get_host_buffer_type = NULL,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .event_new = NULL,
};

/* ---- registry ---- */

static const char *reg_get_name(struct bp_registry *reg)
{
    (void)reg;
    return CPU_FAMILY;
}

static size_t reg_get_device_count(struct bp_registry *reg)
{
    (void)reg;
    return 1;
}

static struct bp_device *reg_get_device(struct bp_registry *reg, size_t index)
{
    struct cpu_plugin *pl = reg->context;
    return index == 0 ? &pl->dev : NULL;
}

static const struct bp_feature *reg_get_features(struct bp_registry *reg)
{
    return ((struct cpu_plugin *)reg->context)->features;
}

static struct bp_buffer_type *dev_repack_buffer_type(struct bp_device *dev)
{
    return dev ? &cpu_plugin_of_device(dev)->repack_buft : NULL;
}

/* BP_PROC_WEIGHT_BUFFER_TYPE: CPU_REPACK for the types with an x8 layout. */
static struct bp_buffer_type *dev_weight_buffer_type(struct bp_device *dev, enum bp_type type)
{
    return dev && cpu_repack_type_ok(type) ? &cpu_plugin_of_device(dev)->repack_buft : NULL;
}

static bp_status dev_set_amx(struct bp_device *dev, bool on)
{
    (void)dev;
    return cpu_amx_use(on) ? BP_OK : BP_ERR_UNSUPPORTED;
}

static void *reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (!name)
        return NULL;
    /* Function pointers travel as void * through get_proc_address (POSIX
     * guarantees the round trip, as it does for dlsym). */
    if (strcmp(name, BP_PROC_SET_N_THREADS) == 0) {
        bp_set_n_threads_fn fn = cpu_backend_set_n_threads;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_CPU_PROC_SET_ABORT_CALLBACK) == 0) {
        bp_cpu_set_abort_callback_fn fn = cpu_backend_set_abort_callback;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    /* The 1.0 name stays an alias of the generic one: same function. */
    if (strcmp(name, BP_PROC_SET_PROFILE) == 0 || strcmp(name, BP_CPU_PROC_SET_PROFILE) == 0) {
        bp_set_profile_fn fn = cpu_backend_set_profile;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_CPU_PROC_PLAN_STATS) == 0) {
        bp_cpu_plan_stats_fn fn = cpu_backend_plan_stats;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_CPU_PROC_SET_AMX) == 0) {
        bp_cpu_set_amx_fn fn = dev_set_amx;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_CPU_PROC_REPACK_BUFFER_TYPE) == 0) {
        bp_cpu_repack_buffer_type_fn fn = dev_repack_buffer_type;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_PROC_WEIGHT_BUFFER_TYPE) == 0) {
        bp_weight_buffer_type_fn fn = dev_weight_buffer_type;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_PROC_DEVICE_IDENTITY) == 0) {
        bp_device_identity_fn fn = cpu_device_identity;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (strcmp(name, BP_PROC_GET_FEATURES) == 0) {
        bp_get_features_fn fn = reg_get_features;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    return NULL;
}

static void reg_shutdown(struct bp_registry *reg)
{
    struct cpu_plugin *pl = reg->context;
    cpu_backends_free_all(pl);
    cpu_buffers_free_all(pl);
    pthread_mutex_destroy(&pl->live_mu);
    free(pl);
}

static const struct bp_registry_iface cpu_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_get_name,
    .get_device_count = reg_get_device_count,
    .get_device = reg_get_device,
    .get_proc_address = reg_get_proc_address,
    .shutdown = reg_shutdown,
};

/* ---- init ---- */

static void read_cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strcspn(v, "\n");
        if (n > 0)
            snprintf(out, cap, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

/* AMX tiles for prefill unless BACKPLANE_CPU_AMX=0 (the first plugin
 * instance of the process decides: the tile permission is per process). */
static const char *amx_init(const struct cpu_plugin *pl)
{
    const char *s = cpu_getenv(pl, "BACKPLANE_CPU_AMX");
    bool want = true;
    if (s && *s && strcmp(s, "1") != 0) {
        if (strcmp(s, "0") == 0)
            want = false;
        else
            cpu_log(pl, BP_LOG_WARN, "BACKPLANE_CPU_AMX='%s' is neither 0 nor 1; using AMX "
                    "where the CPU has it.", s);
    }
    if (cpu_amx_enable(want))
        return "1";
    return want ? "0" : "0 (BACKPLANE_CPU_AMX=0)";
}

/* What `backplane info cpu` shows: the variant that runs, the kernels it
 * uses, and the CPU/OS features the loader's choice rests on. */
static void fill_features(struct cpu_plugin *pl)
{
    snprintf(pl->threads_str, sizeof pl->threads_str, "%d", cpu_default_threads(pl));
    snprintf(pl->poll_str, sizeof pl->poll_str, "%d us", cpu_default_poll_us(pl));
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
    struct bp_feature *f = pl->features;
    int i = 0;
    f[i++] = (struct bp_feature){ "variant", CPU_VARIANT_NAME };
    const char *amx = amx_init(pl);
    f[i++] = (struct bp_feature){ "kernels", cpu_amx_active() ? "avx512+amx" : cpu_kernels_isa() };
    f[i++] = (struct bp_feature){ "amx", amx };
    f[i++] = (struct bp_feature){ "threads", pl->threads_str };
    f[i++] = (struct bp_feature){ "poll", pl->poll_str };
    f[i++] = (struct bp_feature){ "blas", cpu_blas_name() ? cpu_blas_name() : "none" };
    f[i++] = (struct bp_feature){ "huge_pages", pl->huge_pages_str };
    const char *pf = cpu_getenv(pl, "BACKPLANE_CPU_PREFETCH");
    if (!cpu_x8_prefetch_choose(pf, pl->prefetch_str, sizeof pl->prefetch_str))
        cpu_log(pl, BP_LOG_WARN, "BACKPLANE_CPU_PREFETCH='%s' is not 'L2,L1[,L1_32]' in bytes "
                "(multiples of 64 up to 65536); using this CPU's distances.", pf);
    f[i++] = (struct bp_feature){ "prefetch", pl->prefetch_str };
#define ISA(name, flag) f[i++] = (struct bp_feature){ name, (flag) ? "1" : "0" }
#if defined(__x86_64__) || defined(__i386__)
    ISA("cpu.AVX", isa.avx);
    ISA("cpu.AVX2", isa.avx2);
    ISA("cpu.FMA", isa.fma);
    ISA("cpu.F16C", isa.f16c);
    ISA("cpu.AVX512F", isa.avx512f);
    ISA("cpu.AVX512BW", isa.avx512bw);
    ISA("cpu.AVX512VL", isa.avx512vl);
    ISA("cpu.AVX512_VNNI", isa.avx512_vnni);
    ISA("cpu.AVX512_BF16", isa.avx512_bf16);
    ISA("cpu.GFNI", isa.gfni);
    ISA("os.AVX (XCR0 YMM)", isa.os_avx);
    ISA("os.AVX512 (XCR0 ZMM)", isa.os_avx512);
    ISA("cpu.AMX_TILE", isa.amx_tile);
    ISA("cpu.AMX_INT8", isa.amx_int8);
    ISA("os.AMX (XCR0 TILE)", isa.os_amx);
    ISA("score.scalar", 1);
    ISA("score.avx2", cpu_variant_score(CPU_VARIANT_AVX2, &isa) > 0);
    ISA("score.avx512", cpu_variant_score(CPU_VARIANT_AVX512, &isa) > 0);
#elif defined(__aarch64__)
    ISA("cpu.NEON", isa.neon);
    ISA("cpu.DOTPROD", isa.dotprod);
#endif
#undef ISA
    f[i] = (struct bp_feature){ NULL, NULL };
}

static bp_status cpu_plugin_init(const struct bp_host_services *host, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(host, CPU_FAMILY, out);
    if (st != BP_OK)
        return st;
    struct cpu_plugin *pl = calloc(1, sizeof *pl);
    if (!pl) {
        if (host->log)
            host->log(BP_LOG_ERROR, CPU_FAMILY, "could not allocate the plugin state; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    pl->host = host;
    pthread_mutex_init(&pl->live_mu, NULL);
    pl->live_backends.prev = pl->live_backends.next = &pl->live_backends;
    pl->live_buffers.prev = pl->live_buffers.next = &pl->live_buffers;

    pl->reg = (struct bp_registry){ .iface = &cpu_registry_iface, .abi_version = BP_ABI_VERSION,
                                    .variant = CPU_VARIANT_NAME, .context = pl };
    pl->dev = (struct bp_device){ .iface = &cpu_device_iface, .reg = &pl->reg, .context = pl };
    pl->buft = (struct bp_buffer_type){ .iface = &cpu_buffer_type_iface, .device = &pl->dev,
                                        .context = pl };
    pl->repack_buft = (struct bp_buffer_type){ .iface = &cpu_repack_buffer_type_iface,
                                               .device = &pl->dev, .context = pl };
    read_cpu_model(pl->description, sizeof pl->description);
    cpu_blas_init();
    cpu_host_memory_init(pl);
    fill_features(pl);
    *out = &pl->reg;
    return BP_OK;
}

BP_PLUGIN_DEFINE(cpu_plugin_init)
