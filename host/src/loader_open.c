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
    if (BP_ABI_VERSION_MINOR(v) > BP_ABI_MINOR)
        bp__log(BP_LOG_DEBUG, "backplane",
                "%s was built for ABI %u.%u, newer than this host's %u.%u; features of the "
                "newer minor are unavailable.", c->path, (unsigned)BP_ABI_VERSION_MAJOR(v),
                (unsigned)BP_ABI_VERSION_MINOR(v), (unsigned)BP_ABI_MAJOR,
                (unsigned)BP_ABI_MINOR);

    bp_plugin_score_fn score = (bp_plugin_score_fn)dlsym(h, BP_PLUGIN_SCORE_SYMBOL);
    o->handle = h;
    o->abi_version = v;
    o->score = score ? score() : 1;
    if (o->score < 0) o->score = 0;
    bp__log(BP_LOG_DEBUG, "backplane", "%s: ABI %u.%u, score %d%s.", c->path,
            (unsigned)BP_ABI_VERSION_MAJOR(v), (unsigned)BP_ABI_VERSION_MINOR(v), o->score,
            score ? "" : " (no score entry)");
    return true;
}

/* A registry the host can use: tables present, family as the file says,
 * every device named. */
static bool check_registry(const struct bp__candidate *c, struct bp_registry *reg,
                           size_t *n_devices, struct bp__refusal *r)
{
    static const char remedy[] =
        "Fix the plugin: its registry must fill the bp_registry_iface required fields and "
        "name the family of its file.";
    const struct bp_registry_iface *ri = reg ? reg->iface : NULL;
    if (!reg || !ri)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, remedy,
                          "bp_plugin_init returned BP_OK but no registry%s.",
                          reg ? " interface table" : "");
    /* A size beyond any plausible table means garbage, not a newer minor. */
    if (ri->size < offsetof(struct bp_registry_iface, get_device) + sizeof ri->get_device ||
        ri->size > 65536)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, remedy,
                          "its registry table claims size %zu, which cannot hold the required "
                          "fields.", ri->size);
    if (!ri->get_name || !ri->get_device_count || !ri->get_device)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, remedy,
                          "its registry lacks %s.",
                          !ri->get_name ? "get_name"
                                        : !ri->get_device_count ? "get_device_count" : "get_device");
    const char *name = ri->get_name(reg);
    if (!name || strcmp(name, c->family) != 0)
        return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY,
                          "Rename the file after the family its registry reports, or fix "
                          "get_name.",
                          "its registry calls itself '%s' but the file name says family '%s'.",
                          name ? name : "(null)", c->family);
    size_t n = ri->get_device_count(reg);
    for (size_t i = 0; i < n; i++) {
        struct bp_device *d = ri->get_device(reg, i);
        const char *dn = (d && d->iface && d->iface->get_name) ? d->iface->get_name(d) : NULL;
        if (!dn || !*dn)
            return bp__refuse(r, BP_PLUGIN_FAIL_BAD_REGISTRY, remedy,
                              "its device %zu of %zu is %s.", i, n,
                              !d ? "NULL" : "unnamed (no interface table or get_name)");
    }
    *n_devices = n;
    return true;
}

bool bp__init_plugin(const struct bp__candidate *c, struct bp__opened *o, struct bp__refusal *r,
                     bool *keep_resident)
{
    *keep_resident = false;
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
    /* From here on the plugin may have threads running: it stays mapped. */
    *keep_resident = true;
    if (!check_registry(c, reg, &o->n_devices, r)) {
        if (reg && reg->iface && reg->iface->size <= 65536 && BP_IFACE_HAS(reg->iface, shutdown) &&
            reg->iface->shutdown)
            reg->iface->shutdown(reg);
        return false;
    }
    o->reg = reg;
    return true;
}
