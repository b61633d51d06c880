/* loader_scan.c — where plugins are looked for: BACKPLANE_PLUGIN_PATH, the
 * directory beside libbackplane, the install directory. Never the current
 * directory. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loader_internal.h"

#define NAME_PREFIX "libbackplane-"
#define NAME_SUFFIX ".so"

static bool family_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static bool variant_char(char c)
{
    return family_char(c) || c == '-';
}

bool bp__parse_plugin_name(const char *base, char **family, char **variant)
{
    size_t pre = strlen(NAME_PREFIX), suf = strlen(NAME_SUFFIX), n = strlen(base);
    if (n <= pre + suf || strncmp(base, NAME_PREFIX, pre) != 0 ||
        strcmp(base + n - suf, NAME_SUFFIX) != 0)
        return false;
    const char *s = base + pre, *end = base + n - suf;
    const char *dash = memchr(s, '-', (size_t)(end - s));
    const char *fend = dash ? dash : end;
    if (fend == s) return false;
    for (const char *p = s; p < fend; p++)
        if (!family_char(*p)) return false;
    if (dash) {
        if (dash + 1 == end) return false;
        for (const char *p = dash + 1; p < end; p++)
            if (!variant_char(*p)) return false;
    }
    char *f = strndup(s, (size_t)(fend - s));
    char *v = dash ? strndup(dash + 1, (size_t)(end - dash - 1)) : strdup("");
    if (!f || !v) {
        free(f);
        free(v);
        return false;
    }
    *family = f;
    *variant = v;
    return true;
}

void bp__candidates_free(struct bp__candidates *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].path);
        free(c->v[i].family);
        free(c->v[i].variant);
    }
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
}

static bool already_seen(const struct bp__candidates *c, const char *real)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].path, real)) return true;
    return false;
}

/* Add one file. `explicit_file`: named in BACKPLANE_PLUGIN_PATH, so a bad
 * name is worth a record instead of a silent skip. */
static bp_status add_file(struct bp__candidates *c, const char *path, int location,
                          bool explicit_file)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        bp__log(BP_LOG_DEBUG, "backplane", "skipping %s: it cannot be resolved.", path);
        return BP_OK;
    }
    /* The name it was found under decides the family: a symlink
     * libbackplane-cpu.so -> build/cpu-avx2.so is the cpu family. */
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *family = NULL, *variant = NULL;
    if (!bp__parse_plugin_name(base, &family, &variant)) {
        if (explicit_file) {
            struct bp__refusal r;
            bp__refuse(&r, BP_PLUGIN_FAIL_BAD_NAME,
                       "Rename it libbackplane-<family>[-<variant>].so, with a lower-case family.",
                       "its file name %s is not of the form libbackplane-<family>[-<variant>].so.",
                       base);
            bp__record_failure(real, "", &r);
        } else {
            bp__log(BP_LOG_DEBUG, "backplane", "skipping %s: not a plugin file name.", real);
        }
        return BP_OK;
    }
    if (already_seen(c, real)) {
        bp__log(BP_LOG_DEBUG, "backplane", "skipping %s: already found earlier in the search.",
                real);
        free(family);
        free(variant);
        return BP_OK;
    }
    struct bp__candidate *v = bp__grow(c->v, sizeof *v, c->n, &c->cap, 16);
    if (v) c->v = v;
    char *p = v ? strdup(real) : NULL;
    if (!p) {
        free(family);
        free(variant);
        return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory listing plugin files.");
    }
    c->v[c->n++] = (struct bp__candidate){
        .path = p, .family = family, .variant = variant, .location = location};
    bp__log(BP_LOG_DEBUG, "backplane", "found %s (family %s%s%s).", real, family,
            *variant ? ", variant " : "", variant);
    return BP_OK;
}

/* Everything but . and ..: BACKPLANE_LOG=debug tells why each file was
 * skipped. */
