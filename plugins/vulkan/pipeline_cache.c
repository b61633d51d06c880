/*
 * pipeline_cache.c — the device's VkPipelineCache, kept on disk between
 * processes so that a driver which caches compiled pipelines in it does not
 * compile a shader twice. One file per (device UUID, driver version, shader
 * set): <dir>/<uuid>-<driver>-<blobs>.vkpc, where dir is
 * BACKPLANE_VULKAN_PIPELINE_CACHE (a directory; "0" turns the file off), else
 * $XDG_CACHE_HOME/backplane/vulkan, else ~/.cache/backplane/vulkan.
 *
 * A file is our header (magic, payload length, FNV-1a of the payload) then
 * the driver's data, whose own header must name this device. A file that
 * fails any check is ignored with one log line and replaced at exit; the
 * cache is written (to a temporary file, then renamed) only when pipelines
 * were made, when the device is destroyed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk_internal.h"
#include "vk_spirv.h"

#define PC_MAGIC "BPVKPC01"
#define PC_HEAD 24                        /* magic, u64 length, u64 hash */
#define PC_MAX_BYTES ((size_t)256 << 20)  /* larger is not a cache we wrote */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Every embedded shader, by name and code: a rebuilt plugin gets a new file. */
static uint64_t blobs_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const struct vk_spirv_blob *b = vk_spirv; b->name; b++) {
        h = fnv1a(h, b->name, strlen(b->name) + 1);
        h = fnv1a(h, b->code, b->size);
    }
    return h;
}

/* mkdir -p for the directory part of path (everything before the last '/'). */
static bool make_parents(char *path)
{
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *s = '/';
        if (!ok) return false;
    }
    return true;
}

/* The cache file's path into out; false when the file is off or there is no
 * place for it. */
static bool cache_path(const struct vk_dev *d, char *out, size_t cap)
{
    const char *env = vk_getenv(d->pl, "BACKPLANE_VULKAN_PIPELINE_CACHE");
    if (env && strcmp(env, "0") == 0) return false;
    char dir[4096];
    const char *xdg = vk_getenv(d->pl, "XDG_CACHE_HOME"), *home = vk_getenv(d->pl, "HOME");
    int n;
    if (env && *env) n = snprintf(dir, sizeof dir, "%s", env);
    else if (xdg && xdg[0] == '/') n = snprintf(dir, sizeof dir, "%s/backplane/vulkan", xdg);
    else if (home && home[0] == '/') n = snprintf(dir, sizeof dir, "%s/.cache/backplane/vulkan", home);
    else return false;
    if (n < 0 || (size_t)n >= sizeof dir) return false;
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++)
        snprintf(uuid + 2 * i, 3, "%02x", d->has_uuid ? d->uuid[i] : d->props.pipelineCacheUUID[i]);
    n = snprintf(out, cap, "%s/%s-%08x-%016llx.vkpc", dir, uuid, (unsigned)d->props.driverVersion,
                 (unsigned long long)blobs_hash());
    return n > 0 && (size_t)n < cap;
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Why data (the whole file) is not a cache of this device; NULL when it is. */
static const char *reject_reason(const struct vk_dev *d, const unsigned char *data, size_t n)
{
    if (n < PC_HEAD || memcmp(data, PC_MAGIC, 8) != 0) return "it does not start with backplane's header";
    const uint64_t len = rd64(data + 8);
    if (len != n - PC_HEAD) return "its length disagrees with its header (truncated?)";
    if (fnv1a(0xcbf29ce484222325ull, data + PC_HEAD, len) != rd64(data + 16))
        return "its checksum does not match";
    /* VkPipelineCacheHeaderVersionOne: length, version, vendor, device, UUID. */
    const unsigned char *v = data + PC_HEAD;
    uint32_t w[4];
    if (len < 16 + VK_UUID_SIZE) return "the driver's header is missing";
    memcpy(w, v, sizeof w);
    if (w[0] < 16 + VK_UUID_SIZE || w[0] > len || w[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
        w[2] != d->props.vendorID || w[3] != d->props.deviceID ||
        memcmp(v + 16, d->props.pipelineCacheUUID, VK_UUID_SIZE) != 0)
        return "the driver's header names another device or driver";
    return NULL;
}

/* The file's payload, checked, or NULL (*n = 0) when there is none to use. */
static unsigned char *load_file(const struct vk_dev *d, const char *path, size_t *n)
{
    *n = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;   /* the first run: nothing to say */
    unsigned char *data = NULL;
    size_t size = 0;
    const char *why = NULL;
    if (fseek(fp, 0, SEEK_END) != 0) why = "it cannot be read";
    else {
        long end = ftell(fp);
        if (end < 0 || (size_t)end > PC_MAX_BYTES) why = "its size is not that of a cache";
        else if (fseek(fp, 0, SEEK_SET) != 0 || !(data = malloc((size_t)end + 1)) ||
                 fread(data, 1, (size_t)end, fp) != (size_t)end)
            why = "it cannot be read";
        else size = (size_t)end;
    }
    fclose(fp);
    if (!why) why = reject_reason(d, data, size);
    if (why) {
        vk_log(d->pl, BP_LOG_WARN, "%s ignores its pipeline cache file %s: %s; it will be "
               "replaced when the process ends.", d->name, path, why);
        free(data);
        return NULL;
    }
    memmove(data, data + PC_HEAD, size - PC_HEAD);
    *n = size - PC_HEAD;
    return data;
}

void vk_pcache_open(struct vk_dev *d)
{
    const struct vk_fns *f = &d->pl->fn;
    d->pcache = VK_NULL_HANDLE;
    d->pcache_dirty = false;
    if (!f->vkCreatePipelineCache) return;
    char path[4352];
    size_t n = 0;
    unsigned char *data = NULL;
    if (cache_path(d, path, sizeof path)) data = load_file(d, path, &n);
    VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                     .initialDataSize = n, .pInitialData = data };
    VkResult r = f->vkCreatePipelineCache(d->device, &ci, NULL, &d->pcache);
    if (r != VK_SUCCESS && data) {
        vk_log(d->pl, BP_LOG_WARN, "%s ignores its pipeline cache file %s: the driver refused "
               "its data (%d); it will be replaced when the process ends.", d->name, path, (int)r);
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = f->vkCreatePipelineCache(d->device, &ci, NULL, &d->pcache);
    } else if (r == VK_SUCCESS && data) {
        vk_log(d->pl, BP_LOG_DEBUG, "%s loaded %zu bytes of pipeline cache from %s.", d->name, n, path);
    }
    if (r != VK_SUCCESS) d->pcache = VK_NULL_HANDLE;   /* pipelines are made without one */
    free(data);
}

