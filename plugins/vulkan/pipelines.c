/*
 * pipelines.c — one descriptor-set layout and pipeline layout per device
 * (six storage buffers: four sources, the output, the parameter blocks; one
 * push-constant word), and compute pipelines cached for the device's
 * lifetime by shader and MUL_MAT weight type: made when supports_op first
 * meets a node that needs them (the scheduler asks while it plans a graph,
 * before the graph runs), else on first use, through the device's
 * VkPipelineCache (pipeline_cache.c). Each shader
 * comes in two builds; a device uses the native 16-bit one (<name>_f16s)
 * when it enabled storageBuffer16BitAccess (vk_device.c).
 */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_spirv.h"

const char *const vk_shader_names[VK_SH_COUNT] = {
    [VK_SH_BINARY] = "binary", [VK_SH_ELEMENTWISE] = "elementwise", [VK_SH_SILU_MUL] = "silu_mul",
    [VK_SH_RMS_NORM] = "rms_norm", [VK_SH_SOFT_MAX] = "soft_max", [VK_SH_ROPE] = "rope",
    [VK_SH_GET_ROWS] = "get_rows", [VK_SH_SET_ROWS] = "set_rows",
    [VK_SH_MUL_MAT_VEC] = "mul_mat_vec", [VK_SH_MUL_MAT] = "mul_mat",
    [VK_SH_FLASH_ATTN] = "flash_attn", [VK_SH_TOP_K] = "top_k",
    [VK_SH_MUL_MAT_VEC_ID] = "mul_mat_vec_id", [VK_SH_MUL_MAT_VEC_SG] = "mul_mat_vec_sg",
    [VK_SH_MUL_MAT_VEC_ID_SG] = "mul_mat_vec_id_sg", [VK_SH_FLASH_ATTN_WIDE] = "flash_attn_wide",
    [VK_SH_MUL_MAT_CPU] = "mul_mat_cpu", [VK_SH_MUL_MAT_CPU1] = "mul_mat_cpu1",
    [VK_SH_FLASH_ATTN_CPU] = "flash_attn_cpu", [VK_SH_MUL_MAT_M] = "mul_mat_m",
    [VK_SH_MUL_MAT_L] = "mul_mat_l", [VK_SH_MUL_MAT_VEC_Q8] = "mul_mat_vec_q8",
    [VK_SH_MUL_MAT_CM] = "mul_mat_cm", [VK_SH_MUL_MAT_CPU_ID] = "mul_mat_cpu_id",
    [VK_SH_MUL_MAT_CPU1_ID] = "mul_mat_cpu1_id", [VK_SH_MUL_MAT_ID] = "mul_mat_id",
    [VK_SH_MUL_MAT_ID_M] = "mul_mat_id_m", [VK_SH_MUL_MAT_ID_L] = "mul_mat_id_l",
};

/* 12, 24 and 32 KiB of shared memory in float (half in float16_t); 64,
 * 128 and 256 invocations. The small tile fits every device's minimum
 * limits (16 KiB, 128 invocations). */
const struct vk_mm_tile vk_mm_tiles[VK_MM_TILES] = {
    { VK_SH_MUL_MAT, VK_SH_MUL_MAT_ID, 64, 32, 4 },
    { VK_SH_MUL_MAT_M, VK_SH_MUL_MAT_ID_M, 128, 64, 8 },
    { VK_SH_MUL_MAT_L, VK_SH_MUL_MAT_ID_L, 128, 128, 8 },
};

static const struct vk_mm_tile *mm_tile_of(enum vk_shader sh)
{
    for (int i = 0; i < VK_MM_TILES; i++)
        if (vk_mm_tiles[i].sh == sh || vk_mm_tiles[i].sh_id == sh) return &vk_mm_tiles[i];
    return NULL;
}

