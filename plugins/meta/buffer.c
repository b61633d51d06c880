/* buffer.c — the meta buffer type and buffer: per-device sub-buffers that
 * hold only each device's slices (a 4-way split weight takes a quarter of
 * its bytes on each device; a mirrored one takes all of them everywhere),
 * per-device tensors of reduced shape, and set/get that scatter and gather
 * slices. The meta buffer's own address space is a cookie that locates
 * tensors for the host; slices get their device bytes when first needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

/* The meta buffer's address space is a cookie: offsets into it locate the
 * meta tensors; it is never dereferenced. */
#define META_BASE ((char *)(uintptr_t)(1u << 20))

static struct meta_device *buft_md(struct bp_buffer_type *buft) { return buft->context; }

/* The weight type of one of md->wbuft, -1 for md->buft. */
static int buft_wtype(struct bp_buffer_type *buft)
{
    struct meta_device *md = buft_md(buft);
    return buft == &md->buft ? -1 : (int)(buft - md->wbuft);
}

bool meta_buft_is_meta(const struct bp_buffer_type *buft)
{
    return buft && buft->iface == &meta_buft_iface;
}

/* The failures below return a status to the host, which cannot know which
 * slice or sub-device was at fault: each logs that first, in one sentence. */

static bp_status no_host_memory(size_t bytes, const char *what, const char *name)
{
    meta_log(BP_LOG_ERROR, "out of host memory: %zu bytes for %s '%s' could not be allocated.", bytes,
             what, name);
    return BP_ERR_OUT_OF_MEMORY;
}

static bp_status no_record(const struct bp_tensor *t)
{
    meta_log(BP_LOG_ERROR, "tensor '%s' is in a meta buffer but has no meta record; place it with "
             "bp_context_alloc_tensors (or view a tensor placed that way).", t->name);
    return BP_ERR_INVALID_ARGUMENT;
}

struct meta_tensor *meta_tensor_of(const struct bp_tensor *t)
{
    if (!t || !t->buffer || !meta_buft_is_meta(t->buffer->buft)) return NULL;
    return t->extra;
}

static size_t offset_of(const struct bp_tensor *t)
{
    return (size_t)((uintptr_t)t->data - (uintptr_t)META_BASE);
}

static void contiguous_nb(struct bp_tensor *t)
{
    enum bp_type ty = (enum bp_type)t->type;
    t->nb[0] = bp_type_size(ty);
    t->nb[1] = t->nb[0] * (size_t)(t->ne[0] / bp_type_block_size(ty));
    for (int i = 2; i < BP_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Any valid address on device d, for slices of zero bytes. */
static void *device_anchor(struct meta_buffer *mb, size_t d)
{
    return mb->n_arenas[d] ? mb->arenas[d][0].base : NULL;
}

void meta_local_copy(struct bp_tensor *l, const struct bp_tensor *t)
{
    struct bp_tensor *keep_src[BP_MAX_SRC];
    memcpy(keep_src, l->src, sizeof keep_src);
    *l = *t;
    memcpy(l->src, keep_src, sizeof keep_src);
    l->extra = NULL;
    l->view_src = NULL;
    l->view_offs = 0;
}

void meta_local_fill(struct meta_buffer *mb, const struct bp_tensor *t, struct meta_tensor *mt, size_t d,
                     bool own_storage)
{
    struct bp_tensor *l = &mt->local[d];
    meta_local_copy(l, t);
    if (meta_layout_is_axis(&mt->layout)) l->ne[mt->layout.state] = mt->layout.local_ne[d];
    contiguous_nb(l);
    l->buffer = mb->n_arenas[d] ? mb->arenas[d][0].buf : NULL;
    l->data = NULL;
    if (!own_storage) return;
    size_t need = bp_nbytes(l);
    if (need == 0) {
        l->data = device_anchor(mb, d);
        if (!l->data && !mt->pending[d]) { mt->pending[d] = true; mb->n_pending++; }
        return;
    }
    if (mt->mem[d] && mt->mem_cap[d] >= need) {
        l->data = mt->mem[d];
        l->buffer = mt->mem_buf[d];
        return;
    }
    if (!mt->pending[d]) {
        mt->pending[d] = true;
        mb->n_pending++;
    }
}

/* ---- device storage ---- */

static bp_status arena_new(struct meta_buffer *mb, size_t d, size_t bytes)
{
    struct bp_device *s = mb->md->sub[d];
    if (mb->n_arenas[d] == mb->cap_arenas[d]) {
        size_t cap = mb->cap_arenas[d] ? mb->cap_arenas[d] * 2 : 2;
        struct meta_arena *v = realloc(mb->arenas[d], cap * sizeof *v);
        if (!v) return no_host_memory(cap * sizeof *v, "the sub-buffer list of", meta_sub_name(s));
        mb->arenas[d] = v;
        mb->cap_arenas[d] = cap;
    }
    if (mb->dry) {
        /* any aligned, never-dereferenced address: slices are told apart by it */
        mb->arenas[d][mb->n_arenas[d]++] = (struct meta_arena){NULL, META_BASE, 0, bytes};
        return BP_OK;
    }
    struct bp_buffer *b = NULL;
    bp_status st = meta_sub_alloc_for(s, mb->wtype, bytes, &b);
    if (st != BP_OK) {
        /* A broken table was already reported in its own words. */
        if (st != BP_ERR_PLUGIN)
            meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not allocate %zu bytes for its slices of a meta "
                     "buffer; free memory there or give it a smaller split ratio.", d, meta_sub_name(s), bytes);
        return st;
    }
    if (mb->clear_value && (st = meta_sub_clear(b, mb->clear_value)) != BP_OK) {
        meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not clear its new %zu-byte sub-buffer (%s).", d,
                 meta_sub_name(s), bytes, bp_status_name(st));
        meta_sub_free_buffer(b);
        return st;
    }
    mb->arenas[d][mb->n_arenas[d]++] = (struct meta_arena){b, b->iface->get_base(b), 0, bytes};
    return BP_OK;
}

