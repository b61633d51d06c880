/* device.c — meta devices: composing sub-devices (from a spec string or a
 * list), their properties (memory summed, capabilities intersected, ops
 * supported by every sub-device), and the plugin's list of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct meta_device **list;
static size_t n_list, cap_list;

/* Feature tables, newest first; each is immutable once published, and kept
 * until shutdown because a caller may still be reading an older one. */
struct feature_snapshot {
    struct feature_snapshot *older;
    struct bp_feature f[];
};
static struct feature_snapshot *features;  /* under list_lock */

/* Serialises meta_device_from_spec: look-up and creation are one step, so
 * two threads asking for one spec get one device. */
static pthread_mutex_t spec_lock = PTHREAD_MUTEX_INITIALIZER;

extern struct bp_registry meta_registry;

const char *meta_sub_name(struct bp_device *d)
{
    const char *(*fn)(struct bp_device *) = d ? BP_IFACE_GET(d->iface, get_name) : NULL;
    const char *n = fn ? fn(d) : NULL;
    return n ? n : "(unnamed)";
}

static struct meta_device *md_of(struct bp_device *dev)
{
    return (struct meta_device *)dev;
}

static const char *dev_get_name(struct bp_device *dev) { return md_of(dev)->name; }
static const char *dev_get_description(struct bp_device *dev) { return md_of(dev)->desc; }
static enum bp_device_type dev_get_type(struct bp_device *dev) { (void)dev; return BP_DEVICE_TYPE_META; }

static void dev_get_memory(struct bp_device *dev, size_t *free_b, size_t *total_b)
{
    struct meta_device *md = md_of(dev);
    size_t f = 0, t = 0;
    for (size_t i = 0; i < md->n; i++) {
        size_t sf = 0, st = 0;
        struct bp_device *s = md->sub[i];
        void (*mem)(struct bp_device *, size_t *, size_t *) = BP_IFACE_GET(s->iface, get_memory);
        if (mem) mem(s, &sf, &st);
        f += sf;
        t += st;
    }
    *free_b = f;
    *total_b = t;
}

/* A capability is the sub-devices' intersection only where the meta device
 * forwards the feature itself, and today it forwards none of them, so each
 * is false whatever the sub-devices offer:
 *   async        the meta backend has no set/get/copy_tensor_async (a meta
 *                tensor's bytes are scattered over several devices; writes go
 *                through the meta buffer, which is synchronous);
 *   events       the meta backend has no event_record/event_wait (an event
 *                would have to stand for one event per sub-stream);
 *   host_buffer  the meta device has no get_host_buffer_type (pinned memory
 *                of which sub-device?);
 *   buffer_from_host_ptr  reserved in the ABI, unimplemented everywhere.
 * Claiming any of them would send the host down a path the meta backend
 * does not have. */
static void dev_get_caps(struct bp_device *dev, struct bp_device_caps *caps)
{
    (void)dev;
    /* Only what the caller's size covers; never its size. */
    if (BP_IFACE_HAS(caps, async)) caps->async = false;
    if (BP_IFACE_HAS(caps, host_buffer)) caps->host_buffer = false;
    if (BP_IFACE_HAS(caps, events)) caps->events = false;
    if (BP_IFACE_HAS(caps, buffer_from_host_ptr)) caps->buffer_from_host_ptr = false;
}

static struct bp_buffer_type *dev_get_buffer_type(struct bp_device *dev)
{
    return &md_of(dev)->buft;
}

bool meta_sub_passes_through(struct bp_device *s, const struct bp_tensor *node)
{
    bool (*supports)(struct bp_device *, const struct bp_tensor *) = BP_IFACE_GET(s->iface, supports_op);
    struct bp_tensor pass = *node;
    pass.op = BP_OP_SCALE;
    pass.src[1] = NULL;
    return supports && supports(s, &pass);
}

static bool dev_supports_op(struct bp_device *dev, const struct bp_tensor *node)
{
    struct meta_device *md = md_of(dev);
    /* Custom ops: meta has no rule to split a vendor's op, so it declines
     * them even when every sub-device knows the name (bp_custom_op.h). */
    if ((unsigned)node->op >= BP_OP_COUNT || node->op == BP_OP_CUSTOM) return false;
    size_t no_pass = 0;
    for (size_t i = 0; i < md->n; i++) {
        struct bp_device *s = md->sub[i];
        /* An ADD of a partial sum and a whole term adds on one sub-device and
         * passes the partial through (x * 1 + 0, SCALE) on the others
         * (backend.c, ADD_ONCE): one sub-device without SCALE can be the one
         * that adds, two cannot — counted per slot, so meta:X*2 counts X twice. */
        if (node->op == BP_OP_ADD && !meta_sub_passes_through(s, node) && ++no_pass > 1) return false;
        if (i > 0 && s == md->sub[i - 1]) continue;
        /* A sub-device whose table cannot answer declines. */
        bool (*supports)(struct bp_device *, const struct bp_tensor *) = BP_IFACE_GET(s->iface, supports_op);
        if (!supports || !supports(s, node)) return false;
    }
    return true;
}

