/* loader.c — discovery on first use, family selection (BACKPLANE_BACKENDS,
 * variants, duplicates), the loaded-plugin list, and unloading. */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

struct plugin {
    struct bp_plugin_info info; /* strings owned */
    void *handle;
};

static pthread_mutex_t load_mutex = PTHREAD_MUTEX_INITIALIZER;
static int loaded;                      /* atomic: discovery has run */
static _Thread_local bool in_load;      /* this thread is inside discovery */
static struct plugin *plugins;
static size_t n_plugins, cap_plugins;

/* ---- small helpers ---- */

struct strlist {
    char **v;
    size_t n;
};

static void strlist_free(struct strlist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static bool strlist_has(const struct strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s)) return true;
    return false;
}

static bp_status strlist_push(struct strlist *l, const char *s)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory while loading plugins.");
    l->v = v;
    if (!(l->v[l->n] = strdup(s)))
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory while loading plugins.");
    l->n++;
    return BP_OK;
}

/* BACKPLANE_BACKENDS="cuda, cpu" -> {"cuda", "cpu"}; blanks and repeats dropped. */
static bp_status parse_backends(const char *env, struct strlist *out)
{
    char *copy = strdup(env);
    if (!copy) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory reading BACKPLANE_BACKENDS.");
    bp_status st = BP_OK;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && st == BP_OK; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ' || *t == '\t') t++;
        char *e = t + strlen(t);
        while (e > t && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
        if (*t && !strlist_has(out, t)) st = strlist_push(out, t);
    }
    free(copy);
    return st;
}

static bp_status add_plugin(const struct bp__candidate *c, const struct bp__opened *o)
{
    struct plugin *v = bp__grow(plugins, sizeof *v, n_plugins, &cap_plugins, 8);
    if (!v) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory while loading plugins.");
    plugins = v;
    struct plugin p = {
        .info = {
            .family = strdup(c->family),
            .variant = strdup(c->variant),
            .path = strdup(c->path),
            .abi_version = o->abi_version,
            .score = o->score,
            .n_devices = o->n_devices,
            .reg = o->reg,
        },
        .handle = o->handle,
    };
    if (!p.info.family || !p.info.variant || !p.info.path) {
        free((char *)p.info.family);
        free((char *)p.info.variant);
        free((char *)p.info.path);
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory while loading plugins.");
    }
    plugins[n_plugins++] = p;
    for (size_t i = 0; i < o->n_devices; i++) {
        bp_status st = bp__devices_append(o->reg->iface->get_device(o->reg, i), c->family);
        if (st != BP_OK) return st;
    }
    bp__log(BP_LOG_INFO, "backplane", "loaded %s (family %s%s%s, score %d, %zu device%s).",
            c->path, c->family, *c->variant ? ", variant " : "", c->variant, o->score,
            o->n_devices, o->n_devices == 1 ? "" : "s");
    return BP_OK;
}

/* ---- one family ---- */

struct slot {
    const struct bp__candidate *c;
    struct bp__opened o;
    bool viable;
};

/* BACKPLANE_CPU_VARIANT for family "cpu". */
static void variant_var(const char *family, char *buf, size_t cap)
{
    snprintf(buf, cap, "BACKPLANE_%s_VARIANT", family);
    for (char *p = buf; *p; p++) *p = (char)toupper((unsigned char)*p);
}

static void close_slot(struct slot *s)
{
    if (s->o.handle) dlclose(s->o.handle);
    s->o.handle = NULL;
    s->viable = false;
}

/* Open every candidate of one family from one search location, then load
 * the best variant that can run. Returns the index of the winner or -1.
 * With defer_composing, a group whose plugin composes others' devices is
 * closed unloaded and *deferred set: the caller loads it again once every
 * other family is in. */
