/* failures.c — the records of plugins that were not loaded, kept as data
 * (bp_plugin_failure_*) as well as logged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

static struct bp_plugin_failure *failures;
static size_t n_failures, cap_failures;

bool bp__refuse(struct bp__refusal *r, enum bp_plugin_failure_code code, const char *remedy,
                const char *reason_fmt, ...)
{
    va_list ap;
    r->code = code;
    va_start(ap, reason_fmt);
    vsnprintf(r->reason, sizeof r->reason, reason_fmt, ap);
    va_end(ap);
    snprintf(r->remedy, sizeof r->remedy, "%s", remedy ? remedy : "");
    return false;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

void bp__record_failure(const char *path, const char *family, const struct bp__refusal *r)
{
    /* Choices the loader made on purpose are not problems: a machine without
     * AVX-512 refuses that variant on every run. */
    enum bp_log_level level = (r->code == BP_PLUGIN_FAIL_FILTERED ||
                               r->code == BP_PLUGIN_FAIL_OUTSCORED ||
                               r->code == BP_PLUGIN_FAIL_CANNOT_RUN)
                                  ? BP_LOG_INFO
                                  : BP_LOG_WARN;
    bp__log(level, "backplane", "plugin %s not loaded (%s): %s %s", path ? path : "?",
            bp_plugin_failure_code_name(r->code), r->reason, r->remedy);

    struct bp_plugin_failure *v = bp__grow(failures, sizeof *v, n_failures, &cap_failures, 8);
    if (!v) {
        bp__log(BP_LOG_ERROR, "backplane",
                "out of memory while recording why %s was not loaded; the record is lost.", path ? path : "?");
        return;
    }
    failures = v;
    struct bp_plugin_failure f = {
        .path = dup_or_empty(path),
        .family = dup_or_empty(family),
        .code = r->code,
        .reason = dup_or_empty(r->reason),
        .remedy = dup_or_empty(r->remedy),
    };
    if (!f.path || !f.family || !f.reason || !f.remedy) {
        free((char *)f.path);
        free((char *)f.family);
        free((char *)f.reason);
        free((char *)f.remedy);
        bp__log(BP_LOG_ERROR, "backplane",
                "out of memory while recording why %s was not loaded; the record is lost.",
                path ? path : "?");
        return;
    }
    failures[n_failures++] = f;
}

void bp__failures_clear(void)
{
    for (size_t i = 0; i < n_failures; i++) {
        free((char *)failures[i].path);
        free((char *)failures[i].family);
        free((char *)failures[i].reason);
        free((char *)failures[i].remedy);
    }
    free(failures);
    failures = NULL;
    n_failures = cap_failures = 0;
}

size_t bp_plugin_failure_count(void)
{
    bp__ensure_loaded();
    return n_failures;
}

const struct bp_plugin_failure *bp_plugin_failure_get(size_t index)
{
    bp__ensure_loaded();
    if (index >= n_failures) {
        bp__fail(BP_ERR_INVALID_ARGUMENT,
                 "plugin failure index %zu is out of range; there are %zu records.", index,
                 n_failures);
        return NULL;
    }
    return &failures[index];
}

const char *bp_plugin_failure_code_name(enum bp_plugin_failure_code code)
{
    switch (code) {
    case BP_PLUGIN_FAIL_NOT_SHARED_OBJECT: return "NOT_SHARED_OBJECT";
    case BP_PLUGIN_FAIL_MISSING_DEPENDENCY: return "MISSING_DEPENDENCY";
    case BP_PLUGIN_FAIL_DLOPEN: return "DLOPEN";
    case BP_PLUGIN_FAIL_MISSING_ENTRY: return "MISSING_ENTRY";
    case BP_PLUGIN_FAIL_ABI_MAJOR: return "ABI_MAJOR";
    case BP_PLUGIN_FAIL_INIT: return "INIT";
    case BP_PLUGIN_FAIL_DUPLICATE: return "DUPLICATE";
    case BP_PLUGIN_FAIL_FILTERED: return "FILTERED";
    case BP_PLUGIN_FAIL_CRASHED: return "CRASHED";
    case BP_PLUGIN_FAIL_TIMEOUT: return "TIMEOUT";
    case BP_PLUGIN_FAIL_CANNOT_RUN: return "CANNOT_RUN";
    case BP_PLUGIN_FAIL_OUTSCORED: return "OUTSCORED";
    case BP_PLUGIN_FAIL_BAD_NAME: return "BAD_NAME";
    case BP_PLUGIN_FAIL_BAD_REGISTRY: return "BAD_REGISTRY";
    case BP_PLUGIN_FAIL_ABI_MINOR: return "ABI_MINOR";
    }
    return "UNKNOWN";
}
