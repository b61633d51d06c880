/* test_meta_allreduce.c — the all-reduce preflight and
 * BACKPLANE_META_ALLREDUCE=auto. The test plugin commpaths
 * (tests/meta_plugins/commtest.c built with COMMTEST_PATHS) offers three
 * registry paths: "slow" (right), "wrong" (one element off by one) and
 * "declines". The probe must call each what it is; auto must never choose
 * the wrong or the declining one, must say which path was wrong, and must
 * answer later all-reduces (and later backends over the same sub-devices)
 * from its cache; `backplane check --comm` must print and fail on the wrong
 * one; meta:cpu*2 and meta:cpu,vulkan0 must sum right at every size. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "cli_util.h"
#include "device_gate.h"
#include "log_capture.h"
#include "suite_main.h"

enum { SLOW, WRONG, DECLINES };

static int split_rows(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    (void)user;
    if (strncmp(t->name, "split", 5) != 0) return 0;
    *out = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    return 1;
}

/* A meta device over commpaths<a> and commpaths<b>. */
static struct bp_device *paths_meta(int a, int b)
{
    struct bp_device *subs[2];
    int idx[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "commpaths%d", idx[i]);
        subs[i] = bp_device_by_name(name);
        ck_assert_msg(subs[i] != NULL, "%s is missing: the commpaths plugin did not load (%s)", name, bp_last_error());
    }
    struct bp_device *meta = NULL;
    ck_assert_msg(bp_meta_device_new(subs, 2, NULL, split_rows, NULL, &meta) == BP_OK, "%s", bp_last_error());
    return meta;
}

static unsigned long long *path_calls(void)
{
    unsigned long long *c = bp_device_proc_address(bp_device_by_name("commpaths0"), "commpaths_calls");
    ck_assert_ptr_nonnull(c);
    return c;
}

enum { K = 64, N = 6, M = 3 };

/* y = w x (row-parallel: every run closes one PARTIAL cut) computed `runs`
 * times on one backend of dev, each result checked against the scalar
 * product of the same small integers (exact in any order). */
static void matmul_on(struct bp_device *dev, int runs, struct bp_meta_stats *stats, char *choice, size_t cap)
{
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, N), "split_w");
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, M), "split_x");
    struct bp_tensor *y = bp_mul_mat(c, w, x);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    float wv[K * N], xv[K * M], yv[N * M];
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 37) % 11) - 5;
    for (int i = 0; i < K * M; i++) xv[i] = (float)((i * 13) % 7) - 3;
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof wv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_msg(bp_backend_init(dev, "n_threads=1", &be) == BP_OK, "%s", bp_last_error());
    for (int r = 0; r < runs; r++) {
        memset(yv, 0, sizeof yv);
        ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
        ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
        for (int mm = 0; mm < M; mm++)
            for (int nn = 0; nn < N; nn++) {
                float want = 0;
                for (int k = 0; k < K; k++) want += wv[nn * K + k] * xv[mm * K + k];
                ck_assert_msg(yv[mm * N + nn] == want, "run %d: y[%d,%d] = %g, want %g", r, nn, mm,
                              (double)yv[mm * N + nn], (double)want);
            }
    }
    ck_assert_int_eq(bp_meta_backend_stats(be, stats), BP_OK);
    if (choice) {
        bp_meta_allreduce_choice_fn fn =
            (bp_meta_allreduce_choice_fn)bp_device_proc_address(dev, BP_PROC_META_ALLREDUCE_CHOICE);
        ck_assert_ptr_nonnull(fn);
        ck_assert_int_eq(fn(be, sizeof yv, 0, choice, cap), BP_OK);
    }
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}

/* Every path of dev at `bytes`; fails the test on a probe error. */
static size_t probe(struct bp_device *dev, size_t bytes, struct bp_meta_allreduce_probe *r, size_t cap)
{
    bp_meta_allreduce_probe_fn fn =
        (bp_meta_allreduce_probe_fn)bp_device_proc_address(dev, BP_PROC_META_ALLREDUCE_PROBE);
    ck_assert_ptr_nonnull(fn);
    struct bp_backend *be;
    ck_assert_msg(bp_backend_init(dev, NULL, &be) == BP_OK, "%s", bp_last_error());
    size_t n = 0;
    ck_assert_msg(fn(be, bytes, 3, r, cap, &n) == BP_OK, "%s", bp_last_error());
    bp_backend_free(be);
    return n;
}

