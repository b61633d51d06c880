/*
 * test_tokenizer_input.c — the tokenizer on small vocabularies written here
 * (no network): the merge order of both models worked out by hand, byte
 * fallback, BOS/EOS rules, and every refusal of a broken file as one
 * sentence that names what is wrong.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_tokenizer.h>

#include "gguf.h"
#include "suite_main.h"

#define SP "\xE2\x96\x81"   /* U+2581, SentencePiece's space */

struct vocab {
    const char *model, *pre;
    const char *const *tokens;
    const float *scores;
    const int32_t *types;
    uint64_t n, n_scores, n_types;
    const char *const *merges;
    uint64_t n_merges;
    int bos, eos;        /* -1: key absent */
    int add_bos;         /* -1: key absent */
};

static bp_status load(const struct vocab *v, struct bp_tokenizer **t)
{
    struct bp_gguf_writer *w;
    ck_assert_int_eq(bp_gguf_writer_new(3, 32, &w), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "general.architecture", "llama"), BP_OK);
    if (v->model) ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.ggml.model", v->model), BP_OK);
    if (v->pre) ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.ggml.pre", v->pre), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", v->tokens, v->n), BP_OK);
    if (v->scores)
        ck_assert_int_eq(bp_gguf_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, v->scores,
                                           v->n_scores ? v->n_scores : v->n), BP_OK);
    if (v->types)
        ck_assert_int_eq(bp_gguf_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, v->types,
                                           v->n_types ? v->n_types : v->n), BP_OK);
    if (v->merges)
        ck_assert_int_eq(bp_gguf_add_string_array(w, "tokenizer.ggml.merges", v->merges, v->n_merges), BP_OK);
    if (v->bos >= 0) ck_assert_int_eq(bp_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos), BP_OK);
    if (v->eos >= 0) ck_assert_int_eq(bp_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos), BP_OK);
    if (v->add_bos >= 0) ck_assert_int_eq(bp_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos), BP_OK);
    uint8_t *img;
    size_t size;
    ck_assert_int_eq(bp_gguf_writer_image(w, &img, &size), BP_OK);
    bp_gguf_writer_free(w);
    bp_status s = bp_tokenizer_load_memory(img, size, t);
    free(img);
    return s;
}

