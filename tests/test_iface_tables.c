/*
 * test_iface_tables.c — the table rules of ABI 1.1 (bp_iface_check.h) kept
 * by the host, by the meta plugin over another vendor's device, and by the
 * CLI: a table below its floor is refused with a sentence naming the field,
 * a table exactly at its floor (ending at a PROT_NONE page) works, optional
 * fields left NULL fall back. The plugins are tests/fault_plugins/tables.
 */

#include <backplane/bp_meta.h>

#include "cli_util.h"
#include "loader_test_util.h"
#include "suite_main.h"

#define TABLES(f) FAULT "/tables/libbackplane-" f ".so"

/* ---- helpers ---- */

static struct bp_device *load_one(const char *path, const char *family, const char *device)
{
    fresh(path, family);
    struct bp_device *d = bp_device_by_name(device);
    ck_assert_msg(d != NULL, "%s did not load: %s", device, bp_last_error());
    return d;
}

/* c = a + b (b broadcast along dim 1) on dev, checked against a scalar sum. */
static void assert_add_computes(struct bp_device *dev)
{
    enum { N0 = 33, N1 = 5 };
    struct bp_context *ctx = NULL;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, N0, N1);
    struct bp_tensor *b = bp_tensor_new_2d(ctx, BP_TYPE_F32, N0, 1);
    struct bp_tensor *c = bp_add(ctx, a, b);
    ck_assert_ptr_nonnull(c);
    struct bp_buffer *buf = NULL;
    ck_assert_msg(bp_context_alloc_tensors(ctx, bp_device_buffer_type(dev), NULL, &buf) == BP_OK, "%s",
                  bp_last_error());
    float av[N0 * N1], bv[N0], cv[N0 * N1];
    for (int i = 0; i < N0 * N1; i++) av[i] = (float)(i % 7) - 2.5f;
    for (int i = 0; i < N0; i++) bv[i] = 0.25f * (float)i;
    ck_assert_int_eq(bp_tensor_set(a, av, 0, sizeof av), BP_OK);
    ck_assert_int_eq(bp_tensor_set(b, bv, 0, sizeof bv), BP_OK);
    struct bp_graph *g = NULL;
    ck_assert_int_eq(bp_graph_new(4, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, c), BP_OK);
    struct bp_backend *be = NULL;
    ck_assert_msg(bp_backend_init(dev, NULL, &be) == BP_OK, "%s", bp_last_error());
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    ck_assert_int_eq(bp_tensor_get(c, cv, 0, sizeof cv), BP_OK);
    for (int i1 = 0; i1 < N1; i1++)
        for (int i0 = 0; i0 < N0; i0++)
            ck_assert_float_eq(cv[i1 * N0 + i0], av[i1 * N0 + i0] + bv[i0]);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(ctx);
}

static struct bp_device *meta_over(const char *spec)
{
    setenv("BACKPLANE_DEVICES", spec, 1);
    struct bp_device *d = NULL;
    size_t n = 0;
    ck_assert_msg(bp_default_devices(&d, 1, &n) == BP_OK, "%s: %s", spec, bp_last_error());
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(bp_device_type(d), BP_DEVICE_TYPE_META);
    return d;
}

/* Runs the CLI (stderr merged); returns its exit status, -1 for a signal. */
static int run_cli(const char *env, const char *args, char *out, size_t cap)
{
    char cmd[1024];
    /* Only the variables given here: a suite run without fork (valgrind)
     * has the earlier tests' BACKPLANE_* in its environment. */
    snprintf(cmd, sizeof cmd, "env -u BACKPLANE_BACKENDS -u BACKPLANE_DEVICES BACKPLANE_PLUGIN_PATH='%s' %s '%s' %s",
             FAULT "/tables", env, CLI, args);
    return cli_run(cmd, CLI_OUT_AND_ERR, out, cap);
}

/* ---- the host ---- */

START_TEST(test_tables_backend_cut_before_graph_compute_is_refused_by_init)
{
    struct bp_device *d = load_one(TABLES("shortbackend"), "shortbackend", "shortbackend0");
    struct bp_backend *be = (struct bp_backend *)&be;
    ck_assert_int_eq(bp_backend_init(d, NULL, &be), BP_ERR_PLUGIN);
    ck_assert_ptr_null(be);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "graph_compute"));
}
END_TEST

