/*
 * cli_util.c — popen with the whole output read: a pipe left unread would
 * end a long-winded program with SIGPIPE and turn its exit status into -1.
 */
#include "cli_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>

/* What has been read so far: into a caller's buffer (grow false; what does
 * not fit is dropped) or into one of ours that doubles as it fills. */
struct sink {
    char *buf;
    size_t cap, len;
    bool grow;
};

static FILE *start(const char *cmd, enum cli_stderr err)
{
    /* Grouped, so the redirection covers every command of a list or pipeline. */
    char *full = NULL;
    if (asprintf(&full, "{ %s\n} %s", cmd, err == CLI_OUT_AND_ERR ? "2>&1" : "2>/dev/null") < 0) {
        fprintf(stderr, "cli_util: no memory for the command line of `%s`; free some and rerun the test.\n", cmd);
        return NULL;
    }
    FILE *p = popen(full, "r");
    if (!p)
        fprintf(stderr, "cli_util: could not start `%s` (%s); check that /bin/sh runs and one more process fits.\n",
                full, strerror(errno));
    free(full);
    return p;
}

/* Reads p to its end; false when a full buffer of ours could not grow. */
static bool drain(FILE *p, struct sink *s)
{
    char spill[4096];
    for (;;) {
        if (s->grow && s->cap - s->len < 1024) {
            char *b = realloc(s->buf, s->cap * 2);
            if (!b) return false;
            s->buf = b;
            s->cap *= 2;
        }
        const bool room = s->len + 1 < s->cap;
        const size_t got = fread(room ? s->buf + s->len : spill, 1, room ? s->cap - s->len - 1 : sizeof spill, p);
        if (got == 0) break;
        if (room) s->len += got;
    }
    s->buf[s->len] = '\0';
    return true;
}

static int finish(FILE *p, const char *cmd, bool read_all)
{
    const int st = pclose(p);
    if (!read_all) {
        fprintf(stderr, "cli_util: no memory to hold the output of `%s`; free some and rerun the test.\n", cmd);
        return CLI_NOT_RUN;
    }
    if (st == -1) {
        fprintf(stderr, "cli_util: lost the exit status of `%s` (%s); is SIGCHLD ignored?\n", cmd, strerror(errno));
        return CLI_NOT_RUN;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int cli_run(const char *cmd, enum cli_stderr err, char *out, size_t cap)
{
    if (cap == 0) {
        fprintf(stderr, "cli_util: no room for the output of `%s`; pass a buffer of at least one byte.\n", cmd);
        return CLI_NOT_RUN;
    }
    out[0] = '\0';
    FILE *p = start(cmd, err);
    if (!p) return CLI_NOT_RUN;
    struct sink s = {.buf = out, .cap = cap};
    return finish(p, cmd, drain(p, &s));
}

int cli_run_all(const char *cmd, enum cli_stderr err, char **out)
{
    struct sink s = {.cap = 1 << 16, .grow = true};
    *out = NULL;
    s.buf = malloc(s.cap);
    if (!s.buf) {
        fprintf(stderr, "cli_util: no memory to hold the output of `%s`; free some and rerun the test.\n", cmd);
        return CLI_NOT_RUN;
    }
    FILE *p = start(cmd, err);
    const int rc = p ? finish(p, cmd, drain(p, &s)) : CLI_NOT_RUN;
    if (rc == CLI_NOT_RUN) {
        free(s.buf);
        return rc;
    }
    *out = s.buf;
    return rc;
}

int cli_count_lines(const char *text, const char *prefix, const char *needle)
{
    if (!needle) needle = "";
    const size_t plen = strlen(prefix), nlen = strlen(needle);
    int n = 0;
    for (const char *line = text; *line;) {
        const char *end = strchrnul(line, '\n');
        const size_t len = (size_t)(end - line);
        if (len >= plen && !strncmp(line, prefix, plen) && memmem(line, len, needle, nlen)) n++;
        if (!*end) break;
        line = end + 1;
    }
    return n;
}

const char *cli_json_tokens(const char *json, char *out, size_t cap)
{
    const char *t = strstr(json, "\"tokens\"");
    const char *e = t ? strchr(t, ']') : NULL;
    if (!e) {
        fprintf(stderr, "cli_util: no \"tokens\" array in the report; was it run with --json?\n");
        return NULL;
    }
    const size_t len = (size_t)(e + 1 - t);
    if (len >= cap) {
        fprintf(stderr, "cli_util: the tokens array needs %zu bytes, %zu were given; pass a larger buffer.\n",
                len + 1, cap);
        return NULL;
    }
    memcpy(out, t, len);
    out[len] = '\0';
    return out;
}

const char *cli_tempdir(const char *name, char *dir, size_t cap)
{
    const int n = snprintf(dir, cap, "/tmp/bp_%s_XXXXXX", name);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(dir)) {
        fprintf(stderr, "cli_util: cannot make a directory for %s under /tmp (%s); free space there and "
                "rerun the test.\n", name, n < 0 || (size_t)n >= cap ? "name too long" : strerror(errno));
        return NULL;
    }
    return dir;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) == 0) return 0;
    fprintf(stderr, "cli_util: cannot remove %s (%s).\n", path, strerror(errno));
    return -1;
}

int cli_tempdir_remove(const char *dir)
{
    /* depth first, so a directory is empty when its turn comes */
    return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
