/*
 * internal.h — what the files of libbackplane share among themselves.
 * Nothing here is installed; applications use backplane.h.
 */
#ifndef BP_HOST_INTERNAL_H
#define BP_HOST_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <backplane/backplane.h>

#define BP_HIDDEN __attribute__((visibility("hidden")))

/* An application options struct's field when its `size` covers it (size 0:
 * every field, the caller predates the size or left it zero), else dflt. */
#define BP__OPT(opts, field, dflt)                                                         \
    ((opts) && ((opts)->size == 0 ||                                                      \
                (opts)->size >= offsetof(__typeof__(*(opts)), field) + sizeof((opts)->field)) \
         ? (opts)->field : (dflt))

/* error.c — the per-thread last error. Returns status, so a failing path can
 * `return bp__fail(BP_ERR_SHAPE, "...")`. Also logs at debug level. */
BP_HIDDEN bp_status bp__fail(bp_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
BP_HIDDEN void bp__clear_error(void);

/* log.c — diagnostics filtered by BACKPLANE_LOG (default: warn). */
BP_HIDDEN void bp__log(enum bp_log_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
BP_HIDDEN void bp__vlog(enum bp_log_level level, const char *who, const char *fmt, va_list ap);
BP_HIDDEN int bp__log_enabled(enum bp_log_level level);
/* Drop every later line, the application's callback included: for a
 * process forked to probe a plugin (probe.c). */
BP_HIDDEN void bp__log_silence(void);

/* grow.c — room for element n of the array v of *cap elements of elem
 * bytes: v itself while n < *cap, else v reallocated to twice *cap (first
 * when empty) and *cap updated. NULL when out of memory (v still valid). */
BP_HIDDEN void *bp__grow(void *v, size_t elem, size_t n, size_t *cap, size_t first);

/* env.c — getenv that returns NULL in setuid/setgid programs. */
BP_HIDDEN const char *bp__getenv(const char *name);

/* loader.c — load plugins on first use (idempotent, thread-safe). Every
 * public entry point that touches plugins or devices calls it. */
BP_HIDDEN void bp__ensure_loaded(void);
/* Proc-address lookups on loaded registries, without loading or logging
 * (NULL when absent): the registry of `family` (its first len bytes), or
 * the first registry that offers `name`. The host finds a plugin's
 * features by what it offers, never by a family it knows by name. */
BP_HIDDEN bool bp__family_loaded(const char *family, size_t len);
BP_HIDDEN void *bp__family_proc(const char *family, size_t len, const char *name);
BP_HIDDEN void *bp__any_proc(const char *name);

/* devices.c — whether dev's backends read buffers of buft: its
 * supports_buft, or (without one) only buffer types of dev itself. */
BP_HIDDEN bool bp__device_supports_buft(struct bp_device *dev, struct bp_buffer_type *buft);

/* devices.c — the family of dev's plugin (its registry's name), for the
 * sentence that blames a plugin for a broken table; "?" when unknown. */
BP_HIDDEN const char *bp__device_family(struct bp_device *dev);

/* The host-services table handed to plugins. */
BP_HIDDEN const struct bp_host_services *bp__host_services(void);

#endif /* BP_HOST_INTERNAL_H */
