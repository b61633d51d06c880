/* error.c — the per-thread "last error" sentence behind bp_last_error(). */
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[1024];

bp_status bp__fail(bp_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    bp__log(BP_LOG_DEBUG, "backplane", "%s (%s)", last_error, bp_status_name(status));
    return status;
}

void bp__clear_error(void)
{
    last_error[0] = '\0';
}

const char *bp_last_error(void)
{
    return last_error;
}

const char *bp_version_string(void)
{
    return BP_VERSION_STRING;
}
