/*
 * plugin.c — the Vulkan plugin's entry and registry: loads the Vulkan loader,
 * makes one device per physical device with a compute queue (vulkan0, ...),
 * chosen and ordered by BACKPLANE_VULKAN_DEVICES, and lists the features and
 * limits each device relies on (bp_get_features).
 *
 * No loader, no driver or no usable device is not an error: the registry
 * then has zero devices and one sentence in the log says why.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

void vk_log(const struct vk_plugin *pl, enum bp_log_level level, const char *fmt, ...)
{
    const struct bp_host_services *host = pl ? pl->host : NULL;
    if (!BP_IFACE_HAS(host, log) || !host->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->log(level, VK_FAMILY, "%s", msg);
}

const char *vk_tname(const struct bp_tensor *t)
{
    return t->name[0] ? t->name : "(unnamed)";
}

const char *vk_getenv(const struct vk_plugin *pl, const char *name)
{
    if (!BP_IFACE_HAS(pl->host, get_env) || !pl->host->get_env)
        return NULL;
    return pl->host->get_env(name);
}

/* ---- registry ---- */

static const char *reg_get_name(struct bp_registry *reg)
{
    (void)reg;
    return VK_FAMILY;
}

static size_t reg_get_device_count(struct bp_registry *reg)
{
    return ((struct vk_plugin *)reg->context)->n_devs;
}

static struct bp_device *reg_get_device(struct bp_registry *reg, size_t index)
{
    struct vk_plugin *pl = reg->context;
    return index < pl->n_devs ? &pl->devs[index]->dev : NULL;
}

static const struct bp_feature *reg_get_features(struct bp_registry *reg)
{
    return ((struct vk_plugin *)reg->context)->features;
}

static void *reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (name && strcmp(name, BP_PROC_GET_FEATURES) == 0) {
        bp_get_features_fn fn = reg_get_features;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (name && strcmp(name, BP_PROC_DEVICE_IDENTITY) == 0) {
        bp_device_identity_fn fn = vk_device_identity;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    if (name && strcmp(name, BP_PROC_SET_PROFILE) == 0) {
        bp_set_profile_fn fn = vk_backend_set_profile;
        void *p;
        memcpy(&p, &fn, sizeof p);
        return p;
    }
    return NULL;
}

static void plugin_free(struct vk_plugin *pl)
{
    for (size_t i = 0; i < pl->n_devs; i++)
        vk_device_destroy(pl->devs[i]);
    if (pl->instance && pl->fn.vkDestroyInstance)
        pl->fn.vkDestroyInstance(pl->instance, NULL);
    /* libvulkan stays mapped: drivers may leave atexit handlers behind. */
    pthread_mutex_destroy(&pl->live_mu);
    free(pl->features);
    free(pl->feature_strs);
    free(pl);
}

static void reg_shutdown(struct bp_registry *reg)
{
    plugin_free(reg->context);
}

static const struct bp_registry_iface vk_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_get_name,
    .get_device_count = reg_get_device_count,
    .get_device = reg_get_device,
    .get_proc_address = reg_get_proc_address,
    .shutdown = reg_shutdown,
};

/* ---- features: "vulkanN.<name>" = value for every device ---- */

/* The bytes one snprintf into a slot of cap took, its NUL included,
 * whether or not it was cut short. */
static size_t feature_len(int written, size_t cap)
{
    return written < 0 ? 1 : (size_t)written < cap ? (size_t)written + 1 : cap;
}

