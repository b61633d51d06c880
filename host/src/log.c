/* log.c — the one log channel: lines filtered by BACKPLANE_LOG=debug|info|
 * warn|error go to the application's bp_set_log_callback, else to stderr. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static int log_threshold = -1; /* -1: not read yet */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* The sink is read on every line and may be set while plugin threads log:
 * the pair is copied under this lock so fn never meets another fn's user. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_log_fn sink_fn;
static void *sink_user;

static const char *const level_names[] = {"debug", "info", "warning", "error"};

/* Set in a probe's child process (probe.c), whose plugin init says again
 * what the parent's own init of the same plugin will say. */
static volatile sig_atomic_t silenced;

void bp__log_silence(void)
{
    silenced = 1;
}

/* Hands one finished line to the sink, past the threshold check. */
static void emit(enum bp_log_level level, const char *who, const char *msg)
{
    if (silenced) return;
    pthread_mutex_lock(&sink_lock);
    bp_log_fn fn = sink_fn;
    void *user = sink_user;
    pthread_mutex_unlock(&sink_lock);
    who = who ? who : "backplane";
    if (fn) {
        fn(user, level, who, msg);
        return;
    }
    /* One fprintf per line keeps lines from different threads whole. */
    fprintf(stderr, "%s: %s: %s\n", who, level_names[(unsigned)level < 4 ? level : 3], msg);
}

static void log_read_env(void)
{
    const char *v = bp__getenv("BACKPLANE_LOG");
    int level = BP_LOG_WARN;
    if (v && *v) {
        if (!strcasecmp(v, "debug")) level = BP_LOG_DEBUG;
        else if (!strcasecmp(v, "info")) level = BP_LOG_INFO;
        else if (!strcasecmp(v, "warn") || !strcasecmp(v, "warning")) level = BP_LOG_WARN;
        else if (!strcasecmp(v, "error")) level = BP_LOG_ERROR;
        else {
            char msg[256];
            snprintf(msg, sizeof msg, "BACKPLANE_LOG=%.64s is not one of debug, info, warn, "
                     "error; using warn.", v);
            emit(BP_LOG_WARN, "backplane", msg);
        }
    }
    log_threshold = level;
}

void bp_set_log_callback(bp_log_fn fn, void *user)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = fn ? user : NULL;
    pthread_mutex_unlock(&sink_lock);
}

int bp__log_enabled(enum bp_log_level level)
{
    pthread_once(&log_once, log_read_env);
    return (int)level >= log_threshold;
}

void bp__vlog(enum bp_log_level level, const char *who, const char *fmt, va_list ap)
{
    if (!bp__log_enabled(level)) return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    emit(level, who, msg);
}

void bp__log(enum bp_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bp__vlog(level, who, fmt, ap);
    va_end(ap);
}
