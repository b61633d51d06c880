/* log_capture.c — see log_capture.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <backplane/backplane.h>

#include "log_capture.h"

/* Lines may come from a plugin's worker threads, hence the lock. Overflow
 * keeps the first lines: a test asserts on the sentence of the refusal,
 * which comes first. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char text[16384];
static size_t used;

static void collect(void *user, enum bp_log_level level, const char *who, const char *message)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    (void)user;
    pthread_mutex_lock(&lock);
    int n = snprintf(text + used, sizeof text - used, "%s: %s: %s\n", who,
                     names[(unsigned)level < 4 ? level : 3], message);
    if (n > 0) used += (size_t)n < sizeof text - used ? (size_t)n : sizeof text - 1 - used;
    pthread_mutex_unlock(&lock);
}

void log_capture_begin(void)
{
    pthread_mutex_lock(&lock);
    text[0] = '\0';
    used = 0;
    pthread_mutex_unlock(&lock);
    bp_set_log_callback(collect, NULL);
}

const char *log_capture_end(void)
{
    bp_set_log_callback(NULL, NULL);
    return text;
}
