/* sched_copy.c — one boundary copy. Where both backends offer events and
 * copy_tensor_async the copy is queued on the reading stream behind an
 * event of the producing one, so neither waits on the host; otherwise the
 * producer is synchronised and the bytes move through host memory: straight
 * into or out of a host buffer when one end is one, else via the
 * scheduler's staging bytes. */
#include <string.h>

#include "sched_internal.h"

static bool has_async_copy(const struct bp_backend *b)
{
    return BP_IFACE_HAS(b->iface, copy_tensor_async) && b->iface->copy_tensor_async &&
           BP_IFACE_HAS(b->iface, event_wait) && b->iface->event_wait;
}

static bool host_plain(const struct bp_buffer *buf)
{
    struct bp_buffer_type *buft = buf->buft;
    /* A device's other host buffer types (the CPU's repacked weights) hold
     * bytes in a layout of their own: only the default type is plain. */
    return buft && BP_IFACE_HAS(buft->iface, is_host) && buft->iface->is_host && buft->iface->is_host(buft) &&
           buft == bp_device_buffer_type(buft->device);
}

static bp_status queued_copy(struct bp_sched *s, const struct sched_copy *c)
{
    struct bp_backend *sb = s->be[c->from], *db = s->be[c->to];
    if (!s->ev[c->from] || !has_async_copy(db) || !has_async_copy(sb)) return BP_ERR_UNSUPPORTED;
    bp_status st = sb->iface->event_record(sb, s->ev[c->from]);
    if (st == BP_OK) st = db->iface->event_wait(db, s->ev[c->from]);
    if (st == BP_OK) st = db->iface->copy_tensor_async(sb, db, c->src, c->dst);
    if (st == BP_OK) s->pending[c->to] = true;
    return st;
}

bp_status sched__copy(struct bp_sched *s, const struct sched_copy *c)
{
    size_t n = bp_nbytes(c->src);
    if (c->from >= 0 && s->pending[c->from]) {
        if (queued_copy(s, c) == BP_OK) return BP_OK;
        bp_status st = bp_backend_synchronize(s->be[c->from]);
        if (st != BP_OK) return st;
        s->pending[c->from] = false;
    }
    struct bp_backend *db = s->be[c->to];
    struct bp_buffer *sbuf = c->src->buffer, *dbuf = c->dst->buffer;
    if (host_plain(dbuf)) return bp_tensor_get(c->src, c->dst->data, 0, n);
    if (host_plain(sbuf) && BP_IFACE_HAS(db->iface, set_tensor_async) && db->iface->set_tensor_async) {
        bp_status st = db->iface->set_tensor_async(db, c->dst, c->src->data, 0, n);
        if (st == BP_OK) {
            s->pending[c->to] = true;
            return BP_OK;
        }
    }
    if (host_plain(sbuf)) return bp_tensor_set(c->dst, c->src->data, 0, n);
    if (BP_IFACE_HAS(dbuf->iface, copy_tensor) && dbuf->iface->copy_tensor &&
        dbuf->iface->copy_tensor(dbuf, c->src, c->dst) == BP_OK)
        return BP_OK;
    bp_status st = bp_tensor_get(c->src, s->staging, 0, n);
    return st == BP_OK ? bp_tensor_set(c->dst, s->staging, 0, n) : st;
}
