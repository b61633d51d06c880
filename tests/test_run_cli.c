/*
 * test_run_cli.c — `backplane run` end to end: a built-in model saved as
 * GGUF and run from the file gives the same tokens, --dump-logits writes one
 * row per evaluated position, a bad file is one sentence and exit 1, and
 * BACKPLANE_PROFILE=1 prints each graph's op table.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "suite_main.h"

START_TEST(test_run_cli_saved_gguf_gives_same_tokens_as_builtin)
{
    char dir[64];
    ck_assert_ptr_nonnull(cli_tempdir("run_cli", dir, sizeof dir));
    char cmd[1024], a[16384], b[16384], ta[1024], tb[1024];
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --weight-type f32 --prompt-len 4 "
             "--n-gen 5 --json --save %s/m.gguf --dump-logits %s/a.bin", dir, dir);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, a, sizeof a) == 0, "%s", a);
    snprintf(cmd, sizeof cmd, CLI " run --model %s/m.gguf --prompt-len 4 --n-gen 5 --json "
             "--dump-logits %s/b.bin", dir, dir);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, b, sizeof b) == 0, "%s", b);
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
    /* 4 prompt rows + 4 decode steps, 512 floats each. */
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/a.bin", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 8 * 512 * 4);
    snprintf(cmd, sizeof cmd, "cmp -s %s/a.bin %s/b.bin", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

/* `info --model` shows a file as the runner reads it: the values below
 * are the ones tests/data/arch/README.md gives gemma3.gguf (6 layers,
 * window 4 on five of six, base 1e6 and 1e4, linear x8, q/k norms, tied). */
START_TEST(test_run_cli_info_model_shows_architecture_rope_window_and_types)
{
    char out[16384];
    ck_assert_msg(cli_run(CLI " info --model " BP_TEST_SOURCE_DIR "/tests/data/arch/gemma3.gguf --json",
                          CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    const char *want[] = { "\"architecture\": \"gemma3\"", "\"n_layer\": 6", "\"sliding_window\": 4",
                           "\"pairs\": \"neox\"", "\"freq_base\": 1000000", "\"scaling\": \"linear\"",
                           "\"factor\": 8", "\"tied_output\": true", "\"attn_q_norm.weight\"",
                           "\"post_ffw_norm.weight\"", "\"chat_template\"" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]), "no %s in: %s", want[i], out);
    ck_assert_msg(cli_run(CLI " info --model " BP_TEST_SOURCE_DIR "/tests/data/arch/qwen2-256-q4_k_m.gguf",
                          CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "architecture:  qwen2") && strstr(out, "q4_K x") && strstr(out, "attn_q.bias"),
                  "%s", out);
    /* A file the runner refuses: the same sentence, exit 1. */
    ck_assert_int_eq(cli_run(CLI " info --model " BP_TEST_SOURCE_DIR "/tests/data/arch/refuse-unknown-tensor.gguf",
                             CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "'blk.0.foo.weight'"), "%s", out);
}
END_TEST

START_TEST(test_run_cli_bad_file_is_one_sentence_and_exit_1)
{
    char dir[64];
    ck_assert_ptr_nonnull(cli_tempdir("run_cli", dir, sizeof dir));
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "printf 'NOTAGGUFFILE' > %s/bad.gguf", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, CLI " run --model %s/bad.gguf", dir);
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "not a GGUF file"));
    ck_assert_int_eq(cli_count_lines(out, "", NULL), 1);
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:nope");
    ck_assert_int_eq(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "no built-in model 'nope'"));
    ck_assert_int_eq(cli_run(CLI " run --n-gen x", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}
END_TEST

/* The op rows of the table after the heading that starts with head: the
 * nodes of op, and the sums of the ms/graph and share columns. */
static void profile_table(const char *out, const char *head, const char *op, double *nodes,
                          double *ms, double *share, double *graph_ms)
{
    const char *h = strstr(out, head);
    ck_assert_msg(h != NULL, "no '%s' in:\n%s", head, out);
    const char *per = strstr(h, " ms per graph");
    ck_assert_ptr_nonnull(per);
    while (per > h && per[-1] != ' ') per--;
    *graph_ms = atof(per);
    *nodes = -1;
    *ms = *share = 0;
    const char *l = strchr(h, '\n');
    l = l ? strchr(l + 1, '\n') : NULL;
    ck_assert_msg(l != NULL, "no column names under '%s' in:\n%s", head, out);
    l++; /* past the column names */
    char name[64];
    double n, t, sh;
    int rows = 0;
    /* Op rows, and MUL_MAT's "converting x" row, which is part of its time. */
    for (; l && l[0] == ' ' && l[1] == ' '; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "    converting x", 16)) continue;
        ck_assert_msg(sscanf(l, " %63s %lf %lf %lf%%", name, &n, &t, &sh) == 4, "bad row: %.80s", l);
        if (!strcmp(name, op)) *nodes = n;
        *ms += t;
        *share += sh;
        rows++;
    }
    ck_assert_int_ge(rows, 8);
}

