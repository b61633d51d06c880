/* test_meta_env.c — the operator's path to a meta device: with
 * BACKPLANE_DEVICES=meta:cpu*4 and BACKPLANE_META_SPLIT=3,1,1,1 (set by
 * CTest) bp_default_devices gives meta0 over four CPU sub-devices with those
 * ratios, it computes like the CPU device, `backplane info meta0` shows its
 * sub-devices, ratios and all-reduce path, and bad BACKPLANE_META_SPLIT
 * values are refused with one sentence. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "cli_util.h"
#include "log_capture.h"
#include "suite_main.h"

static const char *feature(struct bp_device *dev, const char *name)
{
    bp_get_features_fn f = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull(f);
    for (const struct bp_feature *x = f(NULL); x && x->name; x++)
        if (!strcmp(x->name, name)) return x->value;
    return NULL;
}

static int split_rows(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    (void)user;
    (void)t;
    *out = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    return 1;
}

START_TEST(test_meta_default_device_from_backplane_devices)
{
    struct bp_device *devs[4];
    size_t n = 0;
    ck_assert_msg(bp_default_devices(devs, 4, &n) == BP_OK, "%s", bp_last_error());
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(bp_device_name(devs[0]), "meta0");
    ck_assert_int_eq(bp_device_type(devs[0]), BP_DEVICE_TYPE_META);
    ck_assert_str_eq(feature(devs[0], "meta0.sub_devices"), "cpu,cpu,cpu,cpu");
    ck_assert_str_eq(feature(devs[0], "meta0.split_ratios"), "3,1,1,1");
    ck_assert_str_eq(feature(devs[0], "meta0.allreduce"), "butterfly");
    size_t f1, t1, f4, t4;
    bp_device_memory(bp_device_by_name("cpu"), &f1, &t1);
    bp_device_memory(devs[0], &f4, &t4);
    ck_assert_uint_eq(t4, 4 * t1);

    /* a row-parallel matmul over the 3,1,1,1 split: 96 rows as 48,16,16,16 */
    ck_assert_int_eq(bp_meta_set_split_fn(devs[0], split_rows, NULL), BP_OK);
    enum { K = 96, N = 4 };
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(4, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_new_2d(c, BP_TYPE_F32, K, N), *x = bp_tensor_new_2d(c, BP_TYPE_F32, K, 1);
    struct bp_tensor *y = bp_mul_mat(c, w, x);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(devs[0]), NULL, &buf), BP_OK);
    int32_t state;
    int64_t lne[BP_META_MAX_DEVICES];
    ck_assert_int_eq(bp_meta_tensor_split(w, &state, lne), BP_OK);
    ck_assert_int_eq(lne[0], 48);
    ck_assert_int_eq(lne[1], 16);
    ck_assert_int_eq(lne[3], 16);
    float wv[K * N], xv[K], yv[N];
    for (int i = 0; i < K * N; i++) wv[i] = (float)(i % 5) - 2;
    for (int i = 0; i < K; i++) xv[i] = (float)(i % 3) - 1;
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof wv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(devs[0], "n_threads=1", &be), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_tensor_get(y, yv, 0, sizeof yv), BP_OK);
    for (int nn = 0; nn < N; nn++) {
        float want = 0;
        for (int k = 0; k < K; k++) want += wv[nn * K + k] * xv[k];
        ck_assert_msg(yv[nn] == want, "y[%d] = %g, want %g", nn, (double)yv[nn], (double)want);
    }
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}
END_TEST

START_TEST(test_meta_info_cli_shows_sub_devices_ratios_and_allreduce)
{
    char text[16384];
    const int rc = cli_run(CLI " info meta0", CLI_OUT_AND_ERR, text, sizeof text);
    ck_assert_msg(rc == 0, "backplane info meta0 failed: %s", text);
    ck_assert_msg(strstr(text, "META"), "no device type in: %s", text);
    ck_assert_msg(strstr(text, "meta0.sub_devices") && strstr(text, "cpu,cpu,cpu,cpu"), "no sub-devices in: %s", text);
    ck_assert_msg(strstr(text, "meta0.split_ratios") && strstr(text, "3,1,1,1"), "no ratios in: %s", text);
    ck_assert_msg(strstr(text, "meta0.allreduce") && strstr(text, "butterfly"), "no all-reduce path in: %s", text);
}
END_TEST

/* bp_meta_device_new with BACKPLANE_META_SPLIT=value: the status, and the
 * plugin's log lines. */
static bp_status compose_with_split(const char *value, char *log, size_t cap)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct bp_device *subs[2] = {cpu, cpu}, *m = NULL;
    setenv("BACKPLANE_META_SPLIT", value, 1);
    log_capture_begin();
    bp_status st = bp_meta_device_new(subs, 2, NULL, NULL, NULL, &m);
    snprintf(log, cap, "%s", log_capture_end());
    setenv("BACKPLANE_META_SPLIT", "3,1,1,1", 1);
    return st;
}

START_TEST(test_meta_split_env_refuses_bad_values_in_one_sentence)
{
    static const char *bad[] = {"3,x", "3", "3,1,1", "-1,2", "0,0", "3,1,", "abc", "3;1"};
    char log[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_status st = compose_with_split(bad[i], log, sizeof log);
        ck_assert_msg(st == BP_ERR_INVALID_ARGUMENT, "BACKPLANE_META_SPLIT='%s' was accepted", bad[i]);
        ck_assert_msg(strstr(log, "BACKPLANE_META_SPLIT") || strstr(log, "split ratio"),
                      "'%s': the log does not name the variable: %s", bad[i], log);
        /* the plugin says it once: one "meta:" line */
        const char *first = strstr(log, "meta:");
        ck_assert_msg(first && !strstr(first + 1, "meta:"), "'%s': expected one sentence from the plugin, got: %s",
                      bad[i], log);
    }
    ck_assert_int_eq(compose_with_split(" 2 , 1 ", log, sizeof log), BP_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta_env");
    TCase *tc = tcase_create("env");
    tcase_add_test(tc, test_meta_default_device_from_backplane_devices);
    tcase_add_test(tc, test_meta_info_cli_shows_sub_devices_ratios_and_allreduce);
    tcase_add_test(tc, test_meta_split_env_refuses_bad_values_in_one_sentence);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
