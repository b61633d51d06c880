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

/* Four hex digits at p, or -1. */
static long hex4(const char *p)
{
    long u = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        u = u * 16 + d;
    }
    return u;
}

/* A \u escape after the "\u" at ps->p (a surrogate pair takes the second
 * escape too) as UTF-8 into utf8; its length, or 0 after a failure. */
static int parse_u_escape(struct parser *ps, char utf8[4])
{
    long u = hex4(ps->p);
    if (u < 0) return fail(ps, "bad \\u escape in a string"), 0;
    ps->p += 4;
    if (u >= 0xD800 && u <= 0xDBFF) {
        const long lo = ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return fail(ps, "a lone surrogate in a \\u escape"), 0;
        ps->p += 6;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
        return fail(ps, "a lone surrogate in a \\u escape"), 0;
    }
    /* the tree's strings are C strings: a NUL would cut them short unseen */
    if (u == 0) return fail(ps, "\\u0000 in a string"), 0;
    if (u < 0x80) { utf8[0] = (char)u; return 1; }
    if (u < 0x800) {
        utf8[0] = (char)(0xC0 | (u >> 6));
        utf8[1] = (char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        utf8[0] = (char)(0xE0 | (u >> 12));
        utf8[1] = (char)(0x80 | ((u >> 6) & 0x3F));
        utf8[2] = (char)(0x80 | (u & 0x3F));
        return 3;
    }
    utf8[0] = (char)(0xF0 | (u >> 18));
    utf8[1] = (char)(0x80 | ((u >> 12) & 0x3F));
    utf8[2] = (char)(0x80 | ((u >> 6) & 0x3F));
    utf8[3] = (char)(0x80 | (u & 0x3F));
    return 4;
}

static char *parse_string(struct parser *ps)
{
    if (*ps->p != '"') return fail(ps, "expected a string"), NULL;
    ps->p++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    if (!out) return fail(ps, "out of memory"), NULL;
    while (*ps->p && *ps->p != '"') {
        char bytes[4] = { *ps->p++ };
        int k = 1;
        if (bytes[0] == '\\') {
            char e = *ps->p++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *m = e ? strchr(from, e) : NULL;
            if (m) bytes[0] = to[m - from];
            else if (e == 'u') k = parse_u_escape(ps, bytes);
            else k = fail(ps, "bad escape in a string");
            if (!k) { free(out); return NULL; }
        }
        if (n + (size_t)k + 1 > cap) {
            char *m = realloc(out, cap *= 2);
            if (!m) { free(out); return fail(ps, "out of memory"), NULL; }
            out = m;
        }
        memcpy(out + n, bytes, (size_t)k);
        n += (size_t)k;
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
