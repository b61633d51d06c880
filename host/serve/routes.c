/*
 * routes.c — the endpoints: GET /health, /v1/models, /metrics; POST
 * /v1/chat/completions, /v1/completions, /tokenize, /detokenize. A
 * completion is checked whole (fields, model, prompt length against the
 * slot's context) before it is queued, so that every refusal is an HTTP
 * status with an error object, never a broken stream.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "metrics.h"
#include "request.h"
#include "server.h"

static enum MHD_Result fail(struct MHD_Connection *c, struct serve_conn *cn, int status, const char *param,
                            const char *msg)
{
    struct serve_error e;
    serve_fail(&e, status, param, "%s", msg);
    return serve_reply_error(c, cn, &e);
}

static enum MHD_Result health(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn)
{
    (void)s;
    return serve_reply_json(c, cn, 200, json_pack("{s:s,s:i}", "status", "ok", "slots_busy", serve_metrics_busy()));
}

static enum MHD_Result models(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn)
{
    return serve_reply_json(c, cn, 200,
                            json_pack("{s:s,s:[{s:s,s:s,s:i,s:s,s:{s:I,s:I,s:i}}]}", "object", "list", "data", "id",
                                      s->model_id, "object", "model", "created", 0, "owned_by", "backplane", "meta",
                                      "n_vocab", (json_int_t)s->n_vocab, "n_ctx", (json_int_t)s->n_ctx, "slots",
                                      s->o.parallel));
}

static enum MHD_Result metrics(struct MHD_Connection *c, struct serve_conn *cn)
{
    struct serve_buf b = {0};
    enum MHD_Result r;
    if (!serve_metrics_render(&b)) r = fail(c, cn, 500, NULL, "The server ran out of memory rendering the metrics.");
    else r = serve_reply(c, cn, 200, "text/plain; version=0.0.4", b.data, b.len);
    free(b.data);
    return r;
}

/* The body as a JSON object, or NULL after answering 400. */
static json_t *object_body(struct MHD_Connection *c, struct serve_conn *cn, enum MHD_Result *r)
{
    json_error_t je;
    json_t *root = json_loadb(cn->body.data ? cn->body.data : "", cn->body.len, 0, &je);
    if (root && json_is_object(root)) return root;
    json_decref(root);
    struct serve_error e;
    if (root) serve_fail(&e, 400, NULL, "The body must be a JSON object.");
    else serve_fail(&e, 400, NULL, "The body is not valid JSON: %s (line %d, column %d).", je.text, je.line, je.column);
    *r = serve_reply_error(c, cn, &e);
    return NULL;
}

static bool opt_bool(json_t *root, const char *name, bool def, bool *out, struct serve_error *e)
{
    json_t *v = json_object_get(root, name);
    *out = def;
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return serve_fail(e, 400, name, "'%s' must be true or false.", name);
    *out = json_is_true(v);
    return true;
}

static enum MHD_Result tokenize(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn)
{
    enum MHD_Result r;
    json_t *root = object_body(c, cn, &r);
    if (!root) return r;
    struct serve_error e;
    json_t *content = json_object_get(root, "content");
    bool add_special, parse_special, with_pieces;
    if (!json_is_string(content)) {
        serve_fail(&e, 400, "content", "'content' must be a string: the text to tokenize.");
        goto bad;
    }
    if (!opt_bool(root, "add_special", false, &add_special, &e) ||
        !opt_bool(root, "parse_special", true, &parse_special, &e) ||
        !opt_bool(root, "with_pieces", false, &with_pieces, &e))
        goto bad;
    int32_t *ids = NULL;
    size_t n = 0;
    unsigned flags = (add_special ? BP_TOKENIZE_ADD_SPECIAL : 0) | (parse_special ? BP_TOKENIZE_PARSE_SPECIAL : 0);
    const char *text = json_string_value(content);
    if (bp_tokenizer_encode(s->tok, text, json_string_length(content), flags, &ids, &n) != BP_OK) {
        serve_fail(&e, 500, NULL, "Tokenizing failed: %s", bp_last_error());
        goto bad;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(tokens, json_integer(ids[i]));
            continue;
        }
        char buf[256];
        size_t len = bp_tokenizer_piece(s->tok, ids[i], true, buf, sizeof buf);
        json_array_append_new(tokens, json_pack("{s:i,s:o}", "id", ids[i], "piece",
                                                serve_json_text(buf, len < sizeof buf ? len : sizeof buf)));
    }
    free(ids);
    json_decref(root);
    return serve_reply_json(c, cn, 200, json_pack("{s:o}", "tokens", tokens));
