/*
 * tokenizer_encode.c — the two encoders of a run of plain text, merging
 * adjacent symbols through a priority queue as llama.cpp's do:
 *   SentencePiece: the adjacent pair whose concatenation is the token of
 *     highest score first (ties: leftmost); symbols start as UTF-8
 *     characters; a final symbol that is no token becomes byte tokens;
 *   byte-level BPE: per pre-tokenized word, the pair of lowest merge rank
 *     first (ties: leftmost); symbols start as single bytes.
 */
#include "tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "tokenizer_unicode.h"

struct sym {
    int32_t prev, next;
    uint32_t off, n;   /* bytes of the text */
    int32_t id;        /* BPE: the token these bytes are (-1 none) */
};

/* A candidate merge of symbols left and right. Symbols only grow (a merge
 * empties the right one into the left), so a pair is outdated exactly when
 * one side is empty or their sizes no longer add up to size. */
struct bigram {
    float score;       /* SPM: higher first; BPE: -rank */
    int32_t left, right;
    uint32_t size;     /* bytes the pair covered when queued */
};

struct heap {
    struct bigram *v;
    size_t n, cap;
};

/* Higher score first, then the leftmost. */
static bool before(const struct bigram *a, const struct bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(struct heap *h, struct bigram b)
{
    struct bigram *v = bp__grow(h->v, sizeof *v, h->n, &h->cap, 64);
    if (!v) return false;
    h->v = v;
    size_t i = h->n++;
    while (i > 0 && before(&b, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = b;
    return true;
}

static struct bigram heap_pop(struct heap *h)
{
    struct bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

struct syms {
    struct sym *v;
    size_t n, cap;
};

static bool syms_reserve(struct syms *s, size_t n)
{
    if (n <= s->cap) return true;
    struct sym *v = realloc(s->v, n * sizeof *v);
    if (!v) return false;
    s->v = v;
    s->cap = n;
    return true;
}

/* ------------------------------------------------------- SentencePiece */

static bool spm_pair(const struct bp_tokenizer *t, const char *text, struct syms *s, struct heap *h,
                     int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    const uint32_t size = s->v[l].n + s->v[r].n;
    const int32_t id = bp_str_map_find(t, text + s->v[l].off, size);
    if (id < 0) return true;
    return heap_push(h, (struct bigram){ .score = t->score[id], .left = l, .right = r, .size = size });
}

bp_status bp_tok_encode_spm(const struct bp_tokenizer *t, const char *text, size_t len,
                            struct bp_ids *out)
{
    struct syms s = {0};
    struct heap h = {0};
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    if (len == 0) return BP_OK;
    if (!syms_reserve(&s, len)) goto out;
    for (size_t off = 0; off < len;) {
        size_t n = bp_utf8_lead_len((uint8_t)text[off]);
        if (n > len - off) n = len - off;
        const int32_t i = (int32_t)s.n++;
        s.v[i] = (struct sym){ .prev = i - 1, .next = off + n == len ? -1 : i + 1,
                               .off = (uint32_t)off, .n = (uint32_t)n };
        off += n;
    }
    for (size_t i = 1; i < s.n; i++)
        if (!spm_pair(t, text, &s, &h, (int32_t)i - 1, (int32_t)i)) goto out;
    while (h.n) {
        const struct bigram b = heap_pop(&h);
        struct sym *l = &s.v[b.left], *r = &s.v[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   /* outdated */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.v[r->next].prev = b.left;
        if (!spm_pair(t, text, &s, &h, l->prev, b.left) || !spm_pair(t, text, &s, &h, b.left, l->next))
            goto out;
    }
    for (int32_t i = 0; i != -1; i = s.v[i].next) {
        const struct sym *y = &s.v[i];
        const int32_t id = bp_str_map_find(t, text + y->off, y->n);
        if (id >= 0) {
            if (!bp_ids_push(out, id)) goto out;
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {   /* byte fallback */
            int32_t b = t->byte_token[(uint8_t)text[y->off + k]];
            if (b < 0) b = t->unk;
            if (b >= 0 && !bp_ids_push(out, b)) goto out;
        }
    }
    st = BP_OK;
out:
    free(s.v);
    free(h.v);
    return st;
}

/* ------------------------------------------------------- byte-level BPE */

static bool bpe_pair(const struct bp_tokenizer *t, struct syms *s, struct heap *h, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || s->v[l].id < 0 || s->v[r].id < 0) return true;
    const struct bp_merge *m = bp_merge_find(t, s->v[l].id, s->v[r].id);
    if (!m) return true;
    return heap_push(h, (struct bigram){ .score = -(float)m->rank, .left = l, .right = r,
                                         .size = s->v[l].n + s->v[r].n });
}

/* One word (raw bytes w[0..n)): its tokens appended to out. */
static bool bpe_word(const struct bp_tokenizer *t, const char *w, size_t n, struct syms *s,
                     struct heap *h, struct bp_ids *out)
{
    if (t->ignore_merges) {
        const int32_t id = bp_str_map_find(t, w, n);
        if (id >= 0) return bp_ids_push(out, id);
    }
    s->n = 0;
    h->n = 0;
    if (!syms_reserve(s, n)) return false;
    for (size_t i = 0; i < n; i++)
        s->v[s->n++] = (struct sym){ .prev = (int32_t)i - 1, .next = i + 1 == n ? -1 : (int32_t)i + 1,
                                     .off = (uint32_t)i, .n = 1, .id = bp_str_map_find(t, w + i, 1) };
    for (size_t i = 1; i < n; i++)
        if (!bpe_pair(t, s, h, (int32_t)i - 1, (int32_t)i)) return false;
    while (h->n) {
        const struct bigram b = heap_pop(h);
        struct sym *l = &s->v[b.left], *r = &s->v[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   /* outdated */
        l->n += r->n;
        l->id = bp_merge_find(t, l->id, r->id)->result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->v[r->next].prev = b.left;
        if (!bpe_pair(t, s, h, l->prev, b.left) || !bpe_pair(t, s, h, b.left, l->next)) return false;
    }
    for (int32_t i = 0; i != -1 && n > 0; i = s->v[i].next) {
        const struct sym *y = &s->v[i];
        if (y->id >= 0) {
            if (!bp_ids_push(out, y->id)) return false;
            continue;
        }
        /* A byte the vocabulary lacks: llama.cpp looks up the single bytes
         * of its mapped spelling, which only printable ASCII can match. */
        for (uint32_t k = 0; k < y->n; k++) {
            const uint8_t c = (uint8_t)w[y->off + k];
            const int32_t id = c >= 0x21 && c <= 0x7E ? bp_str_map_find(t, (const char *)&c, 1) : -1;
            if (id >= 0 && !bp_ids_push(out, id)) return false;
        }
    }
    return true;
}

bp_status bp_tok_encode_bpe(const struct bp_tokenizer *t, const char *text, size_t len,
                            struct bp_ids *out)
{
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    char *word = NULL;
    size_t word_cap = 0;
    struct bp_pre_words words = {0};
    struct syms s = {0};
    struct heap h = {0};
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    size_t n = 0;
    if (!cps) goto out;
    for (size_t i = 0; i < len;) {   /* invalid bytes read as U+FFFD, as llama.cpp reads them */
        size_t cl;
        cps[n++] = bp_utf8_decode((const uint8_t *)text + i, len - i, &cl);
        i += cl;
    }
    if ((st = bp_pretokenize(t->pre, cps, n, &words)) != BP_OK) goto out;
    st = BP_ERR_OUT_OF_MEMORY;
    size_t at = 0;
    for (size_t k = 0; k < words.n; k++) {
        if (4 * words.len[k] > word_cap) {
            free(word);
            word_cap = 4 * words.len[k];
            if (!(word = malloc(word_cap))) goto out;
        }
        size_t wl = 0;
        for (size_t i = 0; i < words.len[k]; i++) wl += bp_utf8_encode(cps[at + i], (uint8_t *)word + wl);
        at += words.len[k];
        if (!bpe_word(t, word, wl, &s, &h, out)) goto out;
    }
    st = BP_OK;
out:
    free(cps);
    free(word);
    free(words.len);
    free(s.v);
    free(h.v);
    return st;
}
