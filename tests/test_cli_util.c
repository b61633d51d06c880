/*
 * test_cli_util.c — the helper the CLI suites run the program through
 * (tests/cli_util.h), on shell commands whose output and status are known:
 * the exit status comes back, stderr is merged or dropped, an output longer
 * than the buffer is cut but the program still runs to its end, a signal is
 * -1, and the readers of the output count lines and find the tokens array.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "suite_main.h"

START_TEST(test_cli_run_gives_the_output_and_the_exit_status)
{
    char out[64];
    ck_assert_int_eq(cli_run("printf 'one\\ntwo'; exit 3", CLI_OUT_AND_ERR, out, sizeof out), 3);
    ck_assert_str_eq(out, "one\ntwo");
    ck_assert_int_eq(cli_run("true", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_str_eq(out, "");
    /* The shell's own status for a program it cannot find. */
    ck_assert_int_eq(cli_run("/nonexistent/backplane", CLI_OUT_ONLY, out, sizeof out), 127);
}
END_TEST

START_TEST(test_cli_run_merges_or_drops_stderr)
{
    char out[64];
    ck_assert_int_eq(cli_run("printf a; printf b >&2; printf c", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_str_eq(out, "abc");
    ck_assert_int_eq(cli_run("printf a; printf b >&2; printf c", CLI_OUT_ONLY, out, sizeof out), 0);
    ck_assert_str_eq(out, "ac");
}
END_TEST

/* 200000 bytes are three pipe buffers: a reader that stopped at 15 would
 * leave head blocked, then killed by SIGPIPE, instead of exiting 0. */
START_TEST(test_cli_run_cuts_a_long_output_but_lets_the_program_finish)
{
    char out[16];
    memset(out, '#', sizeof out);
    ck_assert_int_eq(cli_run("yes x | head -c 200000; exit 4", CLI_OUT_AND_ERR, out, sizeof out), 4);
    ck_assert_str_eq(out, "x\nx\nx\nx\nx\nx\nx\nx");
    ck_assert_int_eq(cli_run("yes x | head -c 200000", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_int_eq(cli_run("printf abc", CLI_OUT_AND_ERR, out, 1), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_cli_run_reports_a_signal_and_a_buffer_of_no_bytes)
{
    char out[64];
    ck_assert_int_eq(cli_run("printf gone; kill -KILL $$", CLI_OUT_AND_ERR, out, sizeof out), -1);
    ck_assert_str_eq(out, "gone");
    ck_assert_int_eq(cli_run("true", CLI_OUT_AND_ERR, out, 0), CLI_NOT_RUN);
}
END_TEST

START_TEST(test_cli_run_all_keeps_every_byte)
{
    char *out = NULL;
    ck_assert_int_eq(cli_run_all("yes x | head -c 300000; printf e >&2; exit 6", CLI_OUT_AND_ERR, &out), 6);
    ck_assert_ptr_nonnull(out);
    const size_t len = strlen(out);
    ck_assert_uint_eq(len, 300001);
    size_t wrong = 0;
    for (size_t i = 0; i + 1 < len; i++) wrong += out[i] != (i % 2 ? '\n' : 'x');
    ck_assert_uint_eq(wrong, 0);
    ck_assert_int_eq(out[len - 1], 'e');
    free(out);
    ck_assert_int_eq(cli_run_all("printf e >&2", CLI_OUT_ONLY, &out), 0);
    ck_assert_str_eq(out, "");
    free(out);
}
END_TEST

START_TEST(test_cli_count_lines_matches_the_prefix_and_the_needle_within_a_line)
{
    const char *text = "PASS add f32\nFAIL add f16\nPASS mul f32\n  PASS indented\nPASS last add";
    ck_assert_int_eq(cli_count_lines(text, "PASS", NULL), 3);
    ck_assert_int_eq(cli_count_lines(text, "PASS", "add"), 2);
    ck_assert_int_eq(cli_count_lines(text, "FAIL", "f16"), 1);
    ck_assert_int_eq(cli_count_lines(text, "FAIL", "mul"), 0); /* on the next line only */
    ck_assert_int_eq(cli_count_lines(text, "PASS", "PASS"), 3);
    ck_assert_int_eq(cli_count_lines("", "PASS", NULL), 0);
    /* every line, with or without a newline at the end */
    ck_assert_int_eq(cli_count_lines("one sentence.\n", "", NULL), 1);
    ck_assert_int_eq(cli_count_lines("one sentence.", "", NULL), 1);
    ck_assert_int_eq(cli_count_lines("one.\ntwo.\n", "", NULL), 2);
}
END_TEST

START_TEST(test_cli_tempdir_is_new_and_goes_with_all_inside)
{
    char a[64], b[64], cmd[256], small[12];
    ck_assert_ptr_eq(cli_tempdir("cli_util", a, sizeof a), a);
    ck_assert_ptr_nonnull(cli_tempdir("cli_util", b, sizeof b));
    ck_assert_str_ne(a, b);
    ck_assert_ptr_nonnull(strstr(a, "/tmp/bp_cli_util_"));
    snprintf(cmd, sizeof cmd, "mkdir -p %s/x/y && echo hi > %s/x/y/f && echo hi > %s/g", a, a, a);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(cli_tempdir_remove(a), 0);
    ck_assert_int_eq(access(a, F_OK), -1);
    ck_assert_int_eq(cli_tempdir_remove(b), 0);
    ck_assert_int_eq(cli_tempdir_remove(b), -1); /* already gone: said, not crashed */
    ck_assert_ptr_null(cli_tempdir("cli_util", small, sizeof small)); /* the name does not fit */
}
END_TEST

START_TEST(test_cli_json_tokens_copies_the_array_or_says_why_not)
{
    const char *json = "{\"prompt\": [9], \"tokens\": [1, 22, 333], \"later\": [4]}";
    char out[32];
    ck_assert_str_eq(cli_json_tokens(json, out, sizeof out), "\"tokens\": [1, 22, 333]");
    ck_assert_ptr_null(cli_json_tokens(json, out, 22)); /* 22 bytes + NUL do not fit */
    ck_assert_ptr_nonnull(cli_json_tokens(json, out, 23));
    ck_assert_ptr_null(cli_json_tokens("{\"prompt\": [9]}", out, sizeof out));
    ck_assert_ptr_null(cli_json_tokens("{\"tokens\": [1, 2", out, sizeof out));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_util");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cli_run_gives_the_output_and_the_exit_status);
    tcase_add_test(tc, test_cli_run_merges_or_drops_stderr);
    tcase_add_test(tc, test_cli_run_cuts_a_long_output_but_lets_the_program_finish);
    tcase_add_test(tc, test_cli_run_reports_a_signal_and_a_buffer_of_no_bytes);
    tcase_add_test(tc, test_cli_run_all_keeps_every_byte);
    tcase_add_test(tc, test_cli_count_lines_matches_the_prefix_and_the_needle_within_a_line);
    tcase_add_test(tc, test_cli_json_tokens_copies_the_array_or_says_why_not);
    tcase_add_test(tc, test_cli_tempdir_is_new_and_goes_with_all_inside);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
