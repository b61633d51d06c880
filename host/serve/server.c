/*
 * server.c — bp_serve_run (serve.h): the model, its tokenizer and chat
 * template, the batch and its engine, the HTTP daemon; then it waits for
 * SIGTERM/SIGINT and shuts down in order: no new completions, the ones in
 * flight finish and their answers are written, then the daemon and the
 * engine stop.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "chat_template.h"
#include "metrics.h"
#include "model.h"
#include "server.h"
#include "tokenizer_builtin.h"

#define ERR_CAP 1024
#define DRAIN_LIMIT_S 600.0   /* the longest a shutdown waits for answers in flight */

void bp_serve_defaults(struct bp_serve_options *o)
{
    *o = (struct bp_serve_options){ .model = "builtin:tiny", .host = "127.0.0.1", .port = 8080, .parallel = 4,
                                    .max_queue = 64, .max_body = (size_t)8 << 20, .timeout_s = 600 };
}

static struct bp_run_model *load_model(const char *name, char *err)
{
    struct bp_run_model *m = NULL;
    if (!strncmp(name, "builtin:", 8)) {
        /* The same weights `backplane run --model builtin:NAME` makes. */
        struct bp_run_builtin_options bo = { .weight_type = BP_TYPE_F16, .seed = 1 };
        if (bp_run_model_builtin(name + 8, &bo, &m, err, ERR_CAP) != BP_OK) return NULL;
        return m;
    }
    if (bp_run_model_load_gguf(name, &m, err, ERR_CAP) != BP_OK) {
        char e[ERR_CAP];
        snprintf(e, sizeof e, "%s", err);
        snprintf(err, ERR_CAP, "%.200s: %.800s", name, e);
        return NULL;
    }
    return m;
}

static void model_id_of(const char *model, char *out, size_t cap)
{
    const char *base = strrchr(model, '/');
    snprintf(out, cap, "%s", base ? base + 1 : model);
}

/* The write end of the pipe the signal handler writes the signal to. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    const int saved = errno;
    const unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) { /* the pipe is full: a signal is already waiting */ }
    errno = saved;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int bp_serve_run(const struct bp_serve_options *o, struct bp_device *dev)
{
    char err[ERR_CAP] = "";
    struct serve_server s = { .o = *o };
    struct bp_run_model *m = NULL;
    struct bp_tokenizer *tok = NULL;
    struct bp_run_batch *b = NULL;
    char *tmpl = NULL;
    struct MHD_Daemon *d = NULL;
    int rc = 1, port = 0;
    struct sigaction sa = { .sa_handler = on_signal }, old_term, old_int;

    /* SIGTERM/SIGINT, whichever thread takes them (the plugins' threads
     * may predate this call), write to a pipe that this thread reads. */
    if (pipe(sig_pipe) != 0) {
        snprintf(err, sizeof err, "cannot create a pipe for signals: %s.", strerror(errno));
        goto fail;
    }
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    signal(SIGPIPE, SIG_IGN);

    if (!(m = load_model(o->model, err))) goto fail;
    if (bp_run_tokenizer_for(o->model, &tok, err, sizeof err) != BP_OK) {
        char e[ERR_CAP];
        snprintf(e, sizeof e, "%s", err);
        snprintf(err, sizeof err, "serving needs the model's tokenizer, but %.900s", e);
        goto fail;
    }
    if (bp_tokenizer_n_tokens(tok) > m->hp.n_vocab) {
        snprintf(err, sizeof err, "the tokenizer has %d tokens but the model's vocabulary only %" PRId64
                 "; the file is inconsistent.", bp_tokenizer_n_tokens(tok), m->hp.n_vocab);
        goto fail;
    }
    if (bp_chat_template_of_model(o->model, &tmpl, err, sizeof err) != BP_OK) goto fail;
    if (bp_chat_template_detect(tmpl) == BP_CHAT_TEMPLATE_UNKNOWN) {
        /* Completions still work; chat requests would all fail: say so now. */
        char why[ERR_CAP];
        bp_chat_template_unknown(tmpl, why, sizeof why);
        fprintf(stderr, "backplane: warning: %s Chat requests will be refused; /v1/completions works.\n", why);
    }
    const int64_t n_ctx = o->n_ctx ? o->n_ctx : m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (n_ctx > m->hp.n_ctx_train) {
        snprintf(err, sizeof err, "--n-ctx %" PRId64 " is more than the model's context of %" PRId64
                 " positions; ask for fewer.", n_ctx, m->hp.n_ctx_train);
        goto fail;
    }
    struct bp_run_batch_options bo = { .n_slots = o->parallel, .n_ctx = n_ctx, .n_threads = o->threads };
    if (bp_run_batch_new(m, dev, &bo, &b, err, sizeof err) != BP_OK) goto fail;
    s.tok = tok;
    s.tmpl = tmpl;
    s.n_ctx = bp_run_batch_n_ctx(b);
    s.n_vocab = bp_run_batch_n_vocab(b);
    model_id_of(o->model, s.model_id, sizeof s.model_id);
    serve_metrics_init(o->parallel);
    if (!(s.engine = serve_engine_start(b, tok, o->max_queue, err, sizeof err))) goto fail;
    b = NULL;   /* the engine's now */
    if (!(d = serve_http_start(&s, &port, err, sizeof err))) goto fail;
    const bool v6 = strchr(o->host, ':') != NULL;
    char url[320];
    snprintf(url, sizeof url, "http://%s%s%s:%d", v6 ? "[" : "", o->host, v6 ? "]" : "", port);
    if (o->json) {
        json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:I}", "url", url, "model", s.model_id, "device",
                              bp_device_name(dev), "slots", o->parallel, "n_ctx", (json_int_t)s.n_ctx);
        char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
        printf("%s\n", line ? line : "{}");
        free(line);
        json_decref(j);
    } else {
        printf("backplane serve: %s on %s, %d slots of %" PRId64 " positions; listening on %s\n", s.model_id,
               bp_device_name(dev), o->parallel, s.n_ctx, url);
    }
    fflush(stdout);

    unsigned char sig = 0;
    while (read(sig_pipe[0], &sig, 1) < 0 && errno == EINTR) continue;
    fprintf(stderr, "backplane serve: %s received; finishing the requests in flight.\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&s.draining, 1);
    serve_engine_drain(s.engine);
    /* Answers in flight: the engine's jobs, then the answers being written. */
    const double t0 = serve_now();
    while ((!serve_engine_idle(s.engine) || atomic_load(&s.in_flight) > 0) && serve_now() - t0 < DRAIN_LIMIT_S)
        sleep_ms(20);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "backplane: %s\n", err);
    if (d) MHD_stop_daemon(d);
    serve_engine_stop(s.engine);
    bp_run_batch_free(b);
    free(tmpl);
    bp_tokenizer_free(tok);
    bp_run_model_free(m);
    if (sig_pipe[0] >= 0) {
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGINT, &old_int, NULL);
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
    }
    return rc;
}
