/*
 * partial.c — a test plugin that computes only F32 ADD, MUL and MUL_MAT, as
 * a vendor's first accelerator plugin might: one device "partial0" whose
 * memory is its own (host memory underneath, but it reads no other buffer
 * type), a synchronous backend, nothing optional. Built from the ABI headers
 * alone, like an out-of-tree plugin; the scheduler tests run models on it.
 *
 * Built with -DPARTIAL_ASYNC it is the family "streams": two such devices
 * ("streams0", "streams1", each reading only its own memory) whose backends
 * also offer set_tensor_async, copy_tensor_async and events — done at once,
 * but counted (proc "streams_counts"), so a test sees which path the
 * scheduler took between them.
 */
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_abi.h>

#ifdef PARTIAL_ASYNC
#define FAMILY "streams"
#define N_DEV 2
#else
#define FAMILY "partial"
#define N_DEV 1
#endif

#ifdef PARTIAL_ASYNC
/* Calls of the optional functions: the test reads them. */
struct partial_counts {
    unsigned set_async, copy_async, event_record, event_wait;
};
static struct partial_counts counts;
#endif

static const struct bp_host_services *host;

/* ---- the three ops ---- */

static float *at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (float *)((char *)t->data + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
                     (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3]);
}

static bool all_f32(const struct bp_tensor *n)
{
    return n->type == BP_TYPE_F32 && n->src[0] && n->src[0]->type == BP_TYPE_F32 && n->src[1] &&
           n->src[1]->type == BP_TYPE_F32;
}

static bool supports(const struct bp_tensor *n)
{
    if (bp_op_is_view((enum bp_op)n->op)) return true;
    return (n->op == BP_OP_ADD || n->op == BP_OP_MUL || n->op == BP_OP_MUL_MAT) && all_f32(n);
}

static void binary(struct bp_tensor *n)
{
    const struct bp_tensor *a = n->src[0], *b = n->src[1];
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
                    float x = *at(a, i0, i1, i2, i3);
                    float y = *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                    *at(n, i0, i1, i2, i3) = n->op == BP_OP_ADD ? x + y : x * y;
                }
}

/* dst[n, m] = sum_k W[k, n] X[k, m], W broadcast over dims 2 and 3. */
static void mul_mat(struct bp_tensor *d)
{
    const struct bp_tensor *w = d->src[0], *x = d->src[1];
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t m = 0; m < d->ne[1]; m++)
                for (int64_t n = 0; n < d->ne[0]; n++) {
                    double acc = 0.0;
                    int64_t w2 = i2 / (d->ne[2] / w->ne[2]), w3 = i3 / (d->ne[3] / w->ne[3]);
                    for (int64_t k = 0; k < w->ne[0]; k++)
                        acc += (double)*at(w, k, n, w2, w3) * (double)*at(x, k, m, i2, i3);
                    *at(d, n, m, i2, i3) = (float)acc;
                }
}

/* ---- backend ---- */

static const char *dev_name(struct bp_device *d);
static const char *be_name(struct bp_backend *b) { return dev_name(b->device); }
static void be_free(struct bp_backend *b) { free(b); }
static bp_status be_sync(struct bp_backend *b) { (void)b; return BP_OK; }

static bp_status be_compute(struct bp_backend *b, struct bp_graph *g)
{
    (void)b;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        if (!supports(n)) {
            host->log(BP_LOG_ERROR, FAMILY, "cannot compute %s of tensor '%s'; only F32 ADD, MUL and MUL_MAT.",
                      bp_op_name((enum bp_op)n->op), n->name);
            return BP_ERR_UNSUPPORTED;
        }
        if (n->op == BP_OP_MUL_MAT)
            mul_mat(n);
        else
            binary(n);
    }
    return BP_OK;
}

#ifdef PARTIAL_ASYNC
static bool own_memory(const struct bp_backend *b, const struct bp_tensor *t);

static bp_status be_set_async(struct bp_backend *b, struct bp_tensor *t, const void *src, size_t off, size_t n)
{
    if (!own_memory(b, t)) return BP_ERR_INVALID_ARGUMENT;
    counts.set_async++;
    memcpy((char *)t->data + off, src, n);
    return BP_OK;
}

/* Between two devices of this plugin only (both are host memory). */
static bp_status be_copy_async(struct bp_backend *sb, struct bp_backend *db, const struct bp_tensor *src,
                               struct bp_tensor *dst)
{
    if (!own_memory(sb, src) || !own_memory(db, dst)) return BP_ERR_UNSUPPORTED;
    counts.copy_async++;
    memcpy(dst->data, src->data, bp_nbytes(src));
    return BP_OK;
}

static bp_status be_event_record(struct bp_backend *b, struct bp_event *ev)
{
    (void)b;
    (void)ev;
    counts.event_record++;
    return BP_OK;
}

