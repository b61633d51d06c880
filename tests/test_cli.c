/*
 * test_cli.c — the `backplane` program run as a user runs it: exit codes,
 * output, JSON that parses, and the check harness catching broken devices
 * (the plugins under tests/check_plugins/, found through BACKPLANE_PLUGIN_PATH).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "cli_util.h"
#include "json.h"
#include "suite_main.h"

struct run {
    int rc;      /* exit status; -1 when the program did not exit normally */
    char *out;   /* stdout (and stderr when merged) */
};

/* Runs the CLI with args (a shell word list we control) and an optional
 * plugin path; stderr is merged into out when merge is true, dropped otherwise. */
static struct run run_cli(const char *plugin_path, bool merge, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "BACKPLANE_PLUGIN_PATH='%s' '%s' %s", plugin_path ? plugin_path : "", CLI, args);
    struct run r;
    r.rc = cli_run_all(cmd, merge ? CLI_OUT_AND_ERR : CLI_OUT_ONLY, &r.out);
    ck_assert_msg(r.out != NULL, "%s did not run", cmd);
    return r;
}

/* "<dev>: P passed, F failed, U unsupported" -> true and the three numbers. */
static bool summary_of(const char *text, const char *dev, int *passed, int *failed, int *unsup)
{
    char key[64];
    snprintf(key, sizeof key, "\n%s: ", dev);
    const char *s = strstr(text, key);
    if (!s) return false;
    char fmt[96];
    snprintf(fmt, sizeof fmt, "\n%s: %%d passed, %%d failed, %%d unsupported", dev);
    return sscanf(s, fmt, passed, failed, unsup) == 3;
}

/* ---- a strict little JSON validator (RFC 8259 grammar, no extensions) ---- */

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_str(const char *p)
{
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_num(const char *p)
{
    const char *start = p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p > start ? p : NULL;
}

static const char *json_container(const char *p, int depth, char close, bool keyed)
{
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
        if (keyed) {
            p = json_str(ws(p));
            if (!p) return NULL;
            p = ws(p);
            if (*p++ != ':') return NULL;
        }
        p = json_value(p, depth + 1);
        if (!p) return NULL;
        p = ws(p);
        if (*p == ',') { p++; continue; }
        return *p == close ? p + 1 : NULL;
    }
}

static const char *json_value(const char *p, int depth)
{
    if (depth > 64) return NULL;
    p = ws(p);
    switch (*p) {
    case '{': return json_container(p, depth, '}', true);
    case '[': return json_container(p, depth, ']', false);
    case '"': return json_str(p);
    case 't': return strncmp(p, "true", 4) ? NULL : p + 4;
    case 'f': return strncmp(p, "false", 5) ? NULL : p + 5;
    case 'n': return strncmp(p, "null", 4) ? NULL : p + 4;
    default: return json_num(p);
    }
}

static bool json_valid(const char *text)
{
    const char *end = json_value(text, 0);
    return end && *ws(end) == '\0';
}

/* ---- the tests ---- */

START_TEST(test_json_writer_escapes_strings_and_nests)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    struct json_writer w;
    json_init(&w, f);
    json_object_begin(&w, NULL);
    json_string(&w, "s", "a\"b\\c\nd\x01" "e");
    json_array_begin(&w, "xs");
    json_int(&w, NULL, -3);
    json_double(&w, NULL, 0.5);
    json_double(&w, NULL, 1.0 / 0.0);
    json_array_end(&w);
    json_array_begin(&w, "empty");
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
    fclose(f);
    const char *expect = "{\n  \"s\": \"a\\\"b\\\\c\\nd\\u0001e\",\n  \"xs\": [\n    -3,\n"
                         "    0.5,\n    null\n  ],\n  \"empty\": []\n}\n";
    ck_assert_str_eq(buf, expect);
    ck_assert(json_valid(buf));
    free(buf);
}
END_TEST

START_TEST(test_json_validator_rejects_malformed_documents)
{
    /* The validator is what the JSON tests below lean on: it must say no. */
    ck_assert(!json_valid("{\"a\": 1,}"));
    ck_assert(!json_valid("{\"a\" 1}"));
    ck_assert(!json_valid("[1 2]"));
    ck_assert(!json_valid("\"tab\there\""));
    ck_assert(!json_valid("{\"a\": nan}"));
    ck_assert(json_valid("{\"a\": [1, -2.5e3, true, null, {\"b\": \"\\u00e9\"}]}"));
}
END_TEST

