/*
 * request.c — completion request bodies to serve_params (request.h). Each
 * field is read by one helper of its JSON type, which names the field in
 * the 400 it gives; fields this server does not know are ignored, as
 * OpenAI's clients send several.
 */
#include "request.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* The field name, absent or null: *given false. Otherwise a JSON integer
 * in [lo, hi]. */
static bool get_int(json_t *root, const char *name, int64_t lo, int64_t hi, int64_t *out, bool *given,
                    struct serve_error *e)
{
    json_t *v = json_object_get(root, name);
    *given = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v))
        return serve_fail(e, 400, name, "'%s' must be an integer from %lld to %lld.", name, (long long)lo,
                          (long long)hi);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return serve_fail(e, 400, name, "'%s' is %lld; it must be from %lld to %lld.", name, (long long)x,
                          (long long)lo, (long long)hi);
    *out = x;
    *given = true;
    return true;
}

static bool get_num(json_t *root, const char *name, double lo, double hi, float *out, struct serve_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v))
        return serve_fail(e, 400, name, "'%s' must be a number from %g to %g.", name, lo, hi);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return serve_fail(e, 400, name, "'%s' is %g; it must be from %g to %g.", name, x, lo, hi);
    *out = (float)x;
    return true;
}

static bool get_bool(json_t *root, const char *name, bool *out, struct serve_error *e)
{
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return serve_fail(e, 400, name, "'%s' must be true or false.", name);
    *out = json_is_true(v);
    return true;
}

static char *dup_string(json_t *v, size_t *len)
{
    size_t n = json_string_length(v);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, json_string_value(v), n);
    s[n] = '\0';
    if (len) *len = n;
    return s;
}

static bool oom(struct serve_error *e)
{
    return serve_fail(e, 500, NULL, "The server ran out of memory reading the request; try again later.");
}

/* "content": a string, null, or an array of {"type":"text","text":...} parts. */
static bool message_content(json_t *c, size_t i, char **out, struct serve_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        *out = strdup("");
        return *out ? true : oom(e);
    }
    if (json_is_string(c)) {
        *out = dup_string(c, NULL);
        return *out ? true : oom(e);
    }
    if (!json_is_array(c))
        return serve_fail(e, 400, param, "'%s' must be a string or an array of text parts.", param);
    struct serve_buf b = {0};
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            free(b.data);
            return serve_fail(e, 400, param, "'%s[%zu]' must be {\"type\": \"text\", \"text\": ...}; "
                              "only text parts are supported.", param, k);
        }
        if (!serve_buf_add(&b, json_string_value(text), json_string_length(text))) {
            free(b.data);
            return oom(e);
        }
    }
    if (!serve_buf_add(&b, "", 0)) return oom(e);
    *out = b.data;
    return true;
}

static bool parse_messages(json_t *root, struct serve_params *p, struct serve_error *e)
{
    json_t *m = json_object_get(root, "messages");
    if (!m) return serve_fail(e, 400, "messages", "'messages' is required: an array of {role, content}.");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return serve_fail(e, 400, "messages", "'messages' must be a non-empty array of {role, content}.");
    const size_t n = json_array_size(m);
    p->msgs = calloc(n, sizeof *p->msgs);
    if (!p->msgs) return oom(e);
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return serve_fail(e, 400, param, "'%s' must be an object {role, content}.", param);
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        size_t r = 0;
        while (json_is_string(role) && r < sizeof roles / sizeof roles[0] && strcmp(json_string_value(role), roles[r]))
            r++;
        if (!json_is_string(role) || r == sizeof roles / sizeof roles[0])
            return serve_fail(e, 400, param, "'%s' must be one of system, developer, user, assistant, tool.",
                              param);
        /* Templates know "system"; OpenAI's newer name for it is "developer". */
        p->msgs[i].role = roles[r == 1 ? 0 : r];
        char *content = NULL;
        if (!message_content(json_object_get(msg, "content"), i, &content, e)) return false;
        p->msgs[i].content = content;
        p->n_msgs = i + 1;
    }
    return true;
}

static bool parse_prompt(json_t *root, struct serve_params *p, struct serve_error *e)
{
    json_t *v = json_object_get(root, "prompt");
    if (!v) return serve_fail(e, 400, "prompt", "'prompt' is required: a string or an array of token ids.");
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)))
        v = json_array_get(v, 0);   /* one prompt in a list */
    if (json_is_string(v)) {
        p->prompt = dup_string(v, &p->prompt_len);
        return p->prompt ? true : oom(e);
    }
    if (!json_is_array(v) || json_array_size(v) == 0)
        return serve_fail(e, 400, "prompt", "'prompt' must be a string or a non-empty array of token ids "
                          "(one prompt per request).");
    const size_t n = json_array_size(v);
    p->prompt_ids = malloc(n * sizeof *p->prompt_ids);
    if (!p->prompt_ids) return oom(e);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return serve_fail(e, 400, "prompt", "'prompt[%zu]' must be a token id (an integer >= 0); one "
                              "prompt per request.", i);
        p->prompt_ids[i] = (int32_t)json_integer_value(t);
    }
    p->n_prompt_ids = n;
    return true;
}