START_TEST(test_probe_names_each_path_what_it_is)
{
    struct bp_meta_allreduce_probe r[8];
    size_t n = probe(paths_meta(2, 3), 4096, r, 8);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(r[0].path, "comm:slow");
    ck_assert_str_eq(r[1].path, "comm:wrong");
    ck_assert_str_eq(r[2].path, "comm:declines");
    ck_assert_str_eq(r[3].path, "butterfly");
    ck_assert_int_eq(r[0].status, BP_OK);
    ck_assert_int_eq(r[0].wrong, 0);
    ck_assert(r[0].max_abs_err == 0 && r[0].seconds > 0);
    ck_assert_int_eq(r[1].status, BP_OK);
    ck_assert_int_eq(r[1].wrong, 1);
    ck_assert(r[1].max_abs_err == 1);
    ck_assert_int_eq(r[2].status, BP_ERR_UNSUPPORTED);
    ck_assert_int_eq(r[3].status, BP_OK);
    ck_assert_int_eq(r[3].wrong, 0);
}
END_TEST

START_TEST(test_auto_never_chooses_a_wrong_path_says_so_and_caches)
{
    struct bp_device *meta = paths_meta(0, 1);
    unsigned long long *calls = path_calls();
    struct bp_meta_stats st = {.size = sizeof st};
    char choice[BP_META_ALLREDUCE_PATH_LEN];
    log_capture_begin();
    matmul_on(meta, 2, &st, choice, sizeof choice);
    const char *log = log_capture_end();
    ck_assert_msg(!strcmp(choice, "comm:slow") || !strcmp(choice, "butterfly"), "auto chose %s", choice);
    ck_assert_msg(strstr(log, "comm:wrong over commpaths0, commpaths1 returned a wrong sum"),
                  "the wrong path was not reported: %s", log);
    ck_assert_uint_eq(st.reductions, 2);
    ck_assert_uint_eq(st.allreduce_measured, 1); /* one size class, measured once */
    ck_assert_uint_eq(st.allreduce_cached, 1);   /* the second run found the choice */
    /* a second backend over the same sub-devices measures nothing */
    unsigned long long wrong_calls = calls[WRONG], declined_calls = calls[DECLINES];
    struct bp_meta_stats st2 = {.size = sizeof st2};
    char choice2[BP_META_ALLREDUCE_PATH_LEN];
    matmul_on(paths_meta(0, 1), 3, &st2, choice2, sizeof choice2);
    ck_assert_str_eq(choice2, choice);
    ck_assert_uint_eq(st2.allreduce_measured, 0);
    ck_assert_uint_eq(st2.allreduce_cached, 3);
    ck_assert_uint_eq(calls[WRONG], wrong_calls);
    ck_assert_uint_eq(calls[DECLINES], declined_calls);
    ck_assert_uint_eq(st2.comm_calls, !strcmp(choice, "comm:slow") ? 3 : 0);
}
END_TEST

START_TEST(test_choice_before_first_use_is_not_measured_yet)
{
    struct bp_device *meta = paths_meta(1, 3);
    bp_meta_allreduce_choice_fn fn =
        (bp_meta_allreduce_choice_fn)bp_device_proc_address(meta, BP_PROC_META_ALLREDUCE_CHOICE);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(meta, NULL, &be), BP_OK);
    char path[BP_META_ALLREDUCE_PATH_LEN];
    ck_assert_int_eq(fn(be, 16 << 20, 0, path, sizeof path), BP_OK);
    ck_assert_str_eq(path, "not measured yet");
    bp_backend_free(be);
}
END_TEST

struct asker {
    struct bp_device *meta;
    bp_status st;
    char path[BP_META_ALLREDUCE_PATH_LEN];
    struct bp_meta_stats stats;
};

/* A backend of its own asking for the 64 KiB class's choice, measuring
 * when nobody has: no check assertions off the main thread. */
static void *ask(void *arg)
{
    struct asker *a = arg;
    bp_meta_allreduce_choice_fn fn =
        (bp_meta_allreduce_choice_fn)bp_device_proc_address(a->meta, BP_PROC_META_ALLREDUCE_CHOICE);
    struct bp_backend *be;
    a->st = fn ? bp_backend_init(a->meta, NULL, &be) : BP_ERR_NOT_FOUND;
    if (a->st != BP_OK) return NULL;
    a->st = fn(be, 64 << 10, 1, a->path, sizeof a->path);
    a->stats.size = sizeof a->stats;
    if (a->st == BP_OK) a->st = bp_meta_backend_stats(be, &a->stats);
    bp_backend_free(be);
    return NULL;
}

