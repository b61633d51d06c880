/* allreduce_paths.c — which all-reduce paths a meta backend has and which
 * one BACKPLANE_META_ALLREDUCE fixes. The sub-devices' registry offers its
 * collective when every sub-device comes from it: one path "comm", or, when
 * it names several (BP_PROC_COMM_PATHS), "comm:<name>" each. The butterfly
 * (tensor copies and ADD graphs) works over any mix and is always last. */
#include <stdio.h>
#include <string.h>

#include <backplane/bp_dist.h>

#include "meta_internal.h"

#define ENV_NAME "BACKPLANE_META_ALLREDUCE"
#define BUTTERFLY "butterfly"

typedef void *(*proc_fn)(struct bp_registry *, const char *);

/* The shared registry's proc lookup, or NULL when the sub-devices come from
 * several registries (no collective spans them). */
static proc_fn shared_proc(struct bp_device *const *sub, size_t n, struct bp_registry **reg)
{
    struct bp_registry *r = sub[0]->reg;
    for (size_t i = 1; i < n; i++)
        if (sub[i]->reg != r) return NULL;
    *reg = r;
    return r ? BP_IFACE_GET(r->iface, get_proc_address) : NULL;
}

/* The registry's path names: "comm" for a single collective, "comm:<name>"
 * for each named one; returns how many (0: none). */
static size_t registry_paths(struct bp_device *const *sub, size_t n, char names[][BP_META_ALLREDUCE_PATH_LEN],
                             const char **raw, size_t cap)
{
    struct bp_registry *r = NULL;
    proc_fn proc = n > 1 ? shared_proc(sub, n, &r) : NULL;
    if (!proc || !proc(r, BP_PROC_COMM_INIT) || !proc(r, BP_PROC_COMM_ALLREDUCE_TENSOR)) return 0;
    bp_comm_paths_fn list = (bp_comm_paths_fn)proc(r, BP_PROC_COMM_PATHS);
    size_t k = list && proc(r, BP_PROC_COMM_INIT_PATH) ? list(raw, cap) : 0;
    if (k > cap) k = cap;
    if (k == 0) {
        raw[0] = NULL;
        snprintf(names[0], BP_META_ALLREDUCE_PATH_LEN, "comm");
        return 1;
    }
    for (size_t i = 0; i < k; i++)
        snprintf(names[i], BP_META_ALLREDUCE_PATH_LEN, "comm:%s", raw[i] ? raw[i] : "?");
    return k;
}

void meta_ar_describe(struct meta_device *md, char *buf, size_t cap)
{
    char names[META_AR_MAX_PATHS][BP_META_ALLREDUCE_PATH_LEN];
    const char *raw[META_AR_MAX_PATHS];
    size_t k = registry_paths(md->sub, md->n, names, raw, META_AR_MAX_PATHS - 1);
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < k && used < cap; i++) used += (size_t)snprintf(buf + used, cap - used, "%s, ", names[i]);
    if (used < cap) snprintf(buf + used, cap - used, BUTTERFLY);
}

static void close_paths(struct meta_backend *be)
{
    for (size_t i = 0; i < be->n_paths; i++)
        if (be->paths[i].comm && be->paths[i].free) be->paths[i].free(be->paths[i].comm);
    be->n_paths = 0;
}

/* "auto" (or unset), "comm", "butterfly" or one path's name. */
static bp_status fix_path(struct meta_backend *be)
{
    const char *env = meta_host->get_env(ENV_NAME);
    be->fixed_path = META_AR_AUTO;
    for (int c = 0; c < BP_META_ALLREDUCE_CLASSES; c++) be->class_path[c] = -1;
    if (!env || !*env || !strcmp(env, "auto")) return BP_OK;
    if (!strcmp(env, "comm")) {
        /* the registry's first path (the behaviour before auto); without a
         * registry collective that is the butterfly */
        be->fixed_path = 0;
        return BP_OK;
    }
    for (size_t i = 0; i < be->n_paths; i++)
        if (!strcmp(env, be->paths[i].name)) {
            be->fixed_path = (int)i;
            return BP_OK;
        }
    char list[256];
    size_t used = 0;
    for (size_t i = 0; i < be->n_paths && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, ", %s", be->paths[i].name);
    meta_log(BP_LOG_ERROR, "%s='%s' is no all-reduce path of %s; set auto, comm%s (see `backplane check "
             "--comm %s`).", ENV_NAME, env, be->md->name, list, be->md->name);
    return BP_ERR_INVALID_ARGUMENT;
}

/* The slots of a dist: device (bp_dist.h) span processes: only their
 * registry's collective reaches the other ranks, and every other slot is a
 * placeholder that reads zeros, so the butterfly cannot sum them and a
 * probe cannot verify them. There the collective is the path in any mode. */
static bool spans_processes(struct meta_backend *be)
{
    struct bp_registry *r = NULL;
    if (be->n < 2 || !shared_proc(be->md->sub, be->n, &r) || !r->iface->get_name) return false;
    const char *name = r->iface->get_name(r);
    return name && !strcmp(name, BP_DIST_REGISTRY);
}

bp_status meta_ar_paths_open(struct meta_backend *be)
{
    char names[META_AR_MAX_PATHS][BP_META_ALLREDUCE_PATH_LEN];
    const char *raw[META_AR_MAX_PATHS];
    size_t k = registry_paths(be->md->sub, be->n, names, raw, META_AR_MAX_PATHS - 1);
    struct bp_registry *r = NULL;
    proc_fn proc = k ? shared_proc(be->md->sub, be->n, &r) : NULL;
    be->n_paths = 0;
    for (size_t i = 0; i < k; i++) {
        struct meta_ar_path *p = &be->paths[be->n_paths];
        bp_status st;
        if (raw[i]) {
            bp_comm_init_path_fn init = (bp_comm_init_path_fn)proc(r, BP_PROC_COMM_INIT_PATH);
            st = init(be->sub, be->n, raw[i], &p->comm);
        } else {
            st = ((bp_comm_init_fn)proc(r, BP_PROC_COMM_INIT))(be->sub, be->n, &p->comm);
        }
        if (st != BP_OK || !p->comm) {
            /* a declined communicator is no path for these backends */
            if (st != BP_ERR_UNSUPPORTED)
                meta_log(BP_LOG_WARN, "%s: all-reduce path %s did not start (%s); the others remain.",
                         be->md->name, names[i], bp_status_name(st));
            p->comm = NULL;
            continue;
        }
        memcpy(p->name, names[i], sizeof p->name);
        p->allreduce = (bp_comm_allreduce_tensor_fn)proc(r, BP_PROC_COMM_ALLREDUCE_TENSOR);
        p->free = (bp_comm_free_fn)proc(r, BP_PROC_COMM_FREE);
        be->n_paths++;
    }
    be->paths[be->n_paths++] = (struct meta_ar_path){.name = BUTTERFLY};
    bp_status st = fix_path(be);
    if (st != BP_OK) close_paths(be);
    else if (be->n_paths > 1 && spans_processes(be)) be->fixed_path = 0;
    return st;
}

void meta_ar_paths_close(struct meta_backend *be) { close_paths(be); }
