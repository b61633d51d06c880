/*
 * cli_util.h — a command line run as a user's shell runs it, its output and
 * exit status captured, for the suites that test the `backplane` program.
 * Nothing here asserts: a command that cannot run gives CLI_NOT_RUN, which
 * the test's own assertion on the status then reports.
 */
#ifndef BP_CLI_UTIL_H
#define BP_CLI_UTIL_H

#include <stddef.h>

/* The program under test, as the build lays it out. */
#define CLI BP_TEST_BIN_DIR "/backplane"

/* The status of a command that could not be started or whose output could
 * not be kept (a sentence on stderr says why); no exit status is negative. */
#define CLI_NOT_RUN (-2)

/* Where the command's stderr goes: into the captured text, or nowhere. */
enum cli_stderr { CLI_OUT_AND_ERR, CLI_OUT_ONLY };

/* Runs cmd through /bin/sh, the stderr of each of its commands as err says,
 * and copies what it printed into out (cap > 0 bytes: at most cap - 1 of
 * text, always NUL-terminated; the rest is read and dropped, so a long output
 * never stops the program early). Returns the exit status, -1 when a signal
 * ended it, or CLI_NOT_RUN. */
int cli_run(const char *cmd, enum cli_stderr err, char *out, size_t cap);

/* As cli_run, but all that it printed: *out is a NUL-terminated string the
 * caller frees, or NULL when the status is CLI_NOT_RUN. */
int cli_run_all(const char *cmd, enum cli_stderr err, char **out);

/* The number of lines of text that start with prefix and contain needle
 * (NULL: every line that starts with prefix). */
int cli_count_lines(const char *text, const char *prefix, const char *needle);

/* The "tokens" array of a `run --json` report, copied into out as text from
 * the key to its closing bracket; NULL (and a sentence on stderr) when json
 * has none or it does not fit in cap bytes. */
const char *cli_json_tokens(const char *json, char *out, size_t cap);

/* A new empty directory /tmp/bp_<name>_XXXXXX, its path written into dir
 * (cap bytes; 64 is enough for a short name). Returns dir, or NULL with a
 * sentence on stderr when it cannot be made. */
const char *cli_tempdir(const char *name, char *dir, size_t cap);

/* Removes dir and everything in it (a cli_tempdir). Returns 0, or -1 with a
 * sentence on stderr for what could not be removed. */
int cli_tempdir_remove(const char *dir);

#endif
