/* run_error.c — see run_error.h. */
#include <stdarg.h>
#include <stdio.h>

#include "run_error.h"

bp_status bp_run_fail(char *err, size_t cap, bp_status s, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return s;
}
