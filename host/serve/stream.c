/*
 * stream.c — streamed answers as server-sent events: a chunked response
 * whose reader (on the connection's own thread) blocks on the job, formats
 * what is new as `data: {chunk}` events, sends `: keep-alive` comments
 * while the job waits for a slot, and ends with `data: [DONE]`. A client
 * that goes away (a peek at the socket, or MHD's free callback after a
 * failed write) cancels the job.
 */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "server.h"

#define PING_S 2.0            /* ":" comment to a stream that has had nothing this long */

bool serve_sse_data(struct serve_buf *b, const char *payload)
{
    return serve_buf_add(b, "data: ", 6) && serve_buf_add(b, payload, strlen(payload)) && serve_buf_add(b, "\n\n", 2);
}

bool serve_sse_comment(struct serve_buf *b, const char *text)
{
    return serve_buf_add(b, ": ", 2) && serve_buf_add(b, text, strlen(text)) && serve_buf_add(b, "\n\n", 2);
}

struct stream {
    struct serve_server *s;
    struct serve_job *j;
    int fd;
    struct serve_buf out;       /* formatted, not yet handed to MHD */
    size_t out_at;
    size_t text_sent, lp_sent;
    bool role_sent, finished, ended;
    double t_last;
};

static bool add_event(struct stream *st, json_t *chunk)
{
    char *s = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    json_decref(chunk);
    bool ok = s && serve_sse_data(&st->out, s);
    free(s);
    return ok;
}

/* Formats what the job has that the client has not seen (j->mu held). */
static bool format_news(struct stream *st)
{
    struct serve_job *j = st->j;
    const size_t tlen = j->text.len - st->text_sent, lp_to = j->n_lp;
    bool ok = true;
    if (j->failed) {
        struct serve_error e;
        serve_fail(&e, 500, NULL, "%s.", j->err);
        char *s = serve_error_json(&e);
        ok = s && serve_sse_data(&st->out, s);
        free(s);
        st->finished = true;
        return ok && serve_sse_data(&st->out, "[DONE]");
    }
    const bool role = j->p.kind == SERVE_CHAT && !st->role_sent;
    if (tlen || lp_to > st->lp_sent || role) {
        ok = add_event(st, serve_body_chunk(st->s, j, j->text.data + st->text_sent, tlen, st->lp_sent, lp_to,
                                            NULL, role));
        st->text_sent += tlen;
        st->lp_sent = lp_to;
        st->role_sent = true;
    }
    if (j->done && ok) {
        ok = add_event(st, serve_body_chunk(st->s, j, "", 0, 0, 0, j->finish, false));
        if (ok && j->p.include_usage) ok = add_event(st, serve_body_usage_chunk(st->s, j));
        ok = ok && serve_sse_data(&st->out, "[DONE]");
        st->finished = true;
    }
    return ok;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    while (st->out_at == st->out.len) {
        if (st->finished) {
            st->ended = true;
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        st->out.len = st->out_at = 0;
        struct serve_job *j = st->j;
        pthread_mutex_lock(&j->mu);
        const uint64_t seen = j->version;
        const bool news = j->done || j->failed || j->text.len > st->text_sent || j->n_lp > st->lp_sent;
        if (!news) serve_job_wait(j, seen, SERVE_POLL_MS);
        bool ok = true;
        if (j->version != seen || news) ok = format_news(st);
        pthread_mutex_unlock(&j->mu);
        if (!ok) {
            serve_job_cancel(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st->out.len) break;
        if (serve_peer_gone(st->fd)) {
            serve_job_cancel(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        /* Nothing yet (queued, or a long prefill): a comment keeps the
         * connection alive and finds a dead peer by a failed write. */
        if (serve_now() - st->t_last >= PING_S && !serve_sse_comment(&st->out, "keep-alive")) {
            serve_job_cancel(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = st->out.len - st->out_at;
    if (n > max) n = max;
    memcpy(buf, st->out.data + st->out_at, n);
    st->out_at += n;
    st->t_last = serve_now();
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    if (!st->ended) serve_job_cancel(st->j);   /* the client left before the end */
    else serve_metrics_observe(SERVE_HIST_REQUEST, serve_now() - st->j->t_arrive);
    serve_job_release(st->j);
    free(st->out.data);
    free(st);
}

enum MHD_Result serve_reply_stream(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn,
                                   struct serve_job *j)
{
    struct stream *st = calloc(1, sizeof *st);
    struct MHD_Response *r = NULL;
    if (st) {
        *st = (struct stream){ .s = s, .j = j, .fd = serve_conn_fd(c), .t_last = serve_now() };
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    }
    if (!r) {
        serve_job_cancel(j);
        serve_job_release(j);
        free(st);
        struct serve_error e;
        serve_fail(&e, 500, NULL, "The server ran out of memory starting a stream; try again later.");
        return serve_reply_error(c, cn, &e);
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    cn->status = 200;
    return ok;
}
