/*
 * respond.c — the JSON bodies of completion answers in OpenAI's shapes:
 * chat.completion / text_completion, their streamed chunks, usage, and
 * logprobs (the chat form {content: [...]}, the legacy form of parallel
 * arrays).
 */
#include <jansson.h>
#include <stdio.h>

#include "server.h"

static json_t *piece_of(const struct serve_server *s, int32_t id, json_t **bytes)
{
    char buf[256];
    size_t n = bp_tokenizer_piece(s->tok, id, true, buf, sizeof buf);
    if (n > sizeof buf) n = sizeof buf;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    return serve_json_text(buf, n);
}

static json_t *chat_logprobs(const struct serve_server *s, const struct serve_job *j, size_t from, size_t to)
{
    json_t *content = json_array();
    for (size_t i = from; i < to; i++) {
        const struct serve_token_lp *lp = &j->lp[i];
        json_t *bytes, *tok = piece_of(s, lp->id, &bytes), *top = json_array();
        for (int k = 0; k < lp->n_top; k++) {
            json_t *tb, *tt = piece_of(s, lp->top_id[k], &tb);
            json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", tt, "logprob", (double)lp->top_lp[k],
                                                 "bytes", tb));
        }
        json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", tok, "logprob",
                                                 (double)lp->logprob, "bytes", bytes, "top_logprobs", top));
    }
    return json_pack("{s:o}", "content", content);
}

static json_t *legacy_logprobs(const struct serve_server *s, const struct serve_job *j, size_t from, size_t to,
                               size_t offset)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = from; i < to; i++) {
        const struct serve_token_lp *lp = &j->lp[i];
        char buf[256];
        size_t n = bp_tokenizer_piece(s->tok, lp->id, true, buf, sizeof buf);
        json_array_append_new(tokens, serve_json_text(buf, n < sizeof buf ? n : sizeof buf));
        json_array_append_new(lps, json_real(lp->logprob));
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += n;
        json_t *top = json_object();
        for (int k = 0; k < lp->n_top; k++) {
            char tb[256];
            size_t tn = bp_tokenizer_piece(s->tok, lp->top_id[k], true, tb, sizeof tb);
            json_t *key = serve_json_text(tb, tn < sizeof tb ? tn : sizeof tb);
            if (key) json_object_set_new(top, json_string_value(key), json_real(lp->top_lp[k]));
            json_decref(key);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

static json_t *usage(const struct serve_job *j)
{
    return json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens",
                     (json_int_t)j->n_gen, "total_tokens", (json_int_t)(j->n_prompt + j->n_gen));
}

static json_t *envelope(const struct serve_server *s, const struct serve_job *j, const char *object, json_t *choice)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", s->model_id, "choices", choice);
}

static json_t *finish_of(const char *finish)
{
    return finish ? json_string(finish) : json_null();
}

json_t *serve_body_final(const struct serve_server *s, const struct serve_job *j)
{
    const bool chat = j->p.kind == SERVE_CHAT;
    json_t *text = serve_json_text(j->text.data ? j->text.data : "", j->text.len);
    json_t *lp = !j->p.logprobs ? json_null()
                 : chat         ? chat_logprobs(s, j, 0, j->n_lp)
                                : legacy_logprobs(s, j, 0, j->n_lp, 0);
    json_t *choice = chat ? json_pack("{s:i,s:{s:s,s:o},s:o,s:o}", "index", 0, "message", "role", "assistant",
                                      "content", text, "logprobs", lp, "finish_reason", finish_of(j->finish))
                          : json_pack("{s:o,s:i,s:o,s:o}", "text", text, "index", 0, "logprobs", lp,
                                      "finish_reason", finish_of(j->finish));
    json_t *body = envelope(s, j, chat ? "chat.completion" : "text_completion", choice);
    if (body) json_object_set_new(body, "usage", usage(j));
    return body;
}

json_t *serve_body_chunk(const struct serve_server *s, const struct serve_job *j, const char *text, size_t len,
                         size_t lp_from, size_t lp_to, const char *finish, bool role)
{
    const bool chat = j->p.kind == SERVE_CHAT;
    json_t *lp = !j->p.logprobs || lp_from == lp_to ? json_null()
                 : chat                             ? chat_logprobs(s, j, lp_from, lp_to)
                                                    : legacy_logprobs(s, j, lp_from, lp_to, 0);
    json_t *choice;
    if (chat) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (len || role) json_object_set_new(delta, "content", serve_json_text(text, len));
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "delta", delta, "logprobs", lp, "finish_reason",
                           finish_of(finish));
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", serve_json_text(text, len), "logprobs", lp,
                           "finish_reason", finish_of(finish));
    }
    return envelope(s, j, chat ? "chat.completion.chunk" : "text_completion", choice);
}

json_t *serve_body_usage_chunk(const struct serve_server *s, const struct serve_job *j)
{
    const bool chat = j->p.kind == SERVE_CHAT;
    return json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", j->id, "object",
                     chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created, "model",
                     s->model_id, "choices", "usage", usage(j));
}
