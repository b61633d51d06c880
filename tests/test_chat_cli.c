/*
 * test_chat_cli.c — `backplane chat-template` and `backplane run --chat` end
 * to end. chat-template prints llama.cpp's formats (written out by hand
 * here) for a named template and for a GGUF's own; bad input is one
 * sentence. run --chat, fed its turns on stdin, answers each line and exits
 * 0 at end of file; its replies are the ones a plain `run` gives for the
 * same formatted conversation (built here from the first reply's tokens),
 * which checks the turn handling and the re-reading of a conversation whose
 * template trims the reply.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_tokenizer.h>

#include "cli_util.h"
#include "gguf.h"
#include "suite_main.h"
#include "tokenizer_builtin.h"

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_chat_template_cli_prints_llama_cpps_format)
{
    char dir[64], path[128], cmd[1024], out[4096];
    ck_assert_ptr_nonnull(cli_tempdir("chat_cli", dir, sizeof dir));
    snprintf(path, sizeof path, "%s/m.json", dir);
    /* \u escapes arrive as UTF-8; other members are ignored */
    const char *json = "[{\"role\": \"system\", \"content\": \" Be brief.\\n\", \"name\": \"x\"},\n"
                       " {\"role\": \"user\", \"content\": \"caf\\u00e9 \\ud83d\\ude00\"}]";
    write_file(path, json, strlen(json));
    snprintf(cmd, sizeof cmd, CLI " chat-template --template llama3 --messages %s", path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\ncaf\xC3\xA9 \xF0\x9F\x98\x80<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    snprintf(cmd, sizeof cmd, CLI " chat-template --template gemma --messages %s --no-assistant", path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "<start_of_turn>user\nBe brief.\n\ncaf\xC3\xA9 \xF0\x9F\x98\x80<end_of_turn>\n");
    /* a template's text: Mistral's v7 markers */
    snprintf(cmd, sizeof cmd, CLI " chat-template --template '{{ \"[SYSTEM_PROMPT]\" }}[INST]' --messages %s",
             path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "[SYSTEM_PROMPT]  Be brief.\n[/SYSTEM_PROMPT][INST] caf\xC3\xA9 \xF0\x9F\x98\x80[/INST]");
    /* a built-in model has no template: chatml */
    snprintf(cmd, sizeof cmd, CLI " chat-template --model builtin:test --messages %s", path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "<|im_start|>system\n Be brief.\n<|im_end|>\n<|im_start|>user\ncaf\xC3\xA9 "
                          "\xF0\x9F\x98\x80<|im_end|>\n<|im_start|>assistant\n");
    ck_assert_int_eq(cli_run(CLI " chat-template --list", CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 54);
    ck_assert_int_eq(cli_count_lines(out, "chatml", NULL), 1);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

START_TEST(test_chat_template_cli_reads_a_gguf_template)
{
    char dir[64], gguf[128], msgs[128], cmd[1024], out[4096];
    ck_assert_ptr_nonnull(cli_tempdir("chat_cli", dir, sizeof dir));
    snprintf(gguf, sizeof gguf, "%s/t.gguf", dir);
    snprintf(msgs, sizeof msgs, "%s/m.json", dir);
    struct bp_gguf_writer *w = NULL;
    ck_assert_int_eq(bp_gguf_writer_new(3, 32, &w), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "general.architecture", "llama"), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.chat_template",
                                        "{% for m in messages %}{{ '<|im_start|>' + m.role + '<|im_sep|>' }}"
                                        "{{ m.content + '<|im_end|>' }}{% endfor %}"), BP_OK);
    ck_assert_int_eq(bp_gguf_writer_save(w, gguf), BP_OK);
    bp_gguf_writer_free(w);
    const char *json = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Yo\"}]";
    write_file(msgs, json, strlen(json));
    snprintf(cmd, sizeof cmd, CLI " chat-template --model %s --messages %s", gguf, msgs);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|>Yo<|im_end|>"
                          "<|im_start|>assistant<|im_sep|>");
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

