/* devices.c — the device list (every loaded registry's devices, in family
 * order), lookups by name, and the default-device choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

/* Every loaded device with the name it is listed by (owned): usually the
 * plugin's own, "<family>:<name>" when that does not begin with the family. */
struct listed {
    struct bp_device *dev;
    char *name;
};
static struct listed *devices;
static size_t n_devices, cap_devices;


/* The plugin's own name for dev, "" when it has none. */
static const char *plugin_name(struct bp_device *dev)
{
    const char *(*get_name)(struct bp_device *) = dev ? BP_IFACE_GET(dev->iface, get_name) : NULL;
    const char *n = get_name ? get_name(dev) : NULL;
    return n ? n : "";
}

/* The name dev of family is listed by, into buf. Names are namespaced by
 * family so that a plugin cannot take over another's device name ("cpu")
 * just by loading first. */
static const char *listed_name(struct bp_device *dev, const char *family, char *buf, size_t cap)
{
    const char *n = plugin_name(dev);
    if (!strncmp(n, family, strlen(family)))
        snprintf(buf, cap, "%s", n);
    else
        snprintf(buf, cap, "%s:%s", family, n);
    return buf;
}

bool bp__devices_check_names(struct bp_registry *reg, size_t n, const char *family,
                             struct bp__refusal *r)
{
    char name[2 * BP_MAX_NAME], other[2 * BP_MAX_NAME];
    for (size_t i = 0; i < n; i++) {
        struct bp_device *d = reg->iface->get_device(reg, i);
        listed_name(d, family, name, sizeof name);
        struct bp_device *taken = bp__devices_find_loaded(name);
        for (size_t k = 0; k < i && !taken; k++) {
            struct bp_device *e = reg->iface->get_device(reg, k);
            if (!strcmp(listed_name(e, family, other, sizeof other), name)) taken = e;
        }
        if (taken)
            return bp__refuse(r, BP_PLUGIN_FAIL_DUPLICATE,
                              "Give every device a name of its own that begins with the "
                              "family (e.g. <family>0, <family>1).",
                              "its device %zu is named '%s', which %s already has.", i, name,
                              taken->reg == reg ? "another of its devices" : "a loaded device");
    }
    return true;
}

bp_status bp__devices_append(struct bp_device *dev, const char *family)
{
    struct listed *v = bp__grow(devices, sizeof *v, n_devices, &cap_devices, 8);
    if (!v) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory growing the device list.");
    devices = v;
    char name[2 * BP_MAX_NAME];
    listed_name(dev, family, name, sizeof name);
    char *copy = strdup(name);
    if (!copy) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory growing the device list.");
    if (strcmp(name, plugin_name(dev)) != 0)
        bp__log(BP_LOG_WARN, "backplane",
                "device '%s' of plugin family %s is listed as '%s': device names must begin "
                "with their family.", plugin_name(dev), family, name);
    devices[n_devices++] = (struct listed){dev, copy};
    return BP_OK;
}

void bp__devices_clear(void)
{
    for (size_t i = 0; i < n_devices; i++) free(devices[i].name);
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
    return index < n_devices ? devices[index].dev : NULL;
}

static const char *dev_name(struct bp_device *dev)
{
    for (size_t i = 0; dev && i < n_devices; i++)
        if (devices[i].dev == dev) return devices[i].name;
    return plugin_name(dev);
}

