/* slots.c — the devices a meta device spans across a job: one per rank.
 * This rank's slot forwards every call to the real device; the others are
 * placeholders that hold nothing and compute nothing, so that the meta
 * plugin, unchanged, places and computes only this rank's share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

struct slot {
    struct bp_device dev;        /* first: a bp_device* is a slot* */
    struct bp_device *inner;     /* this rank's real device */
    int32_t rank;
    char name[48];
    char params[128];            /* for the inner device's init_backend */
    struct bp_buffer_type buft;  /* a placeholder's */
    struct slot *next;
};

extern struct bp_registry dist_registry;
static struct slot *g_slots;
static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER;

static struct slot *slot_of(struct bp_device *d) { return (struct slot *)d; }
static struct bp_device *inner(struct bp_device *d) { return slot_of(d)->inner; }

/* ---- shared by both kinds ---- */

static const char *slot_name(struct bp_device *d) { return slot_of(d)->name; }
static const char *slot_desc(struct bp_device *d)
{
    struct bp_device *i = inner(d);
    const char *(*desc)(struct bp_device *) = BP_IFACE_GET(i->iface, get_description);
    return desc ? desc(i) : slot_of(d)->name;
}
static enum bp_device_type slot_type(struct bp_device *d)
{
    struct bp_device *i = inner(d);
    enum bp_device_type (*type)(struct bp_device *) = BP_IFACE_GET(i->iface, get_type);
    return type ? type(i) : BP_DEVICE_TYPE_CPU;
}
static void slot_memory(struct bp_device *d, size_t *free, size_t *total)
{
    struct bp_device *i = inner(d);
    *free = *total = 0;
    void (*mem)(struct bp_device *, size_t *, size_t *) = BP_IFACE_GET(i->iface, get_memory);
    if (mem) mem(i, free, total);
}
/* A placeholder answers as the real device does, so that the meta device
 * refuses and accepts the same nodes on every rank. */
static bool slot_supports_op(struct bp_device *d, const struct bp_tensor *node)
{
    struct bp_device *i = inner(d);
    bool (*supports)(struct bp_device *, const struct bp_tensor *) = BP_IFACE_GET(i->iface, supports_op);
    return supports && supports(i, node);
}

/* ---- this rank's slot: forward ---- */

static void local_caps(struct bp_device *d, struct bp_device_caps *c)
{
    struct bp_device *i = inner(d);
    void (*caps)(struct bp_device *, struct bp_device_caps *) = BP_IFACE_GET(i->iface, get_caps);
    if (caps) caps(i, c);
}
static bp_status local_init_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    struct slot *s = slot_of(d);
    return s->inner->iface->init_backend(s->inner, s->params[0] ? s->params : params, out);
}
static struct bp_buffer_type *local_buft(struct bp_device *d)
{
    return inner(d)->iface->get_buffer_type(inner(d));
}
static struct bp_buffer_type *local_host_buft(struct bp_device *d)
{
    struct bp_device *i = inner(d);
    struct bp_buffer_type *(*host)(struct bp_device *) = BP_IFACE_GET(i->iface, get_host_buffer_type);
    return host ? host(i) : NULL;
}
static bool local_supports_buft(struct bp_device *d, struct bp_buffer_type *b)
{
    struct bp_device *i = inner(d);
    bool (*supports)(struct bp_device *, struct bp_buffer_type *) = BP_IFACE_GET(i->iface, supports_buft);
    return supports ? supports(i, b) : b == local_buft(d);
}

static const struct bp_device_iface local_iface;

struct bp_buffer_type *dist_slot_weight_buffer_type(struct bp_device *d, enum bp_type type)
{
    if (!d || d->iface != &local_iface) return NULL;
    struct bp_device *i = inner(d);
    struct bp_registry *r = i->reg;
    void *(*proc)(struct bp_registry *, const char *) =
        r && r->iface ? BP_IFACE_GET(r->iface, get_proc_address) : NULL;
    void *p = proc ? proc(r, BP_PROC_WEIGHT_BUFFER_TYPE) : NULL;
    if (!p) return NULL;
    bp_weight_buffer_type_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn(i, type);
}

static const struct bp_device_iface local_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = slot_name,
    .get_description = slot_desc,
    .get_type = slot_type,
    .get_memory = slot_memory,
    .get_caps = local_caps,
    .init_backend = local_init_backend,
    .get_buffer_type = local_buft,
    .get_host_buffer_type = local_host_buft,
    .supports_op = slot_supports_op,
    .supports_buft = local_supports_buft,
};

/* ---- another rank's slot: a placeholder ---- */

/* Tensors in a placeholder buffer get addresses from this non-NULL base; no
 * one dereferences them (the buffer type is not host memory). */
#define PH_BASE ((void *)(uintptr_t)4096)

static void ph_free_buffer(struct bp_buffer *b) { free(b); }
static void *ph_base(struct bp_buffer *b) { (void)b; return PH_BASE; }
static bp_status ph_set(struct bp_buffer *b, struct bp_tensor *t, const void *src, size_t off, size_t n)
{
    (void)b, (void)t, (void)src, (void)off, (void)n;
    return BP_OK;
}
/* Zeros: a tensor read back from the meta device then holds this rank's
 * slices and zeros elsewhere, and a sum over ranks gathers it. */
static bp_status ph_get(struct bp_buffer *b, const struct bp_tensor *t, void *dst, size_t off, size_t n)
{
    (void)b, (void)t, (void)off;
    memset(dst, 0, n);
    return BP_OK;
}
static bp_status ph_clear(struct bp_buffer *b, uint8_t v) { (void)b, (void)v; return BP_OK; }