static void fill_features(struct vk_plugin *pl)
{
    enum { PER_DEV = 20 };   /* at least the ADDs of one device below */
    size_t n = pl->n_devs * PER_DEV + 2;
    pl->features = calloc(n, sizeof *pl->features);
    pl->feature_strs = calloc(n, 160);
    if (!pl->features || !pl->feature_strs) {
        free(pl->features);
        free(pl->feature_strs);
        pl->features = NULL;
        pl->feature_strs = NULL;
        return;
    }
    size_t k = 0;
    char *s = pl->feature_strs;
#define ADD(dn, key, ...)                                                     \
    do {                                                                      \
        if (k + 1 >= n) break; /* keep the terminator */                      \
        char *nm = s; s += feature_len(snprintf(s, 64, "%s.%s", dn, key), 64); \
        char *vl = s; s += feature_len(snprintf(s, 96, __VA_ARGS__), 96);      \
        pl->features[k++] = (struct bp_feature){ nm, vl };                    \
    } while (0)
    for (size_t i = 0; i < pl->n_devs; i++) {
        const struct vk_dev *d = pl->devs[i];
        const VkPhysicalDeviceLimits *l = &d->props.limits;
        ADD(d->name, "api_version", "%u.%u.%u", VK_API_VERSION_MAJOR(d->props.apiVersion),
            VK_API_VERSION_MINOR(d->props.apiVersion), VK_API_VERSION_PATCH(d->props.apiVersion));
        ADD(d->name, "driver_version", "0x%x", d->props.driverVersion);
        ADD(d->name, "physical_index", "%u", d->phys_index);
        ADD(d->name, "storageBuffer16BitAccess", "%d (%s)", d->f16_storage,
            d->use_f16_storage ? "used: 16-bit loads and stores"
            : d->f16_storage ? "not used: BACKPLANE_VULKAN_F16_STORAGE=0; packed words"
                             : "packed words");
        ADD(d->name, "storageBuffer8BitAccess", "%d", d->int8_storage);
        ADD(d->name, "shaderFloat16", "%d", d->shader_f16);
        ADD(d->name, "shaderInt8", "%d", d->shader_int8);
        ADD(d->name, "subgroup_size", "%u", d->subgroup_size);
        ADD(d->name, "subgroup_arithmetic", "%s", d->subgroup_arith ? "1 (used: subgroupAdd)" : "0");
        ADD(d->name, "mul_mat_kernel", "%s",
            d->mm_cpu ? "mul_mat_cpu (lanes share X)" : "mul_mat (shared-memory tiles)");
        char tiles[64] = "";
        for (int t = 0, n = 0; t < d->mm_tiles && n >= 0 && (size_t)n < sizeof tiles; t++)
            n += snprintf(tiles + n, sizeof tiles - (size_t)n, "%s%ux%u", t ? " " : "",
                          vk_mm_tiles[t].bn, vk_mm_tiles[t].bm);
        ADD(d->name, "integer_dot_product", "%d (%s)", d->int_dot,
            d->use_int_dot ? "used: mul_mat_vec_q8 for one-column products of quantized weights"
            : !d->int_dot ? "not offered"
            : d->int_dot_fast ? "not used: BACKPLANE_VULKAN_INT_DOT=0" : "not accelerated; not used");
        ADD(d->name, "cooperative_matrix", "%d (%s)", d->coopmat_offered,
            d->use_coopmat ? "used: mul_mat_cm, BACKPLANE_VULKAN_COOPMAT=1"
            : d->coopmat_offered ? "not used: off until it has run on a GPU; "
                                   "BACKPLANE_VULKAN_COOPMAT=1 uses it"
                                 : "VK_NV_cooperative_matrix 16x16x16 float16 not offered");
        ADD(d->name, "mul_mat_tiles", "%s, in %s", tiles, d->use_f16_tiles ? "float16_t" : "float");
        ADD(d->name, "maxStorageBufferRange", "%u", l->maxStorageBufferRange);
        ADD(d->name, "max_buffer_bytes", "%zu", d->max_alloc);
        ADD(d->name, "maxComputeWorkGroupCount", "%u,%u,%u", l->maxComputeWorkGroupCount[0],
            l->maxComputeWorkGroupCount[1], l->maxComputeWorkGroupCount[2]);
        ADD(d->name, "maxComputeWorkGroupInvocations", "%u (needs 256)",
            l->maxComputeWorkGroupInvocations);
        ADD(d->name, "maxComputeSharedMemorySize", "%u (needs 8192)", l->maxComputeSharedMemorySize);
        ADD(d->name, "minStorageBufferOffsetAlignment", "%llu",
            (unsigned long long)l->minStorageBufferOffsetAlignment);
    }
#undef ADD
    pl->features[k] = (struct bp_feature){ NULL, NULL };
}

/* ---- selection: BACKPLANE_VULKAN_DEVICES=0,2 ---- */

