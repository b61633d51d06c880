/* text.c — byte buffers, UTF-8-safe JSON strings and stop strings (text.h). */
#include "text.h"

#include <stdlib.h>
#include <string.h>

bool serve_buf_add(struct serve_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return false;
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* The length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    unsigned cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

json_t *serve_json_text(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_seq(u + i, n - i);
        if (!l || (l == 1 && u[i] == 0)) break;
        i += l;
    }
    if (i == n) return json_stringn(s, n);
    struct serve_buf b = {0};
    for (i = 0; i < n;) {
        size_t l = utf8_seq(u + i, n - i);
        bool ok = l ? serve_buf_add(&b, s + i, l) : serve_buf_add(&b, "\xEF\xBF\xBD", 3);
        if (!ok) {
            free(b.data);
            return NULL;
        }
        i += l ? l : 1;
    }
    /* NUL is valid UTF-8 and json_stringn keeps it (escaped as \u0000). */
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    free(b.data);
    return j;
}

void serve_stop_init(struct serve_stop *s, char *const *stops, size_t n)
{
    *s = (struct serve_stop){ .stops = stops, .n_stops = n };
}

void serve_stop_free(struct serve_stop *s)
{
    free(s->text.data);
    s->text = (struct serve_buf){0};
}

bool serve_stop_push(struct serve_stop *s, const char *piece, size_t n)
{
    if (s->stopped) return true;
    const size_t old = s->text.len;
    if (!serve_buf_add(&s->text, piece, n)) return false;
    /* The earliest stop string that ends in the new bytes. */
    size_t cut = s->text.len;
    for (size_t k = 0; k < s->n_stops; k++) {
        const size_t sl = strlen(s->stops[k]);
        size_t from = old + 1 > sl ? old + 1 - sl : 0;
        const char *hit = s->text.len >= sl ? memmem(s->text.data + from, s->text.len - from, s->stops[k], sl) : NULL;
        if (hit && (size_t)(hit - s->text.data) < cut) cut = (size_t)(hit - s->text.data);
    }
    if (cut < s->text.len) {
        s->text.len = cut;
        s->text.data[cut] = '\0';
        s->stopped = true;
        if (s->released > cut) s->released = cut;   /* cannot happen: a tail that starts a stop is held */
    }
    return true;
}

void serve_stop_take(struct serve_stop *s, bool final, const char **out, size_t *len)
{
    size_t end = s->text.len;
    if (!final && !s->stopped) {
        /* Hold back the longest tail that is a proper prefix of a stop string. */
        size_t hold = 0;
        for (size_t k = 0; k < s->n_stops; k++) {
            const size_t sl = strlen(s->stops[k]);
            for (size_t t = sl - 1; t > hold; t--)
                if (t <= s->text.len && !memcmp(s->text.data + s->text.len - t, s->stops[k], t)) {
                    hold = t;
                    break;
                }
        }
        end = s->text.len - hold;
        /* Never split a UTF-8 character. */
        while (end > s->released && ((unsigned char)s->text.data[end] & 0xC0) == 0x80) end--;
    }
    if (end < s->released) end = s->released;
    *out = s->text.data ? s->text.data + s->released : "";
    *len = end - s->released;
    s->released = end;
}