static int plugin_entry_filter(const struct dirent *e)
{
    return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

static bp_status add_dir(struct bp__candidates *c, const char *dir, int location)
{
    struct dirent **names = NULL;
    /* alphasort: the same files give the same order on every machine. */
    int n = scandir(dir, &names, plugin_entry_filter, alphasort);
    if (n < 0) {
        bp__log(BP_LOG_DEBUG, "backplane", "cannot read directory %s; skipping it.", dir);
        return BP_OK;
    }
    bp__log(BP_LOG_DEBUG, "backplane", "searching %s.", dir);
    bp_status st = BP_OK;
    for (int i = 0; i < n; i++) {
        if (st == BP_OK) {
            size_t len = strlen(dir) + 1 + strlen(names[i]->d_name) + 1;
            char *path = malloc(len);
            if (!path) {
                st = bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory listing plugin files.");
            } else {
                snprintf(path, len, "%s/%s", dir, names[i]->d_name);
                struct stat sb;
                if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
                    st = add_file(c, path, location, false);
                else
                    bp__log(BP_LOG_DEBUG, "backplane", "skipping %s: not a regular file.", path);
                free(path);
            }
        }
        free(names[i]);
    }
    free(names);
    return st;
}

static bp_status add_entry(struct bp__candidates *c, const char *entry, int location,
                           bool from_env)
{
    struct stat sb;
    if (stat(entry, &sb) != 0) {
        bp__log(from_env ? BP_LOG_WARN : BP_LOG_DEBUG, "backplane",
                "%s%s does not exist; skipping it.", from_env ? "BACKPLANE_PLUGIN_PATH entry " : "",
                entry);
        return BP_OK;
    }
    if (S_ISDIR(sb.st_mode)) return add_dir(c, entry, location);
    return add_file(c, entry, location, from_env);
}

static bp_status scan_env_path(struct bp__candidates *c, int *location)
{
    const char *env = bp__getenv("BACKPLANE_PLUGIN_PATH");
    if (!env || !*env) return BP_OK;
    char *copy = strdup(env);
    if (!copy) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory reading BACKPLANE_PLUGIN_PATH.");
    bp_status st = BP_OK;
    char *save = NULL;
    for (char *e = strtok_r(copy, ":", &save); e && st == BP_OK; e = strtok_r(NULL, ":", &save)) {
        if (e[0] != '/') {
            /* A relative entry would be resolved against the current
             * directory, which is exactly where plugins must not come from. */
            bp__log(BP_LOG_WARN, "backplane",
                    "BACKPLANE_PLUGIN_PATH entry '%s' is relative and is ignored (it would "
                    "depend on the current directory); use an absolute path.", e);
            continue;
        }
        st = add_entry(c, e, (*location)++, true);
    }
    free(copy);
    return st;
}

/* <directory of libbackplane.so>/BP_PLUGIN_SUBDIR, so a build tree or a
 * relocated install finds its own plugins. */
static bp_status scan_beside_library(struct bp__candidates *c, int *location)
{
    Dl_info info;
    if (!dladdr((void *)&bp_load_plugins, &info) || !info.dli_fname) {
        bp__log(BP_LOG_DEBUG, "backplane", "cannot tell where libbackplane lives; skipping the "
                                           "plugin directory beside it.");
        return BP_OK;
    }
    char real[PATH_MAX];
    if (!realpath(info.dli_fname, real)) return BP_OK;
    char *slash = strrchr(real, '/');
    if (!slash) return BP_OK;
    *slash = '\0';
    size_t len = strlen(real) + 1 + strlen(BP_PLUGIN_SUBDIR) + 1;
    char *dir = malloc(len);
    if (!dir) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory listing plugin directories.");
    snprintf(dir, len, "%s/%s", real, BP_PLUGIN_SUBDIR);
    bp_status st = add_entry(c, dir, (*location)++, false);
    free(dir);
    return st;
}

bp_status bp__scan_candidates(struct bp__candidates *out)
{
    int location = 0;
    bp_status st = scan_env_path(out, &location);
    if (st == BP_OK) st = scan_beside_library(out, &location);
    if (st == BP_OK) st = add_entry(out, BP_INSTALL_PLUGIN_DIR, location++, false);
    return st;
}