static bp_status be_event_wait(struct bp_backend *b, struct bp_event *ev)
{
    (void)b;
    (void)ev;
    counts.event_wait++;
    return BP_OK;
}
#endif

static const struct bp_backend_iface backend_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = be_name,
    .free = be_free,
    .synchronize = be_sync,
    .graph_compute = be_compute,
#ifdef PARTIAL_ASYNC
    .set_tensor_async = be_set_async,
    .copy_tensor_async = be_copy_async,
    .event_record = be_event_record,
    .event_wait = be_event_wait,
#endif
};

/* ---- device and registry ---- */

static struct bp_registry registry;
static struct bp_device device[N_DEV];
static struct bp_buffer_type buffer_type[N_DEV];

static size_t index_of(const struct bp_device *d) { return (size_t)(d - device); }
static const char *dev_name(struct bp_device *d)
{
    static const char *const names[] = { FAMILY "0", FAMILY "1" };
    return names[index_of(d)];
}
static const char *dev_desc(struct bp_device *d) { (void)d; return "test device: F32 ADD, MUL, MUL_MAT only"; }
static enum bp_device_type dev_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_ACCEL; }

static void dev_memory(struct bp_device *d, size_t *free_b, size_t *total)
{
    (void)d;
    *free_b = *total = (size_t)1 << 30;
}

static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    size_t size = caps->size;
    memset(caps, 0, size < sizeof *caps ? size : sizeof *caps);
    caps->size = size;
}

static bp_status dev_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)params;
    struct bp_backend *b = calloc(1, sizeof *b);
    if (!b) return BP_ERR_OUT_OF_MEMORY;
    *b = (struct bp_backend){ .iface = &backend_iface, .device = d };
    *out = b;
    return BP_OK;
}

static struct bp_buffer_type *dev_buft(struct bp_device *d) { return &buffer_type[index_of(d)]; }
static bool dev_supports_op(struct bp_device *d, const struct bp_tensor *n) { (void)d; return supports(n); }
static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *t) { return t == dev_buft(d); }

#ifdef PARTIAL_ASYNC
static bool own_memory(const struct bp_backend *b, const struct bp_tensor *t)
{
    const struct bp_tensor *o = t;
    while (o->view_src) o = o->view_src;
    return o->buffer && o->buffer->buft == dev_buft(b->device);
}

static void ev_free(struct bp_event *ev) { free(ev); }
static bp_status ev_sync(struct bp_event *ev) { (void)ev; return BP_OK; }
static const struct bp_event_iface event_iface = {
    .size = sizeof(struct bp_event_iface),
    .free = ev_free,
    .synchronize = ev_sync,
};

static bp_status dev_event_new(struct bp_device *d, struct bp_event **out)
{
    struct bp_event *ev = calloc(1, sizeof *ev);
    if (!ev) return BP_ERR_OUT_OF_MEMORY;
    *ev = (struct bp_event){ .iface = &event_iface, .device = d };
    *out = ev;
    return BP_OK;
}

static const struct partial_counts *get_counts(void) { return &counts; }

static void *reg_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    return !strcmp(name, "streams_counts") ? (void *)get_counts : NULL;
}
#endif

static const struct bp_device_iface device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_desc,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_backend,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
#ifdef PARTIAL_ASYNC
    .event_new = dev_event_new,
#endif
};

static const char *reg_name(struct bp_registry *r) { (void)r; return FAMILY; }
static size_t reg_count(struct bp_registry *r) { (void)r; return N_DEV; }
static struct bp_device *reg_device(struct bp_registry *r, size_t i) { (void)r; return i < N_DEV ? &device[i] : NULL; }

static const struct bp_registry_iface registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_name,
    .get_device_count = reg_count,
    .get_device = reg_device,
#ifdef PARTIAL_ASYNC
    .get_proc_address = reg_proc,
#endif
};

static bp_status partial_init(const struct bp_host_services *h, struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(h, FAMILY, out);
    if (st != BP_OK) return st;
    host = h;
    struct bp_host_helpers helpers;
    if (!bp_host_helpers_get(h, FAMILY, &helpers)) return BP_ERR_ABI;
    registry = (struct bp_registry){ .iface = &registry_iface, .abi_version = BP_ABI_VERSION };
    /* Each device's memory is a host buffer type of its own: dev_supports_buft
     * accepts only that one, so the scheduler copies between devices. */
    for (size_t i = 0; i < N_DEV && st == BP_OK; i++) {
        device[i] = (struct bp_device){ .iface = &device_iface, .reg = &registry };
        st = helpers.buffer_type_init(&buffer_type[i], &device[i]);
    }
    if (st != BP_OK) return st;
    *out = &registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(partial_init)