/* Slice d of mt gets its bytes in arena a: at `at` (a mapped arena), or
 * after what a holds (at == SIZE_MAX). */
static bp_status give_storage(struct meta_buffer *mb, struct meta_tensor *mt, size_t d, struct meta_arena *a,
                              size_t at)
{
    struct bp_tensor *l = &mt->local[d];
    size_t need = bp_nbytes(l);
    mt->pending[d] = false;
    if (need == 0) {
        l->data = device_anchor(mb, d);
    } else {
        size_t off = at == SIZE_MAX ? align_up(a->used, mb->align[d]) : at;
        mt->mem[d] = a->base + off;
        mt->mem_cap[d] = need;
        mt->mem_buf[d] = a->buf;
        if (off + need > a->used) a->used = off + need;
        l->data = mt->mem[d];
    }
    l->buffer = a->buf;
    struct bp_buffer *sb = a->buf;
    if (!sb) return BP_OK; /* dry */
    bp_status (*init_tensor)(struct bp_buffer *, struct bp_tensor *) = BP_IFACE_GET(sb->iface, init_tensor);
    return init_tensor ? init_tensor(sb, l) : BP_OK;
}

/* Whether slice d of a computed tensor lies at the tensor's own meta offset
 * (see meta_buffer_materialize). */
static bool mapped_slice(const struct meta_buffer *mb, const struct meta_tensor *mt, size_t d)
{
    const size_t need = bp_nbytes(&mt->local[d]);
    return !mt->leaf && !mt->zeroed_early[d] && need > 0 && need <= mt->bytes &&
           mt->offset % mb->align[d] == 0;
}

/* Computed tensors (a graph's, placed by the host's graph allocator, which
 * gives the bytes of a tensor whose last reader has run to a later one)
 * keep their slices at their meta offsets in one arena per device: tensors
 * that share meta bytes never live at once, and a slice is no larger than
 * its tensor, so the slices share device bytes exactly where the tensors
 * share meta bytes, and a device holds what the graph allocator planned
 * rather than the sum of every tensor the graph computes (a 256-token
 * prefill of a 1B model: 23 MiB a device instead of 670). Leaves (weights,
 * caches, inputs) never share bytes, and neither do slices zeroed before
 * the graph runs (zeroed_early); their slices are packed, each device
 * holding only its share. This holds as long as each device computes its
 * slices in the graph's node order and no device writes another's slices,
 * which is how backend.c runs a plan. */
