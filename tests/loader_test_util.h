/* loader_test_util.h — set-up shared by the loader and device suites. */
#ifndef BP_LOADER_TEST_UTIL_H
#define BP_LOADER_TEST_UTIL_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#define FAULT BP_TEST_FAULT_DIR
#define BP_STR_(x) #x
#define BP_STR(x) BP_STR_(x)
#define SAFE(f) FAULT "/safe/libbackplane-" f ".so"
#define UNSAFE(f) FAULT "/unsafe/libbackplane-" f ".so"

/* Start from nothing loaded and exactly these variables (NULL unsets), so a
 * test reads the same in a forked child and in one long process. */
static inline void fresh(const char *plugin_path, const char *backends)
{
    static const char *const knobs[] = {"BACKPLANE_DEVICES", "BACKPLANE_FAKEVAR_VARIANT", NULL};
    for (const char *const *k = knobs; *k; k++) unsetenv(*k);
    if (plugin_path) setenv("BACKPLANE_PLUGIN_PATH", plugin_path, 1);
    else unsetenv("BACKPLANE_PLUGIN_PATH");
    if (backends) setenv("BACKPLANE_BACKENDS", backends, 1);
    else unsetenv("BACKPLANE_BACKENDS");
    bp_unload();
}

/* The failure record of the file whose real path ends with suffix. */
static inline const struct bp_plugin_failure *failure_for(const char *path)
{
    char real[PATH_MAX];
    const char *want = realpath(path, real) ? real : path;
    for (size_t i = 0; i < bp_plugin_failure_count(); i++) {
        const struct bp_plugin_failure *f = bp_plugin_failure_get(i);
        if (!strcmp(f->path, want)) return f;
    }
    return NULL;
}

static inline void assert_refused(const char *path, enum bp_plugin_failure_code code,
                                  const char *reason_part)
{
    const struct bp_plugin_failure *f = failure_for(path);
    ck_assert_msg(f != NULL, "no failure recorded for %s", path);
    ck_assert_msg(f->code == code, "%s: code %s, expected %s (reason: %s)", path,
                  bp_plugin_failure_code_name(f->code), bp_plugin_failure_code_name(code),
                  f->reason);
    if (reason_part)
        ck_assert_msg(strstr(f->reason, reason_part) != NULL, "reason '%s' lacks '%s'", f->reason,
                      reason_part);
    ck_assert_msg(f->remedy[0] != '\0', "%s: empty remedy", path);
}

/* Failures of the test's own plugins (the real plugin directory beside
 * libbackplane adds FILTERED records of its own). */
static inline size_t fault_failure_count(void)
{
    char real[PATH_MAX];
    if (!realpath(FAULT, real)) return 0;
    size_t n = 0, len = strlen(real);
    for (size_t i = 0; i < bp_plugin_failure_count(); i++)
        if (!strncmp(bp_plugin_failure_get(i)->path, real, len)) n++;
    return n;
}

static inline const struct bp_plugin_info *plugin_of(const char *family)
{
    for (size_t i = 0; i < bp_plugin_count(); i++)
        if (!strcmp(bp_plugin_get(i)->family, family)) return bp_plugin_get(i);
    return NULL;
}

#endif
