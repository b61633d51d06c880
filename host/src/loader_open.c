/* loader_open.c — the checks one plugin file goes through, in order: dlopen,
 * entry symbols, ABI major, variant score, init, registry. Each refusal
 * fills a bp__refusal with the key fact and a remedy. Shared by the loader
 * and the probe child. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "loader_internal.h"

#define CANNOT_OPEN ": cannot open shared object file"

/* A dlerror() text into a refusal. glibc says "<lib>: cannot open shared
 * object file: ..." both for the plugin itself and for a library it needs;
 * the name tells which. */
static bool refuse_dlopen(const char *path, const char *err, struct bp__refusal *r)
{
    if (strstr(err, "invalid ELF header") || strstr(err, "file too short") ||
        strstr(err, "not an ELF") || strstr(err, "ELF load command"))
        return bp__refuse(r, BP_PLUGIN_FAIL_NOT_SHARED_OBJECT,
                          "Remove it from the plugin directory, or replace it with a plugin "
                          "built for this machine.",
                          "it is not an ELF shared object (%s).", err);
    const char *m = strstr(err, CANNOT_OPEN);
    if (m) {
        /* The library name is the text between the previous ": " and m. */
        const char *start = err;
        for (const char *p = err; p + 1 < m; p++)
            if (p[0] == ':' && p[1] == ' ') start = p + 2;
        char lib[200];
        size_t len = (size_t)(m - start);
        if (len >= sizeof lib) len = sizeof lib - 1;
        memcpy(lib, start, len);
        lib[len] = '\0';
        if (strcmp(lib, path) != 0) {
            char remedy[320];
            snprintf(remedy, sizeof remedy,
                     "Install the package that provides %s, or add its directory to "
                     "LD_LIBRARY_PATH.", lib);
            return bp__refuse(r, BP_PLUGIN_FAIL_MISSING_DEPENDENCY, remedy,
                              "it needs the library %s, which cannot be found.", lib);
        }
    }
    if (strstr(err, "wrong ELF class"))
        return bp__refuse(r, BP_PLUGIN_FAIL_NOT_SHARED_OBJECT,
                          "Install the build of this plugin for this machine's architecture.",
                          "it was built for another architecture (%s).", err);
    return bp__refuse(r, BP_PLUGIN_FAIL_DLOPEN,
                      "Check the file's permissions and that its dependencies match this "
                      "system (ldd shows them).",
                      "dlopen failed: %s.", err);
}

