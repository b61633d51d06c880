/* run_error.h — how the runner's functions report a failure: one sentence
 * into the caller's buffer, and the status returned, so a failing path reads
 * `return bp_run_fail(err, cap, BP_ERR_IO, "...", ...);`. The sentence quotes
 * bp_last_error() when a library call failed, and is not logged as well
 * (backplane.h, "The three error channels"). */
#ifndef BP_RUN_ERROR_H
#define BP_RUN_ERROR_H

#include <stddef.h>

#include <backplane/bp_status.h>

/* Formats the sentence into err (when err && cap) and returns s. */
bp_status bp_run_fail(char *err, size_t cap, bp_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* BP_RUN_ERROR_H */