START_TEST(test_two_threads_share_one_measurement)
{
    struct bp_device *meta = paths_meta(1, 2);
    struct asker a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct asker){.meta = meta};
        ck_assert_int_eq(pthread_create(&th[i], NULL, ask, &a[i]), 0);
    }
    uint64_t measured = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(a[i].st == BP_OK, "thread %d: %s", i, bp_status_name(a[i].st));
        ck_assert_str_eq(a[i].path, a[0].path);
        measured += a[i].stats.allreduce_measured;
    }
    ck_assert_uint_eq(measured, 1); /* one class, one set: measured once among the four */
    ck_assert_msg(strcmp(a[0].path, "comm:wrong") && strcmp(a[0].path, "comm:declines"), "chose %s", a[0].path);
}
END_TEST

/* BACKPLANE_META_ALLREDUCE=value on a new backend over commpaths0,1: its
 * choice, or the status of bp_backend_init. */
static bp_status fixed(const char *value, char *path, size_t cap)
{
    setenv("BACKPLANE_META_ALLREDUCE", value, 1);
    struct bp_device *meta = paths_meta(0, 2);
    struct bp_backend *be;
    bp_status st = bp_backend_init(meta, NULL, &be);
    if (st == BP_OK) {
        bp_meta_allreduce_choice_fn fn =
            (bp_meta_allreduce_choice_fn)bp_device_proc_address(meta, BP_PROC_META_ALLREDUCE_CHOICE);
        ck_assert_int_eq(fn(be, 4096, 0, path, cap), BP_OK);
        bp_backend_free(be);
    }
    unsetenv("BACKPLANE_META_ALLREDUCE");
    return st;
}

START_TEST(test_explicit_values_fix_the_path)
{
    char path[BP_META_ALLREDUCE_PATH_LEN];
    ck_assert_int_eq(fixed("butterfly", path, sizeof path), BP_OK);
    ck_assert_str_eq(path, "butterfly");
    ck_assert_int_eq(fixed("comm", path, sizeof path), BP_OK);
    ck_assert_str_eq(path, "comm:slow");
    ck_assert_int_eq(fixed("comm:declines", path, sizeof path), BP_OK);
    ck_assert_str_eq(path, "comm:declines");
    log_capture_begin();
    bp_status st = fixed("fastest", path, sizeof path);
    const char *log = log_capture_end();
    ck_assert_int_eq(st, BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(log, "BACKPLANE_META_ALLREDUCE='fastest'") && strstr(log, "comm:wrong"),
                  "the refusal does not name the value and the paths: %s", log);
}
END_TEST

START_TEST(test_a_declining_fixed_path_falls_back_per_call)
{
    setenv("BACKPLANE_META_ALLREDUCE", "comm:declines", 1);
    struct bp_meta_stats st = {.size = sizeof st};
    matmul_on(paths_meta(0, 3), 2, &st, NULL, 0);
    unsetenv("BACKPLANE_META_ALLREDUCE");
    ck_assert_uint_eq(st.comm_calls, 2);
    ck_assert_uint_eq(st.comm_declined, 2); /* both done by the butterfly, both right */
}
END_TEST

/* The CLI's output (stderr merged) and exit status. */
static int cli(const char *args, char *text, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s", CLI, args);
    return cli_run(cmd, CLI_OUT_AND_ERR, text, cap);
}

/* The table line of path at the size printed as `size`, or NULL. */
static const char *row(const char *text, const char *path, const char *size)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        size_t len = strcspn(l, "\n");
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), l);
        if (!strncmp(line, path, strlen(path)) && line[strlen(path)] == ' ' && strstr(line, size))
            return l;
    }
    return NULL;
}

static bool row_says(const char *text, const char *path, const char *size, const char *word)
{
    const char *l = row(text, path, size);
    if (!l) return false;
    const char *w = strstr(l, word);
    return w && w < l + strcspn(l, "\n");
}

static const char *const sizes[] = {" 4 KiB", " 64 KiB", " 1 MiB", " 16 MiB"}; /* as bp_format_bytes prints them */

