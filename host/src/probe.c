/* probe.c — try a plugin in a child process first (isolate_probe), so one
 * that crashes or hangs in dlopen/init is recorded instead of taking the
 * application down. The child runs the very same checks as the loader and
 * sends its verdict over a pipe; the parent waits with a time limit. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader_internal.h"

/* Stage markers the child writes as it goes, so that a crash can be placed. */
#define STAGE_OPEN   'O'
#define STAGE_INIT   'I'
#define STAGE_REPORT 'R'

struct probe_report {
    int ok;
    int score;
    struct bp__refusal r;
};

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void stage(int fd, char s)
{
    write_all(fd, &s, 1);
}

__attribute__((noreturn)) static void child_main(const struct bp__candidate *c, int fd)
{
    /* A crash must end the child by its signal, whatever handler the
     * application (or a sanitizer) installed. */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], SIG_DFL);
    /* What the plugin logs here, it logs again when the parent loads it
     * (a bad BACKPLANE_CPU_* value was warned once per probed variant and
     * once more); how the child ended reaches the parent through the pipe. */
    bp__log_silence();

    struct probe_report rep;
    memset(&rep, 0, sizeof rep);
    struct bp__opened o;
    stage(fd, STAGE_OPEN);
    if (bp__open_plugin(c, &o, &rep.r)) {
        rep.score = o.score;
        /* A variant that cannot run here may use instructions this CPU
         * lacks: its init is never called, in the child either. */
        if (o.score == 0) {
            rep.ok = 1;
        } else {
            stage(fd, STAGE_INIT);
            rep.ok = bp__init_plugin(c, &o, &rep.r);
        }
    }
    stage(fd, STAGE_REPORT);
    write_all(fd, &rep, sizeof rep);
    /* _exit: no atexit handlers, no stdio flush of the parent's buffers. */
    _exit(0);
}

static long ms_until(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(deadline->tv_sec - now.tv_sec) * 1000 +
           (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

static const char *signal_name(int sig, char *buf, size_t cap)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, cap, "SIG%s", abbrev);
    else
        snprintf(buf, cap, "signal %d", sig);
    return buf;
}

static bool refuse_timeout(struct bp__refusal *r, unsigned timeout_s, char last_stage)
{
    return bp__refuse(r, BP_PLUGIN_FAIL_TIMEOUT,
                      "Remove the plugin or ask its vendor why it blocks; a slow device may "
                      "need a longer probe_timeout_s.",
                      "it did not answer within %u s during %s.", timeout_s,
                      last_stage == STAGE_INIT ? "init" : "dlopen");
}

bool bp__probe_plugin(const struct bp__candidate *c, unsigned timeout_s, struct bp__refusal *r)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        bp__log(BP_LOG_WARN, "backplane",
                "cannot create a pipe to probe %s (%s); loading it without isolation.", c->path,
                strerror(errno));
        return true;
    }
    bp__log(BP_LOG_DEBUG, "backplane", "probing %s in a child process.", c->path);
    pid_t pid = fork();
    if (pid < 0) {
        bp__log(BP_LOG_WARN, "backplane",
                "cannot fork to probe %s (%s); loading it without isolation.", c->path,
                strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return true;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(c, fds[1]);
    }
    close(fds[1]);

    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_s;

    char buf[2 + 1 + sizeof(struct probe_report)];
    size_t got = 0;
    char last_stage = 0;
    bool eof = false, timed_out = false;
    while (!eof) {
        long ms = ms_until(&deadline);
        if (ms > 3600L * 1000) ms = 3600L * 1000; /* poll takes an int */
        if (ms <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            timed_out = true;
            break;
        }
        char tmp[sizeof buf];
        ssize_t n = read(fds[0], tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            eof = true;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (got < sizeof buf) buf[got++] = tmp[i];
        }
    }
    close(fds[0]);

    /* Stage bytes come first, then 'R' and the report. */
    size_t rpos = got;
    for (size_t i = 0; i < got; i++) {
        if (buf[i] == STAGE_REPORT) {
            rpos = i;
            break;
        }
        last_stage = buf[i];
    }
    bool have_report = rpos < got && got - rpos - 1 == sizeof(struct probe_report);

    int status = 0;
    bool reaped = false;
    while (!timed_out && !reaped) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            reaped = true;
        } else if (w < 0 && errno != EINTR) {
            break; /* ECHILD: the application ignores SIGCHLD; the report decides */
        } else if (ms_until(&deadline) <= 0) {
            timed_out = true;
        } else {
            struct timespec nap = {0, 5 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
    }
    if (timed_out) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!have_report) return refuse_timeout(r, timeout_s, last_stage);
    }

    if (reaped && WIFSIGNALED(status)) {
        char sig[32];
        return bp__refuse(r, BP_PLUGIN_FAIL_CRASHED,
                          "Remove the plugin and report the crash to its vendor; the "
                          "application is unaffected because the probe ran in a child process.",
                          "it crashed with %s during %s.",
                          signal_name(WTERMSIG(status), sig, sizeof sig),
                          last_stage == STAGE_INIT ? "init" : "dlopen");
    }
    if (!have_report) {
        if (reaped && WIFEXITED(status))
            return bp__refuse(r, BP_PLUGIN_FAIL_INIT,
                              "Remove the plugin; a plugin must return a status, never end the "
                              "process.",
                              "it ended the process with exit status %d during %s.",
                              WEXITSTATUS(status), last_stage == STAGE_INIT ? "init" : "dlopen");
        return bp__refuse(r, BP_PLUGIN_FAIL_CRASHED,
                          "Remove the plugin, or load it without isolate_probe to see what "
                          "happens.",
                          "its probe process ended during %s without reporting.",
                          last_stage == STAGE_INIT ? "init" : "dlopen");
    }
    struct probe_report rep;
    memcpy(&rep, buf + rpos + 1, sizeof rep);
    if (rep.ok) return true;
    *r = rep.r;
    r->reason[sizeof r->reason - 1] = '\0';
    r->remedy[sizeof r->remedy - 1] = '\0';
    return false;
}