bool bp__open_plugin(const struct bp__candidate *c, struct bp__opened *o, struct bp__refusal *r)
{
    memset(o, 0, sizeof *o);
    bp__log(BP_LOG_DEBUG, "backplane", "opening %s.", c->path);
    dlerror();
    void *h = dlopen(c->path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        return refuse_dlopen(c->path, err ? err : "unknown error", r);
    }

    bp_plugin_abi_version_fn abi = (bp_plugin_abi_version_fn)dlsym(h, BP_PLUGIN_ABI_VERSION_SYMBOL);
    bp_plugin_init_fn init = (bp_plugin_init_fn)dlsym(h, BP_PLUGIN_INIT_SYMBOL);
    if (!abi || !init) {
        dlclose(h);
        return bp__refuse(r, BP_PLUGIN_FAIL_MISSING_ENTRY,
                          "Build the plugin with BP_PLUGIN_DEFINE() from <backplane/bp_plugin.h>, "
                          "which exports both entry symbols.",
                          "it does not export %s, so it is not a backplane plugin.",
                          !abi ? BP_PLUGIN_ABI_VERSION_SYMBOL "()" : BP_PLUGIN_INIT_SYMBOL "()");
    }

    uint32_t v = abi();
    if (BP_ABI_VERSION_MAJOR(v) != BP_ABI_MAJOR) {
        unsigned pmaj = BP_ABI_VERSION_MAJOR(v), pmin = BP_ABI_VERSION_MINOR(v);
        char remedy[320];
        if (pmaj > BP_ABI_MAJOR)
            snprintf(remedy, sizeof remedy,
                     "Upgrade backplane to a version that speaks ABI %u, or rebuild the plugin "
                     "against the ABI %u.x headers.", pmaj, (unsigned)BP_ABI_MAJOR);
        else
            snprintf(remedy, sizeof remedy,
                     "Rebuild the plugin against this backplane's ABI %u.x headers.",
                     (unsigned)BP_ABI_MAJOR);
        dlclose(h);
        return bp__refuse(r, BP_PLUGIN_FAIL_ABI_MAJOR, remedy,
                          "it was built for ABI %u.%u, this host speaks %u.%u.", pmaj, pmin,
                          (unsigned)BP_ABI_MAJOR, (unsigned)BP_ABI_MINOR);
    }
    /* A newer minor loads unless the plugin says it needs a newer host. */
    bp_plugin_min_host_version_fn min_host =
        (bp_plugin_min_host_version_fn)dlsym(h, BP_PLUGIN_MIN_HOST_SYMBOL);
    uint32_t need = min_host ? min_host() : 0;
    if (need > BP_ABI_VERSION) {
        char remedy[320];
        snprintf(remedy, sizeof remedy,
                 "Upgrade backplane to ABI %u.%u or newer, or install a build of the plugin "
                 "made for ABI %u.%u.", (unsigned)BP_ABI_VERSION_MAJOR(need),
                 (unsigned)BP_ABI_VERSION_MINOR(need), (unsigned)BP_ABI_MAJOR,
                 (unsigned)BP_ABI_MINOR);
        dlclose(h);
        return bp__refuse(r, BP_PLUGIN_FAIL_ABI_MINOR, remedy,
                          "it needs a host of ABI %u.%u or newer (%s), this host speaks %u.%u.",
                          (unsigned)BP_ABI_VERSION_MAJOR(need),
                          (unsigned)BP_ABI_VERSION_MINOR(need), BP_PLUGIN_MIN_HOST_SYMBOL "()",
                          (unsigned)BP_ABI_MAJOR, (unsigned)BP_ABI_MINOR);
    }
    if (BP_ABI_VERSION_MINOR(v) > BP_ABI_MINOR)
        bp__log(BP_LOG_DEBUG, "backplane",
                "%s was built for ABI %u.%u, newer than this host's %u.%u; features of the "
                "newer minor are unavailable.", c->path, (unsigned)BP_ABI_VERSION_MAJOR(v),
                (unsigned)BP_ABI_VERSION_MINOR(v), (unsigned)BP_ABI_MAJOR,
                (unsigned)BP_ABI_MINOR);

    bp_plugin_score_fn score = (bp_plugin_score_fn)dlsym(h, BP_PLUGIN_SCORE_SYMBOL);
    bp_plugin_composes_fn composes = (bp_plugin_composes_fn)dlsym(h, BP_PLUGIN_COMPOSES_SYMBOL);
    o->composes = composes && composes();
    o->handle = h;
    o->abi_version = v;
    o->score = score ? score() : 1;
    if (o->score < 0) o->score = 0;
    bp__log(BP_LOG_DEBUG, "backplane", "%s: ABI %u.%u, score %d%s.", c->path,
            (unsigned)BP_ABI_VERSION_MAJOR(v), (unsigned)BP_ABI_VERSION_MINOR(v), o->score,
            score ? "" : " (no score entry)");
    return true;
}

static const char table_remedy[] =
    "Fix the plugin: every table must start with its size and fill the required fields "
    "bp_plugin.h marks (docs/plugins.md lists them).";

/* Device i: a table that reaches its required fields, and a name. Its
 * buffer type is checked when handed out (bp_device_buffer_type): a device
 * forwarding to another plugin's may not have one yet at load time. */
static bool check_device(struct bp_device *d, size_t i, size_t n, struct bp__refusal *r)
{
    char why[160];
    if (!d)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, table_remedy,
                          "its registry's get_device returned NULL for device %zu of %zu.", i, n);
    struct bp_iface_problem p = bp_device_iface_check(d->iface);
    if (p.field)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, table_remedy,
                          "the table of its device %zu (bp_device_iface) %s.", i,
                          bp_iface_problem_text(p, why, sizeof why));
    const char *dn = d->iface->get_name(d);
    if (!dn || !*dn)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, table_remedy,
                          "its device %zu of %zu has no name (get_name returned %s).", i, n,
                          dn ? "\"\"" : "NULL");
    return true;
}

/* A registry the host can use: tables that reach their required fields,
 * the ABI version of its entry symbol, the family of its file name, and
 * devices that pass check_device. */
