/*
 * test_tokenizer.c — the GGUF tokenizer against llama.cpp's own: every
 * string of tests/data/tokenizer/cases.txt encoded with the real LLaMA 1/2
 * (SentencePiece) and LLaMA 3 (byte-level BPE, four pre-tokenizers)
 * vocabularies must give the ids that llama.cpp gave (ref-*.txt, made by
 * scripts/tokenizer-reference.sh), every piece the bytes llama.cpp gave;
 * decode(encode(s)) == s where the tokenizer is lossless; and a stream fed
 * token by token never emits broken UTF-8. The vocabularies come from the
 * CTest fixture tokenizer_vocabs (network at set-up; no skip without it).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_tokenizer.h>

#include "suite_main.h"

#define MAX_CASES 64

struct tcase {
    char name[64];
    char flags[16];
    char *text;
    size_t len;
};

static struct tcase cases[MAX_CASES];
static int n_cases;

static size_t unescape(const char *s, char *out)
{
    size_t n = 0;
    for (; *s; s++) {
        if (*s != '\\') { out[n++] = *s; continue; }
        s++;
        if (*s == 'n') out[n++] = '\n';
        else if (*s == 't') out[n++] = '\t';
        else if (*s == 'r') out[n++] = '\r';
        else if (*s == 'x') { unsigned v; sscanf(s + 1, "%2x", &v); out[n++] = (char)v; s += 2; }
        else out[n++] = *s;
    }
    return n;
}

static void load_cases(void)
{
    if (n_cases) return;
    FILE *f = fopen(BP_TEST_SOURCE_DIR "/tests/data/tokenizer/cases.txt", "r");
    ck_assert_msg(f, "cannot read tests/data/tokenizer/cases.txt");
    static char line[1 << 16];
    while (fgets(line, sizeof line, f) && n_cases < MAX_CASES) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *flags = strtok(NULL, "\t"), *esc = strtok(NULL, "");
        struct tcase *c = &cases[n_cases++];
        snprintf(c->name, sizeof c->name, "%s", name);
        snprintf(c->flags, sizeof c->flags, "%s", flags);
        c->text = malloc(esc ? strlen(esc) + 1 : 1);
        c->len = unescape(esc ? esc : "", c->text);
    }
    fclose(f);
}

static unsigned case_flags(const struct tcase *c)
{
    if (!strcmp(c->flags, "raw")) return 0;
    if (!strcmp(c->flags, "special")) return BP_TOKENIZE_ADD_SPECIAL | BP_TOKENIZE_PARSE_SPECIAL;
    return BP_TOKENIZE_ADD_SPECIAL;
}

static const char *const vocabs[] = {
    "llama-spm", "llama3-llama-bpe", "llama3-qwen2", "llama3-gpt-2", "llama3-default",
};
#define N_VOCABS (int)(sizeof vocabs / sizeof vocabs[0])

static struct bp_tokenizer *open_vocab(const char *name)
{
    const char *dir = getenv("BP_TOKENIZER_DATA");
    ck_assert_msg(dir, "BP_TOKENIZER_DATA is not set; run the suite through ctest, whose "
                  "tokenizer_vocabs fixture fetches the vocabularies");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    struct bp_tokenizer *t = NULL;
    ck_assert_msg(bp_tokenizer_load(path, &t) == BP_OK, "%s: %s", path, bp_last_error());
    return t;
}

/* UTF-8 validity, written here independently of the library's. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], need, cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; }
        else return false;
        for (unsigned k = 1; k <= need; k++) {
            if (i + k >= n || (s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += need + 1;
    }
    return true;
}

START_TEST(test_tokenizer_encode_matches_llama_cpp)
{
    load_cases();
    const char *name = vocabs[_i];
    struct bp_tokenizer *t = open_vocab(name);
    char path[4096];
    snprintf(path, sizeof path, BP_TEST_SOURCE_DIR "/tests/data/tokenizer/ref-%s.txt", name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot read %s", path);
    static char line[1 << 18];
    int checked = 0, pieces = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "piece\t", 6)) {
            int id = atoi(line + 6);
            const char *hex = strchr(line + 6, '\t') + 1;
            char want[256], got[256];
            size_t wl = 0;
            for (; hex[0] && hex[1]; hex += 2) { unsigned v; sscanf(hex, "%2x", &v); want[wl++] = (char)v; }
            size_t gl = bp_tokenizer_piece(t, id, false, got, sizeof got);
            ck_assert_msg(gl == wl && !memcmp(got, want, wl), "%s: the piece of token %d differs "
                          "from llama.cpp's (%zu bytes, want %zu)", name, id, gl, wl);
            pieces++;
            continue;
        }
        if (strncmp(line, "ids\t", 4)) continue;
        char *cname = line + 4, *ids = strchr(cname, '\t');
        if (ids) *ids++ = 0;
        const struct tcase *c = NULL;
        for (int i = 0; i < n_cases; i++)
            if (!strcmp(cases[i].name, cname)) c = &cases[i];
        ck_assert_msg(c, "%s names case '%s', which cases.txt lacks", path, cname);
        int32_t *got;
        size_t n;
        ck_assert_int_eq(bp_tokenizer_encode(t, c->text, c->len, case_flags(c), &got, &n), BP_OK);
        size_t k = 0;
        for (char *tok = ids ? strtok(ids, " ") : NULL; tok; tok = strtok(NULL, " "), k++) {
            ck_assert_msg(k < n, "%s/%s: %zu ids, llama.cpp has more", name, cname, n);
            ck_assert_msg(got[k] == atoi(tok), "%s/%s: id %zu is %d, llama.cpp's is %s", name,
                          cname, k, got[k], tok);
        }
        ck_assert_msg(k == n, "%s/%s: %zu ids, llama.cpp's %zu", name, cname, n, k);
        free(got);
        checked++;
    }
    fclose(f);
    ck_assert_int_eq(checked, n_cases);
    ck_assert_int_gt(pieces, 100);
    bp_tokenizer_free(t);
}
END_TEST

/* Lossless unless special tokens were parsed (decode skips control tokens)
 * or the text has invalid UTF-8: byte-level BPE reads it as U+FFFD, and
 * SentencePiece keeps every byte but a truncated sequence swallows the
 * U+2581 of a following space (both as llama.cpp does). Stray bytes alone
 * (lone_continuation) survive SentencePiece. */