bp_status meta_buffer_materialize(struct meta_buffer *mb)
{
    pthread_mutex_lock(&mb->lock);
    bp_status st = BP_OK;
    for (size_t d = 0; d < mb->md->n && mb->n_pending && st == BP_OK; d++) {
        size_t total = 0, end = 0;
        bool any = false;
        for (size_t i = 0; i < mb->n_recs; i++) {
            const struct meta_tensor *mt = mb->recs[i];
            if (!mt->pending[d]) continue;
            if (mapped_slice(mb, mt, d)) {
                const size_t e = mt->offset + bp_nbytes(&mt->local[d]);
                if (e > end) end = e;
            } else {
                any = true;
                total += align_up(bp_nbytes(&mt->local[d]), mb->align[d]);
            }
        }
        end = align_up(end, mb->align[d]);
        if (end && (mb->mapped[d] < 0 || mb->arenas[d][mb->mapped[d]].cap < end)) {
            if ((st = arena_new(mb, d, end)) != BP_OK) break;
            mb->mapped[d] = (ptrdiff_t)mb->n_arenas[d] - 1;
        }
        for (size_t i = 0; end && i < mb->n_recs && st == BP_OK; i++)
            if (mb->recs[i]->pending[d] && mapped_slice(mb, mb->recs[i], d))
                st = give_storage(mb, mb->recs[i], d, &mb->arenas[d][mb->mapped[d]], mb->recs[i]->offset);
        if (!any || st != BP_OK) continue;
        /* a device whose slices are all empty still gets a small sub-buffer:
         * its per-device tensors need a valid address */
        if ((st = arena_new(mb, d, total ? total : mb->align[d])) != BP_OK) break;
        struct meta_arena *a = &mb->arenas[d][mb->n_arenas[d] - 1];
        for (size_t i = 0; i < mb->n_recs && st == BP_OK; i++)
            if (mb->recs[i]->pending[d]) st = give_storage(mb, mb->recs[i], d, a, SIZE_MAX);
    }
    if (st == BP_OK) mb->n_pending = 0;
    pthread_mutex_unlock(&mb->lock);
    return st;
}

