/*
 * vk_device.c — one backplane device per Vulkan physical device: probing
 * (type, heaps, limits, 16-bit/8-bit storage, subgroup size), the logical
 * device and its compute queue, and the device interface.
 *
 * Type mapping: discrete -> GPU, integrated -> IGPU, everything else
 * (lavapipe's CPU type, virtual GPUs) -> ACCEL. A CPU-type Vulkan device is
 * NOT reported as CPU: the host's default-device rule falls back to the
 * first CPU device, and lavapipe must never be chosen over the reference
 * cpu plugin (nor over a real GPU, which GPU/IGPU already ensure).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

bp_status vk_status(const struct vk_plugin *pl, VkResult r, const char *what)
{
    switch (r) {
    case VK_SUCCESS:
        return BP_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        vk_log(pl, BP_LOG_ERROR, "%s: the Vulkan driver ran out of host memory; free memory.", what);
        return BP_ERR_OUT_OF_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        vk_log(pl, BP_LOG_ERROR, "%s: the Vulkan device is out of memory; use smaller tensors or "
               "free buffers.", what);
        return BP_ERR_OUT_OF_MEMORY;
    case VK_ERROR_DEVICE_LOST:
        vk_log(pl, BP_LOG_ERROR, "%s: the Vulkan device was lost (driver reset or hang); the device "
               "cannot be used until the process restarts.", what);
        return BP_ERR_DEVICE_LOST;
    default:
        vk_log(pl, BP_LOG_ERROR, "%s failed with VkResult %d.", what, (int)r);
        return BP_ERR_PLUGIN;
    }
}

int vk_find_memory(const struct vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

bp_status vk_submit_wait(struct vk_dev *d, VkCommandBuffer cmd, VkFence fence)
{
    const struct vk_fns *f = &d->pl->fn;
    VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                        .pCommandBuffers = &cmd };
    f->vkResetFences(d->device, 1, &fence);
    pthread_mutex_lock(&d->queue_mu);
    VkResult r = f->vkQueueSubmit(d->queue, 1, &si, fence);
    pthread_mutex_unlock(&d->queue_mu);
    if (r == VK_SUCCESS)
        r = f->vkWaitForFences(d->device, 1, &fence, VK_TRUE, UINT64_MAX);
    return vk_status(d->pl, r, "a Vulkan transfer");
}

/* ---- device interface ---- */

static const char *dev_get_name(struct bp_device *dev) { return vk_dev_of(dev)->name; }
static const char *dev_get_description(struct bp_device *dev) { return vk_dev_of(dev)->description; }
static enum bp_device_type dev_get_type(struct bp_device *dev) { return vk_dev_of(dev)->type; }

static void dev_get_memory(struct bp_device *dev, size_t *free_b, size_t *total_b)
{
    struct vk_dev *d = vk_dev_of(dev);
    pthread_mutex_lock(&d->pl->live_mu);
    size_t used = d->allocated;
    pthread_mutex_unlock(&d->pl->live_mu);
    if (total_b) *total_b = d->total_mem;
    if (free_b) *free_b = used < d->total_mem ? d->total_mem - used : 0;
}

static void dev_get_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    (void)dev;
    if (!caps || caps->size < sizeof(size_t))
        return;
    struct bp_device_caps c = { .size = sizeof c, .async = true, .events = true };
    size_t n = caps->size < sizeof c ? caps->size : sizeof c;
    memcpy((char *)caps + sizeof(size_t), (const char *)&c + sizeof(size_t), n - sizeof(size_t));
}

static struct bp_buffer_type *dev_get_buffer_type(struct bp_device *dev)
{
    return &vk_dev_of(dev)->buft;
}

static bool dev_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    struct vk_dev *d = vk_dev_of(dev);
    if (!vk_supports_node(d, node)) return false;
    vk_pipelines_warm(d, node);
    return true;
}

static bool dev_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    return buft == &vk_dev_of(dev)->buft;
}