START_TEST(test_chat_template_cli_bad_input_is_one_sentence)
{
    char dir[64], path[128], cmd[1024], out[4096];
    ck_assert_ptr_nonnull(cli_tempdir("chat_cli", dir, sizeof dir));
    snprintf(path, sizeof path, "%s/m.json", dir);
    const char *ok = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    write_file(path, ok, strlen(ok));
    snprintf(cmd, sizeof cmd, CLI " chat-template --template '\n  {{ messages | my_filter }}\nmore' --messages %s",
             path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_str_eq(out, "backplane: the chat template whose first line is \"{{ messages | my_filter }}\" is not "
                          "one llama.cpp formats without Jinja: it is none of the 54 built-in names (chatml, "
                          "llama3, ...) and has none of the markers llama.cpp detects a format by; choose a "
                          "format with --template NAME (--list names them).\n");
    const char *bad[] = { "{\"role\": \"user\"}", "[{\"role\": \"user\"}]", "[{\"role\": \"user\", \"content\": 3}]",
                          "[{\"role\": \"user\", \"content\": \"a\\u0000b\"}]", "[1," };
    const char *want[] = { "is not a JSON array of messages", "message 1 of", "message 1 of", "\\u0000 in a string",
                           "reading the messages failed" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i], strlen(bad[i]));
        snprintf(cmd, sizeof cmd, CLI " chat-template --template chatml --messages %s", path);
        ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
        ck_assert_msg(strstr(out, want[i]), "for %s: %s", bad[i], out);
        ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    }
    snprintf(cmd, sizeof cmd, CLI " chat-template --messages %s", path);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, CLI " chat-template --template chatml --messages %s/none.json", dir);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "cannot open"));
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

/* ------------------------------------------------------------ run --chat */

#define RUN_CHAT CLI " run --model builtin:test --device cpu --n-ctx 256 --threads 1"
#define N_GEN 5

static struct bp_tokenizer *builtin_tokenizer(void)
{
    struct bp_tokenizer *t = NULL;
    char err[256];
    ck_assert_msg(bp_run_tokenizer_for("builtin:test", &t, err, sizeof err) == BP_OK, "%s", err);
    return t;
}

/* The ids of a `run --json` report's "tokens". */
static size_t report_tokens(const char *json, int32_t *ids, size_t cap)
{
    char list[4096];
    ck_assert_ptr_nonnull(cli_json_tokens(json, list, sizeof list));
    size_t n = 0;
    for (const char *p = strchr(list, '['); p && *p && *p != ']';) {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1) break;
        ck_assert_uint_lt(n, cap);
        ids[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

/* What `run` generates after the prompt text in file path: its tokens. */
static size_t plain_run(const char *path, int32_t *ids, size_t cap, const char *weight_seed)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, RUN_CHAT " --weight-seed %s --prompt-file %s --n-gen %d --json", weight_seed, path,
             N_GEN);
    ck_assert_int_eq(cli_run_all(cmd, CLI_OUT_ONLY, &out), 0);
    const size_t n = report_tokens(out, ids, cap);
    free(out);
    return n;
}

/* The text a reply of these tokens streams (what --chat prints). */
static void streamed(const struct bp_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap)
{
    struct bp_token_stream *s = bp_token_stream_new(t);
    ck_assert_ptr_nonnull(s);
    out[0] = 0;
    size_t len;
    for (size_t i = 0; i < n; i++) strncat(out, bp_token_stream_push(s, ids[i], &len), cap - strlen(out) - 1);
    strncat(out, bp_token_stream_flush(s, &len), cap - strlen(out) - 1);
    bp_token_stream_free(s);
}

/* The reply as the next prompt holds it: each token's piece, specials as
 * text, without the end-of-generation token that ended it. */
static void reply_text(const struct bp_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (bp_tokenizer_is_eog(t, ids[i])) break;
        k += bp_tokenizer_piece(t, ids[i], true, out + k, cap - k - 1);
    }
    out[k] = 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