START_TEST(test_check_passes_on_cpu_against_itself)
{
    struct run r = run_cli(NULL, true, "check --device cpu");
    int passed = -1, failed = -1, unsup = -1;
    ck_assert_msg(summary_of(r.out, "cpu", &passed, &failed, &unsup), "no summary in:\n%s", r.out);
    ck_assert_msg(r.rc == 0, "check exited %d:\n%s", r.rc, r.out);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(cli_count_lines(r.out, "FAIL", NULL), 0);
    /* The summary counts the per-case lines, and the harness is not trivial. */
    ck_assert_int_eq(cli_count_lines(r.out, "PASS", NULL), passed);
    ck_assert_int_ge(passed, 100);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "MUL_MAT"), 20);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "FLASH_ATTN_EXT"), 5);
    /* ABI 1.2's ops: every template in both types */
    ck_assert_int_eq(cli_count_lines(r.out, "PASS", "ROPE_EXT"), 14);
    ck_assert_int_eq(cli_count_lines(r.out, "PASS", "TANH"), 8);
    ck_assert_int_eq(cli_count_lines(r.out, "PASS", "FLASH_ATTN_SOFTCAP"), 10);
    free(r.out);
}
END_TEST

START_TEST(test_check_fails_a_device_with_a_wrong_add)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, true, "check --device badadd");
    int passed = -1, failed = -1, unsup = -1;
    ck_assert_msg(summary_of(r.out, "badadd", &passed, &failed, &unsup), "no summary in:\n%s", r.out);
    ck_assert_int_eq(r.rc, 1);
    ck_assert_int_ge(cli_count_lines(r.out, "FAIL", " ADD "), 1);
    ck_assert_int_eq(cli_count_lines(r.out, "FAIL", " MUL "), 0);
    /* Everything but F32 ADD is declined, and declined is not failed. */
    ck_assert_int_ge(cli_count_lines(r.out, "UNSUP", "MUL_MAT"), 1);
    ck_assert_int_eq(cli_count_lines(r.out, "FAIL", NULL), failed);
    ck_assert_int_ge(unsup, 100);
    free(r.out);
}
END_TEST

/* A meta device whose sub-device computes ADD wrong fails whichever place
 * the broken device takes: each sub-device's copy of a mirrored output is
 * compared (not only sub-device 0's), and the split pass routes rows to
 * every sub-device. The failure names the sub-device. */
START_TEST(test_check_meta_fails_a_broken_sub_device_in_either_place)
{
    static const struct { const char *spec, *names; } orders[] = {
        {"meta:cpu,badadd", "sub-device 1 (badadd) computed it wrong"},
        {"meta:badadd,cpu", "sub-device 0 (badadd) computed it wrong"},
    };
    for (size_t i = 0; i < 2; i++) {
        char args[128];
        snprintf(args, sizeof args, "check --device %s --op ADD", orders[i].spec);
        struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, true, args);
        int passed = -1, failed = -1, unsup = -1;
        ck_assert_msg(summary_of(r.out, "meta0", &passed, &failed, &unsup), "no summary in:\n%s", r.out);
        ck_assert_int_eq(r.rc, 1);
        /* badadd computes F32 only: every F32 case fails, the rest are declined. */
        ck_assert_int_eq(passed, 0);
        ck_assert_int_ge(cli_count_lines(r.out, "FAIL", orders[i].names), 5);
        ck_assert_int_ge(cli_count_lines(r.out, "FAIL", "[split]  nmse"), 1);
        ck_assert_int_ge(cli_count_lines(r.out, "FAIL", "split over "), 1);
        ck_assert_int_eq(cli_count_lines(r.out, "FAIL", NULL), failed);
        free(r.out);
    }
}
END_TEST

/* On sound sub-devices both passes of every MUL_MAT case agree with the
 * reference, and the split pass exists (work went to each sub-device). */
START_TEST(test_check_meta_over_cpus_passes_mirrored_and_split)
{
    struct run r = run_cli(NULL, true, "check --device meta:cpu*3 --op MUL_MAT --op ADD");
    int passed = -1, failed = -1, unsup = -1;
    ck_assert_msg(summary_of(r.out, "meta0", &passed, &failed, &unsup), "no summary in:\n%s", r.out);
    ck_assert_msg(r.rc == 0 && failed == 0, "meta:cpu*3 failed:\n%s", r.out);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "[split]"), 20);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "MUL_MAT        q4_0 w[256,17] x[256,7] [split]"), 1);
    free(r.out);
}
END_TEST