START_TEST(test_tables_buffer_table_of_one_size_t_is_refused_by_alloc)
{
    struct bp_device *d = load_one(TABLES("shortbuffer"), "shortbuffer", "shortbuffer0");
    struct bp_buffer *buf = (struct bp_buffer *)&buf;
    ck_assert_int_eq(bp_buffer_alloc(bp_device_buffer_type(d), 64, &buf), BP_ERR_PLUGIN);
    ck_assert_ptr_null(buf);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "free_buffer"));
}
END_TEST

START_TEST(test_tables_required_graph_compute_null_is_refused_by_init)
{
    struct bp_device *d = load_one(TABLES("nullcompute"), "nullcompute", "nullcompute0");
    struct bp_backend *be = NULL;
    ck_assert_int_eq(bp_backend_init(d, NULL, &be), BP_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "graph_compute"));
}
END_TEST

START_TEST(test_tables_at_their_floor_before_a_guard_page_work)
{
    /* Any host read past a table's size would fault on the PROT_NONE page. */
    struct bp_device *d = load_one(TABLES("guarded"), "guarded", "guarded0");
    ck_assert_str_eq(bp_device_description(d), "fault-injection test plugin");
    ck_assert_ptr_null(bp_device_proc_address(d, "bp_fault_init_count")); /* beyond its size */
    struct bp_buffer_type *bt = bp_device_buffer_type(d);
    ck_assert_ptr_nonnull(bt);
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_buffer_alloc(bt, 100, &buf), BP_OK);
    ck_assert_int_eq(bp_buffer_clear(buf, 0x5a), BP_OK); /* clear lies past the floor */
    unsigned char back[100];
    ck_assert_int_eq(bp_buffer_read(buf, 0, back, sizeof back), BP_OK);
    for (size_t i = 0; i < sizeof back; i++) ck_assert_uint_eq(back[i], 0x5a);
    bp_buffer_free(buf);
    assert_add_computes(d);
}
END_TEST

START_TEST(test_tables_optional_fields_null_fall_back)
{
    struct bp_device *d = load_one(TABLES("nullopt"), "nullopt", "nullopt0");
    ck_assert_str_eq(bp_device_description(d), "");
    size_t fr = 1, total = 1;
    bp_device_memory(d, &fr, &total);
    ck_assert_uint_eq(fr, 0);
    ck_assert_uint_eq(total, 0);
    struct bp_device_caps caps;
    memset(&caps, 0xff, sizeof caps);
    caps.size = sizeof caps;
    bp_device_caps(d, &caps);
    ck_assert(!caps.async && !caps.host_buffer && !caps.events && !caps.buffer_from_host_ptr);
    ck_assert_ptr_null(bp_device_proc_address(d, "bp_fault_init_count"));
    /* No clear: the host writes the bytes itself. */
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_buffer_alloc(bp_device_buffer_type(d), 70000, &buf), BP_OK);
    ck_assert_int_eq(bp_buffer_clear(buf, 3), BP_OK);
    unsigned char tail[16];
    ck_assert_int_eq(bp_buffer_read(buf, 70000 - sizeof tail, tail, sizeof tail), BP_OK);
    for (size_t i = 0; i < sizeof tail; i++) ck_assert_uint_eq(tail[i], 3);
    bp_buffer_free(buf);
    /* No synchronize, no supports_buft (its own buffer type is accepted). */
    assert_add_computes(d);
}
END_TEST

