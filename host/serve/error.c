/* error.c — the OpenAI error object (error.h). */
#include "error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *type_of(int status)
{
    switch (status) {
    case 400: case 404: case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 503: return "unavailable_error";
    default: return "server_error";
    }
}

_Bool serve_fail(struct serve_error *e, int status, const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type = type_of(status);
    e->code = status == 404 && param && !strcmp(param, "model") ? "model_not_found" : NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return 0;
}

char *serve_error_json(const struct serve_error *e)
{
    json_t *inner = json_object();
    json_object_set_new(inner, "message", json_string(e->message));
    json_object_set_new(inner, "type", json_string(e->type ? e->type : type_of(e->status)));
    json_object_set_new(inner, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(inner, "code", e->code ? json_string(e->code) : json_integer(e->status));
    json_t *root = json_pack("{s:o}", "error", inner);
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return s;
}