static bool check_registry(const struct bp__candidate *c, const struct bp__opened *o,
                           struct bp_registry *reg, size_t *n_devices, struct bp__refusal *r)
{
    char why[160];
    if (!reg)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, table_remedy,
                          "bp_plugin_init returned BP_OK but no registry.");
    struct bp_iface_problem p = bp_registry_iface_check(reg->iface);
    if (p.field)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, table_remedy,
                          "its registry table (bp_registry_iface) %s.",
                          bp_iface_problem_text(p, why, sizeof why));
    if (reg->abi_version != o->abi_version) {
        bool major = BP_ABI_VERSION_MAJOR(reg->abi_version) != BP_ABI_VERSION_MAJOR(o->abi_version);
        return bp__refuse(r, major ? BP_PLUGIN_FAIL_ABI_MAJOR : BP_PLUGIN_FAIL_BAD_REGISTRY,
                          "Rebuild the plugin so that its registry and its exported version "
                          "come from the same headers (set abi_version = BP_ABI_VERSION).",
                          "its registry says ABI %u.%u but its %s says %u.%u.",
                          (unsigned)BP_ABI_VERSION_MAJOR(reg->abi_version),
                          (unsigned)BP_ABI_VERSION_MINOR(reg->abi_version),
                          BP_PLUGIN_ABI_VERSION_SYMBOL "()",
                          (unsigned)BP_ABI_VERSION_MAJOR(o->abi_version),
                          (unsigned)BP_ABI_VERSION_MINOR(o->abi_version));
    }
    const struct bp_registry_iface *ri = reg->iface;
    const char *name = ri->get_name(reg);
    if (!name || strcmp(name, c->family) != 0)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY,
                          "Rename the file after the family its registry reports, or fix "
                          "get_name.",
                          "its registry calls itself '%s' but the file name says family '%s'.",
                          name ? name : "(null)", c->family);
    size_t n = ri->get_device_count(reg);
    for (size_t i = 0; i < n; i++)
        if (!check_device(ri->get_device(reg, i), i, n, r)) return false;
    if (!bp__devices_check_names(reg, n, c->family, r)) return false;
    *n_devices = n;
    return true;
}

/* Residency: once init succeeded the plugin may own threads and has handed
 * out strings and tables, so it must never be unmapped. A second reference,
 * opened RTLD_NODELETE and never closed, pins it whatever the loader's own
 * handle does later (dlclose on refusal or bp_unload). */
static void pin_resident(const char *path)
{
    dlerror();
    if (!dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) {
        const char *err = dlerror();
        bp__log(BP_LOG_WARN, "backplane",
                "cannot pin %s resident (%s); it may be unmapped at bp_unload.", path,
                err ? err : "unknown error");
    }
}

bool bp__init_plugin(const struct bp__candidate *c, struct bp__opened *o, struct bp__refusal *r)
{
    bp_plugin_init_fn init = (bp_plugin_init_fn)dlsym(o->handle, BP_PLUGIN_INIT_SYMBOL);
    struct bp_registry *reg = NULL;
    bp__plugin_log_capture_begin();
    bp_status s = init ? init(bp__host_services(), &reg) : BP_ERR_NOT_FOUND;
    const char *said = bp__plugin_log_capture_end();
    if (s != BP_OK) {
        if (*said) {
            char last = said[strlen(said) - 1];
            return bp__refuse(r, BP_PLUGIN_FAIL_INIT,
                              "Fix what the plugin's message says, or remove the plugin.",
                              "bp_plugin_init returned %s: %s%s", bp_status_name(s), said,
                              (last == '.' || last == '!' || last == '?') ? "" : ".");
        }
        return bp__refuse(r, BP_PLUGIN_FAIL_INIT,
                          "Run with BACKPLANE_LOG=debug for the plugin's own messages, or "
                          "remove the plugin.",
                          "bp_plugin_init returned %s without saying why.", bp_status_name(s));
    }
    pin_resident(c->path);
    if (!check_registry(c, o, reg, &o->n_devices, r)) {
        void (*shutdown)(struct bp_registry *) = NULL;
        if (reg && reg->iface && reg->iface->size <= BP_IFACE_MAX_SIZE)
            shutdown = BP_IFACE_GET(reg->iface, shutdown);
        if (shutdown) shutdown(reg);
        return false;
    }
    o->reg = reg;
    return true;
}