static const struct bp_buffer_iface ph_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = ph_free_buffer,
    .get_base = ph_base,
    .set_tensor = ph_set,
    .get_tensor = ph_get,
    .clear = ph_clear,
};

static const char *ph_buft_name(struct bp_buffer_type *bt) { return slot_of(bt->device)->name; }
static bp_status ph_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
    struct bp_buffer *b = calloc(1, sizeof *b);
    if (!b) return BP_ERR_OUT_OF_MEMORY;
    *b = (struct bp_buffer){ .iface = &ph_buffer_iface, .buft = bt, .size = size };
    *out = b;
    return BP_OK;
}
/* The real device's alignment and sizes, so slices are laid out alike. */
static size_t ph_alignment(struct bp_buffer_type *bt)
{
    struct bp_buffer_type *r = local_buft(bt->device);
    return r && r->iface->get_alignment ? r->iface->get_alignment(r) : 64;
}
static bool ph_is_host(struct bp_buffer_type *bt) { (void)bt; return false; }

static const struct bp_buffer_type_iface ph_buft_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = ph_buft_name,
    .alloc_buffer = ph_alloc,
    .get_alignment = ph_alignment,
    .is_host = ph_is_host,
};

static const char *ph_backend_name(struct bp_backend *b) { return slot_of(b->device)->name; }
static void ph_backend_free(struct bp_backend *b) { free(b); }
static bp_status ph_sync(struct bp_backend *b) { (void)b; return BP_OK; }
static bp_status ph_compute(struct bp_backend *b, struct bp_graph *g) { (void)b, (void)g; return BP_OK; }

static const struct bp_backend_iface ph_backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = ph_backend_name,
    .free = ph_backend_free,
    .synchronize = ph_sync,
    .graph_compute = ph_compute,
};

bool dist_is_placeholder_backend(const struct bp_backend *b) { return b && b->iface == &ph_backend_iface; }

static void ph_caps(struct bp_device *d, struct bp_device_caps *c)
{
    (void)d;
    size_t sz = c->size;
    memset(c, 0, sz < sizeof *c ? sz : sizeof *c);
    c->size = sz;
}
static bp_status ph_init_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)params;
    struct bp_backend *b = calloc(1, sizeof *b);
    if (!b) return BP_ERR_OUT_OF_MEMORY;
    *b = (struct bp_backend){ .iface = &ph_backend_iface, .device = d };
    *out = b;
    return BP_OK;
}
static struct bp_buffer_type *ph_buft(struct bp_device *d) { return &slot_of(d)->buft; }
static bool ph_supports_buft(struct bp_device *d, struct bp_buffer_type *b) { return b == ph_buft(d); }

static const struct bp_device_iface ph_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = slot_name,
    .get_description = slot_desc,
    .get_type = slot_type,
    .get_memory = slot_memory,
    .get_caps = ph_caps,
    .init_backend = ph_init_backend,
    .get_buffer_type = ph_buft,
    .supports_op = slot_supports_op,
    .supports_buft = ph_supports_buft,
};

/* ---- making them ---- */

bp_status dist_devices(struct bp_dist_group *g, struct bp_device *local, const char *params,
                       struct bp_device **out)
{
    if (!g || !local || !local->iface || !out) return BP_ERR_INVALID_ARGUMENT;
    enum bp_device_type (*type)(struct bp_device *) = BP_IFACE_GET(local->iface, get_type);
    if (type && type(local) == BP_DEVICE_TYPE_META) {
        dist_log(BP_LOG_ERROR, "a rank's device cannot be a meta device (a meta device does not nest); "
                 "run more ranks instead, e.g. dist:cpu.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    if (g->nranks > DIST_MAX_RANKS) {
        dist_log(BP_LOG_ERROR, "the job has %d ranks and a dist: device spans at most %d; run fewer.",
                 (int)g->nranks, DIST_MAX_RANKS);
        return BP_ERR_INVALID_ARGUMENT;
    }
    if (params && strlen(params) >= sizeof ((struct slot *)0)->params) return BP_ERR_INVALID_ARGUMENT;
    const char *lname = local->iface->get_name ? local->iface->get_name(local) : "device";
    struct slot *made[DIST_MAX_RANKS] = {0};
    for (int32_t r = 0; r < g->nranks; r++) {
        struct slot *s = calloc(1, sizeof *s);
        if (!s) {
            for (int32_t k = 0; k < r; k++) free(made[k]);
            return BP_ERR_OUT_OF_MEMORY;
        }
        s->inner = local;
        s->rank = r;
        snprintf(s->name, sizeof s->name, "rank%d:%s", (int)r, r == g->rank ? lname : "-");
        if (params && r == g->rank) snprintf(s->params, sizeof s->params, "%s", params);
        s->dev = (struct bp_device){ .iface = r == g->rank ? &local_iface : &ph_iface,
                                     .reg = &dist_registry, .context = s };
        s->buft = (struct bp_buffer_type){ .iface = &ph_buft_iface, .device = &s->dev };
        made[r] = s;
    }
    pthread_mutex_lock(&g_slots_mu);
    for (int32_t r = 0; r < g->nranks; r++) {
        made[r]->next = g_slots;
        g_slots = made[r];
        out[r] = &made[r]->dev;
    }
    pthread_mutex_unlock(&g_slots_mu);
    return BP_OK;
}

void dist_slots_free_all(void)
{
    pthread_mutex_lock(&g_slots_mu);
    while (g_slots) {
        struct slot *n = g_slots->next;
        free(g_slots);
        g_slots = n;
    }
    pthread_mutex_unlock(&g_slots_mu);
}