const struct bp_device_iface vk_device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_get_name,
    .get_description = dev_get_description,
    .get_type = dev_get_type,
    .get_memory = dev_get_memory,
    .get_caps = dev_get_caps,
    .init_backend = vk_backend_init,
    .get_buffer_type = dev_get_buffer_type,
    .get_host_buffer_type = NULL,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .event_new = vk_event_new,
};

/* ---- creation ---- */

/* How many of vk_mm_tiles the device takes: those whose invocations and
 * shared memory its limits allow; a CPU device the smallest (its
 * workgroups run on few cores, and a larger tile only makes fewer of
 * them). BACKPLANE_VULKAN_MM_TILE=s|m|l caps it, within the limits. The
 * MUL_MAT_ID build also keeps a word per column and per invocation
 * (mul_mat.comp), so it may take one tile fewer. */
static void choose_mm_tiles(struct vk_plugin *pl, struct vk_dev *d)
{
    const VkPhysicalDeviceLimits *l = &d->props.limits;
    const uint32_t elem = d->use_f16_tiles ? 2 : 4;
    int fit = 0, fit_id = 0;
    while (fit < VK_MM_TILES) {
        const struct vk_mm_tile *t = &vk_mm_tiles[fit];
        const uint32_t wg = vk_mm_tile_wg(t), shared = VK_MM_BK * (t->bn + t->bm) * elem;
        if (wg > l->maxComputeWorkGroupInvocations || wg > l->maxComputeWorkGroupSize[0] ||
            shared > l->maxComputeSharedMemorySize)
            break;
        if (shared + 4 * (t->bm + wg) <= l->maxComputeSharedMemorySize) fit_id = fit + 1;
        fit++;
    }
    if (fit == 0) fit = 1; /* the small tile is within every device's minimum limits */
    d->mm_tiles = d->software ? 1 : fit;
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_MM_TILE");
    if (env && *env) {
        static const char *const names[VK_MM_TILES] = { "s", "m", "l" };
        int want = 0;
        while (want < VK_MM_TILES && strcmp(env, names[want]) != 0) want++;
        if (want == VK_MM_TILES)
            vk_log(pl, BP_LOG_WARN, "BACKPLANE_VULKAN_MM_TILE='%s' is not s, m or l; ignored.", env);
        else if (want + 1 > fit)
            vk_log(pl, BP_LOG_WARN, "BACKPLANE_VULKAN_MM_TILE=%s is beyond what %s's limits allow; "
                   "using %s.", env, d->props.deviceName, names[fit - 1]);
        d->mm_tiles = want == VK_MM_TILES ? d->mm_tiles : want + 1 > fit ? fit : want + 1;
    }
    d->mm_tiles_id = fit_id < 1 ? 1 : fit_id < d->mm_tiles ? fit_id : d->mm_tiles;
}

static bool has_extension(const struct vk_fns *f, VkPhysicalDevice phys, const char *name);

/* Integer dot products (Vulkan 1.3, or VK_KHR_shader_integer_dot_product
 * before it): mul_mat_vec_q8 where the device says four packed signed
 * bytes are accelerated; BACKPLANE_VULKAN_INT_DOT=1 uses them wherever the
 * feature is there (to test them on a device that emulates them), =0
 * nowhere. The kernel keeps a quantized column in shared memory: K / 32
 * blocks of 40 bytes (32 quants, the scale, the sum) beside its 512-byte
 * reduction. */
static void probe_int_dot(struct vk_plugin *pl, struct vk_dev *d)
{
    const struct vk_fns *f = &pl->fn;
    bool ext = false;
    if (d->props.apiVersion < VK_API_VERSION_1_3) {
        ext = has_extension(f, d->phys, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
        if (!ext) return;
    }
    VkPhysicalDeviceShaderIntegerDotProductFeatures fe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                     .pNext = &fe };
    f->vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    VkPhysicalDeviceShaderIntegerDotProductProperties pr = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &pr };
    f->vkGetPhysicalDeviceProperties2(d->phys, &p2);
    const uint32_t shared = d->props.limits.maxComputeSharedMemorySize;
    d->int_dot = fe.shaderIntegerDotProduct && shared > 512 + 40;
    d->int_dot_ext = ext;
    d->int_dot_fast = pr.integerDotProduct4x8BitPackedSignedAccelerated;
    const uint32_t blocks = d->int_dot ? (shared - 512) / 40 : 0;
    d->mmq_max_blocks = blocks < 1024 ? blocks : 1024;
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_INT_DOT");
    const bool force = env && strcmp(env, "1") == 0, off = env && strcmp(env, "0") == 0;
    d->use_int_dot = d->int_dot && !off && (d->int_dot_fast || force);
}

