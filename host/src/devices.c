/* devices.c — the device list (every loaded registry's devices, in family
 * order), lookups by name, and the default-device choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

static struct bp_device **devices;
static size_t n_devices, cap_devices;

/* What bp_meta_device_from_spec looks like; the meta plugin exports it
 * through its registry's get_proc_address. */
typedef bp_status (*meta_device_from_spec_fn)(const char *spec, struct bp_device **out);
#define META_FAMILY "meta"
#define META_FROM_SPEC "bp_meta_device_from_spec"

bp_status bp__devices_append(struct bp_device *dev)
{
    if (n_devices == cap_devices) {
        size_t cap = cap_devices ? cap_devices * 2 : 8;
        struct bp_device **v = realloc(devices, cap * sizeof *v);
        if (!v) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory growing the device list.");
        devices = v;
        cap_devices = cap;
    }
    devices[n_devices++] = dev;
    return BP_OK;
}

void bp__devices_clear(void)
{
    free(devices);
    devices = NULL;
    n_devices = cap_devices = 0;
}

size_t bp__devices_count_loaded(void)
{
    return n_devices;
}

struct bp_device *bp__devices_get_loaded(size_t index)
{
    return index < n_devices ? devices[index] : NULL;
}

static const char *dev_name(struct bp_device *dev)
{
    if (!dev || !dev->iface || !dev->iface->get_name) return "";
    const char *n = dev->iface->get_name(dev);
    return n ? n : "";
}

struct bp_device *bp__devices_find_loaded(const char *name)
{
    if (!name) return NULL;
    if (bp__identity_is_selector(name)) return bp__identity_find(name);
    for (size_t i = 0; i < n_devices; i++)
        if (!strcmp(dev_name(devices[i]), name)) return devices[i];
    return NULL;
}

/* ---- public API ---- */

size_t bp_device_count(void)
{
    bp__ensure_loaded();
    return n_devices;
}

struct bp_device *bp_device_get(size_t index)
{
    bp__ensure_loaded();
    if (index >= n_devices) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "device index %zu is out of range; there are %zu devices.",
                 index, n_devices);
        return NULL;
    }
    return devices[index];
}