static void expect_ids(const struct bp_tokenizer *t, const char *text, unsigned flags,
                       const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(bp_tokenizer_encode(t, text, strlen(text), flags, &ids, &n), BP_OK);
    ck_assert_msg(n == n_want, "'%s': %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++) ck_assert_msg(ids[i] == want[i], "'%s': id %zu is %d, want %d", text, i, ids[i], want[i]);
    free(ids);
}

/* SentencePiece: <unk> <s> </s>, bytes <0xC3> <0xA9>, then pieces. */
static const char *const spm_tokens[] = {
    "<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", SP, "a", "b", "c", "ab", "bc", SP "a", "abc",
};
static const int32_t spm_types[] = { 2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1 };

START_TEST(test_tokenizer_spm_merges_by_score)
{
    /* "abc" -> "▁abc": pairs ▁a (id 11), ab (9), bc (10). With bc scored
     * highest: ▁ a bc; then abc (12) beats ▁a: ▁ abc. With ▁a highest:
     * ▁a b c; then bc: ▁a bc (▁abc is no token). */
    float s1[13] = { 0, 0, 0, 0, 0, -5, -5, -5, -5, -3, -1, -4, -2 };
    float s2[13] = { 0, 0, 0, 0, 0, -5, -5, -5, -5, -3, -2, -1, -4 };
    struct vocab v = { "llama", NULL, spm_tokens, s1, spm_types, 13, 0, 0, NULL, 0, -1, -1, -1 };
    struct bp_tokenizer *t;
    ck_assert_int_eq(load(&v, &t), BP_OK);
    expect_ids(t, "abc", BP_TOKENIZE_ADD_SPECIAL, (int32_t[]){ 1, 5, 12 }, 3);
    expect_ids(t, "abc", 0, (int32_t[]){ 5, 12 }, 2);
    /* é is no token: its two bytes; the space before "é" is ▁ itself. */
    expect_ids(t, "\xC3\xA9", 0, (int32_t[]){ 5, 3, 4 }, 3);
    char *text;
    size_t len;
    ck_assert_int_eq(bp_tokenizer_decode(t, (int32_t[]){ 1, 5, 12, 5, 3, 4 }, 6, &text, &len), BP_OK);
    ck_assert_str_eq(text, "abc \xC3\xA9");
    free(text);
    bp_tokenizer_free(t);
    v.scores = s2;
    ck_assert_int_eq(load(&v, &t), BP_OK);
    expect_ids(t, "abc", 0, (int32_t[]){ 11, 10 }, 2);
    bp_tokenizer_free(t);
}
END_TEST

/* Byte-level BPE: the lowest rank merges first. */
static const char *const bpe_tokens[] = { "a", "b", "c", "ab", "bc", "<|end|>" };
static const int32_t bpe_types[] = { 1, 1, 1, 1, 1, 3 };

START_TEST(test_tokenizer_bpe_merges_by_rank)
{
    struct vocab v = { "gpt2", "gpt-2", bpe_tokens, NULL, bpe_types, 6, 0, 0,
                       (const char *const[]){ "b c", "a b" }, 2, 5, 5, -1 };
    struct bp_tokenizer *t;
    ck_assert_int_eq(load(&v, &t), BP_OK);
    expect_ids(t, "abc", BP_TOKENIZE_ADD_SPECIAL, (int32_t[]){ 0, 4 }, 2);   /* gpt-2 adds no BOS */
    /* Special text is plain text unless asked: < | ... are no tokens here,
     * so only its letters survive; parsed, it is the control token. */
    expect_ids(t, "ab<|end|>", BP_TOKENIZE_PARSE_SPECIAL, (int32_t[]){ 3, 5 }, 2);
    ck_assert(bp_tokenizer_is_eog(t, 5));
    bp_tokenizer_free(t);
    v.merges = (const char *const[]){ "a b", "b c" };
    v.add_bos = 1;
    ck_assert_int_eq(load(&v, &t), BP_OK);
    expect_ids(t, "abc", BP_TOKENIZE_ADD_SPECIAL, (int32_t[]){ 5, 3, 2 }, 3);
    bp_tokenizer_free(t);
}
END_TEST

/* Each broken file: refused, one sentence that names the problem. */
static void expect_refusal(const struct vocab *v, bp_status want, const char *words)
{
    struct bp_tokenizer *t = (struct bp_tokenizer *)1;
    ck_assert_int_eq(load(v, &t), want);
    ck_assert_ptr_null(t);
    const char *e = bp_last_error();
    ck_assert_msg(strstr(e, words), "the error '%s' does not say '%s'", e, words);
    ck_assert_msg(!strchr(e, '\n'), "the error '%s' is more than one line", e);
}

START_TEST(test_tokenizer_refuses_broken_metadata)
{
    float sc[13] = {0};
    struct vocab v = { "llama", NULL, spm_tokens, sc, spm_types, 13, 12, 0, NULL, 0, -1, -1, -1 };
    expect_refusal(&v, BP_ERR_SHAPE, "disagree in length: 13 tokens but 12 scores");
    v.n_scores = 0;
    v.n_types = 11;
    expect_refusal(&v, BP_ERR_SHAPE, "11 token types");
    v.n_types = 0;
    v.bos = 13;
    expect_refusal(&v, BP_ERR_INVALID_ARGUMENT, "bos_token_id");
    v.bos = -1;
    v.model = "bert";
    expect_refusal(&v, BP_ERR_UNSUPPORTED, "'bert'");
    v.model = NULL;
    expect_refusal(&v, BP_ERR_NOT_FOUND, "carries no tokenizer");

    struct vocab b = { "gpt2", "gpt-2", bpe_tokens, NULL, bpe_types, 6, 0, 0,
                       (const char *const[]){ "b c", "a x" }, 2, -1, -1, -1 };
    expect_refusal(&b, BP_ERR_INVALID_ARGUMENT, "merge 1 ('a x') names a token that is not in the vocabulary");
    b.merges = (const char *const[]){ "c a" };
    b.n_merges = 1;
    expect_refusal(&b, BP_ERR_INVALID_ARGUMENT, "makes a token that is not in the vocabulary");
    b.merges = NULL;
    expect_refusal(&b, BP_ERR_NOT_FOUND, "tokenizer.ggml.merges");
    b.merges = (const char *const[]){ "a b" };
    b.pre = "made-up-pre";
    expect_refusal(&b, BP_ERR_UNSUPPORTED, "'made-up-pre'");
}
END_TEST

START_TEST(test_tokenizer_decode_refuses_bad_id)
{
    struct vocab v = { "gpt2", "default", bpe_tokens, NULL, bpe_types, 6, 0, 0,
                       (const char *const[]){ "a b" }, 1, -1, -1, -1 };
    struct bp_tokenizer *t;
    ck_assert_int_eq(load(&v, &t), BP_OK);
    char *text;
    size_t len;
    ck_assert_int_eq(bp_tokenizer_decode(t, (int32_t[]){ 0, 6 }, 2, &text, &len), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "token 2 of 2 is 6"));
    ck_assert_uint_eq(bp_tokenizer_piece(t, -1, false, NULL, 0), 0);
    bp_tokenizer_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tokenizer_input");
    TCase *tc = tcase_create("small vocabularies");
    tcase_add_test(tc, test_tokenizer_spm_merges_by_score);
    tcase_add_test(tc, test_tokenizer_bpe_merges_by_rank);
    tcase_add_test(tc, test_tokenizer_refuses_broken_metadata);
    tcase_add_test(tc, test_tokenizer_decode_refuses_bad_id);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