/* ABI 1.2's ops on meta:cpu*3: every case passes mirrored, and the split
 * pass cuts x by heads (ROPE_EXT, its factors mirrored), rows (TANH) and
 * q, k, v by heads in whole GQA groups (FLASH_ATTN_SOFTCAP). */
START_TEST(test_check_meta_over_cpus_splits_the_abi_1_2_ops)
{
    struct run r = run_cli(NULL, true, "check --device meta:cpu*3 --op ROPE_EXT --op TANH --op FLASH_ATTN_SOFTCAP");
    int passed = -1, failed = -1, unsup = -1;
    ck_assert_msg(summary_of(r.out, "meta0", &passed, &failed, &unsup), "no summary in:\n%s", r.out);
    ck_assert_msg(r.rc == 0 && failed == 0 && unsup == 0, "meta:cpu*3 failed:\n%s", r.out);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "ROPE_EXT"), 14);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "factors [split]"), 4);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "TANH           f32  x[65,3,2] [split]"), 1);
    ck_assert_int_ge(cli_count_lines(r.out, "PASS", "GQA mask f32 cap=0.5 [split]"), 2);
    free(r.out);
}
END_TEST

START_TEST(test_check_reports_an_out_of_bounds_write)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, true, "check --device oobwrite --op SCALE");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(cli_count_lines(r.out, "FAIL", "wrote out of bounds of tensor 'out'") >= 1,
                  "no out-of-bounds report in:\n%s", r.out);
    free(r.out);
}
END_TEST

START_TEST(test_check_reports_nan_in_an_output)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, true, "check --device nansilu --op silu");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(cli_count_lines(r.out, "FAIL", "NaN in the output") >= 1, "no NaN report in:\n%s", r.out);
    free(r.out);
}
END_TEST

START_TEST(test_check_json_gives_records_and_summary)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, false, "check --device cpu --device badadd --op ADD --json");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(json_valid(r.out), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"summary\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"status\": \"pass\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"status\": \"fail\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"ok\": false"));
    free(r.out);
}
END_TEST

START_TEST(test_devices_json_lists_cpu_and_the_test_plugins)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, false, "devices --json");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(json_valid(r.out), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"devices\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "\"failures\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "\"name\": \"cpu\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"family\": \"badadd\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"family\": \"oobwrite\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"family\": \"nansilu\""));
    free(r.out);
}
END_TEST

START_TEST(test_devices_survives_a_plugin_that_crashes_in_init)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR "/crashing", false, "devices --json");
    ck_assert_msg(r.rc == 0, "devices exited %d:\n%s", r.rc, r.out);
    ck_assert_msg(json_valid(r.out), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"name\": \"cpu\""));
    ck_assert_ptr_nonnull(strstr(r.out, "libbackplane-crashinit.so"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"code\": \"CRASHED\""));
    free(r.out);
}
END_TEST

START_TEST(test_devices_table_shows_devices_and_plugins)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, true, "devices");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "Devices ("));
    ck_assert_ptr_nonnull(strstr(r.out, "Plugins loaded ("));
    ck_assert_ptr_nonnull(strstr(r.out, "Plugins refused ("));
    ck_assert_ptr_nonnull(strstr(r.out, "libbackplane-badadd.so"));
    free(r.out);
}
END_TEST

START_TEST(test_info_cpu_shows_mul_mat_and_features)
{
    struct run r = run_cli(NULL, true, "info cpu");
    ck_assert_msg(r.rc == 0, "info exited %d:\n%s", r.rc, r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "Device cpu"));
    ck_assert_int_eq(cli_count_lines(r.out, "  MUL_MAT ", " f32"), 1);
    ck_assert_int_eq(cli_count_lines(r.out, "  MUL_MAT ", " f16"), 1);
    ck_assert_ptr_nonnull(strstr(r.out, "Features (proc-address names):"));
    ck_assert_int_eq(cli_count_lines(r.out, "  " BP_PROC_SET_N_THREADS, NULL), 1);
    free(r.out);
}
END_TEST

START_TEST(test_info_of_a_narrow_device_marks_other_ops_unsupported)
{
    struct run r = run_cli(BP_TEST_CHECKPLUG_DIR, false, "info badadd --json");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(json_valid(r.out), "not JSON:\n%s", r.out);
    free(r.out);
    r = run_cli(BP_TEST_CHECKPLUG_DIR, true, "info badadd");
    ck_assert_int_eq(cli_count_lines(r.out, "  ADD", " f32"), 1);
    ck_assert_int_eq(cli_count_lines(r.out, "  ADD", " f16"), 0);
    ck_assert_int_eq(cli_count_lines(r.out, "  MUL_MAT ", " unsupported"), 1);
    free(r.out);
}
END_TEST

