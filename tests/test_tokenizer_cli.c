/*
 * test_tokenizer_cli.c — `backplane tokenize` and the text paths of
 * `backplane run`, end to end: the ids of a file's exact bytes are
 * llama.cpp's (ref-llama3-llama-bpe.txt), --decode inverts them, special
 * text is plain unless --parse-special, `run --prompt` streams text and the
 * same --seed gives the same tokens at any thread count, generation stops
 * at EOS exactly where the seed says (unless --ignore-eos), and each bad
 * input is one sentence with exit status 1.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "gguf.h"
#include "suite_main.h"

static const char *vocab(const char *name)
{
    static char path[4096];
    const char *dir = getenv("BP_TOKENIZER_DATA");
    ck_assert_msg(dir, "BP_TOKENIZER_DATA is not set; run through ctest");
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    return path;
}

/* The reference ids of case name in ref-llama3-llama-bpe.txt. */
static void ref_ids(const char *name, char *out, size_t cap)
{
    FILE *f = fopen(BP_TEST_SOURCE_DIR "/tests/data/tokenizer/ref-llama3-llama-bpe.txt", "r");
    static char line[1 << 18];
    char key[128];
    snprintf(key, sizeof key, "ids\t%s\t", name);
    out[0] = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) snprintf(out, cap, "%s", line + strlen(key));
    if (f) fclose(f);
    ck_assert_msg(out[0], "no reference ids for %s", name);
}

START_TEST(test_tokenize_cli_file_bytes_match_llama_cpp)
{
    char path[] = "/tmp/bp_tok_cli_XXXXXX", cmd[1 << 15], out[1 << 16], want[1 << 14];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char text[] = "line one\nline two\n\n\tindented\r\nwindows\n \n\t\tend\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --file %s", vocab("llama3-llama-bpe"), path);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    ref_ids("newlines_tabs", want, sizeof want);
    ck_assert_str_eq(out, want);
    /* --decode gives the text back (BOS skipped), plus the newline printed. */
    char ids[1 << 14];
    snprintf(ids, sizeof ids, "%s", want);
    for (char *c = ids; *c; c++) if (*c == ' ') *c = ',';
    ids[strcspn(ids, "\n")] = 0;
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --decode %s", vocab("llama3-llama-bpe"), ids);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_uint_eq(strlen(out), sizeof text);
    ck_assert(!memcmp(out, text, sizeof text - 1));
    unlink(path);
}
END_TEST

START_TEST(test_tokenize_cli_special_text_only_when_asked)
{
    char cmd[1 << 14], out[1 << 14];
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --text '<|eot_id|>'", vocab("llama3-llama-bpe"));
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_ptr_null(strstr(out, "128009"));
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --text '<|eot_id|>' --parse-special --json",
             vocab("llama3-llama-bpe"));
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ids\""));
    ck_assert_ptr_nonnull(strstr(out, "128009"));
    ck_assert_ptr_nonnull(strstr(out, "\"piece\": \"<|eot_id|>\""));
}
END_TEST

START_TEST(test_tokenize_cli_bad_input_is_one_sentence)
{
    char cmd[1 << 14], out[4096];
    ck_assert_int_eq(cli_run(CLI " tokenize --model /nonexistent.gguf --text x", CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "/nonexistent.gguf"));
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --decode 1,128256", vocab("llama3-llama-bpe"));
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "'128256', which is not a token id"));
    ck_assert_int_eq(cli_run(CLI " tokenize --model builtin:test", CLI_OUT_AND_ERR, out, sizeof out), 2);
}
END_TEST

START_TEST(test_bench_tokenize_reports_each_model)
{
    char cmd[1 << 14], out[1 << 14];
    snprintf(cmd, sizeof cmd, CLI " bench tokenize --model builtin:test --model %s --rounds 1 --json",
             vocab("llama3-qwen2"));
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\"pre\": \"qwen2\""));
    ck_assert_ptr_nonnull(strstr(out, "\"tokenizer\": \"llama\""));
    const char *m = strstr(out, "\"mb_per_s\"");
    ck_assert_ptr_nonnull(m);
    ck_assert(strtod(strchr(m, ':') + 1, NULL) > 0);
    ck_assert_int_eq(cli_run(CLI " bench tokenize --model /nonexistent.gguf --rounds 1", CLI_OUT_AND_ERR, out,
                             sizeof out), 1);
}
END_TEST

START_TEST(test_run_cli_prompt_streams_text_and_seed_fixes_tokens)
{
    char out[1 << 16], a[1 << 16], b[1 << 16], ta[1024], tb[1024];
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                             "--n-gen 4", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_msg(!strncmp(out, "Hello world", 11), "%s", out);
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                             "--n-gen 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 --threads 1 "
                             "--ignore-eos --json", CLI_OUT_AND_ERR, a, sizeof a), 0);
    ck_assert_ptr_nonnull(strstr(a, "\"text\""));
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                             "--n-gen 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 --threads 2 "
                             "--ignore-eos --json", CLI_OUT_AND_ERR, b, sizeof b), 0);
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
}
END_TEST

