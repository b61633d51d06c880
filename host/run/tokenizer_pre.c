/*
 * tokenizer_pre.c — byte-level BPE pre-tokenizers. Each stage cuts every
 * segment of the previous stage further, as llama.cpp applies its list of
 * expressions:
 *   gpt-2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2   the same with \p{N} alone, through std::regex (collapsed classes)
 *   default [\p{P}\$\+<=>\^~\|]+ (collapsed), gpt-2, \p{N}+ (collapsed), [0-9]{3}
 */
#include "tokenizer_pre.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "tokenizer_unicode.h"

struct pre_family {
    const char *names[8];
    enum bp_pre_kind kind;
};

/* tokenizer.ggml.pre values as llama.cpp's converter writes them. */
static const struct pre_family families[] = {
    { { "default" }, BP_PRE_DEFAULT },
    { { "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral" }, BP_PRE_LLAMA3 },
    { { "qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan" }, BP_PRE_QWEN2 },
    { { "gpt-2", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de" },
      BP_PRE_GPT2 },
};

int bp_pre_kind_from_name(const char *name, size_t len)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (size_t i = 0; i < 8 && families[f].names[i]; i++)
            if (strlen(families[f].names[i]) == len && !memcmp(families[f].names[i], name, len))
                return (int)families[f].kind;
    return -1;
}

const char *bp_pre_kind_name(enum bp_pre_kind k)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        if (families[f].kind == k) return families[f].names[0];
    return "?";
}

/* ------------------------------------------------------------ classes */

/* What the expressions ask of one code point; all false past the segment. */
struct cls {
    bool in, L, N, P, ws;
};

static struct cls cls_real(uint32_t cp)
{
    enum bp_ucat c = bp_ucat_of(cp);
    return (struct cls){ .in = true, .L = c == BP_UCAT_LETTER, .N = c == BP_UCAT_NUMBER,
                         .P = c == BP_UCAT_PUNCT, .ws = bp_uni_is_space(cp) };
}

/* llama.cpp's std::regex path: ASCII keeps its own classes (std::regex's
 * \s, and fixed ASCII ranges for \p{L}, \p{N}, \p{P}); other code points
 * become white space, a number, punctuation, or else a letter. */
