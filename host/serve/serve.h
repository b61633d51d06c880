/*
 * serve.h — `backplane serve`: an OpenAI-compatible HTTP server over the
 * batching engine of the runner (host/run/batch.h). The CLI parses the
 * options and calls bp_serve_run; everything else lives in this directory.
 */
#ifndef BP_SERVE_H
#define BP_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

struct bp_serve_options {
    const char *model;      /* a GGUF path or builtin:NAME (default builtin:tiny) */
    int threads;            /* 0: the backend's default */
    const char *host;       /* address to listen on (default 127.0.0.1) */
    int port;               /* 0: any free port (the one chosen is printed) */
    int parallel;           /* slots (default 4) */
    int64_t n_ctx;          /* KV positions per slot (0: the model's, at most 4096) */
    int max_queue;          /* requests waiting for a slot before 503 (default 64) */
    const char *api_key;    /* NULL or "": no authentication */
    size_t max_body;        /* largest request body in bytes (default 8 MiB) */
    unsigned timeout_s;     /* a connection idle this long is closed (default 600) */
    bool json;              /* announce the address as one JSON line */
};

/* Fills o with the defaults above. */
void bp_serve_defaults(struct bp_serve_options *o);

/* Loads the model onto dev, listens, prints "listening on
 * http://HOST:PORT" on stdout (with json, one JSON object with "url"), and serves until SIGTERM or SIGINT; then
 * finishes the requests in flight and returns 0. Returns 1 after one
 * sentence on stderr when the model, its tokenizer or the socket cannot be
 * set up. Call it from the main thread: it blocks those signals in every
 * thread it starts and waits for them itself. */
int bp_serve_run(const struct bp_serve_options *o, struct bp_device *dev);

#endif /* BP_SERVE_H */