START_TEST(test_run_cli_text_refusals_are_one_sentence)
{
    char dir[64], cmd[4096], out[4096];
    ck_assert_ptr_nonnull(cli_tempdir("tok_run", dir, sizeof dir));
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --n-gen 1 --save %s/m.gguf --json "
             ">/dev/null", dir);
    ck_assert_int_eq(system(cmd), 0);
    /* A GGUF without tokenizer metadata: --prompt says to use token ids. */
    snprintf(cmd, sizeof cmd, CLI " run --model %s/m.gguf --prompt hi", dir);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "--prompt-tokens"));
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --prompt-tokens 1,512", CLI_OUT_AND_ERR, out,
                             sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "'512', which is not a token id"));
    /* builtin:test holds 256 positions. */
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --prompt \"$(printf 'a%.0s' $(seq 300))\"", CLI_OUT_AND_ERR,
                             out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "positions but the model holds 256"));
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    ck_assert_int_eq(cli_run(CLI " run --prompt a --prompt-tokens 1", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_int_eq(cli_run(CLI " run --top-p 2", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

/* splitmix64 seeding xoshiro256** (the generator's reference code). */
static double ref_uniform(uint64_t s[4])
{
#define ROTL(x, k) (((x) << (k)) | ((x) >> (64 - (k))))
    const uint64_t r = ROTL(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = ROTL(s[3], 45);
    return (double)(r >> 11) / 9007199254740992.0;
#undef ROTL
}

static void ref_seed(uint64_t seed, uint64_t s[4])
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        s[i] = z ^ (z >> 31);
    }
}

/* A llama model whose weights are all zero, so every logit is exactly 0 on
 * any device: sampling over all 512 tokens is then exactly uniform, and the
 * seed alone says when EOS (id 2) comes. Tokenizer: <unk> <s> </s> t3 ... */
static void write_zero_model(const char *path)
{
    enum { V = 512, E = 64, F = 64 };
    static float zeros[V * E];
    static char names[V][16];
    const char *tok[V];
    float score[V];
    int32_t type[V];
    for (int i = 0; i < V; i++) {
        snprintf(names[i], sizeof names[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "");
        if (i > 2) snprintf(names[i], sizeof names[i], "t%d", i);
        tok[i] = names[i];
        score[i] = -(float)i;
        type[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    struct bp_gguf_writer *w;
    ck_assert_int_eq(bp_gguf_writer_new(3, 32, &w), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "general.architecture", "llama"), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.block_count", 1), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.context_length", 256), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.embedding_length", E), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.feed_forward_length", F), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.attention.head_count", 2), BP_OK);
    ck_assert_int_eq(bp_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.ggml.model", "llama"), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", tok, V), BP_OK);
    ck_assert_int_eq(bp_gguf_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, score, V), BP_OK);
    ck_assert_int_eq(bp_gguf_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, type, V), BP_OK);
    const struct { const char *name; int n; int64_t ne[2]; } t[] = {
        { "token_embd.weight", 2, { E, V } }, { "output_norm.weight", 1, { E, 1 } },
        { "blk.0.attn_norm.weight", 1, { E, 1 } }, { "blk.0.attn_q.weight", 2, { E, E } },
        { "blk.0.attn_k.weight", 2, { E, E } }, { "blk.0.attn_v.weight", 2, { E, E } },
        { "blk.0.attn_output.weight", 2, { E, E } }, { "blk.0.ffn_norm.weight", 1, { E, 1 } },
        { "blk.0.ffn_gate.weight", 2, { E, F } }, { "blk.0.ffn_up.weight", 2, { E, F } },
        { "blk.0.ffn_down.weight", 2, { F, E } },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_int_eq(bp_gguf_add_tensor(w, t[i].name, BP_TYPE_F32, t[i].n, t[i].ne, zeros), BP_OK);
    ck_assert_int_eq(bp_gguf_writer_save(w, path), BP_OK);
    bp_gguf_writer_free(w);
}

static int count_tokens(const char *json, int *last)
{
    const char *t = strstr(json, "\"tokens\"");
    ck_assert_ptr_nonnull(t);
    int n = 0;
    for (const char *c = strchr(t, '[') + 1; *c && *c != ']';) {
        while (*c == ' ' || *c == '\n' || *c == ',') c++;
        if (*c == ']') break;
        *last = (int)strtol(c, (char **)&c, 10);
        n++;
    }
    return n;
}

START_TEST(test_run_cli_stops_at_eos_where_the_seed_says)
{
    /* The first seed whose uniform draws over 512 tokens hit id 2 early. */
    uint64_t seed = 0, s[4];
    int at = -1;
    for (; at < 0; seed++) {
        ref_seed(seed, s);
        for (int k = 0; k < 40 && at < 0; k++)
            if ((int)(ref_uniform(s) * 512) == 2) at = k;
    }
    seed--;
    char path[] = "/tmp/bp_tok_zero_XXXXXX", cmd[4096], out[1 << 16];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_zero_model(path);
    snprintf(cmd, sizeof cmd, CLI " run --model %s --prompt-tokens 1 --n-gen 60 --temp 1 --top-k 0 "
             "--top-p 1 --min-p 0 --seed %llu --json", path, (unsigned long long)seed);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    int last = -1;
    ck_assert_int_eq(count_tokens(out, &last), at + 1);
    ck_assert_int_eq(last, 2);
    strcat(cmd, " --ignore-eos");
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    ck_assert_int_eq(count_tokens(out, &last), 60);
    unlink(path);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tokenizer_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_tokenize_cli_file_bytes_match_llama_cpp);
    tcase_add_test(tc, test_tokenize_cli_special_text_only_when_asked);
    tcase_add_test(tc, test_tokenize_cli_bad_input_is_one_sentence);
    tcase_add_test(tc, test_bench_tokenize_reports_each_model);
    tcase_add_test(tc, test_run_cli_prompt_streams_text_and_seed_fixes_tokens);
    tcase_add_test(tc, test_run_cli_text_refusals_are_one_sentence);
    tcase_add_test(tc, test_run_cli_stops_at_eos_where_the_seed_says);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
