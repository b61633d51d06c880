/*
 * vk_internal.h — what the Vulkan plugin's files share: the dlopen()ed
 * loader's function table, the plugin/device/backend state and the op table.
 */
#ifndef BP_VK_INTERNAL_H
#define BP_VK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include <backplane/bp_abi.h>

#include "shaders/vk_params.h"

#define VK_FAMILY "vulkan"
#define VK_MAX_DEVICES 16
#define VK_PARAM_WORDS ((int)VK_PB_WORDS) /* one parameter block per dispatch */
#define VK_SLOTS ((int)VK_PB_OUT + 1)     /* bindings 0-3 sources, 4 output */
static_assert(VK_PB_SLOT * VK_SLOTS <= VK_PB_OPP && VK_PB_OPP + VK_PB_N_OPP <= VK_PB_AUX &&
                  VK_PB_AUX + VK_PB_N_AUX <= VK_PB_WORDS,
              "the parameter block's regions overlap (shaders/vk_params.h)");

/* ---- the loader's functions, resolved at init (vk_loader.c) ---- */

#define VK_INSTANCE_FUNCS(X)                                                  \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices)                        \
    X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2)        \
    X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr) \
    X(vkEnumerateDeviceExtensionProperties)

#define VK_DEVICE_FUNCS(X)                                                    \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory)      \
    X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory)                     \
    X(vkCreateShaderModule) X(vkDestroyShaderModule)                          \
    X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)            \
    X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                      \
    X(vkCreateComputePipelines) X(vkDestroyPipeline)                          \
    X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData) \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool) \
    X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)                     \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer)     \
    X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants)     \
    X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer) \
    X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)    \
    X(vkResetFences) X(vkDeviceWaitIdle)                                      \
    X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool)         \
    X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

struct vk_fns {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
#define X(n) PFN_##n n;
    VK_INSTANCE_FUNCS(X)
    VK_DEVICE_FUNCS(X)
#undef X
};

/* Opens libvulkan.so.1 and resolves the global functions; false (with a
 * sentence in why) when there is no loader. */
bool vk_loader_open(struct vk_fns *f, char *why, size_t cap);
/* vkCreateInstance, then pin the drivers it loaded (see vk_loader.c). */
VkResult vk_loader_create_instance(struct vk_fns *f, const VkInstanceCreateInfo *ici,
                                   VkInstance *out);
/* Instance-level functions after vkCreateInstance; device-level through
 * the instance's trampolines. False when one is missing. */
bool vk_loader_instance(struct vk_fns *f, VkInstance inst, char *why, size_t cap);
bool vk_loader_device(struct vk_fns *f, VkInstance inst, char *why, size_t cap);

/* ---- shaders and pipelines (pipelines.c) ---- */

enum vk_shader {
    VK_SH_BINARY, VK_SH_ELEMENTWISE, VK_SH_SILU_MUL, VK_SH_RMS_NORM, VK_SH_SOFT_MAX, VK_SH_ROPE,
    VK_SH_GET_ROWS, VK_SH_SET_ROWS, VK_SH_MUL_MAT_VEC, VK_SH_MUL_MAT, VK_SH_FLASH_ATTN,
    VK_SH_TOP_K, VK_SH_MUL_MAT_VEC_ID, VK_SH_MUL_MAT_VEC_SG, VK_SH_MUL_MAT_VEC_ID_SG,
    VK_SH_FLASH_ATTN_WIDE, VK_SH_MUL_MAT_CPU, VK_SH_MUL_MAT_CPU1, VK_SH_FLASH_ATTN_CPU,
    VK_SH_MUL_MAT_M, VK_SH_MUL_MAT_L, VK_SH_MUL_MAT_VEC_Q8, VK_SH_MUL_MAT_CM,
    VK_SH_MUL_MAT_CPU_ID, VK_SH_MUL_MAT_CPU1_ID, VK_SH_MUL_MAT_ID, VK_SH_MUL_MAT_ID_M,
    VK_SH_MUL_MAT_ID_L,
    VK_SH_COUNT
};

