/*
 * plugin.c — the CUDA plugin's entry, registry and devices (cuda0, cuda1, …).
 *
 * The CUDA runtime is linked statically (cudart_static), and it opens
 * libcuda.so.1 itself when first called, so this shared object loads on a
 * machine with no NVIDIA driver: cudaGetDeviceCount then fails, the plugin
 * reports zero devices and keeps one sentence saying why (logged at info
 * level and listed as the feature "no_devices"). CUDA_VISIBLE_DEVICES is
 * honoured by the runtime itself.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_dist.h>

#include "cuda_internal.h"

void cuda_log(const struct cuda_plugin *pl, enum bp_log_level level, const char *fmt, ...)
{
    const struct bp_host_services *host = pl ? pl->host : NULL;
    if (!BP_IFACE_HAS(host, log) || !host->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->log(level, CUDA_FAMILY, "%s", msg);
}

const char *cuda_getenv(const struct cuda_plugin *pl, const char *name)
{
    const struct bp_host_services *host = pl ? pl->host : NULL;
    if (!BP_IFACE_HAS(host, get_env) || !host->get_env)
        return NULL;
    return host->get_env(name);
}

bp_status cuda_check(const struct cuda_plugin *pl, cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return BP_OK;
    (void)cudaGetLastError(); /* clear a sticky-free error so the next call starts clean */
    cuda_log(pl, BP_LOG_ERROR, "%s failed: %s (%s).", what, cudaGetErrorString(err),
             cudaGetErrorName(err));
    switch (err) {
    case cudaErrorMemoryAllocation: return BP_ERR_OUT_OF_MEMORY;
    case cudaErrorInvalidValue: return BP_ERR_INVALID_ARGUMENT;
    case cudaErrorLaunchFailure: case cudaErrorIllegalAddress:
    case cudaErrorDevicesUnavailable: case cudaErrorNoDevice: return BP_ERR_DEVICE_LOST;
    default: return BP_ERR_INTERNAL;
    }
}

/* ---- device ---- */

static const char *dev_get_name(struct bp_device *dev) { return cuda_device_of(dev)->name; }
static const char *dev_get_description(struct bp_device *dev) { return cuda_device_of(dev)->description; }
static enum bp_device_type dev_get_type(struct bp_device *dev) { (void)dev; return BP_DEVICE_TYPE_GPU; }

static void dev_get_memory(struct bp_device *dev, size_t *free_b, size_t *total_b)
{
    struct cuda_device *cd = cuda_device_of(dev);
    size_t f = 0, t = cd->total_mem;
    if (cudaSetDevice(cd->id) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        f = 0;
        t = cd->total_mem;
    }
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
}

static void dev_get_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    (void)dev;
    if (!caps || caps->size < sizeof(size_t))
        return;
    struct bp_device_caps c = { .size = sizeof c, .async = true, .host_buffer = true,
                                .events = true, .buffer_from_host_ptr = false };
    size_t n = caps->size < sizeof c ? caps->size : sizeof c;
    memcpy((char *)caps + sizeof(size_t), (const char *)&c + sizeof(size_t), n - sizeof(size_t));
}

static struct bp_buffer_type *dev_get_buffer_type(struct bp_device *dev)
{
    return &cuda_device_of(dev)->buft;
}

static struct bp_buffer_type *dev_get_host_buffer_type(struct bp_device *dev)
{
    return &cuda_device_of(dev)->host_buft;
}

static bool dev_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    return cuda_supports_node(cuda_device_of(dev), node);
}

/* Our own device memory, or pinned host memory of any of our devices
 * (mapped into every device's address space by unified addressing). */
static bool dev_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    if (!buft)
        return false;
    if (buft == &cuda_device_of(dev)->buft)
        return true;
    return buft->iface == &cuda_host_buffer_type_iface;
}

static const struct bp_device_iface cuda_device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_get_name,
    .get_description = dev_get_description,
    .get_type = dev_get_type,
    .get_memory = dev_get_memory,
    .get_caps = dev_get_caps,
    .init_backend = cuda_backend_init,
    .get_buffer_type = dev_get_buffer_type,
    .get_host_buffer_type = dev_get_host_buffer_type,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .event_new = cuda_event_new,
};

/* ---- registry ---- */

static const char *reg_get_name(struct bp_registry *reg) { (void)reg; return CUDA_FAMILY; }

static size_t reg_get_device_count(struct bp_registry *reg)
{
    return ((struct cuda_plugin *)reg->context)->n_devices;
}

static struct bp_device *reg_get_device(struct bp_registry *reg, size_t index)
{
    struct cuda_plugin *pl = reg->context;
    return index < pl->n_devices ? &pl->devices[index].dev : NULL;
}

static const struct bp_feature *reg_get_features(struct bp_registry *reg)
{
    return ((struct cuda_plugin *)reg->context)->features;
}

