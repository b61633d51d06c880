/*
 * error.h — the OpenAI error object every failing request gets:
 * {"error":{"message","type","param","code"}}, with its HTTP status.
 */
#ifndef BP_SERVE_ERROR_H
#define BP_SERVE_ERROR_H

struct serve_error {
    int status;             /* HTTP status: 400, 401, 404, 413, 500, 503 */
    const char *type;       /* "invalid_request_error", "authentication_error", ... */
    const char *code;       /* NULL or a short code ("model_not_found") */
    char param[64];         /* the request field at fault; "" when none */
    char message[512];      /* one sentence: what was wrong and what to do */
};

/* Sets e to status, type and the formatted message; param may be NULL.
 * Returns false, so that a validator can `return serve_fail(...)`. */
_Bool serve_fail(struct serve_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The error object as compact JSON (malloc'd, the caller frees); NULL
 * when memory runs out. */
char *serve_error_json(const struct serve_error *e);

#endif /* BP_SERVE_ERROR_H */
