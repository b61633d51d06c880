/*
 * tokenizer_decode.c — token ids back to text: pieces (precomputed at load),
 * whole-sequence decode, and the streaming decoder that holds back a UTF-8
 * sequence split across tokens (byte-fallback tokens, byte-level BPE) so a
 * terminal never receives half a character.
 */
#include "tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "tokenizer_unicode.h"

static const char *piece(const struct bp_tokenizer *t, int32_t id, bool special, size_t *len)
{
    if (special && (t->type[id] == BP_TOK_CONTROL || t->type[id] == BP_TOK_UNKNOWN))
        return bp_tok_text(t, id, len);
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_arena + t->piece_off[id];
}

size_t bp_tokenizer_piece(const struct bp_tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    if (!t || id < 0 || id >= t->n) return 0;
    size_t len;
    const char *p = piece(t, id, special, &len);
    if (buf) memcpy(buf, p, len < cap ? len : cap);
    return len;
}

bp_status bp_tokenizer_decode(const struct bp_tokenizer *t, const int32_t *ids, size_t n, char **text,
                              size_t *len)
{
    size_t total = 0;
    if (!t || !text || !len || (!ids && n))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_tokenizer_decode needs a tokenizer, the ids "
                        "and places for the text and its length.");
    *text = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return bp__fail(BP_ERR_INVALID_ARGUMENT, "token %zu of %zu is %d, which is not a token "
                            "id in [0, %d).", i + 1, n, ids[i], t->n);
        total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return bp__fail(BP_ERR_OUT_OF_MEMORY, "out of memory decoding %zu tokens.", n);
    size_t used = 0;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = piece(t, ids[i], false, &pl);
        if (pl == 0) continue;
        /* The space SentencePiece put before the text is not the text's. */
        if (first && t->model == BP_TOK_SPM && t->add_space_prefix && p[0] == ' ') { p++; pl--; }
        first = false;
        memcpy(s + used, p, pl);
        used += pl;
    }
    s[used] = '\0';
    *text = s;
    *len = used;
    return BP_OK;
}

struct bp_token_stream {
    const struct bp_tokenizer *t;
    char *held;          /* bytes of an incomplete sequence, then the output */
    size_t n_held, cap;
    char *out;
    size_t out_cap;
};

struct bp_token_stream *bp_token_stream_new(const struct bp_tokenizer *t)
{
    struct bp_token_stream *s = t ? calloc(1, sizeof *s) : NULL;
    if (s) s->t = t;
    return s;
}

void bp_token_stream_free(struct bp_token_stream *s)
{
    if (!s) return;
    free(s->held);
    free(s->out);
    free(s);
}

static bool reserve(char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Moves the complete part of held to out (invalid bytes as U+FFFD); with
 * final, an incomplete tail too. */
static const char *drain(struct bp_token_stream *s, bool final, size_t *len)
{
    *len = 0;
    if (!reserve(&s->out, &s->out_cap, 3 * s->n_held + 1)) return "";
    const uint8_t *h = (const uint8_t *)s->held;
    size_t i = 0, o = 0;
    while (i < s->n_held) {
        int l = bp_utf8_valid_len(h + i, s->n_held - i);
        if (l < 0 && !final) break;
        if (l > 0) {
            memcpy(s->out + o, h + i, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
            continue;
        }
        memcpy(s->out + o, "\xEF\xBF\xBD", 3);   /* U+FFFD */
        o += 3;
        if (l < 0) break;   /* final: one replacement for the incomplete tail */
        i++;
    }
    if (final) i = s->n_held;
    if (i < s->n_held) memmove(s->held, s->held + i, s->n_held - i);
    s->n_held -= i;
    s->out[o] = '\0';
    *len = o;
    return s->out;
}

const char *bp_token_stream_push(struct bp_token_stream *s, int32_t id, size_t *len)
{
    *len = 0;
    if (id < 0 || id >= s->t->n) return "";
    size_t pl;
    const char *p = piece(s->t, id, false, &pl);
    if (!reserve(&s->held, &s->cap, s->n_held + pl)) return "";
    if (pl) memcpy(s->held + s->n_held, p, pl);
    s->n_held += pl;
    return drain(s, false, len);
}

const char *bp_token_stream_flush(struct bp_token_stream *s, size_t *len)
{
    return drain(s, true, len);
}
