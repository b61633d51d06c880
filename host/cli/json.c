/* json.c — the streaming JSON writer (see json.h). */
#include <inttypes.h>
#include <math.h>

#include "json.h"

void json_init(struct json_writer *w, FILE *f)
{
    w->f = f;
    w->depth = 0;
    w->has_items[0] = false;
}

void json_write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            /* Other control characters must be escaped; bytes >= 0x80 pass
             * through (plugin strings are expected to be UTF-8). */
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void indent(struct json_writer *w)
{
    for (int i = 0; i < w->depth; i++) fputs("  ", w->f);
}

/* Comma, newline, indentation and "key": for the next value. */
static void item(struct json_writer *w, const char *key)
{
    if (w->depth > 0) {
        if (w->has_items[w->depth]) fputc(',', w->f);
        fputc('\n', w->f);
        indent(w);
        w->has_items[w->depth] = true;
    }
    if (key) {
        json_write_escaped(w->f, key);
        fputs(": ", w->f);
    }
}

static void container_open(struct json_writer *w, const char *key, char c)
{
    item(w, key);
    fputc(c, w->f);
    if (w->depth + 1 < JSON_MAX_DEPTH) w->depth++;
    w->has_items[w->depth] = false;
}

static void container_close(struct json_writer *w, char c)
{
    bool had = w->has_items[w->depth];
    if (w->depth > 0) w->depth--;
    if (had) {
        fputc('\n', w->f);
        indent(w);
    }
    fputc(c, w->f);
}

void json_object_begin(struct json_writer *w, const char *key) { container_open(w, key, '{'); }
void json_object_end(struct json_writer *w) { container_close(w, '}'); }
void json_array_begin(struct json_writer *w, const char *key) { container_open(w, key, '['); }
void json_array_end(struct json_writer *w) { container_close(w, ']'); }

void json_string(struct json_writer *w, const char *key, const char *value)
{
    item(w, key);
    if (value) json_write_escaped(w->f, value);
    else fputs("null", w->f);
}

void json_int(struct json_writer *w, const char *key, int64_t value)
{
    item(w, key);
    fprintf(w->f, "%" PRId64, value);
}

void json_uint(struct json_writer *w, const char *key, uint64_t value)
{
    item(w, key);
    fprintf(w->f, "%" PRIu64, value);
}

void json_double(struct json_writer *w, const char *key, double value)
{
    item(w, key);
    if (isfinite(value)) fprintf(w->f, "%.10g", value);
    else fputs("null", w->f);
}

void json_bool(struct json_writer *w, const char *key, bool value)
{
    item(w, key);
    fputs(value ? "true" : "false", w->f);
}

void json_null(struct json_writer *w, const char *key)
{
    item(w, key);
    fputs("null", w->f);
}

void json_finish(struct json_writer *w)
{
    fputc('\n', w->f);
    fflush(w->f);
}