/* Writes the cache's data to path through a temporary file beside it. */
static void save(struct vk_dev *d, char *path)
{
    const struct vk_fns *f = &d->pl->fn;
    size_t n = 0;
    if (f->vkGetPipelineCacheData(d->device, d->pcache, &n, NULL) != VK_SUCCESS || n == 0 ||
        n > PC_MAX_BYTES)
        return;
    unsigned char *buf = malloc(PC_HEAD + n);
    if (!buf) return;
    bool ok = f->vkGetPipelineCacheData(d->device, d->pcache, &n, buf + PC_HEAD) == VK_SUCCESS;
    const uint64_t len = n, h = fnv1a(0xcbf29ce484222325ull, buf + PC_HEAD, n);
    memcpy(buf, PC_MAGIC, 8);
    memcpy(buf + 8, &len, 8);
    memcpy(buf + 16, &h, 8);
    char tmp[4400];
    ok = ok && make_parents(path) &&
         snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) < (int)sizeof tmp;
    FILE *fp = ok ? fopen(tmp, "wb") : NULL;
    if (fp) {
        ok = fwrite(buf, 1, PC_HEAD + n, fp) == PC_HEAD + n;
        ok = fclose(fp) == 0 && ok;
        ok = ok && rename(tmp, path) == 0;
        if (!ok) unlink(tmp);
    }
    if (!fp || !ok)
        vk_log(d->pl, BP_LOG_INFO, "%s could not write its pipeline cache to %s (%s); the next "
               "process compiles its pipelines again.", d->name, path, strerror(errno));
    free(buf);
}

void vk_pcache_close(struct vk_dev *d)
{
    if (!d->pcache) return;
    char path[4352];
    if (d->pcache_dirty && cache_path(d, path, sizeof path)) save(d, path);
    d->pl->fn.vkDestroyPipelineCache(d->device, d->pcache, NULL);
    d->pcache = VK_NULL_HANDLE;
}