START_TEST(test_unknown_device_is_an_error_listing_the_devices)
{
    struct run r = run_cli(NULL, true, "info nosuchdevice");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "no device named 'nosuchdevice'"));
    ck_assert_ptr_nonnull(strstr(r.out, "available devices: "));
    ck_assert_ptr_nonnull(strstr(r.out, "cpu"));
    free(r.out);
    r = run_cli(NULL, true, "check --device nosuchdevice");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "no device named 'nosuchdevice'"));
    free(r.out);
}
END_TEST

START_TEST(test_usage_errors_exit_2)
{
    static const char *const cases[] = {
        "", "frobnicate", "check --bogus", "check --device", "check --op NOT_AN_OP", "info",
        "info cpu extra", "devices --what", "version --nope", "bench", "bench nosuch",
        "bench mul_mat --rounds 0", "bench mul_mat --rounds 65", "bench mul_mat --type q9_9",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run r = run_cli(NULL, true, cases[i]);
        ck_assert_msg(r.rc == 2, "'backplane %s' exited %d, expected 2:\n%s", cases[i], r.rc, r.out);
        ck_assert_msg(strstr(r.out, "backplane") != NULL, "no message for '%s'", cases[i]);
        free(r.out);
    }
    struct run r = run_cli(NULL, true, "--help");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: backplane"));
    free(r.out);
}
END_TEST

/* The bench's figures are machine-dependent, so only their presence and
 * sanity are checked: a ratio within each round, not a speed. */
START_TEST(test_bench_mul_mat_reports_rounds_and_bandwidth_ratio)
{
    struct run r = run_cli(NULL, false, "bench mul_mat --type q4_0 -K 256 -N 64 -M 1 "
                           "--footprint-mb 1 --rounds 2 --reps 2 --threads 1 --json");
    ck_assert_msg(r.rc == 0, "exit %d:\n%s", r.rc, r.out);
    ck_assert_msg(json_valid(r.out), "not JSON:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "\"rounds\": 2") != NULL, "%s", r.out);
    const char *ratio = strstr(r.out, "\"weights_over_read_bandwidth\": ");
    ck_assert_msg(ratio != NULL, "%s", r.out);
    ck_assert_msg(strtod(ratio + strlen("\"weights_over_read_bandwidth\": "), NULL) > 0, "%s", r.out);
    free(r.out);
}
END_TEST

START_TEST(test_bench_mul_mat_scaling_times_one_thread_too)
{
    struct run r = run_cli(NULL, false, "bench mul_mat --type f32 -K 64 -N 16 -M 8 --threads 2 "
                           "--scaling --rounds 2 --reps 2");
    ck_assert_msg(r.rc == 0, "exit %d:\n%s", r.rc, r.out);
    ck_assert_msg(strstr(r.out, "2 threads / 1 thread: ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "weights / read bandwidth (2 threads): ") != NULL, "%s", r.out);
    /* the value itself is checked in the JSON, at full precision: on so
     * small a problem under load the text's %.2f can round it to 0.00 */
    ck_assert_msg(strstr(r.out, "2 threads / their summed speed: ") != NULL, "%s", r.out);
    free(r.out);

    r = run_cli(NULL, false, "bench mul_mat --type q4_0 -K 64 -N 16 -M 8 --threads 3 "
                "--scaling --rounds 1 --reps 1 --json");
    ck_assert_msg(r.rc == 0, "exit %d:\n%s", r.rc, r.out);
    const char *key = "\"over_1_thread_copies_at_once\": ";
    const char *v = strstr(r.out, key);
    ck_assert_msg(v != NULL && strtod(v + strlen(key), NULL) > 0, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"seconds_1_thread_copy_at_once\": ") != NULL, "%s", r.out);
    free(r.out);
}
END_TEST

START_TEST(test_version_prints_library_and_abi_versions)
{
    struct run r = run_cli(NULL, true, "version");
    ck_assert_int_eq(r.rc, 0);
    char expect[128];
    snprintf(expect, sizeof expect, "backplane %s\n", bp_version_string());
    ck_assert_ptr_nonnull(strstr(r.out, expect));
    snprintf(expect, sizeof expect, "plugin ABI %d.%d\n", BP_ABI_MAJOR, BP_ABI_MINOR);
    ck_assert_ptr_nonnull(strstr(r.out, expect));
    free(r.out);
}
END_TEST

/* A plugin's warning at init is printed once, although the CLI loads
 * plugins with isolate_probe (each cpu variant initialised in a child
 * first) and the cpu family has several variants: it was four times. */
START_TEST(test_a_plugin_init_warning_is_printed_once)
{
    struct run r;
    r.rc = cli_run_all("BACKPLANE_CPU_POLL=x '" CLI "' devices", CLI_OUT_AND_ERR, &r.out);
    ck_assert_ptr_nonnull(r.out);
    ck_assert_int_eq(r.rc, 0);
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "BACKPLANE_CPU_POLL='x'")) != NULL; p++) n++;
    ck_assert_msg(n == 1, "the warning was printed %d times:\n%s", n, r.out);
    free(r.out);
}
END_TEST