START_TEST(test_run_chat_answers_each_line_and_exits_0_at_eof)
{
    char cmd[1024], *out = NULL;
    /* two turns, an empty line between them skipped */
    snprintf(cmd, sizeof cmd, "printf 'first\\n\\nsecond\\n' | " RUN_CHAT " --chat --n-gen %d", N_GEN);
    ck_assert_int_eq(cli_run_all(cmd, CLI_OUT_ONLY, &out), 0);
    ck_assert_msg(!strncmp(out, "> first\n", 8), "%s", out);
    char *second = strstr(out, "\n> second\n");
    ck_assert_msg(second, "%s", out);
    ck_assert_int_eq(cli_count_lines(out, "> ", NULL), 2);
    ck_assert_uint_gt(strlen(second), strlen("\n> second\n") + 1);
    ck_assert_int_eq(out[strlen(out) - 1], '\n');
    /* the first reply is what a plain run of the chatml prompt generates */
    char dir[64], path[128], want[1024];
    ck_assert_ptr_nonnull(cli_tempdir("chat_run", dir, sizeof dir));
    snprintf(path, sizeof path, "%s/p1.txt", dir);
    const char *p1 = "<|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\n";
    write_file(path, p1, strlen(p1));
    int32_t ids[64];
    const size_t n = plain_run(path, ids, 64, "1");
    struct bp_tokenizer *t = builtin_tokenizer();
    streamed(t, ids, n, want, sizeof want);
    *second = 0;
    ck_assert_str_eq(out + 8, want);
    free(out);
    /* end of file at once: no turn, exit 0, nothing printed */
    ck_assert_int_eq(cli_run_all(RUN_CHAT " --chat < /dev/null", CLI_OUT_ONLY, &out), 0);
    ck_assert_str_eq(out, "");
    free(out);
    bp_tokenizer_free(t);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

/* gemma trims the reply when it formats the next turn: a reply with white
 * space at an edge makes the conversation differ from what the cache holds,
 * and --chat reads it all again. The second reply is then exactly a plain
 * run's on the whole second prompt (with --system and --prompt as turns). */
START_TEST(test_run_chat_rereads_a_conversation_its_template_trims)
{
    char dir[64], path[128];
    ck_assert_ptr_nonnull(cli_tempdir("chat_run", dir, sizeof dir));
    struct bp_tokenizer *t = builtin_tokenizer();
    /* (the system message joins the first user turn) */
    const char *head = "<start_of_turn>user\nBe terse.\n\nfirst<end_of_turn>\n<start_of_turn>model\n";
    snprintf(path, sizeof path, "%s/p1.txt", dir);
    write_file(path, head, strlen(head));
    /* weights whose first reply has white space at an edge */
    int32_t ids1[64], ids2[64];
    size_t n1 = 0;
    char seed[16], reply[1024];
    int s = 1;
    for (; s <= 40; s++) {
        snprintf(seed, sizeof seed, "%d", s);
        n1 = plain_run(path, ids1, 64, seed);
        reply_text(t, ids1, n1, reply, sizeof reply);
        const size_t l = strlen(reply);
        if (l && (is_space(reply[0]) || is_space(reply[l - 1]))) break;
    }
    ck_assert_msg(s <= 40, "no weight seed in 1..40 gives a first reply with white space at an edge");
    /* the second prompt, formatted by hand: the reply trimmed */
    const char *a = reply, *b = reply + strlen(reply);
    while (a < b && is_space(*a)) a++;
    while (b > a && is_space(b[-1])) b--;
    char p2[4096];
    snprintf(p2, sizeof p2, "%s%.*s<end_of_turn>\n<start_of_turn>user\nsecond<end_of_turn>\n"
             "<start_of_turn>model\n", head, (int)(b - a), a);
    snprintf(path, sizeof path, "%s/p2.txt", dir);
    write_file(path, p2, strlen(p2));
    const size_t n2 = plain_run(path, ids2, 64, seed);
    char want1[1024], want2[1024], want[4096], cmd[1024], *out = NULL;
    streamed(t, ids1, n1, want1, sizeof want1);
    streamed(t, ids2, n2, want2, sizeof want2);
    snprintf(want, sizeof want, "> first\n%s\n> second\n%s\n", want1, want2);
    snprintf(cmd, sizeof cmd, "printf 'second\\n' | " RUN_CHAT " --weight-seed %s --chat --template gemma "
             "--system 'Be terse.' --prompt first --n-gen %d", seed, N_GEN);
    ck_assert_int_eq(cli_run_all(cmd, CLI_OUT_ONLY, &out), 0);
    ck_assert_str_eq(out, want);
    free(out);
    bp_tokenizer_free(t);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

START_TEST(test_run_chat_refusals_are_one_sentence)
{
    char out[4096];
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --chat --json", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--chat does not take --json."));
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --system hi", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--system goes with --chat."));
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --chat --n-gen 0", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --device cpu --chat --template '{{ nope }}' < /dev/null",
                             CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "first line is \"{{ nope }}\""));
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    /* a conversation longer than the cache stops with a sentence */
    ck_assert_int_eq(cli_run("printf 'one two three four five six seven eight nine ten\\n' | " CLI
                             " run --model builtin:test --device cpu --chat --n-ctx 16 --n-gen 4",
                             CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "start again with a larger --n-ctx."));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("chat_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_chat_template_cli_prints_llama_cpps_format);
    tcase_add_test(tc, test_chat_template_cli_reads_a_gguf_template);
    tcase_add_test(tc, test_chat_template_cli_bad_input_is_one_sentence);
    tcase_add_test(tc, test_run_chat_answers_each_line_and_exits_0_at_eof);
    tcase_add_test(tc, test_run_chat_rereads_a_conversation_its_template_trims);
    tcase_add_test(tc, test_run_chat_refusals_are_one_sentence);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
