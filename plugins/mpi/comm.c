/* comm.c — the slot registry's communicator, which closes a meta device's
 * PARTIAL cuts across ranks. Chosen once per meta backend, by all ranks
 * together: the real device's multi-process comm when its registry offers
 * bp_comm_get_unique_id and bp_comm_init_rank and every rank's init
 * succeeds (the id broadcast over MPI, as NCCL wants), else host memory and
 * MPI_Allreduce. With both, BACKPLANE_META_ALLREDUCE=auto (the default)
 * chooses per size class on first use (comm_auto.c); any other value keeps
 * the device path. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static void *proc(struct bp_registry *r, const char *name)
{
    void *(*get)(struct bp_registry *, const char *) = r ? BP_IFACE_GET(r->iface, get_proc_address) : NULL;
    return get ? get(r, name) : NULL;
}

/* Try the device path on every rank; false (on every rank) when any lacks
 * it or fails. Collective. */
static bool device_comm(struct dist_comm *c, struct bp_backend *b)
{
    struct bp_registry *r = b->device ? b->device->reg : NULL;
    bp_comm_get_unique_id_fn get_id = (bp_comm_get_unique_id_fn)proc(r, BP_PROC_COMM_GET_UNIQUE_ID);
    bp_comm_init_rank_fn init_rank = (bp_comm_init_rank_fn)proc(r, BP_PROC_COMM_INIT_RANK);
    c->dev_allreduce = (bp_comm_allreduce_tensor_fn)proc(r, BP_PROC_COMM_ALLREDUCE_TENSOR);
    c->dev_free = (bp_comm_free_fn)proc(r, BP_PROC_COMM_FREE);
    int ok = get_id && init_rank && c->dev_allreduce;
    if (dist_allreduce_min_int(c->g, &ok, "communicator choice") != BP_OK || !ok) return false;
    /* Rank 0's id (and whether it made one) to everyone. */
    struct { int32_t made; uint32_t len; unsigned char id[BP_COMM_UNIQUE_ID_MAX]; } blob = {0};
    if (c->g->rank == 0) {
        size_t len = 0;
        blob.made = get_id(blob.id, sizeof blob.id, &len) == BP_OK && len <= sizeof blob.id;
        blob.len = (uint32_t)len;
    }
    if (dist_bcast(c->g, &blob, sizeof blob, 0) != BP_OK || !blob.made) return false;
    ok = init_rank(b, c->g->nranks, c->g->rank, blob.id, blob.len, &c->dev_comm) == BP_OK;
    if (dist_allreduce_min_int(c->g, &ok, "communicator set-up") != BP_OK || !ok) {
        if (c->dev_comm && c->dev_free) c->dev_free(c->dev_comm);
        c->dev_comm = NULL;
        return false;
    }
    return true;
}

bp_status dist_comm_init(struct bp_backend *const *backends, size_t n, void **out)
{
    struct bp_dist_group *g = dist_group();
    if (!out || !backends) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!g) return BP_ERR_UNSUPPORTED;
    if (n != (size_t)g->nranks) {
        dist_log(BP_LOG_ERROR, "a meta device over %zu slot devices in a job of %d ranks cannot reduce "
                 "across ranks; make it from bp_dist_devices' list.", n, (int)g->nranks);
        return BP_ERR_INVALID_ARGUMENT;
    }
    size_t local = n, locals = 0;
    for (size_t i = 0; i < n; i++)
        if (!dist_is_placeholder_backend(backends[i])) local = i, locals++;
    if (locals != 1 || local != (size_t)g->rank) {
        dist_log(BP_LOG_ERROR, "the meta device's slot %zu is this rank's but the rank is %d; keep "
                 "bp_dist_devices' order.", local, (int)g->rank);
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct dist_comm *c = calloc(1, sizeof *c);
    if (!c) return BP_ERR_OUT_OF_MEMORY;
    c->g = g;
    c->local = local;
    const char *mode = dist_host->get_env("BACKPLANE_META_ALLREDUCE");
    const bool dev = device_comm(c, backends[local]);
    c->choose = dev && (!mode || !*mode || !strcmp(mode, "auto"));
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) c->class_via[k] = -1;
    g->comm_path = c->choose ? "auto" : dev ? "device" : "host";
    dist_log(BP_LOG_INFO, "rank %d reduces across ranks through %s.", (int)g->rank,
             c->dev_comm ? "the device's own communicator" : "host memory and MPI_Allreduce");
    *out = c;
    return BP_OK;
}

bp_status dist_comm_device_reduce(struct dist_comm *c, struct bp_tensor *t)
{
    struct bp_tensor *one[1] = { t };
    return c->dev_allreduce(c->dev_comm, one, 1);
}

bp_status dist_comm_host_reduce(struct dist_comm *c, struct bp_tensor *t)
{
    if (t->type != BP_TYPE_F32 || !bp_is_contiguous(t)) {
        /* Declining would send the meta plugin to its butterfly, which
         * cannot reach other ranks: refuse in words instead. */
        dist_log(BP_LOG_ERROR, "cannot reduce tensor '%s' across ranks: only contiguous F32 partial "
                 "sums are supported.", t->name);
        return BP_ERR_UNSUPPORTED;
    }
    const size_t count = (size_t)bp_nelements(t);
    struct bp_buffer_type *bt = t->buffer ? t->buffer->buft : NULL;
    bool (*is_host)(struct bp_buffer_type *) = bt ? BP_IFACE_GET(bt->iface, is_host) : NULL;
    if (is_host && is_host(bt))
        return dist_allreduce_f32(c->g, (float *)t->data, count);
    bp_status st = dist_comm_grow(&c->stage, &c->stage_cap, count);
    const size_t bytes = count * sizeof(float);
    if (st == BP_OK) st = t->buffer->iface->get_tensor(t->buffer, t, c->stage, 0, bytes);
    if (st == BP_OK) st = dist_allreduce_f32(c->g, c->stage, count);
    if (st == BP_OK) st = t->buffer->iface->set_tensor(t->buffer, t, c->stage, 0, bytes);
    return st;
}

bp_status dist_comm_grow(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return BP_OK;
    float *q = realloc(*p, n * sizeof *q);
    if (!q) return BP_ERR_OUT_OF_MEMORY;
    *p = q, *cap = n;
    return BP_OK;
}

bp_status dist_comm_allreduce_tensor(void *comm, struct bp_tensor *const *tensors, size_t n)
{
    struct dist_comm *c = comm;
    if (!c || !tensors || n != (size_t)c->g->nranks) return BP_ERR_INVALID_ARGUMENT;
    struct bp_tensor *t = tensors[c->local];
    c->g->reductions++;
    c->g->bytes_reduced += bp_nbytes(t);
    if (!c->dev_comm) return dist_comm_host_reduce(c, t);
    enum dist_via via = DIST_VIA_DEVICE;
    if (c->choose && t->type == BP_TYPE_F32 && bp_is_contiguous(t)) {
        bp_status st = dist_comm_choose(c, t, &via);
        if (st != BP_OK) return st;
    }
    return via == DIST_VIA_DEVICE ? dist_comm_device_reduce(c, t) : dist_comm_host_reduce(c, t);
}

void dist_comm_free(void *comm)
{
    struct dist_comm *c = comm;
    if (!c) return;
    if (c->dev_comm && c->dev_free) c->dev_free(c->dev_comm);
    free(c->stage);
    free(c->save);
    free(c);
}
