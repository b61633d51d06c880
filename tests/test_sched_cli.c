/*
 * test_sched_cli.c — the scheduler from the command line, over the test
 * plugin `partial`: `run --device partial0` gives the cpu's tokens and its
 * JSON placement counts the fallbacks; BACKPLANE_LOG=info prints the
 * placement once per new graph; `--strict` fails with a sentence
 * naming the missing ops; `check --sched partial0,cpu` passes every case;
 * an unknown device in --sched is one sentence and exit 1.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "suite_main.h"

#define RUN CLI " run --model builtin:test --weight-type f32 --prompt-len 4 --n-gen 6 "

START_TEST(test_run_on_partial_device_gives_cpu_tokens_and_json_placement)
{
    static char a[65536], b[65536];
    char ta[512], tb[512];
    ck_assert_msg(cli_run(RUN "--device partial0 --json", CLI_OUT_ONLY, a, sizeof a) == 0, "%s", a);
    ck_assert_msg(cli_run(RUN "--device cpu --json", CLI_OUT_ONLY, b, sizeof b) == 0, "%s", b);
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
    const char *p = strstr(a, "\"placement\"");
    ck_assert_msg(p != NULL, "%s", a);
    ck_assert_msg(strstr(p, "\"GET_ROWS\": 1") && strstr(p, "\"ROPE\": 4") && strstr(p, "\"device\": \"partial0\""),
                  "%s", p);
}
END_TEST

/* BACKPLANE_LOG=info prints the placement once per new graph: the
 * prefill's and the one decode plan (6 positions fit one capacity). */
START_TEST(test_log_info_prints_placement_once_per_new_graph)
{
    static char out[65536];
    ck_assert_int_eq(cli_run("BACKPLANE_LOG=info " RUN "--device partial0", CLI_OUT_AND_ERR, out, sizeof out), 0);
    int n = 0;
    for (const char *p = out; (p = strstr(p, "sched: info: new graph")) != NULL; p++) n++;
    ck_assert_msg(n == 2, "%d placement lines in:\n%s", n, out);
    ck_assert_msg(strstr(out, "fell back: GET_ROWS x1"), "%s", out);
}
END_TEST

START_TEST(test_run_strict_refuses_naming_missing_ops)
{
    static char out[65536];
    ck_assert_int_eq(cli_run(RUN "--device partial0 --strict", CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "strict") && strstr(out, "GET_ROWS x1") && strstr(out, "SILU x2"), "%s", out);
}
END_TEST

START_TEST(test_check_sched_passes_partial_and_names_unknown_devices)
{
    static char out[65536];
    ck_assert_msg(cli_run(CLI " check --sched partial0,cpu", CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "7 passed, 0 failed") && strstr(out, "fell back: GET_ROWS x1"), "%s", out);
    ck_assert_int_eq(cli_run(CLI " check --sched nosuch0,cpu", CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "nosuch0"), "%s", out);
    ck_assert_int_eq(cli_run(CLI " check --sched", CLI_OUT_AND_ERR, out, sizeof out), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched_cli");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_run_on_partial_device_gives_cpu_tokens_and_json_placement);
    tcase_add_test(tc, test_log_info_prints_placement_once_per_new_graph);
    tcase_add_test(tc, test_run_strict_refuses_naming_missing_ops);
    tcase_add_test(tc, test_check_sched_passes_partial_and_names_unknown_devices);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