static bool dev_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft)
{
    struct meta_device *md = md_of(dev);
    return buft == &md->buft || (buft >= md->wbuft && buft < md->wbuft + BP_TYPE_COUNT);
}

struct bp_buffer_type *meta_weight_buffer_type(struct bp_device *dev, enum bp_type type)
{
    if (!dev || !meta_is_meta_device(dev) || (int)type < 0 || type >= BP_TYPE_COUNT) return NULL;
    struct meta_device *md = md_of(dev);
    for (size_t d = 0; d < md->n; d++) {
        struct bp_buffer_type *w = meta_sub_buft_for(md->sub[d], (int)type);
        if (w && w != meta_sub_buft(md->sub[d])) return &md->wbuft[type];
    }
    return NULL;
}

static const struct bp_device_iface meta_device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_get_name,
    .get_description = dev_get_description,
    .get_type = dev_get_type,
    .get_memory = dev_get_memory,
    .get_caps = dev_get_caps,
    .init_backend = meta_backend_init,
    .get_buffer_type = dev_get_buffer_type,
    .get_host_buffer_type = NULL,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .event_new = NULL,
};

bool meta_is_meta_device(const struct bp_device *dev)
{
    return dev && dev->iface == &meta_device_iface;
}

/* BACKPLANE_META_SPLIT="3,1": n ratios or none. */
static bp_status ratios_from_env(size_t n, float *ratio)
{
    for (size_t i = 0; i < n; i++) ratio[i] = 1.0f;
    const char *env = meta_host->get_env("BACKPLANE_META_SPLIT");
    if (!env || !*env) return BP_OK;
    const char *p = env;
    for (size_t i = 0; i < n; i++) {
        char *end;
        float v = strtof(p, &end);
        if (end == p || v < 0) goto bad;
        ratio[i] = v;
        p = end;
        while (*p == ' ') p++;
        if (i + 1 < n) {
            if (*p != ',') goto bad;
            p++;
        }
    }
    if (*p) goto bad;
    return BP_OK;
bad:
    meta_log(BP_LOG_ERROR, "BACKPLANE_META_SPLIT='%s' is not %zu non-negative numbers separated by "
             "commas (one per sub-device); fix or unset it.", env, n);
    return BP_ERR_INVALID_ARGUMENT;
}

static void write_features(struct meta_device *md)
{
    static const char *const suffix[3] = {"sub_devices", "split_ratios", "allreduce"};
    for (int j = 0; j < 3; j++)
        snprintf(md->feat_name[j], sizeof md->feat_name[j], "%s.%s", md->name, suffix[j]);
    size_t u0 = 0, u1 = 0, cap = sizeof md->feat_text[0];
    for (size_t d = 0; d < md->n; d++) {
        u0 += (size_t)snprintf(md->feat_text[0] + u0, cap - u0, "%s%s", d ? "," : "",
                               meta_sub_name(md->sub[d]));
        u1 += (size_t)snprintf(md->feat_text[1] + u1, cap - u1, "%s%g", d ? "," : "",
                               (double)md->ratio[d]);
        if (u0 >= cap) u0 = cap - 1;
        if (u1 >= cap) u1 = cap - 1;
    }
    snprintf(md->feat_text[2], cap, "%s", md->allreduce);
}

/* A new snapshot of every listed device's features (list_lock held). Out of
 * memory keeps the older one: `info` then misses the newest device. */
static void publish_features(void)
{
    struct feature_snapshot *snap = malloc(sizeof *snap + (3 * n_list + 1) * sizeof snap->f[0]);
    if (!snap) {
        meta_log(BP_LOG_WARN, "out of memory listing %s's features; `backplane info` omits it.",
                 list[n_list - 1]->name);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_list; i++)
        for (int j = 0; j < 3; j++)
            snap->f[k++] = (struct bp_feature){list[i]->feat_name[j], list[i]->feat_text[j]};
    snap->f[k] = (struct bp_feature){NULL, NULL};
    snap->older = features;
    features = snap;
}

const struct bp_feature *meta_devices_features(void)
{
    static const struct bp_feature none[1] = {{NULL, NULL}};
    pthread_mutex_lock(&list_lock);
    const struct bp_feature *f = features ? features->f : none;
    pthread_mutex_unlock(&list_lock);
    return f;
}