/* Whether the device lists extension `name`. */
static bool has_extension(const struct vk_fns *f, VkPhysicalDevice phys, const char *name)
{
    uint32_t n = 0;
    bool found = false;
    f->vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL);
    VkExtensionProperties *e = n ? calloc(n, sizeof *e) : NULL;
    if (e && f->vkEnumerateDeviceExtensionProperties(phys, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* Cooperative matrices (VK_NV_cooperative_matrix; Debian 12's glslc has no
 * GL_KHR_cooperative_matrix): offered when the device lists a subgroup-scope
 * 16 x 16 x 16 product of float16_t into float and has float16_t (the
 * float16_t tiles); used only with BACKPLANE_VULKAN_COOPMAT=1, as the
 * kernel has not run on a device yet. */
static void probe_coopmat(struct vk_plugin *pl, struct vk_dev *d)
{
    const struct vk_fns *f = &pl->fn;
    if (!d->use_f16_tiles || d->software || d->subgroup_size < 4 ||
        4 * d->subgroup_size > d->props.limits.maxComputeWorkGroupInvocations ||
        !has_extension(f, d->phys, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
        return;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV props =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)f->vkGetInstanceProcAddr(
            pl->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fe = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                     .pNext = &fe };
    f->vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    uint32_t n = 0;
    if (!props || !fe.cooperativeMatrix || props(d->phys, &n, NULL) != VK_SUCCESS || n == 0)
        return;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    for (uint32_t i = 0; p && i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    if (p && props(d->phys, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !d->coopmat_offered; i++)
            d->coopmat_offered = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
                                 p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                 p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                 p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                 p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                 p[i].scope == VK_SCOPE_SUBGROUP_NV;
    free(p);
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_COOPMAT");
    d->use_coopmat = d->coopmat_offered && env && strcmp(env, "1") == 0;
}

static void probe(struct vk_plugin *pl, struct vk_dev *d)
{
    const struct vk_fns *f = &pl->fn;
    VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &sg };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &m3 };
    f->vkGetPhysicalDeviceProperties2(d->phys, &p2);
    d->props = p2.properties;
    d->subgroup_size = sg.subgroupSize;
    /* Reductions in one subgroup (subgroupAdd) where compute shaders have
     * subgroup arithmetic and the subgroup fits the shaders' bounds;
     * BACKPLANE_VULKAN_SUBGROUPS=0 keeps the shared-memory reductions. */
    const char *sg_env = vk_getenv(pl, "BACKPLANE_VULKAN_SUBGROUPS");
    d->subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                        (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                        sg.subgroupSize >= 4 && sg.subgroupSize <= 128 &&
                        !(sg_env && strcmp(sg_env, "0") == 0);
    vk_identity_probe(f, d);
    /* MUL_MAT's CPU kernel shares X between the lanes of one subgroup with
     * subgroupBroadcast; it is for devices that run a subgroup as one SIMD
     * vector (CPU devices) and is written for subgroups of VK_MMC_LANES. */
    d->mm_cpu = d->software && d->subgroup_arith &&
                (sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) &&
                sg.subgroupSize == VK_MMC_LANES;

    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                     .pNext = &s16 };
    f->vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    d->f16_storage = s16.storageBuffer16BitAccess;
    /* BACKPLANE_VULKAN_F16_STORAGE=0 keeps the packed-word path on a device
     * that has 16-bit storage (to test it, or to work around a driver). */
    const char *env = vk_getenv(pl, "BACKPLANE_VULKAN_F16_STORAGE");
    d->use_f16_storage = d->f16_storage && !(env && strcmp(env, "0") == 0);
    if (d->props.apiVersion >= VK_API_VERSION_1_2) {
        VkPhysicalDeviceVulkan12Features v12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
        VkPhysicalDeviceFeatures2 g2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                         .pNext = &v12 };
        f->vkGetPhysicalDeviceFeatures2(d->phys, &g2);
        d->int8_storage = v12.storageBuffer8BitAccess;
        d->shader_f16 = v12.shaderFloat16;
        d->shader_int8 = v12.shaderInt8;
    }

    /* mul_mat.comp's tiles in float16_t where the device computes in it
     * (BACKPLANE_VULKAN_F16_TILES=0: in float). */
    const char *f16t = vk_getenv(pl, "BACKPLANE_VULKAN_F16_TILES");
    d->use_f16_tiles = d->shader_f16 && !(f16t && strcmp(f16t, "0") == 0);
    choose_mm_tiles(pl, d);
    probe_int_dot(pl, d);
    probe_coopmat(pl, d);

    f->vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
    for (uint32_t i = 0; i < d->mem.memoryHeapCount; i++)
        if (d->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            d->total_mem += (size_t)d->mem.memoryHeaps[i].size;
    /* Shaders address bytes with 32-bit offsets within one binding, so a
     * window is below 4 GiB; a buffer may be larger (one window per tensor),
     * up to one allocation, and below the 1 TiB of opaque address space each
     * buffer is given (buffer.c). */
    size_t range = d->props.limits.maxStorageBufferRange;
    if (range > 0xfffffff0u) range = 0xfffffff0u;
    d->max_range = range & ~(size_t)3;
    d->bind_align = (size_t)d->props.limits.minStorageBufferOffsetAlignment;
    if (d->bind_align < 4 || (d->bind_align & (d->bind_align - 1))) d->bind_align = 256;
    size_t max = m3.maxMemoryAllocationSize ? (size_t)m3.maxMemoryAllocationSize : d->max_range;
    if (max < d->max_range) d->max_range = max & ~(size_t)3;
    if (max > ((size_t)1 << 40)) max = (size_t)1 << 40;
    d->max_alloc = max;

    switch (d->props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: d->type = BP_DEVICE_TYPE_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: d->type = BP_DEVICE_TYPE_IGPU; break;
    default: d->type = BP_DEVICE_TYPE_ACCEL; break;
    }
    static const char *const kinds[] = { "other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU" };
    const char *kind = (unsigned)d->props.deviceType < 5 ? kinds[d->props.deviceType] : "other";
    snprintf(d->description, sizeof d->description, "%s (Vulkan %u.%u, %s)", d->props.deviceName,
             VK_API_VERSION_MAJOR(d->props.apiVersion), VK_API_VERSION_MINOR(d->props.apiVersion),
             kind);
}

static bp_status create_logical(struct vk_plugin *pl, struct vk_dev *d, char *why, size_t cap)
{
    const struct vk_fns *f = &pl->fn;
    uint32_t nq = 0;
    f->vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, NULL);
    VkQueueFamilyProperties qf[32];
    if (nq > 32) nq = 32;
    f->vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, qf);
    /* Prefer a compute queue without graphics: on GPUs it runs beside
     * rendering work. */
    int best = -1;
    for (uint32_t i = 0; i < nq; i++) {
        if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        if (best < 0 || ((qf[best].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                         !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            best = (int)i;
    }
    if (best < 0) {
        snprintf(why, cap, "it has no compute queue");
        return BP_ERR_UNSUPPORTED;
    }
    d->queue_family = (uint32_t)best;
    d->ts_bits = qf[best].timestampValidBits;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                    .queueFamilyIndex = d->queue_family, .queueCount = 1,
                                    .pQueuePriorities = &prio };
    /* Only the feature structures of what is used go in the chain: one
     * that names a feature or extension the device lacks fails creation. */
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .cooperativeMatrix = VK_TRUE };
    VkPhysicalDeviceShaderIntegerDotProductFeatures idp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = VK_TRUE };
    VkPhysicalDeviceShaderFloat16Int8Features fi = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
        .shaderFloat16 = VK_TRUE };
    void *chain = NULL;
    if (d->use_coopmat) cm.pNext = chain, chain = &cm;
    if (d->use_int_dot) idp.pNext = chain, chain = &idp;
    if (d->use_f16_tiles) fi.pNext = chain, chain = &fi;
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .pNext = chain,
        .storageBuffer16BitAccess = d->use_f16_storage };
    const char *ext[2];
    uint32_t n_ext = 0;
    if (d->use_int_dot && d->int_dot_ext) ext[n_ext++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    if (d->use_coopmat) ext[n_ext++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    VkDeviceCreateInfo dci = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                               .pNext = &s16, .queueCreateInfoCount = 1,
                               .pQueueCreateInfos = &qci,
                               .enabledExtensionCount = n_ext, .ppEnabledExtensionNames = ext };
    VkResult r = f->vkCreateDevice(d->phys, &dci, NULL, &d->device);
    if (r != VK_SUCCESS) {
        d->device = VK_NULL_HANDLE;
        snprintf(why, cap, "vkCreateDevice returned %d", (int)r);
        return BP_ERR_PLUGIN;
    }
    f->vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);

    VkCommandPoolCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = d->queue_family };
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    r = f->vkCreateCommandPool(d->device, &pci, NULL, &d->xfer_pool);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = d->xfer_pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1 };
        r = f->vkAllocateCommandBuffers(d->device, &ai, &d->xfer_cmd);
    }
    if (r == VK_SUCCESS)
        r = f->vkCreateFence(d->device, &fci, NULL, &d->xfer_fence);
    if (r != VK_SUCCESS) {
        snprintf(why, cap, "creating its command pool returned %d", (int)r);
        return BP_ERR_PLUGIN;
    }
    if (vk_pipelines_init(d) != BP_OK) {
        snprintf(why, cap, "its pipeline layout or dummy buffer could not be made");
        return BP_ERR_PLUGIN;
    }
    return BP_OK;
}