static ptrdiff_t load_group(struct slot *g, size_t n, const struct bp_load_options *opts,
                            bool defer_composing, bool *deferred)
{
    const char *family = g[0].c->family;
    size_t cannot_run = 0;
    for (size_t i = 0; i < n; i++) {
        struct bp__refusal r;
        unsigned timeout_s = BP__OPT(opts, probe_timeout_s, 0u);
        if (BP__OPT(opts, isolate_probe, false) &&
            !bp__probe_plugin(g[i].c, timeout_s ? timeout_s : 10, &r)) {
            bp__record_failure(g[i].c->path, family, &r);
            continue;
        }
        if (!bp__open_plugin(g[i].c, &g[i].o, &r)) {
            bp__record_failure(g[i].c->path, family, &r);
            continue;
        }
        if (g[i].o.score == 0) {
            bp__refuse(&r, BP_PLUGIN_FAIL_CANNOT_RUN,
                       "Nothing to do when another variant of the family loads; otherwise "
                       "install a variant built for this CPU.",
                       "its score entry says variant '%s' cannot run on this machine.",
                       g[i].c->variant);
            bp__record_failure(g[i].c->path, family, &r);
            close_slot(&g[i]);
            cannot_run++;
            continue;
        }
        g[i].viable = true;
        if (defer_composing && g[i].o.composes) *deferred = true;
    }
    if (*deferred) {
        for (size_t i = 0; i < n; i++) close_slot(&g[i]);
        return -1;
    }

    /* BACKPLANE_<FAMILY>_VARIANT picks one by name, among those that can run. */
    char var[128];
    variant_var(family, var, sizeof var);
    const char *forced = bp__getenv(var);
    ptrdiff_t forced_at = -1;
    if (forced && *forced) {
        for (size_t i = 0; i < n && forced_at < 0; i++)
            if (g[i].viable && !strcmp(g[i].c->variant, forced)) forced_at = (ptrdiff_t)i;
        if (forced_at < 0) {
            bp__log(BP_LOG_WARN, "backplane",
                    "%s=%s names no variant of %s that can run here; choosing by score instead.",
                    var, forced, family);
        } else {
            for (size_t i = 0; i < n; i++) {
                if (!g[i].viable || (ptrdiff_t)i == forced_at) continue;
                struct bp__refusal r;
                bp__refuse(&r, BP_PLUGIN_FAIL_FILTERED, "Unset the variable to choose by score.",
                           "%s=%s selects another variant.", var, forced);
                bp__record_failure(g[i].c->path, family, &r);
                close_slot(&g[i]);
            }
        }
    }

    /* Highest score first; equal scores keep file-name order. */
    ptrdiff_t winner = -1;
    for (;;) {
        ptrdiff_t best = -1;
        for (size_t i = 0; i < n; i++)
            if (g[i].viable && (best < 0 || g[i].o.score > g[best].o.score)) best = (ptrdiff_t)i;
        if (best < 0) break;
        struct slot *s = &g[best];
        s->viable = false;
        struct bp__refusal r;
        if (winner >= 0) {
            char remedy[256];
            snprintf(remedy, sizeof remedy, "Nothing to do; set %s=%s to force this variant.",
                     var, s->c->variant);
            bp__refuse(&r, BP_PLUGIN_FAIL_OUTSCORED, remedy,
                       "variant '%s' scored %d, below variant '%s' (%d), which was loaded.",
                       s->c->variant, s->o.score, g[winner].c->variant, g[winner].o.score);
            bp__record_failure(s->c->path, family, &r);
            close_slot(s);
            continue;
        }
        /* A plugin whose init succeeded is pinned resident: closing the
         * loader's handle below never unmaps it. */
        if (!bp__init_plugin(s->c, &s->o, &r)) {
            bp__record_failure(s->c->path, family, &r);
            close_slot(s);
            continue;
        }
        if (add_plugin(s->c, &s->o) != BP_OK) {
            /* Out of memory: the plugin list may already hold the handle,
             * so leave it to bp_unload (the plugin is pinned anyway). */
            s->o.handle = NULL;
            continue;
        }
        winner = best;
    }
    if (winner < 0 && cannot_run > 0 && cannot_run == n)
        bp__log(BP_LOG_WARN, "backplane",
                "no variant of %s can run on this machine (%zu tried); install a build for this "
                "CPU.", family, n);
    return winner;
}

