/*
 * text.h — the text side of a generation: a growable byte buffer, JSON
 * strings from bytes that may not be UTF-8, and the stop-string matcher
 * that decides how much generated text may be sent yet.
 */
#ifndef BP_SERVE_TEXT_H
#define BP_SERVE_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct serve_buf {
    char *data;
    size_t len, cap;
};

/* Appends s[0..n) and keeps data NUL-terminated; false when memory runs out
 * (the buffer is unchanged then). */
bool serve_buf_add(struct serve_buf *b, const char *s, size_t n);

/* A JSON string of s[0..n): each byte that is not part of valid UTF-8
 * becomes U+FFFD. NULL when memory runs out. */
json_t *serve_json_text(const char *s, size_t n);

/* Stop strings over generated text. Text is pushed as it is decoded (whole
 * UTF-8 characters); what may be released is everything except a tail that
 * could still grow into a stop string. A stop string that appears ends the
 * text just before it. */
struct serve_stop {
    struct serve_buf text;          /* all the text pushed, cut at a stop string */
    size_t released;                /* bytes handed out so far */
    char *const *stops;             /* borrowed, n_stops non-empty strings */
    size_t n_stops;
    bool stopped;
};

/* Starts over with stops[0..n) (borrowed; they must outlive s). */
void serve_stop_init(struct serve_stop *s, char *const *stops, size_t n);
void serve_stop_free(struct serve_stop *s);
/* Pushes piece[0..n); returns false when memory runs out. Afterwards
 * s->stopped says whether a stop string appeared; serve_stop_take gives
 * what can be released. */
bool serve_stop_push(struct serve_stop *s, const char *piece, size_t n);
/* The bytes that may be sent now (at *out, *len of them; valid until the
 * next push), marked as released. With final, everything left goes. */
void serve_stop_take(struct serve_stop *s, bool final, const char **out, size_t *len);

#endif /* BP_SERVE_TEXT_H */