/* BACKPLANE_CPU_PREFETCH: two or three distances are taken as given (the
 * third, for the 32-weight-block types, defaults to the second); anything
 * else warns once and leaves the CPU's own row in use. */
START_TEST(test_cpu_prefetch_setting_is_parsed_or_refused)
{
    static const struct {
        const char *env, *shown; /* shown: NULL when it must be refused */
    } cases[] = {
        { "8192,1024", "L2 8192, L1 1024 (32-weight blocks 1024) bytes ahead (BACKPLANE_CPU_PREFETCH)" },
        { "8192,1024,0", "L2 8192, L1 1024 (32-weight blocks 0) bytes ahead (BACKPLANE_CPU_PREFETCH)" },
        { "8192,1024,64,64", NULL },
        { "8192,1024x", NULL },
        { "8192,100", NULL },
        { "8192", NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "BACKPLANE_CPU_PREFETCH='%s' '" CLI "' info cpu", cases[i].env);
        struct run r;
        r.rc = cli_run_all(cmd, CLI_OUT_AND_ERR, &r.out);
        ck_assert_ptr_nonnull(r.out);
        ck_assert_int_eq(r.rc, 0);
        char warn[128];
        snprintf(warn, sizeof warn, "BACKPLANE_CPU_PREFETCH='%s' is not", cases[i].env);
        if (cases[i].shown) {
            ck_assert_msg(strstr(r.out, cases[i].shown) != NULL, "%s: %s", cases[i].env, r.out);
            ck_assert_msg(strstr(r.out, warn) == NULL, "%s: %s", cases[i].env, r.out);
        } else {
            ck_assert_msg(strstr(r.out, warn) != NULL, "%s: %s", cases[i].env, r.out);
            ck_assert_msg(strstr(r.out, "(BACKPLANE_CPU_PREFETCH)") == NULL, "%s: %s",
                          cases[i].env, r.out);
        }
        free(r.out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_json_writer_escapes_strings_and_nests);
    tcase_add_test(tc, test_json_validator_rejects_malformed_documents);
    tcase_add_test(tc, test_check_passes_on_cpu_against_itself);
    tcase_add_test(tc, test_check_meta_fails_a_broken_sub_device_in_either_place);
    tcase_add_test(tc, test_check_meta_over_cpus_passes_mirrored_and_split);
    tcase_add_test(tc, test_check_meta_over_cpus_splits_the_abi_1_2_ops);
    tcase_add_test(tc, test_check_fails_a_device_with_a_wrong_add);
    tcase_add_test(tc, test_check_reports_an_out_of_bounds_write);
    tcase_add_test(tc, test_check_reports_nan_in_an_output);
    tcase_add_test(tc, test_check_json_gives_records_and_summary);
    tcase_add_test(tc, test_devices_json_lists_cpu_and_the_test_plugins);
    tcase_add_test(tc, test_devices_survives_a_plugin_that_crashes_in_init);
    tcase_add_test(tc, test_devices_table_shows_devices_and_plugins);
    tcase_add_test(tc, test_info_cpu_shows_mul_mat_and_features);
    tcase_add_test(tc, test_info_of_a_narrow_device_marks_other_ops_unsupported);
    tcase_add_test(tc, test_unknown_device_is_an_error_listing_the_devices);
    tcase_add_test(tc, test_usage_errors_exit_2);
    tcase_add_test(tc, test_version_prints_library_and_abi_versions);
    tcase_add_test(tc, test_a_plugin_init_warning_is_printed_once);
    tcase_add_test(tc, test_cpu_prefetch_setting_is_parsed_or_refused);
    tcase_add_test(tc, test_bench_mul_mat_reports_rounds_and_bandwidth_ratio);
    tcase_add_test(tc, test_bench_mul_mat_scaling_times_one_thread_too);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