/* Fills order[] with indices into the compute-capable list; returns count. */
static size_t select_devices(struct vk_plugin *pl, size_t n_avail, size_t order[VK_MAX_DEVICES])
{
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_DEVICES");
    size_t n = 0;
    if (!env || !*env) {
        for (size_t i = 0; i < n_avail && i < VK_MAX_DEVICES; i++)
            order[n++] = i;
        return n;
    }
    const char *p = env;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        size_t len = strcspn(p, ",");
        bool dup = false;
        for (size_t j = 0; j < n; j++)
            dup = dup || (v >= 0 && order[j] == (size_t)v);
        if (end != p + len || end == p || v < 0 || (size_t)v >= n_avail || dup ||
            n == VK_MAX_DEVICES)
            vk_log(pl, BP_LOG_WARN,
                   "BACKPLANE_VULKAN_DEVICES entry '%.*s' is not a distinct index below %zu (the "
                   "number of Vulkan devices with compute queues); it is ignored.",
                   (int)len, p, n_avail);
        else
            order[n++] = (size_t)v;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

static bool has_compute_queue(struct vk_plugin *pl, VkPhysicalDevice phys)
{
    uint32_t nq = 0;
    pl->fn.vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, NULL);
    VkQueueFamilyProperties qf[32];
    if (nq > 32) nq = 32;
    pl->fn.vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
    for (uint32_t i = 0; i < nq; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return true;
    return false;
}

static void enumerate(struct vk_plugin *pl)
{
    char why[256] = "";
    if (!vk_loader_open(&pl->fn, why, sizeof why)) {
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: %s.", why);
        return;
    }
    uint32_t api = VK_API_VERSION_1_0;
    if (pl->fn.vkEnumerateInstanceVersion)
        pl->fn.vkEnumerateInstanceVersion(&api);
    if (api < VK_API_VERSION_1_1) {
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: the Vulkan loader offers version %u.%u and this "
               "plugin needs 1.1; update libvulkan1.", VK_API_VERSION_MAJOR(api),
               VK_API_VERSION_MINOR(api));
        return;
    }
    VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                              .pApplicationName = "backplane", .pEngineName = "backplane",
                              .apiVersion = VK_API_VERSION_1_1 };
    VkInstanceCreateInfo ici = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pApplicationInfo = &app };
    VkResult r = vk_loader_create_instance(&pl->fn, &ici, &pl->instance);
    if (r != VK_SUCCESS) {
        pl->instance = VK_NULL_HANDLE;
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: no Vulkan driver (ICD) could be loaded "
               "(vkCreateInstance returned %d); install one (Debian: mesa-vulkan-drivers) or "
               "check VK_DRIVER_FILES.", (int)r);
        return;
    }
    if (!vk_loader_instance(&pl->fn, pl->instance, why, sizeof why) ||
        !vk_loader_device(&pl->fn, pl->instance, why, sizeof why)) {
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: %s.", why);
        return;
    }
    uint32_t n_phys = 0;
    r = pl->fn.vkEnumeratePhysicalDevices(pl->instance, &n_phys, NULL);
    VkPhysicalDevice phys[VK_MAX_DEVICES];
    if (n_phys > VK_MAX_DEVICES) n_phys = VK_MAX_DEVICES;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        r = pl->fn.vkEnumeratePhysicalDevices(pl->instance, &n_phys, phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n_phys == 0) {
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: no Vulkan driver (ICD) reports a device; "
               "install one (Debian: mesa-vulkan-drivers) or check VK_DRIVER_FILES.");
        return;
    }
    VkPhysicalDevice usable[VK_MAX_DEVICES];
    uint32_t usable_idx[VK_MAX_DEVICES];
    size_t n_usable = 0;
    for (uint32_t i = 0; i < n_phys; i++) {
        VkPhysicalDeviceProperties pr;
        pl->fn.vkGetPhysicalDeviceProperties(phys[i], &pr);
        if (pr.apiVersion < VK_API_VERSION_1_1 || !has_compute_queue(pl, phys[i])) {
            vk_log(pl, BP_LOG_INFO, "Vulkan device '%s' is skipped: it lacks Vulkan 1.1 or a "
                   "compute queue.", pr.deviceName);
            continue;
        }
        usable_idx[n_usable] = i;
        usable[n_usable++] = phys[i];
    }
    size_t order[VK_MAX_DEVICES];
    size_t n_sel = select_devices(pl, n_usable, order);
    for (size_t i = 0; i < n_sel; i++) {
        struct vk_dev *d = NULL;
        if (vk_device_create(pl, usable[order[i]], usable_idx[order[i]], (int)pl->n_devs, &d, why,
                             sizeof why) == BP_OK)
            pl->devs[pl->n_devs++] = d;
        else
            vk_log(pl, BP_LOG_WARN, "Vulkan device %zu is skipped: %s.", order[i], why);
    }
    if (pl->n_devs == 0 && n_usable > 0 && n_sel == 0)
        vk_log(pl, BP_LOG_WARN, "no Vulkan devices: BACKPLANE_VULKAN_DEVICES selects none of the "
               "%zu available.", n_usable);
}

static bp_status vk_plugin_init(const struct bp_host_services *host, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(host, VK_FAMILY, out);
    if (st != BP_OK)
        return st;
    struct vk_plugin *pl = calloc(1, sizeof *pl);
    if (!pl) {
        if (host->log)
            host->log(BP_LOG_ERROR, VK_FAMILY, "could not allocate the plugin state; free memory.");
        return BP_ERR_OUT_OF_MEMORY;
    }
    pl->host = host;
    pthread_mutex_init(&pl->live_mu, NULL);
    pl->reg = (struct bp_registry){ .iface = &vk_registry_iface, .abi_version = BP_ABI_VERSION,
                                    .variant = NULL, .context = pl };
    enumerate(pl);
    fill_features(pl);
    *out = &pl->reg;
    return BP_OK;
}

BP_PLUGIN_DEFINE(vk_plugin_init)