START_TEST(test_tables_caps_write_only_what_the_caller_size_covers)
{
    struct bp_device *d = load_one(SAFE("fakegood"), "fakegood", "fakegood0");
    struct bp_device_caps full = {.size = sizeof full};
    bp_device_caps(d, &full);
    ck_assert(full.host_buffer);
    ck_assert_uint_eq(full.size, sizeof full);

    /* A caller that knows only `async`: host_buffer and beyond are untouched. */
    union {
        struct bp_device_caps caps;
        unsigned char bytes[sizeof(struct bp_device_caps)];
    } u;
    memset(&u, 0xa5, sizeof u);
    size_t small = offsetof(struct bp_device_caps, async) + sizeof u.caps.async;
    u.caps.size = small;
    bp_device_caps(d, &u.caps);
    ck_assert_uint_eq(u.caps.size, small);
    ck_assert(!u.caps.async);
    for (size_t i = small; i < sizeof u; i++) ck_assert_uint_eq(u.bytes[i], 0xa5);
    /* A size too small for the size field itself: nothing is written. */
    memset(&u, 0xa5, sizeof u);
    u.caps.size = 3;
    bp_device_caps(d, &u.caps);
    ck_assert_uint_eq(u.caps.size, 3);
    for (size_t i = sizeof(size_t); i < sizeof u; i++) ck_assert_uint_eq(u.bytes[i], 0xa5);
}
END_TEST

START_TEST(test_tables_options_size_covers_what_the_host_reads)
{
    /* size 0: every 1.1 field (designated initialisers of older code). */
    fresh(UNSAFE("crash") ":" SAFE("fakegood"), "crash,fakegood");
    struct bp_load_options zero = {.isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&zero), BP_OK);
    assert_refused(UNSAFE("crash"), BP_PLUGIN_FAIL_CRASHED, NULL);
    /* A size that ends before isolate_probe: the host reads the default (false)
     * and never looks at the bytes beyond. Only the safe plugin, then. */
    fresh(SAFE("fakegood"), "fakegood");
    struct bp_load_options shortopts = {.size = sizeof(size_t), .isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&shortopts), BP_OK);
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

/* ---- the meta plugin over another vendor's device ---- */

START_TEST(test_tables_meta_declines_a_sub_device_without_graph_compute)
{
    fresh(TABLES("nullcompute"), "cpu,nullcompute,meta");
    struct bp_device *m = meta_over("meta:cpu,nullcompute0");
    struct bp_backend *be = NULL;
    ck_assert_int_ne(bp_backend_init(m, NULL, &be), BP_OK);
    ck_assert_ptr_null(be);
}
END_TEST

START_TEST(test_tables_meta_declines_a_sub_device_with_a_short_backend_table)
{
    fresh(TABLES("shortbackend"), "cpu,shortbackend,meta");
    struct bp_device *m = meta_over("meta:shortbackend0,cpu");
    struct bp_backend *be = NULL;
    ck_assert_int_ne(bp_backend_init(m, NULL, &be), BP_OK);
}
END_TEST

START_TEST(test_tables_meta_clears_a_sub_device_without_clear_by_writes)
{
    fresh(TABLES("nullopt"), "cpu,nullopt,meta");
    struct bp_device *m = meta_over("meta:cpu,nullopt0");
    struct bp_context *ctx = NULL;
    ck_assert_int_eq(bp_context_new(2, &ctx), BP_OK);
    struct bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 1000);
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bp_device_buffer_type(m), NULL, &buf), BP_OK);
    ck_assert_msg(bp_buffer_clear(buf, 0) == BP_OK, "%s", bp_last_error());
    float v[1000];
    ck_assert_int_eq(bp_tensor_get(t, v, 0, sizeof v), BP_OK);
    for (int i = 0; i < 1000; i++) ck_assert_float_eq(v[i], 0.0f);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    assert_add_computes(m);
}
END_TEST

START_TEST(test_tables_meta_over_tables_at_their_floor_computes)
{
    fresh(TABLES("guarded"), "cpu,guarded,meta");
    assert_add_computes(meta_over("meta:guarded0,cpu"));
}
END_TEST

START_TEST(test_tables_meta_refuses_a_short_buffer_table_by_name)
{
    fresh(TABLES("shortbuffer"), "cpu,shortbuffer,meta");
    struct bp_device *m = meta_over("meta:cpu,shortbuffer0");
    struct bp_context *ctx = NULL;
    ck_assert_int_eq(bp_context_new(2, &ctx), BP_OK);
    struct bp_tensor *t = bp_tensor_new_1d(ctx, BP_TYPE_F32, 64);
    struct bp_buffer *buf = NULL;
    bp_status st = bp_context_alloc_tensors(ctx, bp_device_buffer_type(m), NULL, &buf);
    float v[64] = {0};
    /* Meta gives devices memory on first use: the refusal comes then. */
    if (st == BP_OK) st = bp_tensor_set(t, v, 0, sizeof v);
    ck_assert_int_ne(st, BP_OK);
    bp_buffer_free(buf);
    bp_context_free(ctx);
}
END_TEST

