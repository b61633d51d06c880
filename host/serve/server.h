/*
 * server.h — what the files of host/serve share inside the server: the
 * server's state, one connection's state, and the functions between the
 * HTTP layer (http.c), the routes (routes.c) and the response bodies
 * (respond.c).
 */
#ifndef BP_SERVE_SERVER_H
#define BP_SERVE_SERVER_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <backplane/bp_tokenizer.h>

#include "engine.h"
#include "error.h"
#include "job.h"
#include "serve.h"
#include "text.h"

struct serve_server {
    struct bp_serve_options o;
    char model_id[256];             /* what /v1/models lists and responses name */
    const struct bp_tokenizer *tok;
    const char *tmpl;               /* the chat template (NULL: chatml) */
    int64_t n_ctx, n_vocab;
    struct serve_engine *engine;
    atomic_int draining;            /* SIGTERM seen: new completions get 503 */
    atomic_int in_flight;           /* completions whose answer is not yet written */
    atomic_ullong next_id;
};

/* One HTTP request: its body and what the completion callback records. */
struct serve_conn {
    struct serve_buf body;
    bool too_big;
    size_t dropped;                 /* body bytes read past the limit */
    const char *route;              /* a static name for the metrics */
    bool in_flight;                 /* counted in serve_server.in_flight */
    int status;
};

/* Starts listening on o.host:o.port (port 0: any; *port gets the one
 * bound). NULL after one sentence in err. Stop it with MHD_stop_daemon. */
struct MHD_Daemon *serve_http_start(struct serve_server *s, int *port, char *err, size_t err_cap);

/* Routes a request whose body has arrived (http.c calls it). */
enum MHD_Result serve_route(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn,
                            const char *url, const char *method);

/* Responses (http.c; the streamed one in stream.c). Each queues the
 * response and records its status. */
enum MHD_Result serve_reply(struct MHD_Connection *c, struct serve_conn *cn, int status, const char *type,
                            const char *body, size_t len);
enum MHD_Result serve_reply_json(struct MHD_Connection *c, struct serve_conn *cn, int status, json_t *body);
enum MHD_Result serve_reply_error(struct MHD_Connection *c, struct serve_conn *cn, const struct serve_error *e);
/* A streamed (SSE) answer to job j: j's reference passes to the response. */
enum MHD_Result serve_reply_stream(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn,
                                   struct serve_job *j);
/* Blocks until j is done; false when the client went away first (j is
 * then cancelled). */
bool serve_wait_done(struct MHD_Connection *c, struct serve_job *j);
/* How often a waiting connection looks at its socket, in milliseconds. */
#define SERVE_POLL_MS 50
/* The socket of c, or -1. */
int serve_conn_fd(struct MHD_Connection *c);
/* True when the peer on fd has closed its side (a read would return 0). */
bool serve_peer_gone(int fd);
/* Marks j cancelled unless it is done: the engine frees its slot. */
void serve_job_cancel(struct serve_job *j);

/* Server-sent events (stream.c): "data: PAYLOAD\n\n" and ": TEXT\n\n"
 * appended to b (payload and text hold no newline); false when memory
 * runs out. */
bool serve_sse_data(struct serve_buf *b, const char *payload);
bool serve_sse_comment(struct serve_buf *b, const char *text);

/* Response bodies (respond.c), built under j->mu by the caller. */
/* The whole non-streamed answer. */
json_t *serve_body_final(const struct serve_server *s, const struct serve_job *j);
/* One streamed chunk with text[0..len) and j->lp[lp_from..lp_to); finish
 * NULL for a chunk in the middle; role adds the chat's first delta. */
json_t *serve_body_chunk(const struct serve_server *s, const struct serve_job *j, const char *text, size_t len,
                         size_t lp_from, size_t lp_to, const char *finish, bool role);
/* The usage chunk of stream_options.include_usage. */
json_t *serve_body_usage_chunk(const struct serve_server *s, const struct serve_job *j);

#endif /* BP_SERVE_SERVER_H */