START_TEST(test_check_comm_prints_and_fails_on_the_wrong_path)
{
    static char text[16384];
    int rc = cli("check --comm meta:commpaths0,commpaths1", text, sizeof text);
    ck_assert_msg(rc == 1, "check --comm exited %d on a wrong path: %s", rc, text);
    for (size_t k = 0; k < 4; k++) {
        ck_assert_msg(row_says(text, "comm:slow", sizes[k], " ok"), "comm:slow at %s not ok: %s", sizes[k], text);
        ck_assert_msg(row_says(text, "comm:wrong", sizes[k], "WRONG"), "comm:wrong at %s not WRONG: %s", sizes[k],
                      text);
        ck_assert_msg(row_says(text, "comm:declines", sizes[k], "declined"), "no decline at %s: %s", sizes[k], text);
        ck_assert_msg(row_says(text, "butterfly", sizes[k], " ok"), "butterfly at %s not ok: %s", sizes[k], text);
    }
    ck_assert_msg(strstr(text, "all-reduce path comm:wrong of"), "no sentence naming the wrong path: %s", text);
}
END_TEST

START_TEST(test_check_comm_meta_cpu2_sums_right)
{
    static char text[16384];
    int rc = cli("check --comm 'meta:cpu*2'", text, sizeof text);
    ck_assert_msg(rc == 0, "check --comm meta:cpu*2 exited %d: %s", rc, text);
    for (size_t k = 0; k < 4; k++)
        ck_assert_msg(row_says(text, "butterfly", sizes[k], " ok"), "butterfly at %s not ok: %s", sizes[k], text);
    rc = cli("check --comm 'meta:cpu*2' --json", text, sizeof text);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(text, "\"result\": \"ok\"") && strstr(text, "\"ok\": true") &&
                  strstr(text, "\"bytes\": 16777216"), "unexpected JSON: %s", text);
    rc = cli("check --comm cpu", text, sizeof text);
    ck_assert_msg(rc == 2 && strstr(text, "not a meta device"), "check --comm cpu: %d %s", rc, text);
    /* Without mpirun (or, in builds without MPI such as the TSan tree,
     * without the mpi plugin) dist: is a usage error that says what to do. */
    rc = cli("check --comm dist:cpu", text, sizeof text);
    ck_assert_msg(rc == 2 && (strstr(text, "mpirun") || strstr(text, "needs the mpi plugin")),
                  "check --comm dist:cpu: %d %s", rc, text);
}
END_TEST

START_TEST(test_info_shows_the_choice_per_size)
{
    static char text[32768];
    int rc = cli("info meta:commpaths0,commpaths1", text, sizeof text);
    ck_assert_msg(rc == 0, "info exited %d: %s", rc, text);
    const char *sec = strstr(text, "All-reduce path per message size");
    ck_assert_msg(sec != NULL, "no all-reduce section: %s", text);
    ck_assert_msg(!strstr(sec, "comm:wrong") && !strstr(sec, "comm:declines"), "info chose a bad path: %s", sec);
    ck_assert_msg(strstr(sec, "comm:slow") || strstr(sec, "butterfly"), "no choice shown: %s", sec);
}
END_TEST

START_TEST(test_meta_cpu_vulkan_sums_right_at_every_size)
{
    struct bp_device *meta = bp_device_by_name("meta:cpu,vulkan0");
    ck_assert_msg(meta != NULL, "%s", bp_last_error());
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
        struct bp_meta_allreduce_probe r[8];
        size_t n = probe(meta, bp_meta_allreduce_class_bytes(k), r, 8);
        ck_assert_uint_ge(n, 1);
        for (size_t p = 0; p < n; p++)
            ck_assert_msg(r[p].status == BP_OK && !r[p].wrong, "%s at %zu bytes: status %d, off by %g", r[p].path,
                          bp_meta_allreduce_class_bytes(k), r[p].status, r[p].max_abs_err);
    }
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("meta_allreduce");
    TCase *tc = tcase_create("paths");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_probe_names_each_path_what_it_is);
    tcase_add_test(tc, test_auto_never_chooses_a_wrong_path_says_so_and_caches);
    tcase_add_test(tc, test_choice_before_first_use_is_not_measured_yet);
    tcase_add_test(tc, test_two_threads_share_one_measurement);
    tcase_add_test(tc, test_explicit_values_fix_the_path);
    tcase_add_test(tc, test_a_declining_fixed_path_falls_back_per_call);
    tcase_add_test(tc, test_check_comm_prints_and_fails_on_the_wrong_path);
    tcase_add_test(tc, test_check_comm_meta_cpu2_sums_right);
    tcase_add_test(tc, test_info_shows_the_choice_per_size);
    suite_add_tcase(s, tc);
    TCase *vk = tcase_create("vulkan0");
    tcase_set_timeout(vk, 300);
    tcase_set_tags(vk, "vulkan0");
    tcase_add_test(vk, test_meta_cpu_vulkan_sums_right_at_every_size);
    suite_add_tcase(s, vk);
    return run_suite(s);
}