bp_status meta_device_create(struct bp_device *const *devs, size_t n, const float *ratios,
                             bp_meta_split_fn cb, void *user, const char *spec,
                             struct meta_device **out)
{
    *out = NULL;
    if (!devs || n == 0 || n > META_MAX_DEV) {
        meta_log(BP_LOG_ERROR, "a meta device needs 1 to %d sub-devices, not %zu.", META_MAX_DEV, n);
        return BP_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++) {
        if (!devs[i]) {
            meta_log(BP_LOG_ERROR, "sub-device %zu of the meta device is NULL.", i);
            return BP_ERR_INVALID_ARGUMENT;
        }
        /* The same floor the host holds every device to (bp_iface_check.h):
         * an application may hand us a device the host never checked. */
        struct bp_iface_problem p = meta_is_meta_device(devs[i]) ? (struct bp_iface_problem){0}
                                                                 : bp_device_iface_check(devs[i]->iface);
        if (p.field) {
            char why[160];
            meta_log(BP_LOG_ERROR, "sub-device %zu (%s): its device table %s; a meta device cannot use it.",
                     i, meta_sub_name(devs[i]), bp_iface_problem_text(p, why, sizeof why));
            return BP_ERR_INVALID_ARGUMENT;
        }
        if (meta_is_meta_device(devs[i]) || devs[i]->iface->get_type(devs[i]) == BP_DEVICE_TYPE_META) {
            meta_log(BP_LOG_ERROR, "sub-device '%s' is itself a meta device; a meta device is composed "
                     "of real devices only, so list those instead.", meta_sub_name(devs[i]));
            return BP_ERR_INVALID_ARGUMENT;
        }
    }
    meta_warn_same_physical(devs, n);
    struct meta_device *md = calloc(1, sizeof *md);
    if (!md) return BP_ERR_OUT_OF_MEMORY;
    md->n = n;
    float sum = 0;
    for (size_t i = 0; i < n; i++) {
        md->sub[i] = devs[i];
        if (ratios) md->ratio[i] = ratios[i];
    }
    if (!ratios) {
        bp_status st = ratios_from_env(n, md->ratio);
        if (st != BP_OK) { free(md); return st; }
    }
    for (size_t i = 0; i < n; i++) {
        if (!(md->ratio[i] >= 0)) {
            meta_log(BP_LOG_ERROR, "split ratio %zu is %g; ratios must be 0 or more.", i, (double)md->ratio[i]);
            free(md);
            return BP_ERR_INVALID_ARGUMENT;
        }
        sum += md->ratio[i];
    }
    if (sum <= 0) {
        meta_log(BP_LOG_ERROR, "every split ratio of the meta device is 0; give at least one device a share.");
        free(md);
        return BP_ERR_INVALID_ARGUMENT;
    }
    md->split_cb = cb;
    md->split_user = user;
    md->dev.iface = &meta_device_iface;
    md->dev.reg = &meta_registry;
    md->dev.context = md;
    md->buft.iface = &meta_buft_iface;
    md->buft.device = &md->dev;
    md->buft.context = md;
    for (int t = 0; t < BP_TYPE_COUNT; t++)
        md->wbuft[t] = (struct bp_buffer_type){ .iface = &meta_buft_iface, .device = &md->dev, .context = md };
    meta_ar_describe(md, md->allreduce, sizeof md->allreduce);
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof md->desc; i++) {
        int w = snprintf(md->desc + used, sizeof md->desc - used, "%s%s", i ? " + " : "tensor-parallel over ",
                         meta_sub_name(devs[i]));
        if (w < 0) break;
        used += (size_t)w;
    }
    if (spec) snprintf(md->spec, sizeof md->spec, "%s", spec);

    pthread_mutex_lock(&list_lock);
    bp_status st = BP_OK;
    if (n_list == cap_list) {
        size_t cap = cap_list ? cap_list * 2 : 4;
        struct meta_device **v = realloc(list, cap * sizeof *v);
        if (!v) st = BP_ERR_OUT_OF_MEMORY;
        else { list = v; cap_list = cap; }
    }
    if (st == BP_OK) {
        snprintf(md->name, sizeof md->name, "meta%zu", n_list);
        write_features(md);
        list[n_list++] = md;
        publish_features();
    }
    pthread_mutex_unlock(&list_lock);
    if (st != BP_OK) { free(md); return st; }
    *out = md;
    return BP_OK;
}

