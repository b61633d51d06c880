/* json_read.c — recursive-descent JSON reader (json_read.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

#define MAX_DEPTH 64

struct parser {
    const char *s, *p;
    char *err;
    size_t cap;
    bool failed;
};

static bool fail(struct parser *ps, const char *what)
{
    if (!ps->failed)
        snprintf(ps->err, ps->cap, "%s at byte %zu", what, (size_t)(ps->p - ps->s));
    ps->failed = true;
    return false;
}

static void skip_ws(struct parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static bool parse_value(struct parser *ps, struct json_value *v, int depth);

static char *parse_string(struct parser *ps)
{
    if (*ps->p != '"') return fail(ps, "expected a string"), NULL;
    ps->p++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    if (!out) return fail(ps, "out of memory"), NULL;
    while (*ps->p && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            char e = *ps->p++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *k = e ? strchr(from, e) : NULL;
            if (k) c = to[k - from];
            else if (e == 'u' && strlen(ps->p) >= 4) {
                unsigned u = 0;
                if (sscanf(ps->p, "%4x", &u) != 1) break;
                ps->p += 4;
                c = u < 0x80 ? (char)u : '?';
            } else {
                free(out);
                return fail(ps, "bad escape in a string"), NULL;
            }
        }
        if (n + 2 > cap) {
            char *m = realloc(out, cap *= 2);
            if (!m) { free(out); return fail(ps, "out of memory"), NULL; }
            out = m;
        }
        out[n++] = c;
    }
    if (*ps->p != '"') { free(out); return fail(ps, "unterminated string"), NULL; }
    ps->p++;
    out[n] = '\0';
    return out;
}

/* Arrays and objects: members separated by commas up to `close`. */
static bool parse_members(struct parser *ps, struct json_value *v, char close, int depth)
{
    size_t cap = 0;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) { ps->p++; return true; }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            struct json_value *items = realloc(v->items, cap * sizeof *items);
            if (!items) return fail(ps, "out of memory");
            v->items = items;
            if (close == '}') {
                char **keys = realloc(v->keys, cap * sizeof *keys);
                if (!keys) return fail(ps, "out of memory");
                v->keys = keys;
            }
        }
        skip_ws(ps);
        if (close == '}') {
            char *key = parse_string(ps);
            if (!key) return false;
            v->keys[v->n] = key;
        }
        memset(&v->items[v->n], 0, sizeof *v->items);
        v->n++;
        if (close == '}') {
            skip_ws(ps);
            if (*ps->p != ':') return fail(ps, "expected ':'");
            ps->p++;
        }
        if (!parse_value(ps, &v->items[v->n - 1], depth + 1)) return false;
        skip_ws(ps);
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) { ps->p++; return true; }
        return fail(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bool parse_value(struct parser *ps, struct json_value *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > MAX_DEPTH) return fail(ps, "nesting too deep");
    skip_ws(ps);
    static const struct { const char *word; enum json_kind kind; bool b; } words[] = {
        {"null", JSON_NULL, false}, {"true", JSON_BOOL, true}, {"false", JSON_BOOL, false}};
    for (size_t i = 0; i < 3; i++)
        if (!strncmp(ps->p, words[i].word, strlen(words[i].word))) {
            ps->p += strlen(words[i].word);
            v->kind = words[i].kind;
            v->boolean = words[i].b;
            return true;
        }
    if (*ps->p == '"') {
        v->kind = JSON_STRING;
        return (v->string = parse_string(ps)) != NULL;
    }
    if (*ps->p == '[') { v->kind = JSON_ARRAY; return parse_members(ps, v, ']', depth); }
    if (*ps->p == '{') { v->kind = JSON_OBJECT; return parse_members(ps, v, '}', depth); }
    char *end;
    v->number = strtod(ps->p, &end);
    if (end == ps->p) return fail(ps, "expected a value");
    v->kind = JSON_NUMBER;
    ps->p = end;
    return true;
}

static void free_members(struct json_value *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free_members(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
}

void json_value_free(struct json_value *v)
{
    if (!v) return;
    free_members(v);
    free(v);
}

struct json_value *json_read_file(const char *path, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot open '%s'", path);
        return NULL;
    }
    size_t n = 0, size = 4096;
    char *text = malloc(size + 1);
    for (size_t got; text && (got = fread(text + n, 1, size - n, f)) > 0;) {
        n += got;
        if (n == size) {
            char *m = realloc(text, (size *= 2) + 1);
            if (!m) { free(text); text = NULL; }
            else text = m;
        }
    }
    fclose(f);
    if (!text) {
        snprintf(err, cap, "out of memory reading '%s'", path);
        return NULL;
    }
    text[n] = '\0';
    struct parser ps = {.s = text, .p = text, .err = err, .cap = cap};
    struct json_value *v = calloc(1, sizeof *v);
    bool ok = v && parse_value(&ps, v, 0);
    if (ok) {
        skip_ws(&ps);
        if (*ps.p) ok = fail(&ps, "trailing text after the document");
    } else if (!v) {
        snprintf(err, cap, "out of memory");
    }
    free(text);
    if (!ok) {
        json_value_free(v);
        return NULL;
    }
    return v;
}

const struct json_value *json_member(const struct json_value *v, const char *key)
{
    if (!v || v->kind != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

const char *json_member_string(const struct json_value *v, const char *key, const char *fallback)
{
    const struct json_value *m = json_member(v, key);
    return m && m->kind == JSON_STRING ? m->string : fallback;
}

double json_member_number(const struct json_value *v, const char *key, double fallback)
{
    const struct json_value *m = json_member(v, key);
    return m && m->kind == JSON_NUMBER ? m->number : fallback;
}