static bp_status load_family(const char *family, const struct bp__candidates *all,
                             const struct bp_load_options *opts, bool defer_composing,
                             bool *deferred)
{
    struct slot *g = calloc(all->n ? all->n : 1, sizeof *g);
    if (!g) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory while loading plugins.");
    const char *winner_path = NULL;
    size_t i = 0;
    while (i < all->n) {
        if (strcmp(all->v[i].family, family) != 0) {
            i++;
            continue;
        }
        /* One search location at a time: the first that yields a working
         * plugin wins, files of the family elsewhere are duplicates. */
        int loc = all->v[i].location;
        size_t n = 0;
        for (size_t j = i; j < all->n && all->v[j].location == loc; j++) {
            if (strcmp(all->v[j].family, family) != 0) continue;
            memset(&g[n], 0, sizeof g[n]);
            g[n++].c = &all->v[j];
        }
        while (i < all->n && all->v[i].location == loc) i++;
        if (winner_path) {
            for (size_t k = 0; k < n; k++) {
                struct bp__refusal r;
                bp__refuse(&r, BP_PLUGIN_FAIL_DUPLICATE,
                           "Remove one of the two, or list the directory of the one you want "
                           "first in BACKPLANE_PLUGIN_PATH.",
                           "family '%s' was already loaded from %s.", family, winner_path);
                bp__record_failure(g[k].c->path, family, &r);
            }
            continue;
        }
        ptrdiff_t w = load_group(g, n, opts, defer_composing, deferred);
        if (*deferred) break;
        if (w >= 0) winner_path = g[w].c->path;
    }
    free(g);
    return BP_OK;
}

/* ---- discovery ---- */

static bp_status load_all(const struct bp_load_options *opts)
{
    bp__env_warn_unknown();
    struct bp__candidates cands = {0};
    struct strlist families = {0}, order = {0};
    bp_status st = bp__scan_candidates(&cands);

    for (size_t i = 0; st == BP_OK && i < cands.n; i++)
        if (!strlist_has(&families, cands.v[i].family))
            st = strlist_push(&families, cands.v[i].family);

    const char *backends = bp__getenv("BACKPLANE_BACKENDS");
    bool filtering = backends && *backends;
    if (st == BP_OK && filtering) {
        st = parse_backends(backends, &order);
        for (size_t i = 0; st == BP_OK && i < order.n; i++)
            if (!strlist_has(&families, order.v[i]))
                bp__log(BP_LOG_WARN, "backplane",
                        "BACKPLANE_BACKENDS names '%s' but no plugin of that family was found "
                        "(BACKPLANE_LOG=debug lists the paths searched).", order.v[i]);
        for (size_t i = 0; st == BP_OK && i < cands.n; i++) {
            if (strlist_has(&order, cands.v[i].family)) continue;
            struct bp__refusal r;
            char remedy[160];
            snprintf(remedy, sizeof remedy, "Add %s to BACKPLANE_BACKENDS to load it.",
                     cands.v[i].family);
            bp__refuse(&r, BP_PLUGIN_FAIL_FILTERED, remedy,
                       "filtered out by BACKPLANE_BACKENDS=%s.", backends);
            bp__record_failure(cands.v[i].path, cands.v[i].family, &r);
        }
    }

    /* A composing family (bp_plugin_composes) goes last unless the order is
     * explicit, so that its init sees every real device. */
    const struct strlist *fams = filtering ? &order : &families;
    struct strlist later = {0};
    for (size_t i = 0; st == BP_OK && i < fams->n; i++) {
        if (!strlist_has(&families, fams->v[i])) continue;
        bool deferred = false;
        st = load_family(fams->v[i], &cands, opts, !filtering, &deferred);
        if (st == BP_OK && deferred) st = strlist_push(&later, fams->v[i]);
    }
    for (size_t i = 0; st == BP_OK && i < later.n; i++) {
        bool deferred = false;
        st = load_family(later.v[i], &cands, opts, false, &deferred);
    }
    strlist_free(&later);

    strlist_free(&families);
    strlist_free(&order);
    bp__candidates_free(&cands);
    return st;
}

