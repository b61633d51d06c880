/* allreduce_auto.c — BACKPLANE_META_ALLREDUCE=auto: the first all-reduce of
 * a message-size class over a set of sub-devices measures every path of
 * that set (allreduce_probe.c), never chooses one whose sum was wrong, and
 * keeps the fastest right one for the process; later backends over the
 * same sub-devices find the choice made. A set's lock is held while one of
 * its classes is measured, so two threads never measure the same class. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_internal.h"

#define AUTO_ROUNDS 5

struct meta_ar_set {
    struct meta_ar_set *next;
    size_t n;
    struct bp_device *sub[META_MAX_DEV];
    char label[256];                     /* "cpu, cpu": the sub-devices, for messages */
    pthread_mutex_t lock;
    bool chosen[BP_META_ALLREDUCE_CLASSES];
    char choice[BP_META_ALLREDUCE_CLASSES][BP_META_ALLREDUCE_PATH_LEN];
    char reported_wrong[META_AR_MAX_PATHS][BP_META_ALLREDUCE_PATH_LEN]; /* said once each */
    size_t n_reported;
};

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct meta_ar_set *sets;

static struct meta_ar_set *set_of(struct meta_backend *be)
{
    pthread_mutex_lock(&sets_lock);
    struct meta_ar_set *s = sets;
    while (s && !(s->n == be->n && !memcmp(s->sub, be->md->sub, be->n * sizeof s->sub[0]))) s = s->next;
    if (!s && (s = calloc(1, sizeof *s)) != NULL) {
        s->n = be->n;
        memcpy(s->sub, be->md->sub, be->n * sizeof s->sub[0]);
        size_t used = 0;
        for (size_t d = 0; d < be->n && used < sizeof s->label; d++)
            used += (size_t)snprintf(s->label + used, sizeof s->label - used, "%s%s", d ? ", " : "",
                                     meta_sub_name(be->md->sub[d]));
        pthread_mutex_init(&s->lock, NULL);
        s->next = sets;
        sets = s;
    }
    pthread_mutex_unlock(&sets_lock);
    return s;
}

void meta_ar_sets_free_all(void)
{
    pthread_mutex_lock(&sets_lock);
    while (sets) {
        struct meta_ar_set *s = sets;
        sets = s->next;
        pthread_mutex_destroy(&s->lock);
        free(s);
    }
    pthread_mutex_unlock(&sets_lock);
}

static void report_wrong(struct meta_ar_set *s, const struct bp_meta_allreduce_probe *r, size_t bytes)
{
    for (size_t i = 0; i < s->n_reported; i++)
        if (!strcmp(s->reported_wrong[i], r->path)) return;
    if (s->n_reported < META_AR_MAX_PATHS) memcpy(s->reported_wrong[s->n_reported++], r->path, sizeof r->path);
    meta_log(BP_LOG_WARN, "all-reduce path %s over %s returned a wrong sum (off by up to %g at %zu bytes); "
             "it is never chosen, and `backplane check --comm` shows it.", r->path, s->label, r->max_abs_err, bytes);
}

/* Measures class c of set s on be (s->lock held) and records the choice. */
static void measure(struct meta_backend *be, struct meta_ar_set *s, int c)
{
    const size_t bytes = bp_meta_allreduce_class_bytes(c);
    struct bp_meta_allreduce_probe r[META_AR_MAX_PATHS];
    size_t n = 0;
    be->stats.allreduce_measured++;
    bp_status st = meta_ar_probe_be(be, bytes, AUTO_ROUNDS, r, META_AR_MAX_PATHS, &n);
    if (st != BP_OK) {
        /* the path used before auto existed: the registry's, else the butterfly */
        memcpy(s->choice[c], be->paths[0].name, sizeof s->choice[c]);
        s->chosen[c] = true;
        meta_log(BP_LOG_WARN, "could not measure all-reduce over %s at %zu bytes; using %s.", s->label, bytes,
                 s->choice[c]);
        return;
    }
    int best = -1;
    for (size_t p = 0; p < n; p++) {
        if (r[p].status == BP_OK && r[p].wrong) report_wrong(s, &r[p], bytes);
        if (r[p].status != BP_OK || r[p].wrong) continue;
        if (best < 0 || r[p].seconds < r[best].seconds) best = (int)p;
    }
    if (best < 0) {
        best = (int)n - 1;
        meta_log(BP_LOG_ERROR, "no all-reduce path over %s summed %zu bytes correctly, not even the butterfly; "
                 "a sub-device computes ADD wrong (run `backplane check` on each).", s->label, bytes);
    }
    memcpy(s->choice[c], r[best].path, sizeof s->choice[c]);
    s->chosen[c] = true;
    char others[256] = "";
    size_t used = 0;
    for (size_t p = 0; p < n && used < sizeof others; p++) {
        if ((int)p == best) continue;
        if (r[p].status != BP_OK)
            used += (size_t)snprintf(others + used, sizeof others - used, "; %s %s", r[p].path,
                                     r[p].status == BP_ERR_UNSUPPORTED ? "declined" : "failed");
        else
            used += (size_t)snprintf(others + used, sizeof others - used, "; %s %.1f us%s", r[p].path,
                                     r[p].seconds * 1e6, r[p].wrong ? " WRONG" : "");
    }
    meta_log(BP_LOG_INFO, "all-reduce over %s near %zu bytes takes %s (%.1f us%s).", s->label, bytes, r[best].path,
             r[best].seconds * 1e6, others);
}

static int path_index(const struct meta_backend *be, const char *name)
{
    for (size_t p = 0; p < be->n_paths; p++)
        if (!strcmp(be->paths[p].name, name)) return (int)p;
    return (int)be->n_paths - 1; /* another backend's path this one lacks: the butterfly */
}

int meta_ar_auto_path(struct meta_backend *be, size_t bytes, bool measure_now, bool count)
{
    const int c = bp_meta_allreduce_class_of(bytes);
    if (be->n_paths == 1) return 0; /* only the butterfly: nothing to choose */
    if (be->class_path[c] >= 0) {
        if (count) be->stats.allreduce_cached++;
        return be->class_path[c];
    }
    if (!be->ar_set && !(be->ar_set = set_of(be))) return 0; /* out of memory: the registry's path */
    struct meta_ar_set *s = be->ar_set;
    pthread_mutex_lock(&s->lock);
    bool was_chosen = s->chosen[c];
    if (!was_chosen && measure_now) measure(be, s, c);
    int p = s->chosen[c] ? path_index(be, s->choice[c]) : -1;
    pthread_mutex_unlock(&s->lock);
    if (was_chosen && count) be->stats.allreduce_cached++;
    if (p >= 0) be->class_path[c] = p;
    return p;
}

bp_status meta_ar_choice(struct bp_backend *b, size_t bytes, int32_t measure_now, char *path, size_t cap)
{
    if (!meta_is_meta_backend(b) || !path || cap == 0) {
        meta_log(BP_LOG_ERROR, "bp_meta_allreduce_choice needs a meta backend and a buffer for the path.");
        return BP_ERR_INVALID_ARGUMENT;
    }
    struct meta_backend *be = (struct meta_backend *)b;
    if (be->n == 1) {
        snprintf(path, cap, "none (one sub-device)");
        return BP_OK;
    }
    int p = be->fixed_path != META_AR_AUTO ? be->fixed_path : meta_ar_auto_path(be, bytes, measure_now != 0, false);
    snprintf(path, cap, "%s", p >= 0 ? be->paths[p].name : "not measured yet");
    return BP_OK;
}