/* mul_mat.comp's tiles, smallest first: one pipeline per tile (and weight
 * type), the sizes its specialisation constants. A device takes the
 * first mm_tiles of them (vk_device.c: what its limits allow); a product
 * the largest it fills at least half of (ops.c). */
struct vk_mm_tile {
    enum vk_shader sh, sh_id; /* MUL_MAT; MUL_MAT_ID (the BP_MM_ID build) */
    uint32_t bn, bm;   /* rows of W, columns of X */
    uint32_t tm;       /* columns per invocation (4 or 8); 8 rows each */
};
#define VK_MM_TILES 3
#define VK_MM_BK 32u   /* the shader's K step */
extern const struct vk_mm_tile vk_mm_tiles[VK_MM_TILES];
static inline uint32_t vk_mm_tile_wg(const struct vk_mm_tile *t) { return t->bn * t->bm / (8 * t->tm); }

/* ---- objects ---- */

struct vk_plugin;

struct vk_dev {
    struct bp_device dev;
    struct bp_buffer_type buft;
    struct vk_plugin *pl;
    int index;                         /* the N of vulkanN */
    uint32_t phys_index;               /* position in vkEnumeratePhysicalDevices */
    char name[16];
    char description[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE + 64];
    enum bp_device_type type;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    uint32_t ts_bits;                  /* the queue's timestampValidBits (0: no timestamps) */
    pthread_mutex_t queue_mu;          /* vkQueueSubmit needs the queue to itself */
    uint32_t subgroup_size;
    bool subgroup_arith;               /* subgroupAdd in compute shaders (the _sg builds) */
    bool mm_cpu;                       /* mul_mat_cpu: a CPU device, subgroups of
                                        * VK_MMC_LANES with subgroupBroadcast */
    bool f16_storage, int8_storage, shader_f16, shader_int8;
    bool use_f16_storage;              /* 16-bit loads/stores (else packed words) */
    bool use_f16_tiles;                /* mul_mat.comp's tiles in float16_t (mul_mat_f16t) */
    int mm_tiles;                      /* vk_mm_tiles this device takes (1 .. VK_MM_TILES) */
    int mm_tiles_id;                   /* of those, the ones whose BP_MM_ID build fits too */
    bool int_dot, int_dot_fast;        /* shaderIntegerDotProduct; 4x8 packed accelerated */
    bool int_dot_ext;                  /* enabled as VK_KHR_shader_integer_dot_product (< 1.3) */
    bool use_int_dot;                  /* mul_mat_vec_q8 for decode's Q4_0 / Q8_0 products */
    uint32_t mmq_max_blocks;           /* its K / 32 limit: the quantized column in shared memory */
    bool coopmat_offered;              /* VK_NV_cooperative_matrix with 16x16x16 f16 -> f32 */
    bool use_coopmat;                  /* mul_mat_cm for the tiles (BACKPLANE_VULKAN_COOPMAT=1) */
    size_t max_alloc;                  /* largest buffer we accept */
    size_t max_range;                  /* bytes one descriptor binds (maxStorageBufferRange) */
    size_t bind_align;                 /* minStorageBufferOffsetAlignment */
    int range_warned;                  /* a too-large tensor was reported (once) */
    bool has_uuid, software;           /* identity.c */
    uint8_t uuid[VK_UUID_SIZE];
    char pci_bus_id[BP_PCI_BUS_ID_LEN];
    size_t total_mem;
    size_t allocated;                  /* bytes in live buffers */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    pthread_mutex_t pipe_mu;
    VkPipeline pipes[VK_SH_COUNT][BP_TYPE_COUNT]; /* by shader and weight type */
    /* supports_op builds a node's pipelines once some node it was asked
     * about had memory (a graph being planned to run: a model's weights
     * are loaded before its graphs are planned); until then it only notes
     * them, so `backplane info`, which asks about every op and type of bare
     * nodes, waits for no compiler. */
    bool warm_armed;
    bool warm_pending[VK_SH_COUNT][BP_TYPE_COUNT];
    VkPipelineCache pcache;            /* pipeline_cache.c; VK_NULL_HANDLE: none */
    bool pcache_dirty;                 /* pipelines were made since it was loaded */
    VkBuffer dummy;                    /* bound to unused slots */
    VkDeviceMemory dummy_mem;
    /* For synchronous staging transfers of buffer set/get (non-mappable memory). */
    pthread_mutex_t xfer_mu;
    VkCommandPool xfer_pool;
    VkCommandBuffer xfer_cmd;
    VkFence xfer_fence;
};