static bool parse_stop(json_t *root, struct serve_params *p, struct serve_error *e)
{
    json_t *v = json_object_get(root, "stop");
    if (!v || json_is_null(v)) return true;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return serve_fail(e, 400, "stop", "'stop' must be a string or an array of strings.");
    if (n > SERVE_MAX_STOP)
        return serve_fail(e, 400, "stop", "'stop' has %zu strings; at most %d are allowed.", n, SERVE_MAX_STOP);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return serve_fail(e, 400, "stop", "'stop' must hold non-empty strings.");
        if (!(p->stop[i] = dup_string(s, NULL))) return oom(e);
        p->n_stop = i + 1;
    }
    return true;
}

static bool parse_logprobs(json_t *root, struct serve_params *p, struct serve_error *e)
{
    json_t *v = json_object_get(root, "logprobs");
    int64_t k = 0;
    bool given;
    if (p->kind == SERVE_CHAT) {
        if (!get_bool(root, "logprobs", &p->logprobs, e)) return false;
        if (!get_int(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &k, &given, e)) return false;
        if (given && !p->logprobs)
            return serve_fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true.");
    } else if (v && !json_is_null(v)) {
        /* The legacy completions API: an integer, the number of alternatives. */
        if (!get_int(root, "logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &k, &given, e)) return false;
        p->logprobs = true;
    }
    p->top_logprobs = (int)k;
    return true;
}

bool serve_params_parse(const char *body, size_t len, enum serve_kind kind, struct serve_params *p,
                        struct serve_error *e)
{
    *p = (struct serve_params){ .kind = kind, .max_tokens = -1 };
    const struct bp_sampling_params defaults = BP_SAMPLING_DEFAULTS;
    p->sp = defaults;
    p->sp.temp = 1.0f;     /* OpenAI's defaults: temperature 1, top_p 1 */
    p->sp.top_p = 1.0f;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return serve_fail(e, 400, NULL, "The body is not valid JSON: %s (line %d, column %d).", je.text,
                          je.line, je.column);
    bool ok = false, given;
    int64_t x;
    if (!json_is_object(root)) {
        serve_fail(e, 400, NULL, "The body must be a JSON object.");
        goto out;
    }
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) {
            serve_fail(e, 400, "model", "'model' must be a string.");
            goto out;
        }
        if (!(p->model = dup_string(model, NULL))) goto oom;
    }
    if (kind == SERVE_CHAT ? !parse_messages(root, p, e) : !parse_prompt(root, p, e)) goto out;
    /* max_completion_tokens is the chat API's newer name; either works. */
    if (!get_int(root, "max_tokens", 1, INT32_MAX, &x, &given, e)) goto out;
    if (given) p->max_tokens = x;
    if (!get_int(root, "max_completion_tokens", 1, INT32_MAX, &x, &given, e)) goto out;
    if (given) p->max_tokens = x;
    if (!get_int(root, "n", 1, 1, &x, &given, e)) goto out;
    if (!get_num(root, "temperature", 0, 2, &p->sp.temp, e) || !get_num(root, "top_p", 0, 1, &p->sp.top_p, e) ||
        !get_num(root, "min_p", 0, 1, &p->sp.min_p, e) ||
        !get_num(root, "repeat_penalty", 0.01, 100, &p->sp.repeat_penalty, e))
        goto out;
    if (!get_int(root, "top_k", 0, 1 << 30, &x, &given, e)) goto out;
    if (given) p->sp.top_k = (int32_t)x;
    if (!get_int(root, "repeat_last_n", 0, 1 << 20, &x, &given, e)) goto out;
    if (given) p->sp.repeat_last_n = (int32_t)x;
    if (!get_int(root, "seed", INT64_MIN, INT64_MAX, &x, &p->seed_given, e)) goto out;
    if (p->seed_given) p->sp.seed = (uint64_t)x;
    /* OpenAI's penalties have no equivalent in this sampler: checked, then ignored. */
    float ignored = 0;
    if (!get_num(root, "frequency_penalty", -2, 2, &ignored, e) ||
        !get_num(root, "presence_penalty", -2, 2, &ignored, e))
        goto out;
    if (!parse_stop(root, p, e) || !get_bool(root, "stream", &p->stream, e) || !parse_logprobs(root, p, e))
        goto out;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            serve_fail(e, 400, "stream_options", "'stream_options' must be an object.");
            goto out;
        }
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu)) {
            serve_fail(e, 400, "stream_options.include_usage", "'stream_options.include_usage' must be true or false.");
            goto out;
        }
        p->include_usage = json_is_true(iu);
    }
    ok = true;
    goto out;
oom:
    oom(e);
out:
    json_decref(root);
    return ok;
}

void serve_params_free(struct serve_params *p)
{
    for (size_t i = 0; i < p->n_msgs; i++) free((char *)p->msgs[i].content);
    free(p->msgs);
    free(p->model);
    free(p->prompt);
    free(p->prompt_ids);
    for (size_t i = 0; i < p->n_stop; i++) free(p->stop[i]);
    *p = (struct serve_params){0};
}