bad:
    json_decref(root);
    return serve_reply_error(c, cn, &e);
}

static enum MHD_Result detokenize(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn)
{
    enum MHD_Result r;
    json_t *root = object_body(c, cn, &r);
    if (!root) return r;
    struct serve_error e;
    json_t *tokens = json_object_get(root, "tokens");
    int32_t *ids = NULL;
    if (!json_is_array(tokens)) {
        serve_fail(&e, 400, "tokens", "'tokens' must be an array of token ids.");
        goto bad;
    }
    const size_t n = json_array_size(tokens);
    if (!(ids = malloc((n ? n : 1) * sizeof *ids))) {
        serve_fail(&e, 500, NULL, "The server ran out of memory; try again later.");
        goto bad;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->n_vocab) {
            serve_fail(&e, 400, "tokens", "'tokens[%zu]' must be a token id from 0 to %" PRId64 ".", i,
                       s->n_vocab - 1);
            goto bad;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    char *text = NULL;
    size_t len = 0;
    if (bp_tokenizer_decode(s->tok, ids, n, &text, &len) != BP_OK) {
        serve_fail(&e, 400, "tokens", "%s", bp_last_error());
        goto bad;
    }
    free(ids);
    json_decref(root);
    json_t *body = json_pack("{s:o}", "content", serve_json_text(text, len));
    free(text);
    return serve_reply_json(c, cn, 200, body);
bad:
    free(ids);
    json_decref(root);
    return serve_reply_error(c, cn, &e);
}

/* The prompt's token ids into j (chat: the template first), checked
 * against the vocabulary and the slot's context. */
static bool prompt_of(struct serve_server *s, struct serve_job *j, struct serve_error *e)
{
    struct serve_params *p = &j->p;
    const char *param = p->kind == SERVE_CHAT ? "messages" : "prompt";
    size_t n = 0;
    int32_t *ids = NULL;
    if (p->kind == SERVE_COMPLETION && p->prompt_ids) {
        for (size_t i = 0; i < p->n_prompt_ids; i++)
            if (p->prompt_ids[i] >= s->n_vocab)
                return serve_fail(e, 400, "prompt", "'prompt[%zu]' is %d, outside the vocabulary of %" PRId64
                                  " tokens.", i, p->prompt_ids[i], s->n_vocab);
        n = p->n_prompt_ids;
        if (!(ids = malloc(n * sizeof *ids))) return serve_fail(e, 500, NULL, "The server ran out of memory.");
        memcpy(ids, p->prompt_ids, n * sizeof *ids);
    } else {
        char *text = p->prompt, *buf = NULL;
        size_t len = p->prompt_len, cap = 0;
        if (p->kind == SERVE_CHAT) {
            char err[512];
            if (bp_chat_template_format(s->tmpl, p->msgs, p->n_msgs, true, &buf, &len, &cap, err, sizeof err) !=
                BP_OK) {
                free(buf);
                return serve_fail(e, 400, "messages", "The chat template cannot format these messages: %s", err);
            }
            text = buf;
        }
        bp_status st = bp_tokenizer_encode(s->tok, text ? text : "", len,
                                           BP_TOKENIZE_ADD_SPECIAL | BP_TOKENIZE_PARSE_SPECIAL, &ids, &n);
        free(buf);
        if (st != BP_OK) return serve_fail(e, 500, NULL, "Tokenizing the prompt failed: %s", bp_last_error());
    }
    j->prompt = ids;
    j->n_prompt = (int64_t)n;
    if (n == 0)
        return serve_fail(e, 400, param, "The prompt is empty and the model adds no BOS token; send some text.");
    if ((int64_t)n >= s->n_ctx)
        return serve_fail(e, 400, param, "The prompt has %zu tokens; a slot holds %" PRId64 " (--n-ctx), "
                          "so send a shorter one.", n, s->n_ctx);
    const int64_t room = s->n_ctx - (int64_t)n;
    if (p->max_tokens > room)
        return serve_fail(e, 400, "max_tokens", "The prompt has %zu tokens and max_tokens is %" PRId64 ", but a "
                          "slot holds %" PRId64 " (--n-ctx); ask for at most %" PRId64 ".", n, p->max_tokens,
                          s->n_ctx, room);
    j->max_tokens = p->max_tokens > 0 ? p->max_tokens : room;
    return true;
}

static enum MHD_Result completion(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn,
                                  enum serve_kind kind)
{
    struct serve_error e;
    struct serve_params p;
    if (atomic_load(&s->draining))
        return fail(c, cn, 503, NULL, "The server is shutting down; send the request to another server.");
    if (!serve_params_parse(cn->body.data ? cn->body.data : "", cn->body.len, kind, &p, &e)) {
        serve_params_free(&p);
        return serve_reply_error(c, cn, &e);
    }
    if (p.model && strcmp(p.model, s->model_id)) {
        serve_fail(&e, 404, "model", "The model '%.200s' is not served here; this server serves '%.200s' "
                   "(GET /v1/models).", p.model, s->model_id);
        serve_params_free(&p);
        return serve_reply_error(c, cn, &e);
    }
    const unsigned long long n = atomic_fetch_add(&s->next_id, 1);
    if (!p.seed_given) p.sp.seed = (uint64_t)serve_now() * 1000003ULL ^ (n * 0x9E3779B97F4A7C15ULL);
    struct serve_job *j = serve_job_new(&p);
    if (!j) {
        serve_params_free(&p);
        return fail(c, cn, 500, NULL, "The server ran out of memory; try again later.");
    }
    snprintf(j->id, sizeof j->id, "%s-%llu", kind == SERVE_CHAT ? "chatcmpl" : "cmpl", n);
    if (!prompt_of(s, j, &e)) {
        serve_job_release(j);
        return serve_reply_error(c, cn, &e);
    }
    if (!serve_engine_submit(s->engine, j)) {
        serve_job_release(j);
        return fail(c, cn, 503, NULL, atomic_load(&s->draining)
                                          ? "The server is shutting down; send the request to another server."
                                          : "Every slot is busy and the queue is full; try again shortly.");
    }
    atomic_fetch_add(&s->in_flight, 1);
    cn->in_flight = true;
    if (j->p.stream) return serve_reply_stream(s, c, cn, j);
    enum MHD_Result r;
    if (!serve_wait_done(c, j)) {
        serve_job_release(j);
        return MHD_NO;   /* nobody to answer */
    }
    pthread_mutex_lock(&j->mu);
    if (j->failed) {
        serve_fail(&e, 500, NULL, "%s.", j->err);
        r = serve_reply_error(c, cn, &e);
    } else {
        r = serve_reply_json(c, cn, 200, serve_body_final(s, j));
    }
    serve_metrics_observe(SERVE_HIST_REQUEST, serve_now() - j->t_arrive);
    pthread_mutex_unlock(&j->mu);
    serve_job_release(j);
    return r;
}

enum MHD_Result serve_route(struct serve_server *s, struct MHD_Connection *c, struct serve_conn *cn,
                            const char *url, const char *method)
{
    static const struct {
        const char *path, *method, *route;
    } table[] = {
        {"/health", "GET", "health"},
        {"/v1/health", "GET", "health"},
        {"/v1/models", "GET", "models"},
        {"/models", "GET", "models"},
        {"/metrics", "GET", "metrics"},
        {"/v1/chat/completions", "POST", "chat"},
        {"/chat/completions", "POST", "chat"},
        {"/v1/completions", "POST", "completions"},
        {"/completions", "POST", "completions"},
        {"/tokenize", "POST", "tokenize"},
        {"/detokenize", "POST", "detokenize"},
    };
    size_t i = 0;
    while (i < sizeof table / sizeof table[0] && strcmp(url, table[i].path)) i++;
    if (i == sizeof table / sizeof table[0]) {
        struct serve_error e;
        serve_fail(&e, 404, NULL, "There is no route %.200s %.200s; see GET /v1/models, POST /v1/chat/completions, "
                   "POST /v1/completions.", method, url);
        return serve_reply_error(c, cn, &e);
    }
    cn->route = table[i].route;
    if (strcmp(method, table[i].method)) {
        struct serve_error e;
        serve_fail(&e, 405, NULL, "%.200s takes %s, not %.32s.", url, table[i].method, method);
        e.type = "invalid_request_error";
        return serve_reply_error(c, cn, &e);
    }
    const char *r = table[i].route;
    if (!strcmp(r, "health")) return health(s, c, cn);
    if (!strcmp(r, "models")) return models(s, c, cn);
    if (!strcmp(r, "metrics")) return metrics(c, cn);
    if (!strcmp(r, "tokenize")) return tokenize(s, c, cn);
    if (!strcmp(r, "detokenize")) return detokenize(s, c, cn);
    return completion(s, c, cn, !strcmp(r, "chat") ? SERVE_CHAT : SERVE_COMPLETION);
}