bp_status vk_device_create(struct vk_plugin *pl, VkPhysicalDevice phys, uint32_t phys_index,
                           int index, struct vk_dev **out, char *why, size_t cap)
{
    *out = NULL;
    struct vk_dev *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, cap, "out of host memory");
        return BP_ERR_OUT_OF_MEMORY;
    }
    d->pl = pl;
    d->phys = phys;
    d->phys_index = phys_index;
    d->index = index;
    snprintf(d->name, sizeof d->name, "vulkan%d", index);
    pthread_mutex_init(&d->queue_mu, NULL);
    pthread_mutex_init(&d->pipe_mu, NULL);
    pthread_mutex_init(&d->xfer_mu, NULL);
    d->dev = (struct bp_device){ .iface = &vk_device_iface, .reg = &pl->reg, .context = d };
    d->buft = (struct bp_buffer_type){ .iface = &vk_buffer_type_iface, .device = &d->dev,
                                       .context = d };
    probe(pl, d);
    bp_status st = create_logical(pl, d, why, cap);
    if (st != BP_OK) {
        vk_device_destroy(d);
        return st;
    }
    *out = d;
    return BP_OK;
}

void vk_device_destroy(struct vk_dev *d)
{
    if (!d)
        return;
    const struct vk_fns *f = &d->pl->fn;
    if (d->device) {
        f->vkDeviceWaitIdle(d->device);
        vk_pipelines_free(d);
        if (d->xfer_fence) f->vkDestroyFence(d->device, d->xfer_fence, NULL);
        if (d->xfer_pool) f->vkDestroyCommandPool(d->device, d->xfer_pool, NULL);
        f->vkDestroyDevice(d->device, NULL);
    }
    pthread_mutex_destroy(&d->queue_mu);
    pthread_mutex_destroy(&d->pipe_mu);
    pthread_mutex_destroy(&d->xfer_mu);
    free(d);
}