struct bp_device *bp__devices_find_loaded(const char *name)
{
    if (!name) return NULL;
    if (bp__identity_is_selector(name)) return bp__identity_find(name);
    for (size_t i = 0; i < n_devices; i++)
        if (!strcmp(devices[i].name, name)) return devices[i].dev;
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
    return devices[index].dev;
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
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", devices[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* The registry's spec parser when spec is "<family>:..." and that family's
 * registry offers BP_PROC_DEVICE_FROM_SPEC (meta), else NULL. */
static bp_device_from_spec_fn spec_parser(const char *spec)
{
    const char *colon = strchr(spec, ':');
    return colon ? (bp_device_from_spec_fn)bp__family_proc(spec, (size_t)(colon - spec),
                                                           BP_PROC_DEVICE_FROM_SPEC)
                 : NULL;
}

static bp_status device_from_spec(bp_device_from_spec_fn fn, const char *spec,
                                  struct bp_device **out)
{
    *out = NULL;
    /* The plugin logs why it refused: quote that sentence in the error. */
    bp__plugin_log_capture_begin();
    bp_status s = fn(spec, out);
    const char *why = bp__plugin_log_capture_end();
    if (s != BP_OK)
        return bp__fail(s, "the device spec '%s' was refused (%s): %s", spec, bp_status_name(s),
                        *why ? why : "check the names of its sub-devices.");
    if (!*out) return bp__fail(BP_ERR_PLUGIN, "the plugin returned no device for '%s'.", spec);
    return BP_OK;
}

struct bp_device *bp_device_by_name(const char *name)
{
    bp__ensure_loaded();
    if (!name) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_device_by_name was given a NULL name.");
        return NULL;
    }
    struct bp_device *d = bp__devices_find_loaded(name);
    bp_device_from_spec_fn parse = d ? NULL : spec_parser(name);
    if (parse) {
        if (device_from_spec(parse, name, &d) != BP_OK) return NULL;
    } else if (!d && bp__identity_is_selector(name)) {
        bp__fail(BP_ERR_NOT_FOUND, "no device has the identity '%s'; `backplane devices` shows each "
                 "device's UUID and PCI bus id.", name);
    } else if (!d) {
        char names[512];
        bp__fail(BP_ERR_NOT_FOUND, "no device is named '%s'; available devices: %s.", name,
                 available_names(names, sizeof names));
    }
    return d;
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
        /* A spec a registry parses lists its own sub-devices with commas
         * ("meta:cuda0,cuda1"): it takes the rest of the list. */
        char *t = trim(item);
        bp_device_from_spec_fn parse = spec_parser(t);
        if (parse) {
            struct bp_device *d = NULL;
            st = device_from_spec(parse, t, &d);
            if (st == BP_OK) put(out, cap, n, d);
            break;
        }
        if (comma) *comma = '\0';
        p = comma ? comma + 1 : NULL;
        t = trim(item);
        if (!*t) continue;
        struct bp_device *d = bp__devices_find_loaded(t);
        const char *colon = d ? NULL : strchr(t, ':');
        if (colon && !bp__family_loaded(t, (size_t)(colon - t))) {
            st = bp__fail(BP_ERR_NOT_FOUND,
                          "BACKPLANE_DEVICES asks for '%s' but no plugin of family '%.*s' is "
                          "loaded; install libbackplane-%.*s.so or drop the entry.", t,
                          (int)(colon - t), t, (int)(colon - t), t);
            break;
        }
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
            enum bp_device_type t = bp_device_type(devices[i].dev);
            /* A software rasterizer (llvmpipe) is slower than the CPU plugin. */
            struct bp_device_identity id = { .size = sizeof id };
            (void)bp_device_identity(devices[i].dev, &id);
            if ((t == BP_DEVICE_TYPE_GPU || t == BP_DEVICE_TYPE_IGPU) && !id.software)
                pick = devices[i].dev;
        }
        for (size_t i = 0; i < n_devices && !pick; i++)
            if (bp_device_type(devices[i].dev) == BP_DEVICE_TYPE_CPU) pick = devices[i].dev;
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

/* ---- device properties: thin, NULL-safe wrappers over the device table.
 * Every field is read through BP_IFACE_GET: a device from the meta plugin
 * was never checked at load time. ---- */

/* The device's table, or NULL for a NULL device. */
static const struct bp_device_iface *iface_of(struct bp_device *dev)
{
    return dev ? dev->iface : NULL;
}

const char *bp_device_name(struct bp_device *dev)
{
    return dev_name(dev);
}

const char *bp_device_description(struct bp_device *dev)
{
    const char *(*fn)(struct bp_device *) = BP_IFACE_GET(iface_of(dev), get_description);
    const char *d = fn ? fn(dev) : NULL;
    return d ? d : "";
}