bp_status vk_pipelines_init(struct vk_dev *d)
{
    vk_pcache_open(d);
    const struct vk_fns *f = &d->pl->fn;
    VkDescriptorSetLayoutBinding b[VK_SLOTS + 1];
    for (uint32_t i = 0; i < VK_SLOTS + 1; i++)
        b[i] = (VkDescriptorSetLayoutBinding){ .binding = i,
                                               .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               .descriptorCount = 1,
                                               .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT };
    VkDescriptorSetLayoutCreateInfo lci = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                            .bindingCount = VK_SLOTS + 1, .pBindings = b };
    VkResult r = f->vkCreateDescriptorSetLayout(d->device, &lci, NULL, &d->dsl);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "creating the descriptor set layout");
    VkPushConstantRange pcr = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0,
                                .size = sizeof(uint32_t) };
    VkPipelineLayoutCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1, .pSetLayouts = &d->dsl,
                                       .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr };
    r = f->vkCreatePipelineLayout(d->device, &pci, NULL, &d->layout);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "creating the pipeline layout");

    /* A small buffer bound to unused slots, so every descriptor is valid. */
    VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 256,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
    r = f->vkCreateBuffer(d->device, &bci, NULL, &d->dummy);
    if (r != VK_SUCCESS) return vk_status(d->pl, r, "creating the dummy buffer");
    VkMemoryRequirements req;
    f->vkGetBufferMemoryRequirements(d->device, d->dummy, &req);
    int mt = vk_find_memory(d, req.memoryTypeBits, 0);
    if (mt < 0) {
        vk_log(d->pl, BP_LOG_ERROR, "%s offers no memory type for its placeholder buffer; the "
               "driver is broken, use another device.", d->name);
        return BP_ERR_UNSUPPORTED;
    }
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt };
    r = f->vkAllocateMemory(d->device, &ai, NULL, &d->dummy_mem);
    if (r == VK_SUCCESS)
        r = f->vkBindBufferMemory(d->device, d->dummy, d->dummy_mem, 0);
    return vk_status(d->pl, r, "allocating the dummy buffer");
}

void vk_pipelines_free(struct vk_dev *d)
{
    const struct vk_fns *f = &d->pl->fn;
    for (int s = 0; s < VK_SH_COUNT; s++)
        for (int t = 0; t < BP_TYPE_COUNT; t++)
            if (d->pipes[s][t]) f->vkDestroyPipeline(d->device, d->pipes[s][t], NULL);
    vk_pcache_close(d);
    if (d->layout) f->vkDestroyPipelineLayout(d->device, d->layout, NULL);
    if (d->dsl) f->vkDestroyDescriptorSetLayout(d->device, d->dsl, NULL);
    if (d->dummy) f->vkDestroyBuffer(d->device, d->dummy, NULL);
    if (d->dummy_mem) f->vkFreeMemory(d->device, d->dummy_mem, NULL);
}

static const struct vk_spirv_blob *find_blob(const char *name)
{
    for (const struct vk_spirv_blob *b = vk_spirv; b->name; b++)
        if (strcmp(b->name, name) == 0) return b;
    return NULL;
}