START_TEST(test_tokenizer_decode_inverts_encode)
{
    load_cases();
    struct bp_tokenizer *t = open_vocab(vocabs[_i]);
    const bool bpe = !strcmp(bp_tokenizer_model(t), "gpt2");
    int checked = 0;
    for (int i = 0; i < n_cases; i++) {
        const struct tcase *c = &cases[i];
        if (!strcmp(c->flags, "special")) continue;
        if (!valid_utf8((const unsigned char *)c->text, c->len) &&
            (bpe || strcmp(c->name, "lone_continuation")))
            continue;
        int32_t *ids;
        size_t n, len;
        char *text;
        ck_assert_int_eq(bp_tokenizer_encode(t, c->text, c->len, case_flags(c), &ids, &n), BP_OK);
        ck_assert_int_eq(bp_tokenizer_decode(t, ids, n, &text, &len), BP_OK);
        ck_assert_msg(len == c->len && !memcmp(text, c->text, len), "%s/%s: decode(encode(s)) "
                      "is %zu bytes, s %zu", vocabs[_i], c->name, len, c->len);
        free(ids);
        free(text);
        checked++;
    }
    ck_assert_int_ge(checked, n_cases - 3);
    bp_tokenizer_free(t);
}
END_TEST

/* Token by token, every chunk a stream gives is whole UTF-8; for valid
 * text the chunks add up to the pieces' bytes exactly. */
START_TEST(test_tokenizer_stream_never_splits_utf8)
{
    load_cases();
    struct bp_tokenizer *t = open_vocab(vocabs[_i]);
    for (int i = 0; i < n_cases; i++) {
        const struct tcase *c = &cases[i];
        int32_t *ids;
        size_t n;
        ck_assert_int_eq(bp_tokenizer_encode(t, c->text, c->len, 0, &ids, &n), BP_OK);
        struct bp_token_stream *s = bp_token_stream_new(t);
        ck_assert_ptr_nonnull(s);
        size_t cap = 16 * c->len + 64, used = 0, pl = 0;
        char *all = malloc(cap), *pieces = malloc(cap);
        for (size_t k = 0; k <= n; k++) {
            size_t len;
            const char *out = k < n ? bp_token_stream_push(s, ids[k], &len) : bp_token_stream_flush(s, &len);
            ck_assert_msg(valid_utf8((const unsigned char *)out, len), "%s/%s: the stream emitted "
                          "broken UTF-8 after token %zu", vocabs[_i], c->name, k);
            ck_assert_uint_le(used + len, cap);
            memcpy(all + used, out, len);
            used += len;
            if (k < n) pl += bp_tokenizer_piece(t, ids[k], false, pieces + pl, cap - pl);
        }
        if (valid_utf8((const unsigned char *)pieces, pl))
            ck_assert_msg(used == pl && !memcmp(all, pieces, pl), "%s/%s: the stream's text differs "
                          "from the pieces'", vocabs[_i], c->name);
        bp_token_stream_free(s);
        free(all);
        free(pieces);
        free(ids);
    }
    bp_tokenizer_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("llama.cpp parity");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_tokenizer_encode_matches_llama_cpp, 0, N_VOCABS);
    tcase_add_loop_test(tc, test_tokenizer_decode_inverts_encode, 0, N_VOCABS);
    tcase_add_loop_test(tc, test_tokenizer_stream_never_splits_utf8, 0, N_VOCABS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