static void *fn_ptr(void (*fn)(void))
{
    void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

static void *reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (!name)
        return NULL;
    /* Function pointers travel as void * (POSIX guarantees it, as for dlsym). */
    if (strcmp(name, BP_PROC_GET_FEATURES) == 0) {
        bp_get_features_fn f = reg_get_features;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_INIT) == 0) {
        bp_comm_init_fn f = cuda_comm_init;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_PATHS) == 0) {
        bp_comm_paths_fn f = cuda_comm_paths;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_INIT_PATH) == 0) {
        bp_comm_init_path_fn f = cuda_comm_init_path;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_ALLREDUCE_TENSOR) == 0) {
        bp_comm_allreduce_tensor_fn f = cuda_comm_allreduce_tensor;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_FREE) == 0) {
        bp_comm_free_fn f = cuda_comm_free;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_DEVICE_IDENTITY) == 0) {
        bp_device_identity_fn f = cuda_device_identity;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_GET_UNIQUE_ID) == 0) {
        bp_comm_get_unique_id_fn f = cuda_comm_get_unique_id;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, BP_PROC_COMM_INIT_RANK) == 0) {
        bp_comm_init_rank_fn f = cuda_comm_init_rank;
        return fn_ptr((void (*)(void))f);
    }
    if (strcmp(name, CUDA_PROC_BENCH_REFERENCE) == 0) {
        cuda_bench_reference_fn f = cuda_bench_reference;
        return fn_ptr((void (*)(void))f);
    }
    return NULL;
}

static void reg_shutdown(struct bp_registry *reg)
{
    struct cuda_plugin *pl = reg->context;
    cuda_cublas_unload();
    cuda_comm_set_plugin(NULL);
    free(pl->devices);
    free(pl);
}

static const struct bp_registry_iface cuda_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_get_name,
    .get_device_count = reg_get_device_count,
    .get_device = reg_get_device,
    .get_proc_address = reg_get_proc_address,
    .shutdown = reg_shutdown,
};

/* ---- init ---- */

static void fill_device(struct cuda_plugin *pl, struct cuda_device *cd, int id)
{
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cd->pl = pl;
    cd->id = id;
    snprintf(cd->name, sizeof cd->name, "cuda%d", id);
    if (cudaGetDeviceProperties(&prop, id) == cudaSuccess) {
        cd->cc_major = prop.major;
        cd->cc_minor = prop.minor;
        cd->total_mem = prop.totalGlobalMem;
        cuda_identity_probe(cd, &prop);
        snprintf(cd->description, sizeof cd->description, "%.255s (compute capability %d.%d, %d SMs)",
                 prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    } else {
        (void)cudaGetLastError();
        snprintf(cd->description, sizeof cd->description, "CUDA device %d", id);
    }
    snprintf(cd->buft_name, sizeof cd->buft_name, "CUDA%d", id);
    snprintf(cd->host_buft_name, sizeof cd->host_buft_name, "CUDA%d_Host", id);
    cd->dev = (struct bp_device){ .iface = &cuda_device_iface, .reg = &pl->reg, .context = cd };
    cd->buft = (struct bp_buffer_type){ .iface = &cuda_buffer_type_iface, .device = &cd->dev,
                                        .context = cd };
    cd->host_buft = (struct bp_buffer_type){ .iface = &cuda_host_buffer_type_iface,
                                             .device = &cd->dev, .context = cd };
}

static void fill_features(struct cuda_plugin *pl)
{
    int rt = 0;
    (void)cudaRuntimeGetVersion(&rt);
    snprintf(pl->n_dev_str, sizeof pl->n_dev_str, "%zu", pl->n_devices);
    snprintf(pl->cc_str, sizeof pl->cc_str, "%d.%d", rt / 1000, (rt % 1000) / 10);
    snprintf(pl->arch_str, sizeof pl->arch_str, "%s", BP_CUDA_ARCHS_STRING);
    struct bp_feature *f = pl->features;
    int i = 0;
    f[i++] = (struct bp_feature){ "devices", pl->n_dev_str };
    f[i++] = (struct bp_feature){ "cuda_runtime", pl->cc_str };
    f[i++] = (struct bp_feature){ "architectures", pl->arch_str };
    if (pl->no_device_reason[0])
        f[i++] = (struct bp_feature){ "no_devices", pl->no_device_reason };
    f[i] = (struct bp_feature){ NULL, NULL };
}

static bp_status cuda_plugin_init(const struct bp_host_services *host, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(host, CUDA_FAMILY, out);
    if (st != BP_OK)
        return st;
    struct cuda_plugin *pl = calloc(1, sizeof *pl);
    if (!pl) {
        if (host->log)
            host->log(BP_LOG_ERROR, CUDA_FAMILY, "could not allocate the plugin state; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    pl->host = host;
    pl->reg = (struct bp_registry){ .iface = &cuda_registry_iface, .abi_version = BP_ABI_VERSION,
                                    .variant = NULL, .context = pl };

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(pl->no_device_reason, sizeof pl->no_device_reason,
                 "no CUDA device is usable: %s (%s); install the NVIDIA driver or check "
                 "CUDA_VISIBLE_DEVICES.", cudaGetErrorString(err), cudaGetErrorName(err));
        count = 0;
    } else if (count == 0) {
        snprintf(pl->no_device_reason, sizeof pl->no_device_reason,
                 "the CUDA driver reports no device; check CUDA_VISIBLE_DEVICES.");
    }
    if (count > CUDA_MAX_DEVICES)
        count = CUDA_MAX_DEVICES;
    if (count > 0) {
        pl->devices = calloc((size_t)count, sizeof *pl->devices);
        if (!pl->devices) {
            cuda_log(pl, BP_LOG_ERROR, "could not allocate %d device records; free memory.", count);
            free(pl);
            return BP_ERR_OUT_OF_MEMORY;
        }
        for (int i = 0; i < count; i++)
            fill_device(pl, &pl->devices[i], i);
    }
    pl->n_devices = (size_t)count;
    if (pl->no_device_reason[0])
        cuda_log(pl, BP_LOG_INFO, "%s", pl->no_device_reason);
    fill_features(pl);
    cuda_comm_set_plugin(pl);
    *out = &pl->reg;
    return BP_OK;
}

BP_PLUGIN_DEFINE(cuda_plugin_init)