static struct cls cls_collapsed(uint32_t cp)
{
    struct cls c = { .in = true };
    if (cp < 128) {
        c.L = (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z');
        c.N = cp >= '0' && cp <= '9';
        c.P = (cp >= 0x21 && cp <= 0x23) || (cp >= 0x25 && cp <= 0x2A) || (cp >= 0x2C && cp <= 0x2F) ||
              cp == 0x3A || cp == 0x3B || cp == 0x3F || cp == 0x40 || (cp >= 0x5B && cp <= 0x5D) ||
              cp == 0x5F || cp == 0x7B || cp == 0x7D;
        c.ws = (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
        return c;
    }
    if (bp_uni_is_space(cp)) { c.ws = true; return c; }
    enum bp_ucat u = bp_ucat_of(cp);
    if (u == BP_UCAT_NUMBER) c.N = true;
    else if (u == BP_UCAT_PUNCT) c.P = true;
    else c.L = true;
    return c;
}

/* ------------------------------------------------------------ segments */

struct seg {
    const uint32_t *cps;
    size_t ini, end;            /* [ini, end) of the text */
    bool collapsed;
    struct bp_pre_words *out;
    size_t prev;
    bool oom;
};

static uint32_t cpt(const struct seg *s, size_t pos)
{
    return pos >= s->ini && pos < s->end ? s->cps[pos] : 0xFFFFFFFFu;
}

static struct cls cl(const struct seg *s, size_t pos)
{
    if (pos < s->ini || pos >= s->end) return (struct cls){0};
    return s->collapsed ? cls_collapsed(s->cps[pos]) : cls_real(s->cps[pos]);
}

static bool push_len(struct bp_pre_words *w, size_t len)
{
    size_t *p = bp__grow(w->len, sizeof *p, w->n, &w->cap, 64);
    if (!p) return false;
    w->len = p;
    w->len[w->n++] = len;
    return true;
}

/* Ends the current word at end; returns its length. */
static size_t add(struct seg *s, size_t end)
{
    size_t len = end - s->prev;
    if (len > 0 && !push_len(s->out, len)) s->oom = true;
    s->prev = end;
    return len;
}

static uint32_t lower_ascii(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's 't 're 've 'm 'll 'd at pos: the length matched (0: none). */
static size_t contraction(const struct seg *s, size_t pos, bool any_case)
{
    if (cpt(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t a = cpt(s, pos + 1), b = pos + 2 < s->end ? cpt(s, pos + 2) : 0;
    if (any_case) { a = lower_ascii(a); b = lower_ascii(b); }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* End of [^\s\p{L}\p{N}]+ from pos, where f2 is the class at pos. */
static size_t other_run_end(const struct seg *s, size_t pos, struct cls f2)
{
    while (!(f2.ws || f2.L || f2.N) && f2.in) f2 = cl(s, ++pos);
    return pos;
}

/* End of the word at pos, which starts nws whitespace code points (maybe
 * none): \s+(?!\S) keeps the last space for the next word, a trailing run
 * is taken whole, and anything else is a word of one code point. */
static size_t ws_run_end(const struct seg *s, size_t pos, size_t nws)
{
    if (nws > 1 && pos + nws < s->end) return pos + nws - 1;
    return pos + (nws > 0 ? nws : 1);
}

static void split_gpt2(struct seg *s)
{
    for (size_t pos = s->ini; pos < s->end;) {
        const uint32_t c = cpt(s, pos);
        size_t k = contraction(s, pos, false);
        if (k) { pos += add(s, pos + k); continue; }
        struct cls f2 = c == ' ' ? cl(s, pos + 1) : cl(s, pos);
        if (f2.L || f2.N) {                       /* ?\p{L}+ and ?\p{N}+ */
            const bool letters = f2.L;
            pos += c == ' ';
            while (letters ? f2.L : f2.N) f2 = cl(s, ++pos);
            add(s, pos);
            continue;
        }
        if (!(f2.ws || f2.L || f2.N) && f2.in) {  /* ?[^\s\p{L}\p{N}]+ */
            pos = other_run_end(s, pos + (c == ' '), f2);
            add(s, pos);
            continue;
        }
        size_t nws = 0;
        while (cl(s, pos + nws).ws) nws++;
        pos = ws_run_end(s, pos, nws);
        add(s, pos);
    }
}

static void split_llama3(struct seg *s, size_t max_digits)
{
    for (size_t pos = s->ini; pos < s->end;) {
        const uint32_t c = cpt(s, pos);
        const struct cls f = cl(s, pos);
        size_t k = contraction(s, pos, true);
        if (k) { pos += add(s, pos + k); continue; }
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(c == '\r' || c == '\n' || f.N) && (f.L || cl(s, pos + 1).L)) {
            pos++;
            while (cl(s, pos).L) pos++;
            add(s, pos);
            continue;
        }
        if (f.N) {                                /* \p{N}{1,max} */
            size_t ini = pos;
            while (cl(s, pos).N) {
                if (++pos - ini >= max_digits) { add(s, pos); ini = pos; }
            }
            add(s, pos);
            continue;
        }
        /* ?[^\s\p{L}\p{N}]+[\r\n]* */
        struct cls f2 = c == ' ' ? cl(s, pos + 1) : f;
        if (!(f2.ws || f2.L || f2.N) && f.in) {
            pos = other_run_end(s, pos + (c == ' '), f2);
            while (cpt(s, pos) == '\r' || cpt(s, pos) == '\n') pos++;
            add(s, pos);
            continue;
        }
        size_t nws = 0, last_nl = 0;
        while (cl(s, pos + nws).ws) {
            uint32_t c2 = cpt(s, pos + nws);
            if (c2 == '\r' || c2 == '\n') last_nl = pos + nws + 1;
            nws++;
        }
        if (last_nl > 0) { pos = last_nl; add(s, pos); continue; }   /* \s*[\r\n]+ */
        pos = ws_run_end(s, pos, nws);
        add(s, pos);
    }
}

/* A std::regex stage of one repeated class ([...]+): matches and the gaps
 * between them become words. */
static void split_runs(struct seg *s, bool (*in_set)(const struct seg *, size_t))
{
    size_t pos = s->ini;
    while (pos < s->end) {
        size_t q = pos;
        const bool m = in_set(s, pos);
        while (q < s->end && in_set(s, q) == m) q++;
        add(s, q);
        pos = q;
    }
}

static bool set_default_punct(const struct seg *s, size_t pos)
{
    const uint32_t c = cpt(s, pos);
    return cl(s, pos).P || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|';
}

static bool set_number(const struct seg *s, size_t pos)
{
    return cl(s, pos).N;
}

/* [0-9][0-9][0-9], searched left to right. */
static void split_digit_triples(struct seg *s)
{
    size_t pos = s->ini;
    while (pos < s->end) {
        uint32_t a = cpt(s, pos), b = cpt(s, pos + 1), c = cpt(s, pos + 2);
        if (pos + 3 <= s->end && a >= '0' && a <= '9' && b >= '0' && b <= '9' && c >= '0' && c <= '9') {
            add(s, pos);
            add(s, pos + 3);
            pos += 3;
        } else
            pos++;
    }
    add(s, s->end);
}

enum stage { ST_GPT2, ST_LLAMA3, ST_QWEN2, ST_PUNCT, ST_NUMBERS, ST_TRIPLES, ST_END };

static const enum stage stages[][5] = {
    [BP_PRE_DEFAULT] = { ST_PUNCT, ST_GPT2, ST_NUMBERS, ST_TRIPLES, ST_END },
    [BP_PRE_LLAMA3] = { ST_LLAMA3, ST_END },
    [BP_PRE_QWEN2] = { ST_QWEN2, ST_END },
    [BP_PRE_GPT2] = { ST_GPT2, ST_END },
};

bp_status bp_pretokenize(enum bp_pre_kind k, const uint32_t *cps, size_t n, struct bp_pre_words *out)
{
    struct bp_pre_words cur = {0}, next = {0};
    if (n == 0) return BP_OK;
    if (!push_len(&cur, n)) return BP_ERR_OUT_OF_MEMORY;
    for (const enum stage *st = stages[k]; *st != ST_END; st++) {
        next.n = 0;
        size_t start = 0;
        bool oom = false;
        for (size_t i = 0; i < cur.n && !oom; i++) {
            struct seg s = { .cps = cps, .ini = start, .end = start + cur.len[i], .out = &next,
                             .prev = start };
            start = s.end;
            switch (*st) {
            case ST_GPT2: split_gpt2(&s); break;
            case ST_LLAMA3: split_llama3(&s, 3); break;
            case ST_QWEN2: s.collapsed = true; split_llama3(&s, 1); break;
            case ST_PUNCT: s.collapsed = true; split_runs(&s, set_default_punct); break;
            case ST_NUMBERS: s.collapsed = true; split_runs(&s, set_number); break;
            case ST_TRIPLES: split_digit_triples(&s); break;
            case ST_END: break;
            }
            oom = s.oom;
        }
        struct bp_pre_words t = cur;
        cur = next;
        next = t;
        if (oom) {
            free(cur.len);
            free(next.len);
            return BP_ERR_OUT_OF_MEMORY;
        }
    }
    free(next.len);
    for (size_t i = 0; i < cur.n; i++)
        if (!push_len(out, cur.len[i])) {
            free(cur.len);
            return BP_ERR_OUT_OF_MEMORY;
        }
    free(cur.len);
    return BP_OK;
}
