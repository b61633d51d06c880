/*
 * test_run_cli.c — `backplane run` end to end: a built-in model saved as
 * GGUF and run from the file gives the same tokens, --dump-logits writes one
 * row per evaluated position, and a bad file is one sentence and exit 1.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI BP_TEST_BIN_DIR "/backplane"

/* Run cmd; stdout+stderr into out (NUL-terminated); returns the exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
    char full[2048];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *tokens_of(char *json)
{
    char *t = strstr(json, "\"tokens\"");
    ck_assert_ptr_nonnull(t);
    char *e = strchr(t, ']');
    ck_assert_ptr_nonnull(e);
    e[1] = '\0';
    return t;
}

START_TEST(test_run_cli_saved_gguf_gives_same_tokens_as_builtin)
{
    char dir[] = "/tmp/bp_run_cli_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cmd[1024], a[16384], b[16384];
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --weight-type f32 --prompt-len 4 "
             "--n-gen 5 --json --save %s/m.gguf --dump-logits %s/a.bin", dir, dir);
    ck_assert_msg(run(cmd, a, sizeof a) == 0, "%s", a);
    snprintf(cmd, sizeof cmd, CLI " run --model %s/m.gguf --prompt-len 4 --n-gen 5 --json "
             "--dump-logits %s/b.bin", dir, dir);
    ck_assert_msg(run(cmd, b, sizeof b) == 0, "%s", b);
    ck_assert_str_eq(tokens_of(a), tokens_of(b));
    /* 4 prompt rows + 4 decode steps, 512 floats each. */
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/a.bin", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 8 * 512 * 4);
    snprintf(cmd, sizeof cmd, "cmp -s %s/a.bin %s/b.bin", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_run_cli_bad_file_is_one_sentence_and_exit_1)
{
    char dir[] = "/tmp/bp_run_cli_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "printf 'NOTAGGUFFILE' > %s/bad.gguf", dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, CLI " run --model %s/bad.gguf", dir);
    ck_assert_int_eq(run(cmd, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "not a GGUF file"));
    ck_assert_ptr_null(strchr(strchr(out, '\n') + 1, '\n')); /* exactly one line */
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:nope");
    ck_assert_int_eq(run(cmd, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "no built-in model 'nope'"));
    ck_assert_int_eq(run(CLI " run --n-gen x", out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_run_cli_saved_gguf_gives_same_tokens_as_builtin);
    tcase_add_test(tc, test_run_cli_bad_file_is_one_sentence_and_exit_1);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
