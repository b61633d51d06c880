/*
 * http.c — the HTTP layer on libmicrohttpd: one thread per connection, the
 * body gathered up to --max-body (more is read and dropped, then 413),
 * the API key checked, then routes.c decides. A connection that closes
 * while its answer is being made, seen by a peek at its socket while it
 * waits (or by a failed write, stream.c), cancels its job.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "metrics.h"
#include "server.h"


/* ------------------------------------------------------------ replies */

enum MHD_Result serve_reply(struct MHD_Connection *c, struct serve_conn *cn, int status, const char *type,
                            const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    cn->status = status;
    return ok;
}

enum MHD_Result serve_reply_json(struct MHD_Connection *c, struct serve_conn *cn, int status, json_t *body)
{
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"The server ran out of memory; try again later.\","
                                  "\"type\":\"server_error\",\"param\":null,\"code\":500}}";
        return serve_reply(c, cn, 500, "application/json", oom, sizeof oom - 1);
    }
    enum MHD_Result ok = serve_reply(c, cn, status, "application/json", s, strlen(s));
    free(s);
    return ok;
}

enum MHD_Result serve_reply_error(struct MHD_Connection *c, struct serve_conn *cn, const struct serve_error *e)
{
    char *s = serve_error_json(e);
    if (!s) return serve_reply(c, cn, e->status, "application/json", "{}", 2);
    enum MHD_Result ok = serve_reply(c, cn, e->status, "application/json", s, strlen(s));
    free(s);
    return ok;
}

/* ------------------------------------------------------ disconnection */

/* True when the peer has closed its side (a read would return 0). */
bool serve_peer_gone(int fd)
{
    if (fd < 0) return false;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    char ch;
    ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int serve_conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

void serve_job_cancel(struct serve_job *j)
{
    pthread_mutex_lock(&j->mu);
    if (!j->done) j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
}

bool serve_wait_done(struct MHD_Connection *c, struct serve_job *j)
{
    const int fd = serve_conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        serve_job_wait(j, j->version, SERVE_POLL_MS);
        if (!j->done && serve_peer_gone(fd)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

/* ----------------------------------------------------------- requests */

static bool key_matches(const char *want, const char *got)
{
    if (!got) return false;
    const size_t wl = strlen(want), gl = strlen(got);
    unsigned char diff = wl != gl;
    for (size_t i = 0; i < gl; i++) diff |= (unsigned char)(got[i] ^ want[i % (wl ? wl : 1)]);
    return !diff;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct serve_server *s = cls;
    struct serve_conn *cn = *con_cls;
    if (!cn) {
        if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
        cn->route = "other";
        *con_cls = cn;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cn->too_big && cn->body.len + *upload_size <= s->o.max_body) {
            if (!serve_buf_add(&cn->body, upload, *upload_size)) cn->too_big = true;
        } else {
            cn->too_big = true;
            free(cn->body.data);
            cn->body = (struct serve_buf){0};
            /* Read and dropped so that the client sees the 413; a body
             * that goes on past four limits (and 64 MiB) is cut off. */
            cn->dropped += *upload_size;
            if (cn->dropped > 4 * s->o.max_body && cn->dropped > ((size_t)64 << 20)) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    struct serve_error e;
    if (cn->too_big) {
        serve_fail(&e, 413, NULL, "The request body is larger than this server's limit of %zu bytes "
                   "(--max-body).", s->o.max_body);
        return serve_reply_error(c, cn, &e);
    }
    if (s->o.api_key && s->o.api_key[0] && strcmp(url, "/health")) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        const char *key = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
        if (!key_matches(s->o.api_key, key)) {
            serve_fail(&e, 401, NULL, key ? "The API key is not this server's; send the key it was started with."
                                          : "This server needs an API key: send 'Authorization: Bearer KEY'.");
            e.code = "invalid_api_key";
            return serve_reply_error(c, cn, &e);
        }
    }
    return serve_route(s, c, cn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)c, (void)t;
    struct serve_server *s = cls;
    struct serve_conn *cn = *con_cls;
    if (!cn) return;
    if (cn->in_flight) atomic_fetch_sub(&s->in_flight, 1);
    if (cn->status) serve_metrics_request(cn->route, cn->status);
    free(cn->body.data);
    free(cn);
    *con_cls = NULL;
}

struct MHD_Daemon *serve_http_start(struct serve_server *s, int *port, char *err, size_t err_cap)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE },
                    *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", s->o.port);
    int rc = getaddrinfo(s->o.host, service, &hints, &ai);
    if (rc) {
        snprintf(err, err_cap, "cannot listen on '%s': %s; give --host an address such as 127.0.0.1.",
                 s->o.host, gai_strerror(rc));
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)s->o.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o.timeout_s,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        snprintf(err, err_cap, "cannot listen on %s port %d: %s; choose another --port (or stop what uses it).",
                 s->o.host, s->o.port, strerror(errno ? errno : EADDRINUSE));
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : s->o.port;
    return d;
}
