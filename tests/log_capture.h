/*
 * log_capture.h — the library's log lines as text, for tests that assert on
 * what a refusal said. Built on bp_set_log_callback: nothing scrapes stderr.
 */
#ifndef BP_LOG_CAPTURE_H
#define BP_LOG_CAPTURE_H

/* Start collecting every log line (host and plugins, any thread) that passes
 * BACKPLANE_LOG, each as "<who>: <level>: <message>\n", instead of printing
 * it. Captures do not nest. */
void log_capture_begin(void);

/* Stop collecting, send lines to stderr again, and return what was collected
 * ("" if nothing). The text stays valid until the next log_capture_begin. */
const char *log_capture_end(void);

#endif
