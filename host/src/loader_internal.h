/*
 * loader_internal.h — what the loader's files (loader*.c, probe.c, env.c,
 * devices.c, failures.c, host_services.c) share. Not installed.
 */
#ifndef BP_HOST_LOADER_INTERNAL_H
#define BP_HOST_LOADER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

/* ---- env.c ---- */

/* Every BACKPLANE_* variable the host or a shipped plugin reads, besides the
 * BACKPLANE_<FAMILY>_VARIANT pattern. NULL-terminated. */
BP_HIDDEN extern const char *const bp__known_env_vars[];
/* True for a known variable name or one of the form BACKPLANE_<FAMILY>_VARIANT. */
BP_HIDDEN bool bp__env_is_known(const char *name);
/* Levenshtein distance between two strings (bytes). */
BP_HIDDEN size_t bp__edit_distance(const char *a, const char *b);
/* The known variable closest to name, or NULL when none is close enough to
 * be a plausible typo. */
BP_HIDDEN const char *bp__env_suggest(const char *name);
/* Warn about every unknown BACKPLANE_* variable in the environment, once
 * per process. */
BP_HIDDEN void bp__env_warn_unknown(void);

/* ---- failures.c: the refused-plugin records ---- */

/* A failure before it is attached to a path: the probe child sends these. */
struct bp__refusal {
    enum bp_plugin_failure_code code;
    char reason[640];
    char remedy[320];
};
/* Fill r; returns false so a stage can `return bp__refuse(...)`. */
BP_HIDDEN bool bp__refuse(struct bp__refusal *r, enum bp_plugin_failure_code code,
                          const char *remedy, const char *reason_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Store a record (copies every string) and log it: info for FILTERED and
 * OUTSCORED, warn otherwise. */
BP_HIDDEN void bp__record_failure(const char *path, const char *family,
                                  const struct bp__refusal *r);
BP_HIDDEN void bp__failures_clear(void);

/* ---- host_services.c ---- */

/* While a plugin's init runs, remember the last warning/error it logs so the
 * INIT failure can quote it. */
BP_HIDDEN void bp__plugin_log_capture_begin(void);
/* Ends the capture; returns the message ("" when none), valid until the next
 * begin on this thread. */
BP_HIDDEN const char *bp__plugin_log_capture_end(void);

/* ---- devices.c: the device list, appended as registries load ---- */

/* Append dev under the name it is listed by (see bp__devices_check_names). */
BP_HIDDEN bp_status bp__devices_append(struct bp_device *dev, const char *family);
/* Device names are unique: a device whose name does not begin with its
 * family is listed as "<family>:<name>" (logged once at load); a listed name
 * that is still taken, by a loaded device or by another of this registry's,
 * refuses the plugin as DUPLICATE. The registry's tables are already
 * checked. Returns false with r filled. */
BP_HIDDEN bool bp__devices_check_names(struct bp_registry *reg, size_t n, const char *family,
                                       struct bp__refusal *r);
BP_HIDDEN void bp__devices_clear(void);
/* Without bp__ensure_loaded: what host services hand to plugins mid-load. */
BP_HIDDEN size_t bp__devices_count_loaded(void);
BP_HIDDEN struct bp_device *bp__devices_get_loaded(size_t index);
BP_HIDDEN struct bp_device *bp__devices_find_loaded(const char *name);

/* ---- identity.c ---- */

/* True for "uuid:..." and "pci:..." names. */
BP_HIDDEN bool bp__identity_is_selector(const char *name);
/* The loaded device a selector names (the first of several plugins' views of
 * one device), or NULL (a malformed or ambiguous selector is logged). */
BP_HIDDEN struct bp_device *bp__identity_find(const char *sel);
/* Warn once per later device of devs that is an earlier one's physical
 * device through another plugin; `what` names the list ("BACKPLANE_DEVICES"). */
BP_HIDDEN void bp__identity_warn_same(struct bp_device *const *devs, size_t n, const char *what);

/* ---- loader_scan.c: discovery ---- */

struct bp__candidate {
    char *path;      /* realpath */
    char *family;
    char *variant;   /* "" when the name has none */
    int   location;  /* index of the search-path entry it came from */
};
struct bp__candidates {
    struct bp__candidate *v;
    size_t n, cap;
};
/* Parse "libbackplane-<family>[-<variant>].so" (basename only). On success
 * the out strings are malloc'd. */
BP_HIDDEN bool bp__parse_plugin_name(const char *base, char **family, char **variant);
/* Walk BACKPLANE_PLUGIN_PATH, the directory beside libbackplane and the
 * install directory; BAD_NAME files are recorded as failures. */
BP_HIDDEN bp_status bp__scan_candidates(struct bp__candidates *out);
BP_HIDDEN void bp__candidates_free(struct bp__candidates *c);

/* ---- loader_open.c: the checks one file goes through ---- */

struct bp__opened {
    void *handle;
    uint32_t abi_version;
    int score;
    struct bp_registry *reg;
    size_t n_devices;
    bool composes;   /* exports bp_plugin_composes() returning nonzero */
};
/* dlopen, entry symbols, ABI major, score. On failure r is filled and
 * nothing stays open. */
BP_HIDDEN bool bp__open_plugin(const struct bp__candidate *c, struct bp__opened *o,
                               struct bp__refusal *r);
/* bp_plugin_init and registry validation. On failure r is filled. Once
 * init itself succeeded the plugin is pinned resident (RTLD_NODELETE), so
 * the caller may dlclose its handle either way. */
BP_HIDDEN bool bp__init_plugin(const struct bp__candidate *c, struct bp__opened *o,
                               struct bp__refusal *r);

/* ---- probe.c ---- */

/* Run open+init in a child process. Returns true when the child says the
 * plugin loads; otherwise r says why (including CRASHED and TIMEOUT). */
BP_HIDDEN bool bp__probe_plugin(const struct bp__candidate *c, unsigned timeout_s,
                                struct bp__refusal *r);

#endif /* BP_HOST_LOADER_INTERNAL_H */