/* ---- the CLI: never a crash, always the field ---- */

START_TEST(test_tables_cli_devices_names_each_refused_field)
{
    char out[1 << 16];
    int rc = run_cli("", "devices", out, sizeof out);
    ck_assert_msg(rc == 0, "devices exited %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "ends at byte 0, before its required field get_name"));
    ck_assert_ptr_nonnull(strstr(out, "before its required field get_type"));
    ck_assert_ptr_nonnull(strstr(out, "its registry says ABI 2.0"));
    ck_assert_ptr_null(strstr(out, "CRASHED"));
}
END_TEST

START_TEST(test_tables_cli_info_and_check_never_crash)
{
    static const struct {
        const char *device, *env, *expect; /* expect NULL: the check passes */
    } cases[] = {
        {"guarded0", "", NULL},
        {"nullopt0", "", NULL},
        {"shortbackend0", "", "graph_compute"},
        {"shortbuffer0", "", "free_buffer"},
        {"nullcompute0", "", "graph_compute"},
        {"meta0", "BACKPLANE_DEVICES=meta:cpu,guarded0", NULL},
        {"meta0", "BACKPLANE_DEVICES=meta:cpu,nullopt0", NULL},
        {"meta0", "BACKPLANE_DEVICES=meta:cpu,shortbackend0", "graph_compute"},
        {"meta0", "BACKPLANE_DEVICES=meta:cpu,shortbuffer0", "free_buffer"},
        {"meta0", "BACKPLANE_DEVICES=meta:nullcompute0,cpu", "graph_compute"},
    };
    static char out[1 << 20];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "info %s", cases[i].device);
        int rc = run_cli(cases[i].env, args, out, sizeof out);
        ck_assert_msg(rc == 0, "%s %s: info exited %d:\n%s", cases[i].env, args, rc, out);
        snprintf(args, sizeof args, "check --device %s", cases[i].device);
        rc = run_cli(cases[i].env, args, out, sizeof out);
        if (!cases[i].expect) {
            ck_assert_msg(rc == 0, "%s %s exited %d:\n%s", cases[i].env, args, rc, out);
        } else {
            ck_assert_msg(rc == 1, "%s %s exited %d (1 expected):\n%s", cases[i].env, args, rc, out);
            ck_assert_msg(strstr(out, cases[i].expect) != NULL, "%s %s does not name %s:\n%s",
                          cases[i].env, args, cases[i].expect, out);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iface_tables");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_tables_backend_cut_before_graph_compute_is_refused_by_init);
    tcase_add_test(tc, test_tables_buffer_table_of_one_size_t_is_refused_by_alloc);
    tcase_add_test(tc, test_tables_required_graph_compute_null_is_refused_by_init);
    tcase_add_test(tc, test_tables_at_their_floor_before_a_guard_page_work);
    tcase_add_test(tc, test_tables_optional_fields_null_fall_back);
    tcase_add_test(tc, test_tables_caps_write_only_what_the_caller_size_covers);
    tcase_add_test(tc, test_tables_options_size_covers_what_the_host_reads);
    tcase_add_test(tc, test_tables_meta_declines_a_sub_device_without_graph_compute);
    tcase_add_test(tc, test_tables_meta_declines_a_sub_device_with_a_short_backend_table);
    tcase_add_test(tc, test_tables_meta_clears_a_sub_device_without_clear_by_writes);
    tcase_add_test(tc, test_tables_meta_over_tables_at_their_floor_computes);
    tcase_add_test(tc, test_tables_meta_refuses_a_short_buffer_table_by_name);
    suite_add_tcase(s, tc);
    /* The CLI runs other processes: kept apart so valgrind can skip it. */
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 600);
    tcase_add_test(cli, test_tables_cli_devices_names_each_refused_field);
    tcase_add_test(cli, test_tables_cli_info_and_check_never_crash);
    suite_add_tcase(s, cli);
    return run_suite(s);
}
