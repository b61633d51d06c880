/*
 * vk_loader.c — libvulkan.so.1 opened with dlopen() at init, so that a
 * machine without the Vulkan loader still loads this plugin (which then
 * reports zero devices) instead of failing the host's dlopen of it.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

bool vk_loader_open(struct vk_fns *f, char *why, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!f->lib)
        f->lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!f->lib) {
        snprintf(why, cap, "the Vulkan loader libvulkan.so.1 is not installed (Debian: "
                 "libvulkan1)");
        return false;
    }
    void *p = dlsym(f->lib, "vkGetInstanceProcAddr");
    memcpy(&f->vkGetInstanceProcAddr, &p, sizeof p);
    if (!f->vkGetInstanceProcAddr) {
        snprintf(why, cap, "libvulkan.so.1 has no vkGetInstanceProcAddr; reinstall the loader");
        dlclose(f->lib);
        f->lib = NULL;
        return false;
    }
    f->vkCreateInstance = (PFN_vkCreateInstance)f->vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    f->vkEnumerateInstanceVersion =
        (PFN_vkEnumerateInstanceVersion)f->vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (!f->vkCreateInstance) {
        snprintf(why, cap, "libvulkan.so.1 has no vkCreateInstance; reinstall the loader");
        dlclose(f->lib);
        f->lib = NULL;
        return false;
    }
    return true;
}

bool vk_loader_instance(struct vk_fns *f, VkInstance inst, char *why, size_t cap)
{
#define X(n)                                                                   \
    f->n = (PFN_##n)f->vkGetInstanceProcAddr(inst, #n);                        \
    if (!f->n) {                                                               \
        snprintf(why, cap, "the Vulkan loader lacks %s (Vulkan 1.1 is needed)", #n); \
        return false;                                                          \
    }
    VK_INSTANCE_FUNCS(X)
#undef X
    return true;
}

/* Device functions come from the instance as the loader's trampolines, which
 * dispatch to the right driver for every device: one table serves devices
 * of different vendors. */
bool vk_loader_device(struct vk_fns *f, VkInstance inst, char *why, size_t cap)
{
#define X(n)                                                                   \
    f->n = (PFN_##n)f->vkGetInstanceProcAddr(inst, #n);                           \
    if (!f->n) {                                                               \
        snprintf(why, cap, "the Vulkan driver lacks %s", #n);                  \
        return false;                                                          \
    }
    VK_DEVICE_FUNCS(X)
#undef X
    return true;
}

/* ---- driver residency ----
 * The Vulkan loader unloads the drivers (ICDs) in vkDestroyInstance. Mesa's
 * LLVM-based drivers keep process-wide allocations that are only reachable
 * through their own globals, so unloading them turns that memory into leaks
 * (LeakSanitizer reports it from an "unknown module") and would be unsafe if
 * a driver thread outlived the unload. Drivers therefore stay resident, as
 * our plugins do: every shared object that appeared while the instance was
 * created is pinned with RTLD_NODELETE. */

struct vk_objects {
    char **names;
    size_t n, cap;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct vk_objects *o = data;
    if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        char **p = realloc(o->names, cap * sizeof *p);
        if (!p) return 1; /* best effort: pin what we have seen */
        o->names = p;
        o->cap = cap;
    }
    o->names[o->n] = strdup(info->dlpi_name);
    if (o->names[o->n]) o->n++;
    return 0;
}

static void objects_free(struct vk_objects *o)
{
    for (size_t i = 0; i < o->n; i++) free(o->names[i]);
    free(o->names);
    memset(o, 0, sizeof *o);
}

static bool objects_has(const struct vk_objects *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->names[i], name) == 0) return true;
    return false;
}

VkResult vk_loader_create_instance(struct vk_fns *f, const VkInstanceCreateInfo *ici,
                                   VkInstance *out)
{
    struct vk_objects before = {0}, after = {0};
    dl_iterate_phdr(collect_object, &before);
    VkResult r = f->vkCreateInstance(ici, NULL, out);
    if (r == VK_SUCCESS) {
        dl_iterate_phdr(collect_object, &after);
        for (size_t i = 0; i < after.n; i++) {
            if (objects_has(&before, after.names[i])) continue;
            /* The handle is kept on purpose: it is the pin. */
            (void)dlopen(after.names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        }
    }
    objects_free(&before);
    objects_free(&after);
    return r;
}