enum bp_device_type bp_device_type(struct bp_device *dev)
{
    enum bp_device_type (*fn)(struct bp_device *) = BP_IFACE_GET(iface_of(dev), get_type);
    return fn ? fn(dev) : BP_DEVICE_TYPE_ACCEL;
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
    void (*fn)(struct bp_device *, size_t *, size_t *) = BP_IFACE_GET(iface_of(dev), get_memory);
    if (fn) fn(dev, &f, &t);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
}

void bp_device_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    /* The plugin fills a full-size copy (told our size); the caller gets
     * only the bytes its own `size` covers, and keeps its `size`. */
    if (!caps || caps->size < sizeof caps->size) return;
    struct bp_device_caps all;
    memset(&all, 0, sizeof all);
    all.size = sizeof all;
    void (*fn)(struct bp_device *, struct bp_device_caps *) = BP_IFACE_GET(iface_of(dev), get_caps);
    if (fn) fn(dev, &all);
    size_t n = caps->size < sizeof all ? caps->size : sizeof all;
    memcpy((char *)caps + sizeof caps->size, (const char *)&all + sizeof all.size,
           n - sizeof caps->size);
}

/* buft of dev, checked against the buffer-type floor (it is handed out at
 * run time, so it is checked every time it is handed out). */
static struct bp_buffer_type *checked_buft(struct bp_device *dev, struct bp_buffer_type *buft,
                                           const char *what)
{
    struct bp_iface_problem p = bp_buffer_type_iface_check(buft ? buft->iface : NULL);
    if (buft && !p.field) return buft;
    char why[160];
    bp__log(BP_LOG_ERROR, "backplane", "device '%s' (plugin %s) returned a %s that %s; fix the plugin.",
            dev_name(dev), bp__device_family(dev), what,
            buft ? bp_iface_problem_text(p, why, sizeof why) : "is NULL");
    bp__fail(BP_ERR_PLUGIN, "device '%s' returned an unusable %s; see the log.", dev_name(dev),
             what);
    return NULL;
}

struct bp_buffer_type *bp_device_buffer_type(struct bp_device *dev)
{
    struct bp_buffer_type *(*fn)(struct bp_device *) = BP_IFACE_GET(iface_of(dev), get_buffer_type);
    if (!fn) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "device '%s' has no buffer type.", dev_name(dev));
        return NULL;
    }
    return checked_buft(dev, fn(dev), "buffer type (get_buffer_type)");
}

const char *bp__device_family(struct bp_device *dev)
{
    struct bp_registry *reg = dev ? dev->reg : NULL;
    const char *(*fn)(struct bp_registry *) = reg ? BP_IFACE_GET(reg->iface, get_name) : NULL;
    const char *n = fn ? fn(reg) : NULL;
    return n ? n : "?";
}

bool bp__device_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    bool (*fn)(struct bp_device *, struct bp_buffer_type *) = BP_IFACE_GET(iface_of(dev), supports_buft);
    return fn ? fn(dev, buft) : buft && buft->device == dev;
}

struct bp_buffer_type *bp_device_weight_buffer_type(struct bp_device *dev, enum bp_type type)
{
    void *p = (int)type >= 0 && type < BP_TYPE_COUNT
                  ? bp_device_proc_address(dev, BP_PROC_WEIGHT_BUFFER_TYPE) : NULL;
    if (p) {
        bp_weight_buffer_type_fn fn;
        memcpy(&fn, &p, sizeof fn);
        struct bp_buffer_type *buft = fn(dev, type);
        if (buft) buft = checked_buft(dev, buft, "weight buffer type (bp_weight_buffer_type)");
        /* A plugin offering a buffer type its own device refuses is a bug;
         * the default still works, so fall back rather than fail. */
        if (buft && !bp__device_supports_buft(dev, buft))
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
    bool (*fn)(struct bp_device *, const struct bp_tensor *) = BP_IFACE_GET(iface_of(dev), supports_op);
    return fn && node ? fn(dev, node) : false;
}

void *bp_device_proc_address(struct bp_device *dev, const char *name)
{
    if (!dev || !name || !dev->reg) return NULL;
    void *(*fn)(struct bp_registry *, const char *) = BP_IFACE_GET(dev->reg->iface, get_proc_address);
    return fn ? fn(dev->reg, name) : NULL;
}