bp_status vk_pipeline_get(struct vk_dev *d, enum vk_shader sh, int wtype, VkPipeline *out)
{
    const struct vk_fns *f = &d->pl->fn;
    if ((unsigned)sh >= VK_SH_COUNT || wtype < 0 || wtype >= BP_TYPE_COUNT)
        return BP_ERR_INTERNAL;
    pthread_mutex_lock(&d->pipe_mu);
    bp_status st = BP_OK;
    if (!d->pipes[sh][wtype]) {
        /* The tiles are one source with their sizes as constants. */
        const struct vk_mm_tile *tile = mm_tile_of(sh);
        char name[48];
        snprintf(name, sizeof name, "%s%s%s",
                 tile ? (tile->sh_id == sh ? "mul_mat_id" : "mul_mat") : vk_shader_names[sh],
                 tile && d->use_f16_tiles ? "_f16t" : "", d->use_f16_storage ? "_f16s" : "");
        const struct vk_spirv_blob *blob = find_blob(name);
        if (!blob) {
            pthread_mutex_unlock(&d->pipe_mu);
            vk_log(d->pl, BP_LOG_ERROR, "the vulkan plugin has no SPIR-V for shader '%s'; its build "
                   "is incomplete, rebuild it.", name);
            return BP_ERR_INTERNAL;
        }
        VkShaderModule mod = VK_NULL_HANDLE;
        VkResult r = VK_ERROR_INITIALIZATION_FAILED;
        {
            VkShaderModuleCreateInfo mci = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                             .codeSize = blob->size, .pCode = blob->code };
            r = f->vkCreateShaderModule(d->device, &mci, NULL, &mod);
        }
        if (r == VK_SUCCESS) {
            /* Constant 1: the weight type; 0: the workgroup size of the
             * shaders that take it (one subgroup for the _sg builds); 2-4:
             * a tile's sizes. */
            const bool sg = sh == VK_SH_MUL_MAT_VEC_SG || sh == VK_SH_MUL_MAT_VEC_ID_SG;
            uint32_t sc[5] = { sg ? d->subgroup_size : VK_MMV_WG, (uint32_t)wtype, 0, 0, 0 };
            uint32_t n_sc = 2;
            if (tile) {
                sc[0] = vk_mm_tile_wg(tile);
                sc[2] = tile->bn, sc[3] = tile->bm, sc[4] = tile->tm;
                n_sc = 5;
            } else if (sh == VK_SH_MUL_MAT_VEC_Q8) {
                sc[2] = d->mmq_max_blocks;
                n_sc = 3;
            } else if (sh == VK_SH_MUL_MAT_CM) {
                sc[0] = 4 * d->subgroup_size; /* four subgroups */
            }
            VkSpecializationMapEntry me[5];
            for (uint32_t i = 0; i < 5; i++)
                me[i] = (VkSpecializationMapEntry){ .constantID = i, .offset = 4 * i, .size = 4 };
            VkSpecializationInfo si = { .mapEntryCount = n_sc, .pMapEntries = me,
                                        .dataSize = n_sc * sizeof sc[0], .pData = sc };
            VkComputePipelineCreateInfo cci = {
                .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                           .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main",
                           .pSpecializationInfo = &si },
                .layout = d->layout };
            r = f->vkCreateComputePipelines(d->device, d->pcache, 1, &cci, NULL,
                                            &d->pipes[sh][wtype]);
            if (r == VK_SUCCESS) d->pcache_dirty = true;
            f->vkDestroyShaderModule(d->device, mod, NULL);
        }
        if (r != VK_SUCCESS) {
            d->pipes[sh][wtype] = VK_NULL_HANDLE;
            char what[96];
            snprintf(what, sizeof what, "building the %s pipeline on %s", vk_shader_names[sh], d->name);
            st = vk_status(d->pl, r, what);
        }
    }
    *out = d->pipes[sh][wtype];
    pthread_mutex_unlock(&d->pipe_mu);
    return st;
}

void vk_pipelines_warm(struct vk_dev *d, const struct bp_tensor *node)
{
    if (bp_op_is_view((enum bp_op)node->op)) return;
    enum vk_shader sh[2];
    int wtype;
    const int n = vk_node_shaders(d, node, sh, &wtype);
    if (wtype < 0 || wtype >= BP_TYPE_COUNT) return;
    bool mem = node->data != NULL;
    for (int s = 0; s < BP_MAX_SRC; s++) mem |= node->src[s] && node->src[s]->data;
    pthread_mutex_lock(&d->pipe_mu);
    const bool arm_now = mem && !d->warm_armed;
    const bool armed = d->warm_armed |= mem;
    if (!armed)
        for (int i = 0; i < n; i++) d->warm_pending[sh[i]][wtype] = true;
    pthread_mutex_unlock(&d->pipe_mu);
    if (!armed) return;
    VkPipeline unused;
    /* warm_pending is written only before arming, under the lock above */
    if (arm_now) {
        for (int s = 0; s < VK_SH_COUNT; s++)
            for (int t = 0; t < BP_TYPE_COUNT; t++)
                if (d->warm_pending[s][t]) (void)vk_pipeline_get(d, (enum vk_shader)s, t, &unused);
        vk_fuse_warm(d, NULL);
    }
    for (int i = 0; i < n; i++) (void)vk_pipeline_get(d, sh[i], wtype, &unused);
    vk_fuse_warm(d, node);
}