START_TEST(test_run_cli_profile_names_the_ops_and_sums_within_the_graph)
{
    char out[16384];
    /* builtin:test: 2 layers of 7 MUL_MATs, and the output projection. */
    ck_assert_msg(cli_run("BACKPLANE_PROFILE=1 " CLI " run --device cpu --model builtin:test "
                          "--weight-type q8_0 --prompt-len 4 --n-gen 3 --threads 2",
                          CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    const struct { const char *head; } graphs[2] = { { "profile: prefill of 4 tokens, 1 graph," },
                                                     { "profile: decode steps, 2 graphs," } };
    for (int i = 0; i < 2; i++) {
        double nodes, ms, share, graph_ms;
        profile_table(out, graphs[i].head, "MUL_MAT", &nodes, &ms, &share, &graph_ms);
        ck_assert_msg(nodes == 15, "%s: %g MUL_MAT nodes, want 15:\n%s", graphs[i].head, nodes, out);
        /* Rounded to 0.001 ms and 0.1 % per row, 10 rows at most. */
        ck_assert_msg(ms <= graph_ms + 0.01 && share <= 100.5,
                      "%s: the ops sum to %g ms (%g %%) of a %g ms graph:\n%s", graphs[i].head, ms,
                      share, graph_ms, out);
        ck_assert_ptr_nonnull(strstr(strstr(out, graphs[i].head), "FLASH_ATTN_EXT"));
    }
}
END_TEST

START_TEST(test_run_cli_prefill_runs_report_warm_and_keep_the_tokens)
{
    char a[16384], b[16384], ta[1024], tb[1024];
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --weight-type q4_0 --prompt-len 6 "
                          "--n-gen 4 --json", CLI_OUT_AND_ERR, a, sizeof a) == 0, "%s", a);
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --weight-type q4_0 --prompt-len 6 "
                          "--n-gen 4 --json --prefill-runs 3", CLI_OUT_AND_ERR, b, sizeof b) == 0, "%s", b);
    ck_assert_ptr_null(strstr(a, "prefill_warm_tokens_per_s"));
    ck_assert_ptr_nonnull(strstr(b, "\"prefill_warm_tokens_per_s\""));
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
    ck_assert_int_eq(cli_run(CLI " run --prefill-runs 0", CLI_OUT_AND_ERR, a, sizeof a), 2);
}
END_TEST

/* The number after "key": in a run --json report; NAN when it is absent. */
static double json_key(const char *json, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(json, k);
    return p ? strtod(p + strlen(k), NULL) : NAN;
}

/* 39 decode steps: probes before, after steps 16 and 32, and at the end, so
 * three windows (16, 16, 7 steps), each held against its own edges. --json
 * alone probes before and after: one window. */
START_TEST(test_run_cli_bandwidth_windows_each_against_their_probes)
{
    char out[16384];
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --n-gen 40 --json --bandwidth",
                          CLI_OUT_ONLY, out, sizeof out) == 0, "%s", out);
    ck_assert_double_eq(json_key(out, "decode_bandwidth_windows"), 3);
    const double f = json_key(out, "decode_bandwidth_fraction");
    ck_assert_msg(f > 0 && json_key(out, "decode_bandwidth_fraction_min") <= f &&
                  f <= json_key(out, "decode_bandwidth_fraction_max"), "%s", out);
    ck_assert_msg(json_key(out, "read_bandwidth_bytes_per_s") > 1e8, "%s", out);
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --n-gen 40 --json", CLI_OUT_ONLY, out,
                          sizeof out) == 0, "%s", out);
    ck_assert_double_eq(json_key(out, "decode_bandwidth_windows"), 1);
    ck_assert_double_eq(json_key(out, "decode_bandwidth_fraction_min"),
                        json_key(out, "decode_bandwidth_fraction_max"));
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --n-gen 40 --bandwidth", CLI_OUT_ONLY,
                          out, sizeof out) == 0, "%s", out);
    ck_assert_msg(cli_count_lines(out, "         median step ", "% of the measured read bandwidth") == 1 &&
                  cli_count_lines(out, "         (the median of 3 windows of up to 16 steps", NULL) == 1,
                  "%s", out);
    /* one step: nothing to hold against the probes, no fraction claimed */
    ck_assert_msg(cli_run(CLI " run --device cpu --model builtin:test --n-gen 1 --json", CLI_OUT_ONLY, out,
                          sizeof out) == 0, "%s", out);
    ck_assert(isnan(json_key(out, "decode_bandwidth_fraction")));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_run_cli_saved_gguf_gives_same_tokens_as_builtin);
    tcase_add_test(tc, test_run_cli_bad_file_is_one_sentence_and_exit_1);
    tcase_add_test(tc, test_run_cli_profile_names_the_ops_and_sums_within_the_graph);
    tcase_add_test(tc, test_run_cli_info_model_shows_architecture_rope_window_and_types);
    tcase_add_test(tc, test_run_cli_prefill_runs_report_warm_and_keep_the_tokens);
    tcase_add_test(tc, test_run_cli_bandwidth_windows_each_against_their_probes);
    suite_add_tcase(s, tc);
    setenv("CK_FORK", "no", 1);
    return run_suite(s);
}
