/* log.c — diagnostics on stderr, filtered by BACKPLANE_LOG=debug|info|warn|error. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static int log_threshold = -1; /* -1: not read yet */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_read_env(void)
{
    const char *v = bp__getenv("BACKPLANE_LOG");
    int level = BP_LOG_WARN;
    if (v && *v) {
        if (!strcasecmp(v, "debug")) level = BP_LOG_DEBUG;
        else if (!strcasecmp(v, "info")) level = BP_LOG_INFO;
        else if (!strcasecmp(v, "warn") || !strcasecmp(v, "warning")) level = BP_LOG_WARN;
        else if (!strcasecmp(v, "error")) level = BP_LOG_ERROR;
        else
            fprintf(stderr, "backplane: warning: BACKPLANE_LOG=%s is not one of "
                            "debug, info, warn, error; using warn.\n", v);
    }
    log_threshold = level;
}

int bp__log_enabled(enum bp_log_level level)
{
    pthread_once(&log_once, log_read_env);
    return (int)level >= log_threshold;
}

void bp__vlog(enum bp_log_level level, const char *who, const char *fmt, va_list ap)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (!bp__log_enabled(level)) return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* One fprintf per line keeps lines from different threads whole. */
    fprintf(stderr, "%s: %s: %s\n", who ? who : "backplane",
            names[(unsigned)level < 4 ? level : 3], msg);
}

void bp__log(enum bp_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bp__vlog(level, who, fmt, ap);
    va_end(ap);
}