bp_status meta_buffer_device_bytes(struct bp_buffer *buf, size_t *bytes)
{
    if (!buf || !meta_buft_is_meta(buf->buft) || !bytes) {
        meta_log(BP_LOG_ERROR, "bp_meta_buffer_device_bytes was given a buffer that is not a meta buffer.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct meta_buffer *mb = buf->context;
    bp_status st = meta_buffer_materialize(mb);
    if (st != BP_OK) return st;
    for (size_t d = 0; d < META_MAX_DEV; d++) {
        bytes[d] = 0;
        for (size_t k = 0; d < mb->md->n && k < mb->n_arenas[d]; k++) bytes[d] += mb->arenas[d][k].cap;
    }
    return BP_OK;
}

/* ---- buffer iface ---- */

static void buf_free(struct bp_buffer *buf)
{
    struct meta_buffer *mb = buf->context;
    for (size_t d = 0; d < mb->md->n; d++) {
        for (size_t k = 0; k < mb->n_arenas[d]; k++) {
            meta_sub_free_buffer(mb->arenas[d][k].buf);
        }
        free(mb->arenas[d]);
    }
    for (size_t i = 0; i < mb->n_recs; i++) free(mb->recs[i]);
    free(mb->recs);
    pthread_mutex_destroy(&mb->lock);
    free(mb);
    free(buf);
}

static void *buf_get_base(struct bp_buffer *buf) { (void)buf; return META_BASE; }

/* Records are told apart by serial, not address: a graph rebuilt after its
 * buffer was freed gets records (and tensors, and meta addresses, which are
 * offsets) at the same addresses, and must not match the old plan. */
static uint64_t next_serial(void)
{
    static uint64_t counter;
    return __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

static bp_status buf_init_tensor(struct bp_buffer *buf, struct bp_tensor *t)
{
    struct meta_buffer *mb = buf->context;
    struct meta_tensor *mt = calloc(1, sizeof *mt);
    if (!mt) return no_host_memory(sizeof *mt, "the meta record of tensor", t->name);
    mt->serial = next_serial();
    mt->slice_src = -1;
    pthread_mutex_lock(&mb->lock);
    bool ok = true;
    if (mb->n_recs == mb->cap_recs) {
        size_t cap = mb->cap_recs ? mb->cap_recs * 2 : 64;
        struct meta_tensor **v = realloc(mb->recs, cap * sizeof *v);
        if (v) { mb->recs = v; mb->cap_recs = cap; }
        else ok = false;
    }
    if (ok) mb->recs[mb->n_recs++] = mt;
    pthread_mutex_unlock(&mb->lock);
    if (!ok) {
        free(mt);
        return no_host_memory(2 * mb->cap_recs * sizeof *mb->recs, "the record list holding", t->name);
    }
    t->extra = mt;
    mt->offset = offset_of(t);
    mt->bytes = bp_nbytes(t);
    meta_layout_simple(&mt->layout, BP_META_SPLIT_MIRRORED);
    if (t->view_src || t->op != BP_OP_NONE) return BP_OK; /* derived when a graph uses it */
    struct bp_meta_split split;
    memset(&split, 0, sizeof split);
    split.state = BP_META_SPLIT_MIRRORED;
    struct meta_device *md = mb->md;
    if (md->split_cb && !md->split_cb(md->split_user, t, &split)) {
        memset(&split, 0, sizeof split);
        split.state = BP_META_SPLIT_MIRRORED;
    }
    bp_status st = meta_layout_place(&split, t, md->n, md->ratio, &mt->layout);
    if (st != BP_OK) return st;
    mt->placed = true;
    mt->leaf = true;
    mt->whole = *t;
    mt->needs_reduce = mt->layout.state == BP_META_SPLIT_PARTIAL;
    pthread_mutex_lock(&mb->lock);
    for (size_t d = 0; d < md->n; d++) meta_local_fill(mb, t, mt, d, true);
    pthread_mutex_unlock(&mb->lock);
    return BP_OK;
}

/* Bytes of len elements along axis a of a contiguous tensor. */
static size_t axis_bytes(const struct bp_tensor *t, int a, int64_t len)
{
    if (a == 0) return (size_t)(len / bp_type_block_size((enum bp_type)t->type)) * bp_type_size((enum bp_type)t->type);
    return (size_t)len * t->nb[a];
}

/* Move slices between the whole tensor in host memory and the per-device
 * host images: scatter (to_local) or gather. */
static void shuffle(const struct bp_tensor *t, const struct meta_layout *l, size_t n_dev, char *whole,
                    char **local, bool to_local)
{
    int a = l->state;
    int64_t outer = 1;
    for (int i = a + 1; i < BP_MAX_DIMS; i++) outer *= t->ne[i];
    size_t g_outer = axis_bytes(t, a, t->ne[a]);
    size_t l_outer[META_MAX_DEV];
    for (size_t d = 0; d < n_dev; d++) l_outer[d] = axis_bytes(t, a, l->local_ne[d]);
    for (int64_t o = 0; o < outer; o++) {
        int64_t gpos = 0, lpos[META_MAX_DEV] = {0};
        for (int32_t p = 0; p < l->n_pieces; p++) {
            int32_t d = l->piece[p].dev;
            size_t n = axis_bytes(t, a, l->piece[p].len);
            char *g = whole + (size_t)o * g_outer + axis_bytes(t, a, gpos);
            char *x = local[d] + (size_t)o * l_outer[d] + axis_bytes(t, a, lpos[d]);
            if (to_local) memcpy(x, g, n);
            else memcpy(g, x, n);
            gpos += l->piece[p].len;
            lpos[d] += l->piece[p].len;
        }
    }
}

/* st of a sub-buffer's write or read (verb) of size bytes at off of slice
 * l, logged when it is a refusal. */
static bp_status sub_io_status(const struct bp_tensor *l, const char *verb, size_t size, size_t off,
                               bp_status st)
{
    if (st != BP_OK)
        meta_log(BP_LOG_ERROR, "a sub-device buffer refused to %s %zu bytes at %zu of the slice of '%s' (%s).",
                 verb, size, off, l->name, bp_status_name(st));
    return st;
}

static bp_status sub_set(struct bp_tensor *l, const void *src, size_t off, size_t size)
{
    if (size == 0) return BP_OK;
    return sub_io_status(l, "write", size, off, l->buffer->iface->set_tensor(l->buffer, l, src, off, size));
}

static bp_status sub_get(const struct bp_tensor *l, void *dst, size_t off, size_t size)
{
    if (size == 0) return BP_OK;
    return sub_io_status(l, "read", size, off, l->buffer->iface->get_tensor(l->buffer, l, dst, off, size));
}

static bp_status gather_whole(struct meta_buffer *mb, const struct bp_tensor *t, struct meta_tensor *mt,
                              char *whole)
{
    size_t n_dev = mb->md->n;
    if (mt->layout.state == BP_META_SPLIT_MIRRORED) return sub_get(&mt->local[0], whole, 0, bp_nbytes(t));
    char *local[META_MAX_DEV] = {0};
    bp_status st = BP_OK;
    for (size_t d = 0; d < n_dev && st == BP_OK; d++) {
        size_t n = bp_nbytes(&mt->local[d]);
        local[d] = malloc(n ? n : 1);
        if (!local[d]) st = no_host_memory(n, "gathering a slice of", t->name);
        else st = sub_get(&mt->local[d], local[d], 0, n);
    }
    if (st == BP_OK) shuffle(t, &mt->layout, n_dev, whole, local, false);
    for (size_t d = 0; d < n_dev; d++) free(local[d]);
    return st;
}

static bp_status scatter_whole(struct meta_buffer *mb, struct bp_tensor *t, struct meta_tensor *mt,
                               char *whole)
{
    size_t n_dev = mb->md->n;
    size_t n = bp_nbytes(t);
    bp_status st = BP_OK;
    if (mt->layout.state == BP_META_SPLIT_MIRRORED) {
        for (size_t d = 0; d < n_dev && st == BP_OK; d++) st = sub_set(&mt->local[d], whole, 0, n);
        return st;
    }
    if (mt->layout.state == BP_META_SPLIT_PARTIAL) {
        if (t->type != BP_TYPE_F32) {
            meta_log(BP_LOG_ERROR, "tensor '%s' is PARTIAL and %s; only f32 partial sums can be written.",
                     t->name, bp_type_name((enum bp_type)t->type));
            return BP_ERR_UNSUPPORTED;
        }
        float *part = malloc(n ? n : 1);
        if (!part) return no_host_memory(n, "the partial sums of", t->name);
        const float *v = (const float *)whole;
        for (size_t i = 0; i < n / 4; i++) part[i] = v[i] / (float)n_dev;
        for (size_t d = 0; d < n_dev && st == BP_OK; d++) st = sub_set(&mt->local[d], part, 0, n);
        free(part);
        return st;
    }
    char *local[META_MAX_DEV] = {0};
    for (size_t d = 0; d < n_dev && st == BP_OK; d++) {
        size_t ln = bp_nbytes(&mt->local[d]);
        local[d] = malloc(ln ? ln : 1);
        if (!local[d]) st = no_host_memory(ln, "scattering a slice of", t->name);
    }
    if (st == BP_OK) {
        shuffle(t, &mt->layout, n_dev, whole, local, true);
        for (size_t d = 0; d < n_dev && st == BP_OK; d++)
            st = sub_set(&mt->local[d], local[d], 0, bp_nbytes(&mt->local[d]));
    }
    for (size_t d = 0; d < n_dev; d++) free(local[d]);
    return st;
}

/* A tensor the buffer can scatter/gather: placed (a leaf, or a node a graph
 * has computed). */
static bp_status io_check(const struct bp_tensor *t, struct meta_tensor *mt, const char *what)
{
    if (!mt->placed) {
        meta_log(BP_LOG_ERROR, "cannot %s tensor '%s' (%s): its split state is not known until a graph "
                 "computes it; compute the graph first.", what, t->name, bp_op_name((enum bp_op)t->op));
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

/* A view's bytes are bytes of the tensor that owns its memory: find that
 * owner (a placed record) and the view's byte offset in it. */
static const struct bp_tensor *view_owner(const struct bp_tensor *t, size_t *rel)
{
    const struct bp_tensor *o = t;
    for (int depth = 0; o->view_src && depth < 8; depth++) o = o->view_src;
    *rel = (size_t)((uintptr_t)t->data - (uintptr_t)o->data);
    return o;
}

static bp_status set_whole_range(struct meta_buffer *mb, struct bp_tensor *t, struct meta_tensor *mt,
                                 const void *src, size_t offset, size_t size)
{
    bp_status st = BP_OK;
    if (mt->layout.state == BP_META_SPLIT_MIRRORED) {
        for (size_t d = 0; d < mb->md->n && st == BP_OK; d++) st = sub_set(&mt->local[d], src, offset, size);
        return st;
    }
    size_t n = bp_nbytes(t);
    char *whole = malloc(n ? n : 1);
    if (!whole) return no_host_memory(n, "a whole copy of", t->name);
    if (offset != 0 || size != n) {
        if (mt->layout.state == BP_META_SPLIT_PARTIAL) {
            meta_log(BP_LOG_ERROR, "tensor '%s' is PARTIAL: write it whole, not %zu bytes at %zu.", t->name,
                     size, offset);
            st = BP_ERR_UNSUPPORTED;
        } else {
            st = gather_whole(mb, t, mt, whole);
        }
    }
    if (st == BP_OK) {
        memcpy(whole + offset, src, size);
        st = scatter_whole(mb, t, mt, whole);
        if (st == BP_OK && mt->layout.state == BP_META_SPLIT_PARTIAL) mt->needs_reduce = true;
    }
    free(whole);
    return st;
}

static bp_status get_whole_range(struct meta_buffer *mb, const struct bp_tensor *t, struct meta_tensor *mt,
                                 void *dst, size_t offset, size_t size)
{
    if (mt->layout.state == BP_META_SPLIT_PARTIAL) {
        meta_log(BP_LOG_ERROR, "tensor '%s' is PARTIAL (each sub-device holds a partial sum), so it cannot "
                 "be read; read a tensor computed from it after the reduction, or mark it OUTPUT.", t->name);
        return BP_ERR_INVALID_ARGUMENT;
    }
    if (mt->layout.state == BP_META_SPLIT_MIRRORED) return sub_get(&mt->local[0], dst, offset, size);
    size_t n = bp_nbytes(t);
    char *whole = malloc(n ? n : 1);
    if (!whole) return no_host_memory(n, "a whole copy of", t->name);
    bp_status st = gather_whole(mb, t, mt, whole);
    if (st == BP_OK) memcpy(dst, whole + offset, size);
    free(whole);
    return st;
}

/* Raw bytes of the meta address space (bp_buffer_read/write): each tensor
 * overlapping the range moves its part; gaps read as the last clear value. */
static bp_status raw_io(struct meta_buffer *mb, void *host, size_t offset, size_t size, bool write)
{
    if (!write) memset(host, mb->clear_value, size);
    bp_status st = BP_OK;
    for (size_t i = 0; i < mb->n_recs && st == BP_OK; i++) {
        struct meta_tensor *mt = mb->recs[i];
        if (!mt->leaf) continue;
        size_t n = bp_nbytes(&mt->whole), lo = mt->offset, hi = mt->offset + n;
        size_t a = lo > offset ? lo : offset, b = hi < offset + size ? hi : offset + size;
        if (b <= a) continue;
        char *h = (char *)host + (a - offset);
        if (write) st = set_whole_range(mb, &mt->whole, mt, h, a - lo, b - a);
        else if (mt->layout.state != BP_META_SPLIT_PARTIAL) st = get_whole_range(mb, &mt->whole, mt, h, a - lo, b - a);
    }
    return st;
}

static bp_status buf_set_tensor(struct bp_buffer *buf, struct bp_tensor *t, const void *src, size_t offset,
                                size_t size)
{
    struct meta_buffer *mb = buf->context;
    bp_status st = meta_buffer_materialize(mb);
    if (st != BP_OK) return st;
    if (!t->extra) return raw_io(mb, (void *)src, offset + offset_of(t), size, true);
    size_t rel = 0;
    struct bp_tensor *o = (struct bp_tensor *)view_owner(t, &rel);
    struct meta_tensor *mt = meta_tensor_of(o);
    if (!mt) return no_record(o);
    if ((st = io_check(o, mt, "write")) != BP_OK) return st;
    return set_whole_range(mb, o, mt, src, rel + offset, size);
}

static bp_status buf_get_tensor(struct bp_buffer *buf, const struct bp_tensor *t, void *dst, size_t offset,
                                size_t size)
{
    struct meta_buffer *mb = buf->context;
    bp_status st = meta_buffer_materialize(mb);
    if (st != BP_OK) return st;
    if (!t->extra) return raw_io(mb, dst, offset + offset_of(t), size, false);
    size_t rel = 0;
    const struct bp_tensor *o = view_owner(t, &rel);
    struct meta_tensor *mt = meta_tensor_of(o);
    if (!mt) return no_record(o);
    if ((st = io_check(o, mt, "read")) != BP_OK) return st;
    return get_whole_range(mb, o, mt, dst, rel + offset, size);
}

static bp_status buf_clear(struct bp_buffer *buf, uint8_t value)
{
    struct meta_buffer *mb = buf->context;
    bp_status st = meta_buffer_materialize(mb);
    mb->clear_value = value;
    for (size_t d = 0; d < mb->md->n && st == BP_OK; d++)
        for (size_t k = 0; k < mb->n_arenas[d] && st == BP_OK; k++)
            if ((st = meta_sub_clear(mb->arenas[d][k].buf, value)) != BP_OK)
                meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not clear its sub-buffer %zu (%s).", d,
                         meta_sub_name(mb->md->sub[d]), k, bp_status_name(st));
    return st;
}

static const struct bp_buffer_iface meta_buffer_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_get_base,
    .init_tensor = buf_init_tensor,
    .set_tensor = buf_set_tensor,
    .get_tensor = buf_get_tensor,
    .copy_tensor = NULL,
    .clear = buf_clear,
};

/* ---- buffer type ---- */

static const char *buft_get_name(struct bp_buffer_type *buft)
{
    return buft_wtype(buft) < 0 ? "meta" : "meta_weights";
}

static bp_status buft_alloc(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out)
{
    struct meta_device *md = buft_md(buft);
    struct bp_buffer *buf = calloc(1, sizeof *buf);
    struct meta_buffer *mb = calloc(1, sizeof *mb);
    if (!buf || !mb) {
        free(buf);
        free(mb);
        return no_host_memory(sizeof *buf + sizeof *mb, "a buffer of", "meta");
    }
    mb->md = md;
    mb->wtype = buft_wtype(buft);
    for (size_t d = 0; d < META_MAX_DEV; d++) mb->mapped[d] = -1;
    pthread_mutex_init(&mb->lock, NULL);
    /* No device memory yet: each device's sub-buffer is sized from the
     * layouts of the tensors placed here, when they first need bytes. */
    for (size_t d = 0; d < md->n; d++) {
        struct bp_buffer_type *s = meta_sub_buft_for(md->sub[d], mb->wtype);
        size_t a = s ? s->iface->get_alignment(s) : 64;
        mb->align[d] = a ? a : 64;
    }
    buf->iface = &meta_buffer_iface;
    buf->buft = buft;
    buf->context = mb;
    buf->size = size;
    *out = buf;
    return BP_OK;
}

static size_t buft_get_alignment(struct bp_buffer_type *buft)
{
    struct meta_device *md = buft_md(buft);
    size_t a = 64;
    for (size_t d = 0; d < md->n; d++) {
        struct bp_buffer_type *s = meta_sub_buft_for(md->sub[d], buft_wtype(buft));
        size_t sa = s ? s->iface->get_alignment(s) : 1;
        if (sa > a) a = sa;
    }
    return a;
}

static size_t buft_get_alloc_size(struct bp_buffer_type *buft, const struct bp_tensor *t)
{
    struct meta_device *md = buft_md(buft);
    size_t n = bp_nbytes(t);
    for (size_t d = 0; d < md->n; d++) {
        struct bp_buffer_type *s = meta_sub_buft_for(md->sub[d], buft_wtype(buft));
        size_t (*alloc_size)(struct bp_buffer_type *, const struct bp_tensor *) =
            s ? BP_IFACE_GET(s->iface, get_alloc_size) : NULL;
        if (alloc_size) {
            size_t a = alloc_size(s, t);
            if (a > n) n = a;
        }
    }
    return n;
}

static bool buft_is_host(struct bp_buffer_type *buft) { (void)buft; return false; }

const struct bp_buffer_type_iface meta_buft_iface = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_get_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_get_alignment,
    .get_max_size = NULL,
    .get_alloc_size = buft_get_alloc_size,
    .is_host = buft_is_host,
};

bp_status meta_tensor_split_query(const struct bp_tensor *t, int32_t *state, int64_t *local_ne)
{
    struct meta_tensor *mt = meta_tensor_of(t);
    if (!mt || !state) {
        meta_log(BP_LOG_ERROR, "bp_meta_tensor_split: tensor '%s' is not in a meta buffer.", t ? t->name : "(null)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    *state = mt->layout.state;
    if (local_ne) {
        struct meta_buffer *mb = t->buffer->context;
        bool axis = meta_layout_is_axis(&mt->layout);
        for (size_t d = 0; d < META_MAX_DEV; d++)
            local_ne[d] = (axis && d < mb->md->n) ? mt->layout.local_ne[d] : 0;
    }
    return BP_OK;
}

bp_status meta_copy_tensor(const struct bp_tensor *src, struct bp_tensor *dst)
{
    size_t n = bp_nbytes(src);
    if (n == 0) return BP_OK;
    struct bp_buffer_type *sbt = src->buffer->buft, *dbt = dst->buffer->buft;
    bp_status (*copy)(struct bp_buffer *, const struct bp_tensor *, struct bp_tensor *) =
        BP_IFACE_GET(dst->buffer->iface, copy_tensor);
    if (copy) {
        bp_status st = copy(dst->buffer, src, dst);
        if (st != BP_ERR_UNSUPPORTED) {
            if (st != BP_OK)
                meta_log(BP_LOG_ERROR, "a sub-device failed to copy '%s' into '%s' (%s).", src->name,
                         dst->name, bp_status_name(st));
            return st;
        }
    }
    if (meta_sub_buft_is_host(sbt)) return sub_set(dst, src->data, 0, n);
    if (meta_sub_buft_is_host(dbt)) return sub_get(src, dst->data, 0, n);
    void *tmp = malloc(n);
    if (!tmp) return no_host_memory(n, "copying", src->name);
    bp_status st = sub_get(src, tmp, 0, n);
    if (st == BP_OK) st = sub_set(dst, tmp, 0, n);
    free(tmp);
    return st;
}

bp_status meta_tensor_get_copy(const struct bp_tensor *t, size_t d, void *dst, size_t offset, size_t size)
{
    if (!t || !t->buffer || !meta_buft_is_meta(t->buffer->buft) || (size && !dst)) {
        meta_log(BP_LOG_ERROR, "bp_meta_tensor_get_copy: tensor '%s' is not in a meta buffer.", t ? t->name : "(null)");
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct meta_buffer *mb = t->buffer->context;
    bp_status st = meta_buffer_materialize(mb);
    if (st != BP_OK) return st;
    size_t rel = 0;
    const struct bp_tensor *o = view_owner(t, &rel);
    struct meta_tensor *mt = meta_tensor_of(o);
    if (!mt) return no_record(o);
    if ((st = io_check(o, mt, "read")) != BP_OK) return st;
    if (d >= mb->md->n || mt->layout.state != BP_META_SPLIT_MIRRORED || rel + offset + size > bp_nbytes(o)) {
        meta_log(BP_LOG_ERROR, "bp_meta_tensor_get_copy: tensor '%s' is %s and its device has %zu sub-devices; "
                 "only a MIRRORED tensor has a copy on each, numbered from 0, within its bytes.", t->name,
                 meta_state_name(mt->layout.state), mb->md->n);
        return BP_ERR_INVALID_ARGUMENT;
    }
    return sub_get(&mt->local[d], dst, rel + offset, size);
}

bp_status meta_buffer_new_dry(struct meta_device *md, struct bp_buffer **out)
{
    bp_status st = buft_alloc(&md->buft, 0, out);
    if (st == BP_OK) ((struct meta_buffer *)(*out)->context)->dry = true;
    return st;
}
