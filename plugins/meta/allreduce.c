/* allreduce.c — closing a cut: every device's copy of a PARTIAL tensor
 * becomes the sum, by the path BACKPLANE_META_ALLREDUCE fixes or auto
 * chose (allreduce_auto.c): the sub-devices' own collective when their
 * registry offers one (a declined call falls back to the butterfly), or a
 * butterfly built
 * from tensor copies and ADD graphs, which works across any mix of backends:
 * ceil(log2 N) exchange steps among the largest power of two P <= N, the
 * N - P extra devices folded in first and copied back last. */
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

static bp_status ensure_scratch(struct meta_backend *be, size_t bytes)
{
    if (bytes <= be->scratch_size) return BP_OK;
    for (size_t d = 0; d < be->n; d++) {
        meta_sub_free_buffer(be->scratch[d]);
        be->scratch[d] = NULL;
    }
    be->scratch_size = 0;
    for (size_t d = 0; d < be->n; d++) {
        struct bp_device *s = be->md->sub[d];
        bp_status st = meta_sub_alloc(s, bytes, &be->scratch[d]);
        if (st != BP_OK) {
            meta_log(BP_LOG_ERROR, "sub-device %zu (%s) could not allocate %zu bytes of all-reduce scratch.",
                     d, meta_sub_name(s), bytes);
            return st;
        }
    }
    be->scratch_size = bytes;
    return BP_OK;
}

/* dst += peer on each listed device: copies first, then ADD graphs in parallel. */
static bp_status exchange(struct meta_backend *be, struct bp_tensor **loc, struct bp_tensor *scr,
                          const int *peer, struct bp_tensor *adds)
{
    struct bp_graph graphs[META_MAX_DEV];
    struct bp_graph *gs[META_MAX_DEV];
    struct bp_tensor *nodes[META_MAX_DEV];
    for (size_t d = 0; d < be->n; d++) {
        gs[d] = NULL;
        if (peer[d] < 0) continue;
        bp_status st = meta_copy_tensor(loc[peer[d]], &scr[d]);
        if (st != BP_OK) return st;
    }
    for (size_t d = 0; d < be->n; d++) {
        if (peer[d] < 0) continue;
        struct bp_tensor *a = &adds[d];
        *a = *loc[d];
        memset(a->src, 0, sizeof a->src);
        a->op = BP_OP_ADD;
        a->src[0] = loc[d];
        a->src[1] = &scr[d];
        memset(a->op_params, 0, sizeof a->op_params);
        nodes[d] = a;
        graphs[d] = (struct bp_graph){.n_nodes = 1, .capacity = 1, .nodes = &nodes[d]};
        gs[d] = &graphs[d];
    }
    return meta_run_parallel(be, gs);
}

static bp_status butterfly(struct meta_backend *be, struct bp_tensor **loc)
{
    size_t n = be->n;
    size_t bytes = bp_nbytes(loc[0]);
    bp_status st = ensure_scratch(be, bytes);
    if (st != BP_OK) return st;
    struct bp_tensor scr[META_MAX_DEV], adds[META_MAX_DEV];
    for (size_t d = 0; d < n; d++) {
        scr[d] = *loc[d];
        memset(scr[d].src, 0, sizeof scr[d].src);
        scr[d].op = BP_OP_NONE;
        scr[d].buffer = be->scratch[d];
        scr[d].data = be->scratch[d]->iface->get_base(be->scratch[d]);
    }
    size_t P = 1;
    while (P * 2 <= n) P *= 2;
    int peer[META_MAX_DEV];
    /* fold the extra devices into the first ones */
    if (P < n) {
        for (size_t d = 0; d < n; d++) peer[d] = d < n - P ? (int)(d + P) : -1;
        if ((st = exchange(be, loc, scr, peer, adds)) != BP_OK) return st;
    }
    for (size_t k = 1; k < P; k *= 2) {
        for (size_t d = 0; d < n; d++) peer[d] = d < P ? (int)(d ^ k) : -1;
        if ((st = exchange(be, loc, scr, peer, adds)) != BP_OK) return st;
    }
    for (size_t d = P; d < n && st == BP_OK; d++) st = meta_copy_tensor(loc[d - P], loc[d]);
    return st;
}

bp_status meta_allreduce_by(struct meta_backend *be, size_t p, struct bp_tensor **loc)
{
    const struct meta_ar_path *path = &be->paths[p];
    if (!path->comm) return butterfly(be, loc);
    bp_status st = path->allreduce(path->comm, loc, be->n);
    for (size_t d = 0; d < be->n && st == BP_OK; d++) st = meta_sub_synchronize(be->sub[d]);
    return st;
}

bp_status meta_allreduce(struct meta_backend *be, struct bp_tensor *t)
{
    struct meta_tensor *mt = meta_tensor_of(t);
    struct bp_tensor *loc[META_MAX_DEV];
    for (size_t d = 0; d < be->n; d++) loc[d] = &mt->local[d];
    if (be->n == 1) return BP_OK;
    int p = be->fixed_path;
    if (p == META_AR_AUTO) p = meta_ar_auto_path(be, bp_nbytes(t), true, true);
    if (p < 0) return BP_ERR_INVALID_ARGUMENT; /* unreachable: measure always yields a path */
    const bool comm = be->paths[p].comm != NULL;
    if (comm) be->stats.comm_calls++;
    bp_status st = meta_allreduce_by(be, (size_t)p, loc);
    if (st != BP_ERR_UNSUPPORTED || !comm) return st;
    /* a registry may decline any one call; the butterfly takes it */
    be->stats.comm_declined++;
    return butterfly(be, loc);
}