/* "cpu, vulkan0" into buf, for error messages. */
static const char *available_names(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    if (n_devices == 0) {
        snprintf(buf, cap, "none: no plugin is loaded (see `backplane devices`)");
        return buf;
    }
    for (size_t i = 0; i < n_devices && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", dev_name(devices[i]));
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

struct bp_device *bp_device_by_name(const char *name)
{
    bp__ensure_loaded();
    if (!name) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_device_by_name was given a NULL name.");
        return NULL;
    }
    struct bp_device *d = bp__devices_find_loaded(name);
    if (!d && bp__identity_is_selector(name)) {
        bp__fail(BP_ERR_NOT_FOUND, "no device has the identity '%s'; `backplane devices` shows each "
                 "device's UUID and PCI bus id.", name);
    } else if (!d) {
        char names[512];
        bp__fail(BP_ERR_NOT_FOUND, "no device is named '%s'; available devices: %s.", name,
                 available_names(names, sizeof names));
    }
    return d;
}

static bp_status meta_device(const char *spec, struct bp_device **out)
{
    struct bp_registry *reg = bp_registry_by_name(META_FAMILY);
    meta_device_from_spec_fn fn = NULL;
    if (reg && BP_IFACE_HAS(reg->iface, get_proc_address) && reg->iface->get_proc_address)
        fn = (meta_device_from_spec_fn)reg->iface->get_proc_address(reg, META_FROM_SPEC);
    if (!fn)
        return bp__fail(BP_ERR_NOT_FOUND,
                        "BACKPLANE_DEVICES asks for '%s' but the meta plugin is not loaded; "
                        "install libbackplane-meta.so or drop the meta: entry.", spec);
    *out = NULL;
    bp_status s = fn(spec, out);
    if (s != BP_OK)
        return bp__fail(s, "the meta plugin refused BACKPLANE_DEVICES entry '%s' (%s); check "
                           "the names of its sub-devices.", spec, bp_status_name(s));
    if (!*out)
        return bp__fail(BP_ERR_PLUGIN, "the meta plugin returned no device for '%s'.", spec);
    return BP_OK;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
    return s;
}

/* Append d to out (when room) and count it. */
static void put(struct bp_device **out, size_t cap, size_t *n, struct bp_device *d)
{
    if (*n < cap && out) out[*n] = d;
    (*n)++;
}

static bp_status devices_from_env(const char *list, struct bp_device **out, size_t cap,
                                  size_t *n)
{
    char *copy = strdup(list);
    if (!copy) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory reading BACKPLANE_DEVICES.");
    bp_status st = BP_OK;
    char *p = copy;
    while (p && st == BP_OK) {
        char *comma = strchr(p, ',');
        char *item = p;
        /* A meta spec lists its own sub-devices with commas
         * ("meta:cuda0,cuda1"): it takes the rest of the list. */
        char *t = trim(item);
        if (!strncmp(t, META_FAMILY ":", strlen(META_FAMILY ":"))) {
            struct bp_device *d = NULL;
            st = meta_device(t, &d);
            if (st == BP_OK) put(out, cap, n, d);
            break;
        }
        if (comma) *comma = '\0';
        p = comma ? comma + 1 : NULL;
        t = trim(item);
        if (!*t) continue;
        struct bp_device *d = bp__devices_find_loaded(t);
        if (!d) {
            char names[512];
            st = bp__fail(BP_ERR_NOT_FOUND,
                          "BACKPLANE_DEVICES names '%s' but there is no such device; "
                          "available devices: %s.", t, available_names(names, sizeof names));
            break;
        }
        put(out, cap, n, d);
    }
    free(copy);
    if (st == BP_OK && out) bp__identity_warn_same(out, *n < cap ? *n : cap, "BACKPLANE_DEVICES");
    if (st == BP_OK && *n == 0)
        st = bp__fail(BP_ERR_INVALID_ARGUMENT,
                      "BACKPLANE_DEVICES='%s' names no device; list device names separated "
                      "by commas, or unset it.", list);
    return st;
}

bp_status bp_default_devices(struct bp_device **out, size_t cap, size_t *n_out)
{
    bp__ensure_loaded();
    if (!n_out || (!out && cap))
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "bp_default_devices needs n_out, and out when cap is not 0.");
    *n_out = 0;
    size_t n = 0;
    const char *list = bp__getenv("BACKPLANE_DEVICES");
    if (list && *list) {
        bp_status st = devices_from_env(list, out, cap, &n);
        *n_out = n < cap ? n : cap;
        if (st != BP_OK) return st;
    } else {
        struct bp_device *pick = NULL;
        for (size_t i = 0; i < n_devices && !pick; i++) {
            enum bp_device_type t = bp_device_type(devices[i]);
            /* A software rasterizer (llvmpipe) is slower than the CPU plugin. */
            struct bp_device_identity id = { .size = sizeof id };
            (void)bp_device_identity(devices[i], &id);
            if ((t == BP_DEVICE_TYPE_GPU || t == BP_DEVICE_TYPE_IGPU) && !id.software)
                pick = devices[i];
        }
        for (size_t i = 0; i < n_devices && !pick; i++)
            if (bp_device_type(devices[i]) == BP_DEVICE_TYPE_CPU) pick = devices[i];
        if (!pick)
            return bp__fail(BP_ERR_NOT_FOUND,
                            "no GPU or CPU device is available; run `backplane devices` to see "
                            "which plugins were refused and why.");
        put(out, cap, &n, pick);
        *n_out = n < cap ? n : cap;
    }
    if (n > cap)
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "there are %zu default devices but room for only %zu; pass a larger "
                        "array.", n, cap);
    return BP_OK;
}

