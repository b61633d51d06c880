/*
 * test_tokenizer_cli.c — `backplane tokenize` and the text paths of
 * `backplane run`, end to end: the ids of a file's exact bytes are
 * llama.cpp's (ref-llama3-llama-bpe.txt), --decode inverts them, special
 * text is plain unless --parse-special, `run --prompt` streams text and the
 * same --seed gives the same tokens at any thread count, and each bad input
 * is one sentence with exit status 1.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI BP_TEST_BIN_DIR "/backplane"

static int run(const char *cmd, char *out, size_t cap)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

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
    ck_assert_msg(run(cmd, out, sizeof out) == 0, "%s", out);
    ref_ids("newlines_tabs", want, sizeof want);
    ck_assert_str_eq(out, want);
    /* --decode gives the text back (BOS skipped), plus the newline printed. */
    char ids[1 << 14];
    snprintf(ids, sizeof ids, "%s", want);
    for (char *c = ids; *c; c++) if (*c == ' ') *c = ',';
    ids[strcspn(ids, "\n")] = 0;
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --decode %s", vocab("llama3-llama-bpe"), ids);
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_uint_eq(strlen(out), sizeof text);
    ck_assert(!memcmp(out, text, sizeof text - 1));
    unlink(path);
}
END_TEST

START_TEST(test_tokenize_cli_special_text_only_when_asked)
{
    char cmd[4096], out[1 << 14];
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --text '<|eot_id|>'", vocab("llama3-llama-bpe"));
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_ptr_null(strstr(out, "128009"));
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --text '<|eot_id|>' --parse-special --json",
             vocab("llama3-llama-bpe"));
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"ids\""));
    ck_assert_ptr_nonnull(strstr(out, "128009"));
    ck_assert_ptr_nonnull(strstr(out, "\"piece\": \"<|eot_id|>\""));
}
END_TEST

START_TEST(test_tokenize_cli_bad_input_is_one_sentence)
{
    char cmd[4096], out[4096];
    ck_assert_int_eq(run(CLI " tokenize --model /nonexistent.gguf --text x", out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "/nonexistent.gguf"));
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n'));
    snprintf(cmd, sizeof cmd, CLI " tokenize --model %s --decode 1,128256", vocab("llama3-llama-bpe"));
    ck_assert_int_eq(run(cmd, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "'128256', which is not a token id"));
    ck_assert_int_eq(run(CLI " tokenize --model builtin:test", out, sizeof out), 2);
}
END_TEST

static char *tokens_of(char *json)
{
    char *t = strstr(json, "\"tokens\"");
    ck_assert_ptr_nonnull(t);
    char *e = strchr(t, ']');
    ck_assert_ptr_nonnull(e);
    e[1] = '\0';
    return t;
}

START_TEST(test_run_cli_prompt_streams_text_and_seed_fixes_tokens)
{
    char out[1 << 16], a[1 << 16], b[1 << 16];
    ck_assert_int_eq(run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                         "--n-gen 4", out, sizeof out), 0);
    ck_assert_msg(!strncmp(out, "Hello world", 11), "%s", out);
    ck_assert_int_eq(run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                         "--n-gen 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 --threads 1 "
                         "--ignore-eos --json", a, sizeof a), 0);
    ck_assert_ptr_nonnull(strstr(a, "\"text\""));
    ck_assert_int_eq(run(CLI " run --model builtin:test --weight-type f32 --prompt 'Hello world' "
                         "--n-gen 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 --threads 2 "
                         "--ignore-eos --json", b, sizeof b), 0);
    ck_assert_str_eq(tokens_of(a), tokens_of(b));
}
END_TEST

START_TEST(test_run_cli_text_refusals_are_one_sentence)
{
    char dir[] = "/tmp/bp_tok_run_XXXXXX", cmd[4096], out[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --n-gen 1 --save %s/m.gguf --json "
             ">/dev/null", dir);
    ck_assert_int_eq(system(cmd), 0);
    /* A GGUF without tokenizer metadata: --prompt says to use token ids. */
    snprintf(cmd, sizeof cmd, CLI " run --model %s/m.gguf --prompt hi", dir);
    ck_assert_int_eq(run(cmd, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "--prompt-tokens"));
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n'));
    ck_assert_int_eq(run(CLI " run --model builtin:test --prompt-tokens 1,512", out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "'512', which is not a token id"));
    /* builtin:test holds 256 positions. */
    ck_assert_int_eq(run(CLI " run --model builtin:test --prompt \"$(printf 'a%.0s' $(seq 300))\"",
                         out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "positions but the model holds 256"));
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n'));
    ck_assert_int_eq(run(CLI " run --prompt a --prompt-tokens 1", out, sizeof out), 2);
    ck_assert_int_eq(run(CLI " run --top-p 2", out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
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
    tcase_add_test(tc, test_run_cli_prompt_streams_text_and_seed_fixes_tokens);
    tcase_add_test(tc, test_run_cli_text_refusals_are_one_sentence);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