struct vk_plugin {
    struct bp_registry reg;
    const struct bp_host_services *host;
    struct vk_fns fn;
    VkInstance instance;
    struct vk_dev *devs[VK_MAX_DEVICES];
    size_t n_devs;
    struct bp_feature *features;       /* NULL-terminated, names/values in strs */
    char *feature_strs;
    pthread_mutex_t live_mu;
    uint64_t next_buffer_id;
};

struct vk_buffer {
    struct bp_buffer buf;
    struct vk_dev *d;
    uint64_t serial;                   /* never reused, unlike VkBuffer handles */
    size_t alloc;                      /* bytes of the VkBuffer */
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;                      /* host pointer when host-visible and coherent */
    char *base;                        /* what get_base returns */
};

/* ---- plugin.c ---- */
void vk_log(const struct vk_plugin *pl, enum bp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *vk_getenv(const struct vk_plugin *pl, const char *name);
static inline struct vk_dev *vk_dev_of(struct bp_device *dev) { return dev->context; }
const char *vk_tname(const struct bp_tensor *t);

/* ---- vk_device.c: one device per physical device ---- */
bp_status vk_device_create(struct vk_plugin *pl, VkPhysicalDevice phys, uint32_t phys_index,
                           int index, struct vk_dev **out, char *why, size_t cap);
void vk_device_destroy(struct vk_dev *d);
extern const struct bp_device_iface vk_device_iface;
/* ---- identity.c ---- */
/* Reads UUID, PCI address and software flag into d (during creation). */
void vk_identity_probe(const struct vk_fns *f, struct vk_dev *d);
bp_status vk_device_identity(struct bp_device *dev, struct bp_device_identity *out);
/* Memory type index with all of `want` among `bits`, or -1. */
int vk_find_memory(const struct vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want);
/* A status and sentence for a failed VkResult. */
bp_status vk_status(const struct vk_plugin *pl, VkResult r, const char *what);
/* Run one-shot commands recorded by fn on the device's transfer command buffer and wait. */
bp_status vk_submit_wait(struct vk_dev *d, VkCommandBuffer cmd, VkFence fence);

/* ---- buffer.c ---- */
extern const struct bp_buffer_type_iface vk_buffer_type_iface;
/* The Vulkan buffer and byte offset of t's data; false when t is not in a
 * buffer of this plugin's device d. */
bool vk_tensor_loc(const struct vk_dev *d, const struct bp_tensor *t, VkBuffer *buf, size_t *off,
                   const struct vk_buffer **vb);
/* What a descriptor binds for one tensor. A buffer within maxStorageBufferRange
 * is bound whole (one descriptor set serves every tensor in it); a larger one
 * through a window that starts at the tensor's offset rounded down to
 * minStorageBufferOffsetAlignment. Descriptor sets are cached by (serial,
 * offset, range): a freed buffer's handle may come back for a new buffer. */
struct vk_binding {
    uint64_t serial;                   /* the buffer's serial; 0 for the dummy */
    VkBuffer buf;
    VkDeviceSize offset, range;        /* the descriptor's window */
    size_t abs;                        /* the tensor's byte offset in buf */
    uint32_t rel;                      /* the tensor's byte offset in the window */
};
/* BP_ERR_UNSUPPORTED (with a sentence in the log) when t does not fit one
 * window; BP_ERR_INVALID_ARGUMENT when t is not in a buffer of d. */
bp_status vk_tensor_bind(const struct vk_dev *d, const struct bp_tensor *t, struct vk_binding *out);
bp_status vk_buffer_read(struct vk_dev *d, const struct vk_buffer *vb, size_t off, void *dst,
                         size_t size);
bp_status vk_buffer_write(struct vk_dev *d, const struct vk_buffer *vb, size_t off,
                          const void *src, size_t size);

/* ---- pipelines.c ---- */
extern const char *const vk_shader_names[VK_SH_COUNT]; /* the SPIR-V blobs' base names */
bp_status vk_pipelines_init(struct vk_dev *d);
void vk_pipelines_free(struct vk_dev *d);
/* The pipeline of shader sh for weight type wtype (0 unless MUL_MAT), made
 * on first use and cached for the device's lifetime. */
bp_status vk_pipeline_get(struct vk_dev *d, enum vk_shader sh, int wtype, VkPipeline *out);
/* Makes the pipelines a supported node will use (supports_op calls it, so
 * the scheduler's planning makes them before the first graph runs, as a
 * driver that compiles at pipeline creation wants). Failures are left for
 * graph_compute to report. */
void vk_pipelines_warm(struct vk_dev *d, const struct bp_tensor *node);

/* ---- pipeline_cache.c: the VkPipelineCache on disk ---- */
/* Creates d->pcache, from the cache file when there is a valid one. */
void vk_pcache_open(struct vk_dev *d);
/* Writes the file when pipelines were made, then destroys d->pcache. */
void vk_pcache_close(struct vk_dev *d);

/* Workgroup size of mul_mat_vec's shared-memory build (a power of two,
 * at most 64). */
#define VK_MMV_WG 32u
/* Rows and columns one mul_mat_vec workgroup computes (the shader's NR, NC). */
#define VK_MMV_ROWS 2
#define VK_MMV_COLS 8

/* ---- ops.c: the op table ---- */
struct vk_dispatch {
    enum vk_shader shader;
    int wtype;                         /* specialisation (MUL_MAT weight type) */
    const struct bp_tensor *slot[VK_SLOTS - 1]; /* sources by binding; NULL unused */
    uint32_t aux[VK_PB_N_AUX];
    uint32_t groups[3];
    int64_t mmv_max_m;                 /* MUL_MAT: most columns for mul_mat_vec */
    bool mm_cpu;                       /* MUL_MAT: the device takes mul_mat_cpu */
    int mm_tiles;                      /* MUL_MAT: the device's vk_dev.mm_tiles */
    int mm_tiles_id;                   /* MUL_MAT_ID: vk_dev.mm_tiles_id */
    bool int_dot;                      /* MUL_MAT: the device's use_int_dot */
    uint32_t mmq_max_blocks;           /* MUL_MAT: its mmq_max_blocks */
    bool coopmat;                      /* MUL_MAT: the device's use_coopmat */
    const struct bp_tensor *first;     /* a fused chain's first node (fusion.c), whose
                                        * op_params fill the block; else NULL */
    bool writes_fused;                 /* the chain also writes slot VK_PB_FUSED */
    int32_t lead;                      /* an op the chain runs in front of first's (its
                                        * output then takes slot VK_PB_FUSED); else 0 */
};
bool vk_supports_node(struct vk_dev *d, const struct bp_tensor *node);
/* How to dispatch a supported, non-view node. */
void vk_plan_node(const struct vk_dev *d, const struct bp_tensor *node, struct vk_dispatch *out);
/* The shaders a supported non-view node may take, whatever its column
 * count: a MUL_MAT planned at one M also runs at others (prefill, decode).
 * Returns how many were written to sh (at most 2). */
int vk_node_shaders(const struct vk_dev *d, const struct bp_tensor *node, enum vk_shader sh[2],
                    int *wtype);

/* n invocations in workgroups of `local`, as an (x, y) grid of workgroups. */
void vk_grid(uint64_t n, uint32_t local, uint32_t g[3]);

/* The bytes [lo, hi) of one buffer: what a dispatch reads or writes, for
 * the barriers between dispatches (backend.c) and fusion's checks. */
struct vk_range {
    VkBuffer buf;
    size_t lo, hi;
};
static inline bool vk_ranges_meet(const struct vk_range *a, const struct vk_range *b)
{
    return a->buf == b->buf && a->lo < b->hi && b->lo < a->hi;
}

/* ---- fusion.c: the fusion table ---- */
/* When nodes[i] of g starts a chain whose conditions hold (the fusion
 * table's, or one of the longer chains), plans the chain's one dispatch
 * into p and returns the index of the chain's last node, whose output it
 * writes and in whose place it runs; nodes[i] and the nodes skip[0] ..
 * skip[1] (an empty range for chains of two) then have no dispatch of
 * their own. Else -1. */
int32_t vk_fuse_plan(const struct vk_dev *d, const struct bp_graph *g, int32_t i,
                     struct vk_dispatch *p, int32_t skip[2]);
/* BACKPLANE_VULKAN_FUSION: anything but 0 (or unset) fuses. */
bool vk_fusion_enabled(const struct vk_plugin *pl);
/* Makes the pipelines of the chains that start with node's op, or of every
 * chain when node is NULL (supports_op warms them with the node's own). */
void vk_fuse_warm(struct vk_dev *d, const struct bp_tensor *node);

/* ---- profile.c: per-dispatch time from timestamp queries ---- */
struct vk_prof_tag {
    int32_t op;                        /* enum bp_op */
    int32_t shader;                    /* enum vk_shader */
    int32_t wtype;                     /* the MUL_MAT weight type, else 0 */
    int32_t fused;                     /* a fused chain's second op (BP_OP_NONE: none) */
    int32_t lead;                      /* an op in front of the chain's first (ADD) */
};
struct vk_prof_row {
    struct vk_prof_tag tag;
    uint64_t count, ns;
};
#define VK_PROF_ROWS 96
struct vk_prof {
    struct bp_profile *abi;            /* the caller's (bp_set_profile), or NULL */
    bool env;                          /* BACKPLANE_VULKAN_PROFILE: a table at the stream's end */
    VkQueryPool pool;
    uint32_t cap;                      /* timestamps in pool */
    struct vk_prof_tag *tags;          /* by dispatch of the pending submission */
    uint32_t n;                        /* dispatches timed in the pending submission; 0: none */
    uint64_t record_ns;                /* host time recording it */
    uint64_t graphs, graph_ns;         /* the env table's totals */
    struct vk_prof_row rows[VK_PROF_ROWS];
    uint32_t n_rows;
};
/* Reads BACKPLANE_VULKAN_PROFILE into p (zeroed by the caller). */
void vk_prof_init(struct vk_dev *d, struct vk_prof *p);
/* Whether the next graph is timed: someone asked and the queue has timestamps. */
bool vk_prof_wanted(const struct vk_dev *d, const struct vk_prof *p);
/* Room for n dispatches' timestamps, then the start mark recorded on cmd. */
bp_status vk_prof_start(struct vk_dev *d, struct vk_prof *p, VkCommandBuffer cmd, uint32_t n);
/* The end mark of dispatch k (0-based, in order), tagged for the tables. */
void vk_prof_mark(struct vk_dev *d, struct vk_prof *p, VkCommandBuffer cmd, uint32_t k,
                  struct vk_prof_tag tag);
/* After the submission's fence: adds its times to the tables. */
void vk_prof_collect(struct vk_dev *d, struct vk_prof *p);
/* Prints the env table (when asked for) and frees p's objects. */
void vk_prof_free(struct vk_dev *d, struct vk_prof *p);
uint64_t vk_now_ns(void);

/* ---- backend.c ---- */
bp_status vk_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out);
bp_status vk_event_new(struct bp_device *dev, struct bp_event **out);
/* bp_set_profile (bp_profile.h) for a stream of this plugin. */
bp_status vk_backend_set_profile(struct bp_backend *be, struct bp_profile *p);

#endif