/* ---- device properties: thin, NULL-safe wrappers over the device table ---- */

const char *bp_device_name(struct bp_device *dev)
{
    return dev_name(dev);
}

const char *bp_device_description(struct bp_device *dev)
{
    if (!dev || !dev->iface || !BP_IFACE_HAS(dev->iface, get_description) ||
        !dev->iface->get_description)
        return "";
    const char *d = dev->iface->get_description(dev);
    return d ? d : "";
}

enum bp_device_type bp_device_type(struct bp_device *dev)
{
    if (!dev || !dev->iface || !BP_IFACE_HAS(dev->iface, get_type) || !dev->iface->get_type)
        return BP_DEVICE_TYPE_ACCEL;
    return dev->iface->get_type(dev);
}

const char *bp_device_type_name(enum bp_device_type type)
{
    switch (type) {
    case BP_DEVICE_TYPE_CPU: return "CPU";
    case BP_DEVICE_TYPE_GPU: return "GPU";
    case BP_DEVICE_TYPE_IGPU: return "IGPU";
    case BP_DEVICE_TYPE_ACCEL: return "ACCEL";
    case BP_DEVICE_TYPE_META: return "META";
    }
    return "unknown";
}

void bp_device_memory(struct bp_device *dev, size_t *free_bytes, size_t *total_bytes)
{
    size_t f = 0, t = 0;
    if (dev && dev->iface && BP_IFACE_HAS(dev->iface, get_memory) && dev->iface->get_memory)
        dev->iface->get_memory(dev, &f, &t);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
}

void bp_device_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    if (!caps) return;
    memset(caps, 0, sizeof *caps);
    caps->size = sizeof *caps;
    if (dev && dev->iface && BP_IFACE_HAS(dev->iface, get_caps) && dev->iface->get_caps)
        dev->iface->get_caps(dev, caps);
    caps->size = sizeof *caps;
}

struct bp_buffer_type *bp_device_buffer_type(struct bp_device *dev)
{
    if (!dev || !dev->iface || !BP_IFACE_HAS(dev->iface, get_buffer_type) ||
        !dev->iface->get_buffer_type) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "device '%s' has no buffer type.", dev_name(dev));
        return NULL;
    }
    return dev->iface->get_buffer_type(dev);
}

struct bp_buffer_type *bp_device_weight_buffer_type(struct bp_device *dev, enum bp_type type)
{
    void *p = (int)type >= 0 && type < BP_TYPE_COUNT
                  ? bp_device_proc_address(dev, BP_PROC_WEIGHT_BUFFER_TYPE) : NULL;
    if (p) {
        bp_weight_buffer_type_fn fn;
        memcpy(&fn, &p, sizeof fn);
        struct bp_buffer_type *buft = fn(dev, type);
        /* A plugin offering a buffer type its own device refuses is a bug;
         * the default still works, so fall back rather than fail. */
        if (buft && dev->iface && BP_IFACE_HAS(dev->iface, supports_buft) &&
            dev->iface->supports_buft && !dev->iface->supports_buft(dev, buft))
            bp__log(BP_LOG_WARN, "backplane",
                    "device '%s' offers a weight buffer type it does not support; using its "
                    "default buffer type.", dev_name(dev));
        else if (buft)
            return buft;
    }
    return bp_device_buffer_type(dev);
}

bool bp_device_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    if (!dev || !node || !dev->iface || !BP_IFACE_HAS(dev->iface, supports_op) ||
        !dev->iface->supports_op)
        return false;
    return dev->iface->supports_op(dev, node);
}

void *bp_device_proc_address(struct bp_device *dev, const char *name)
{
    if (!dev || !name || !dev->reg || !dev->reg->iface) return NULL;
    const struct bp_registry_iface *ri = dev->reg->iface;
    if (!BP_IFACE_HAS(ri, get_proc_address) || !ri->get_proc_address) return NULL;
    return ri->get_proc_address(dev->reg, name);
}