static void unload_at_exit(void)
{
    bp_unload();
}

bp_status bp_load_plugins(const struct bp_load_options *opts)
{
    /* Fast path once loaded; and a plugin calling back into us during its
     * own init must not deadlock on the load mutex. */
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE) || in_load) return BP_OK;
    static const struct bp_load_options defaults = {0};
    bp_status st = BP_OK;
    pthread_mutex_lock(&load_mutex);
    if (!__atomic_load_n(&loaded, __ATOMIC_RELAXED)) {
        static bool exit_hook;
        if (!exit_hook) exit_hook = atexit(unload_at_exit) == 0;
        in_load = true;
        st = load_all(opts ? opts : &defaults);
        in_load = false;
        /* Even after an out-of-memory failure: retrying on every call would
         * repeat the same warnings; bp_unload() allows a fresh attempt. */
        __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&load_mutex);
    return st;
}

void bp__ensure_loaded(void)
{
    bp_load_plugins(NULL);
}

void bp_unload(void)
{
    pthread_mutex_lock(&load_mutex);
    /* Reverse order: a composing plugin (meta) goes before what it wraps. */
    for (size_t i = n_plugins; i-- > 0;) {
        struct plugin *p = &plugins[i];
        struct bp_registry *reg = p->info.reg;
        void (*shutdown)(struct bp_registry *) = BP_IFACE_GET(reg->iface, shutdown);
        if (shutdown) shutdown(reg);
        /* Pinned at init (RTLD_NODELETE): this drops our reference, the
         * mappings stay (bp_plugin.h, "Lifetime"). */
        if (p->handle) dlclose(p->handle);
        free((char *)p->info.family);
        free((char *)p->info.variant);
        free((char *)p->info.path);
    }
    free(plugins);
    plugins = NULL;
    n_plugins = cap_plugins = 0;
    bp__devices_clear();
    bp__failures_clear();
    __atomic_store_n(&loaded, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&load_mutex);
}

/* ---- queries ---- */

size_t bp_plugin_count(void)
{
    bp__ensure_loaded();
    return n_plugins;
}

const struct bp_plugin_info *bp_plugin_get(size_t index)
{
    bp__ensure_loaded();
    if (index >= n_plugins) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "plugin index %zu is out of range; %zu are loaded.",
                 index, n_plugins);
        return NULL;
    }
    return &plugins[index].info;
}

struct bp_registry *bp_registry_by_name(const char *family)
{
    bp__ensure_loaded();
    if (!family) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_registry_by_name was given a NULL family.");
        return NULL;
    }
    for (size_t i = 0; i < n_plugins; i++)
        if (!strcmp(plugins[i].info.family, family)) return plugins[i].info.reg;
    bp__fail(BP_ERR_NOT_FOUND, "no plugin of family '%s' is loaded; `backplane devices` lists "
                               "the plugins and why any were refused.", family);
    return NULL;
}

static void *registry_proc(struct bp_registry *reg, const char *name)
{
    void *(*proc)(struct bp_registry *, const char *) = BP_IFACE_GET(reg->iface, get_proc_address);
    return proc ? proc(reg, name) : NULL;
}

static struct plugin *family_plugin(const char *family, size_t len)
{
    for (size_t i = 0; i < n_plugins; i++)
        if (strlen(plugins[i].info.family) == len && !strncmp(plugins[i].info.family, family, len))
            return &plugins[i];
    return NULL;
}

bool bp__family_loaded(const char *family, size_t len)
{
    return family_plugin(family, len) != NULL;
}

void *bp__family_proc(const char *family, size_t len, const char *name)
{
    struct plugin *p = family_plugin(family, len);
    return p ? registry_proc(p->info.reg, name) : NULL;
}

void *bp__any_proc(const char *name)
{
    for (size_t i = 0; i < n_plugins; i++) {
        void *fn = registry_proc(plugins[i].info.reg, name);
        if (fn) return fn;
    }
    return NULL;
}