/* "cpu*4" or "cpu,vulkan0" (after "meta:") into devices. */
static bp_status parse_spec(const char *spec, struct bp_device **devs, size_t *n)
{
    *n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        char *e = tok + strlen(tok);
        while (e > tok && e[-1] == ' ') *--e = '\0';
        if (!*tok) continue;
        long times = 1;
        char *star = strchr(tok, '*');
        if (star) {
            *star = '\0';
            char *end;
            times = strtol(star + 1, &end, 10);
            if (*end || times < 1 || times > META_MAX_DEV) {
                meta_log(BP_LOG_ERROR, "'%s*%s' in meta spec '%s' needs a count from 1 to %d after '*'.",
                         tok, star + 1, spec, META_MAX_DEV);
                return BP_ERR_INVALID_ARGUMENT;
            }
        }
        struct bp_device *d = meta_host->device_by_name(tok);
        if (!d) {
            for (size_t i = 0; i < meta_device_count(); i++)
                if (!strcmp(md_of(meta_device_at(i))->name, tok)) d = meta_device_at(i);
        }
        if (!d) {
            meta_log(BP_LOG_ERROR, "meta spec '%s' names '%s', but no loaded device has that name; see "
                     "`backplane devices`.", spec, tok);
            return BP_ERR_NOT_FOUND;
        }
        for (long k = 0; k < times; k++) {
            if (*n == META_MAX_DEV) {
                meta_log(BP_LOG_ERROR, "meta spec '%s' lists more than %d sub-devices.", spec, META_MAX_DEV);
                return BP_ERR_INVALID_ARGUMENT;
            }
            devs[(*n)++] = d;
        }
    }
    if (*n == 0) {
        meta_log(BP_LOG_ERROR, "meta spec '%s' names no sub-device; write e.g. meta:cpu*2 or meta:cpu,vulkan0.", spec);
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

bp_status meta_device_from_spec(const char *spec, struct bp_device **out)
{
    if (!out || !spec) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    const char *body = strncmp(spec, "meta:", 5) == 0 ? spec + 5 : spec;
    /* The same spec names the same device (the one made at load time). */
    pthread_mutex_lock(&spec_lock);
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < n_list; i++)
        if (!strcmp(list[i]->spec, body)) *out = &list[i]->dev;
    pthread_mutex_unlock(&list_lock);
    bp_status st = BP_OK;
    if (!*out) {
        struct bp_device *devs[META_MAX_DEV];
        size_t n = 0;
        struct meta_device *md = NULL;
        st = parse_spec(body, devs, &n);
        if (st == BP_OK) st = meta_device_create(devs, n, NULL, NULL, NULL, body, &md);
        if (st == BP_OK) *out = &md->dev;
    }
    pthread_mutex_unlock(&spec_lock);
    return st;
}

bp_status meta_device_new(struct bp_device *const *devs, size_t n, const float *ratios,
                          bp_meta_split_fn cb, void *user, struct bp_device **out)
{
    if (!out) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    struct meta_device *md = NULL;
    bp_status st = meta_device_create(devs, n, ratios, cb, user, NULL, &md);
    if (st == BP_OK) *out = &md->dev;
    return st;
}

bp_status meta_set_split_fn(struct bp_device *dev, bp_meta_split_fn cb, void *user)
{
    if (!meta_is_meta_device(dev)) {
        meta_log(BP_LOG_ERROR, "bp_meta_set_split_fn was given a device that is not a meta device.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    md_of(dev)->split_cb = cb;
    md_of(dev)->split_user = user;
    return BP_OK;
}

bp_status meta_device_sub_devices(struct bp_device *dev, struct bp_device **subs, size_t cap, size_t *n)
{
    if (!meta_is_meta_device(dev) || !n || (cap && !subs)) {
        meta_log(BP_LOG_ERROR, "bp_meta_device_sub_devices needs a meta device, n, and subs when cap is not 0.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct meta_device *md = md_of(dev);
    for (size_t i = 0; i < md->n && i < cap; i++) subs[i] = md->sub[i];
    *n = md->n;
    return BP_OK;
}

size_t meta_device_count(void)
{
    pthread_mutex_lock(&list_lock);
    size_t n = n_list;
    pthread_mutex_unlock(&list_lock);
    return n;
}

struct bp_device *meta_device_at(size_t i)
{
    pthread_mutex_lock(&list_lock);
    struct bp_device *d = i < n_list ? &list[i]->dev : NULL;
    pthread_mutex_unlock(&list_lock);
    return d;
}

void meta_devices_free_all(void)
{
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < n_list; i++) free(list[i]);
    while (features) {
        struct feature_snapshot *older = features->older;
        free(features);
        features = older;
    }
    free(list);
    list = NULL;
    n_list = cap_list = 0;
    pthread_mutex_unlock(&list_lock);
}
