/* test_loader.c — discovery, refusal records, variants, filtering, probing,
 * and the ABI 1.1 rules: table floors at load time, the registry's own
 * version, version negotiation, residency, device names. */
#include <dlfcn.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "loader_test_util.h"
#include "suite_main.h"

typedef int (*init_count_fn)(void);
typedef const struct bp_host_services *(*host_services_fn)(void);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(test_loader_loads_good_plugin_and_describes_its_device)
{
    fresh(SAFE("fakegood"), "fakegood");
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    ck_assert_uint_eq(bp_plugin_count(), 1);
    const struct bp_plugin_info *p = bp_plugin_get(0);
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(SAFE("fakegood"), real));
    ck_assert_str_eq(p->family, "fakegood");
    ck_assert_str_eq(p->variant, "");
    ck_assert_str_eq(p->path, real);
    ck_assert_uint_eq(p->abi_version, BP_ABI_VERSION);
    ck_assert_int_eq(p->score, 1);
    ck_assert_uint_eq(p->n_devices, 1);
    ck_assert_ptr_eq(bp_registry_by_name("fakegood"), p->reg);

    ck_assert_uint_eq(bp_device_count(), 1);
    struct bp_device *d = bp_device_get(0);
    ck_assert_str_eq(bp_device_name(d), "fakegood0");
    ck_assert_str_eq(bp_device_description(d), "fake good device");
    ck_assert_int_eq(bp_device_type(d), BP_DEVICE_TYPE_CPU);
    ck_assert_str_eq(bp_device_type_name(bp_device_type(d)), "CPU");
    size_t fr = 0, total = 0;
    bp_device_memory(d, &fr, &total);
    ck_assert_uint_eq(fr, 1000);
    ck_assert_uint_eq(total, 2000);
    struct bp_device_caps caps = {.size = sizeof caps};
    bp_device_caps(d, &caps);
    ck_assert(caps.host_buffer);
    ck_assert(!caps.async);
    struct bp_buffer_type *bt = bp_device_buffer_type(d);
    ck_assert_ptr_nonnull(bt);
    ck_assert(bt->iface->is_host(bt));
    struct bp_tensor node = {.op = BP_OP_ADD};
    ck_assert(bp_device_supports_op(d, &node));
    node.op = BP_OP_MUL;
    ck_assert(!bp_device_supports_op(d, &node));
    ck_assert_ptr_nonnull(bp_device_proc_address(d, "bp_fault_init_count"));
    ck_assert_ptr_null(bp_device_proc_address(d, "bp_no_such_feature"));
    ck_assert_uint_eq(fault_failure_count(), 0);
}
END_TEST

START_TEST(test_loader_discovers_plugins_on_first_use)
{
    fresh(SAFE("fakegood"), "fakegood");
    /* No bp_load_plugins: the lookup itself must trigger discovery. */
    struct bp_device *d = bp_device_by_name("fakegood0");
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(bp_device_name(d), "fakegood0");
}
END_TEST

START_TEST(test_loader_loads_only_once)
{
    fresh(SAFE("fakegood"), "fakegood");
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    struct bp_load_options opts = {.isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&opts), BP_OK);
    ck_assert_uint_eq(bp_device_count(), 1);
    ck_assert_uint_eq(bp_plugin_count(), 1);
    init_count_fn count =
        (init_count_fn)bp_device_proc_address(bp_device_get(0), "bp_fault_init_count");
    ck_assert_ptr_nonnull(count);
    ck_assert_int_eq(count(), 1);
}
END_TEST

START_TEST(test_loader_reloads_after_unload)
{
    fresh(SAFE("fakegood"), "fakegood");
    ck_assert_uint_eq(bp_device_count(), 1);
    bp_unload();
    setenv("BACKPLANE_PLUGIN_PATH", SAFE("fakegpu"), 1);
    setenv("BACKPLANE_BACKENDS", "fakegpu", 1);
    ck_assert_uint_eq(bp_device_count(), 1);
    ck_assert_str_eq(bp_device_name(bp_device_get(0)), "fakegpu0");
    ck_assert_ptr_null(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_refuses_abi_major_mismatch)
{
    fresh(SAFE("abimajor") ":" SAFE("fakegood"), "abimajor,fakegood");
    assert_refused(SAFE("abimajor"), BP_PLUGIN_FAIL_ABI_MAJOR, "built for ABI 2.0");
    const struct bp_plugin_failure *f = failure_for(SAFE("abimajor"));
    ck_assert_ptr_nonnull(strstr(f->reason, "this host speaks 1." BP_STR(BP_ABI_MINOR)));
    ck_assert_str_eq(f->family, "abimajor");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
    ck_assert_ptr_null(plugin_of("abimajor"));
}
END_TEST

START_TEST(test_loader_refuses_missing_entry_symbol)
{
    fresh(SAFE("noentry") ":" SAFE("fakegood"), "noentry,fakegood");
    assert_refused(SAFE("noentry"), BP_PLUGIN_FAIL_MISSING_ENTRY, "bp_plugin_init");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_records_init_failure_with_plugin_message)
{
    fresh(SAFE("initfail") ":" SAFE("fakegood"), "initfail,fakegood");
    assert_refused(SAFE("initfail"), BP_PLUGIN_FAIL_INIT, "BP_ERR_DEVICE_LOST");
    assert_refused(SAFE("initfail"), BP_PLUGIN_FAIL_INIT, "the fake device is unplugged");
    ck_assert_ptr_null(bp_device_by_name("initfail0"));
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_refuses_file_that_is_not_a_shared_object)
{
    fresh(SAFE("junk") ":" SAFE("fakegood"), "junk,fakegood");
    assert_refused(SAFE("junk"), BP_PLUGIN_FAIL_NOT_SHARED_OBJECT, "not an ELF shared object");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_names_missing_dependency)
{
    fresh(SAFE("missingdep") ":" SAFE("fakegood"), "missingdep,fakegood");
    assert_refused(SAFE("missingdep"), BP_PLUGIN_FAIL_MISSING_DEPENDENCY, "libbp_fault_helper.so");
    ck_assert_ptr_nonnull(strstr(failure_for(SAFE("missingdep"))->remedy, "libbp_fault_helper.so"));
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_refuses_registry_naming_another_family)
{
    fresh(SAFE("mismatch") ":" SAFE("fakegood"), "mismatch,fakegood");
    assert_refused(SAFE("mismatch"), BP_PLUGIN_FAIL_BAD_REGISTRY, "'somethingelse'");
    ck_assert_ptr_null(bp_device_by_name("mismatch0"));
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_records_bad_file_name_given_explicitly)
{
    const char *helper = FAULT "/deps/libbp_fault_helper.so";
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s:%s", helper, SAFE("fakegood"));
    fresh(path, "fakegood");
    assert_refused(helper, BP_PLUGIN_FAIL_BAD_NAME, "libbp_fault_helper.so");
    ck_assert_str_eq(failure_for(helper)->family, "");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

/* The whole safe/ directory at once: every fault refused, the good plugins
 * loaded in BACKPLANE_BACKENDS order. */
START_TEST(test_loader_scans_directory_refusing_each_fault)
{
    fresh(FAULT "/safe",
          "fakegood,fakegpu,abimajor,noentry,initfail,junk,missingdep,mismatch");
    ck_assert_uint_eq(bp_plugin_count(), 2);
    ck_assert_uint_eq(bp_device_count(), 2);
    ck_assert_str_eq(bp_device_name(bp_device_get(0)), "fakegood0");
    ck_assert_str_eq(bp_device_name(bp_device_get(1)), "fakegpu0");
    ck_assert_uint_eq(fault_failure_count(), 6);
    assert_refused(SAFE("abimajor"), BP_PLUGIN_FAIL_ABI_MAJOR, "2.0");
    assert_refused(SAFE("noentry"), BP_PLUGIN_FAIL_MISSING_ENTRY, NULL);
    assert_refused(SAFE("initfail"), BP_PLUGIN_FAIL_INIT, NULL);
    assert_refused(SAFE("junk"), BP_PLUGIN_FAIL_NOT_SHARED_OBJECT, NULL);
    assert_refused(SAFE("missingdep"), BP_PLUGIN_FAIL_MISSING_DEPENDENCY, NULL);
    assert_refused(SAFE("mismatch"), BP_PLUGIN_FAIL_BAD_REGISTRY, NULL);
}
END_TEST

START_TEST(test_loader_refuses_duplicate_family_naming_the_winner)
{
    char real_good[PATH_MAX], real_dup[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(SAFE("fakegood"), real_good));
    ck_assert_ptr_nonnull(realpath(FAULT "/dup/libbackplane-fakegood.so", real_dup));

    fresh(SAFE("fakegood") ":" FAULT "/dup", "fakegood");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
    ck_assert_ptr_null(bp_device_by_name("fakegood0_dup"));
    assert_refused(real_dup, BP_PLUGIN_FAIL_DUPLICATE, real_good);

    /* The search order decides, not the file name. */
    fresh(FAULT "/dup:" SAFE("fakegood"), "fakegood");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0_dup"));
    ck_assert_ptr_null(bp_device_by_name("fakegood0"));
    assert_refused(real_good, BP_PLUGIN_FAIL_DUPLICATE, real_dup);
}
END_TEST

START_TEST(test_loader_isolated_probe_records_crash_with_signal)
{
    fresh(UNSAFE("crash") ":" SAFE("fakegood"), "crash,fakegood");
    struct bp_load_options opts = {.isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&opts), BP_OK);
    assert_refused(UNSAFE("crash"), BP_PLUGIN_FAIL_CRASHED, "crashed with SIGSEGV during init");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
    ck_assert_uint_eq(bp_plugin_count(), 1);
}
END_TEST

START_TEST(test_loader_isolated_probe_times_out_hanging_plugin)
{
    fresh(UNSAFE("hang") ":" SAFE("fakegood"), "hang,fakegood");
    struct bp_load_options opts = {.isolate_probe = true, .probe_timeout_s = 1};
    double t0 = now_s();
    ck_assert_int_eq(bp_load_plugins(&opts), BP_OK);
    double took = now_s() - t0;
    assert_refused(UNSAFE("hang"), BP_PLUGIN_FAIL_TIMEOUT, "did not answer within 1 s");
    /* The plugin sleeps 60 s; the probe must give up after about 1. */
    ck_assert_msg(took < 30.0, "loading took %.1f s", took);
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_isolated_probe_passes_ordinary_refusals_on)
{
    fresh(SAFE("abimajor") ":" SAFE("initfail") ":" SAFE("fakegood"), "abimajor,initfail,fakegood");
    struct bp_load_options opts = {.isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&opts), BP_OK);
    assert_refused(SAFE("abimajor"), BP_PLUGIN_FAIL_ABI_MAJOR, "built for ABI 2.0, this host speaks 1." BP_STR(BP_ABI_MINOR));
    assert_refused(SAFE("initfail"), BP_PLUGIN_FAIL_INIT, "the fake device is unplugged");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
    /* The probe ran init in the child; the parent ran it once more. */
    init_count_fn count =
        (init_count_fn)bp_device_proc_address(bp_device_by_name("fakegood0"), "bp_fault_init_count");
    ck_assert_int_eq(count(), 1);
}
END_TEST

START_TEST(test_loader_picks_highest_scoring_variant)
{
    fresh(FAULT "/variants", "fakevar");
    const struct bp_plugin_info *p = plugin_of("fakevar");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->variant, "high");
    ck_assert_int_eq(p->score, 5);
    ck_assert_str_eq(bp_device_description(bp_device_by_name("fakevar0")), "fakevar high");
    assert_refused(FAULT "/variants/libbackplane-fakevar-low.so", BP_PLUGIN_FAIL_OUTSCORED,
                   "scored 1, below variant 'high' (5)");
    assert_refused(FAULT "/variants/libbackplane-fakevar-cannot.so", BP_PLUGIN_FAIL_CANNOT_RUN,
                   "'cannot'");
    ck_assert_uint_eq(fault_failure_count(), 2);
}
END_TEST

START_TEST(test_loader_variant_forced_by_environment)
{
    fresh(FAULT "/variants", "fakevar");
    setenv("BACKPLANE_FAKEVAR_VARIANT", "low", 1);
    const struct bp_plugin_info *p = plugin_of("fakevar");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->variant, "low");
    ck_assert_str_eq(bp_device_description(bp_device_by_name("fakevar0")), "fakevar low");
    assert_refused(FAULT "/variants/libbackplane-fakevar-high.so", BP_PLUGIN_FAIL_FILTERED,
                   "BACKPLANE_FAKEVAR_VARIANT=low");
}
END_TEST

START_TEST(test_loader_forced_variant_that_cannot_run_falls_back_to_score)
{
    fresh(FAULT "/variants", "fakevar");
    setenv("BACKPLANE_FAKEVAR_VARIANT", "cannot", 1);
    ck_assert_str_eq(plugin_of("fakevar")->variant, "high");
    assert_refused(FAULT "/variants/libbackplane-fakevar-cannot.so", BP_PLUGIN_FAIL_CANNOT_RUN, NULL);

    fresh(FAULT "/variants", "fakevar");
    setenv("BACKPLANE_FAKEVAR_VARIANT", "nonexistent", 1);
    ck_assert_str_eq(plugin_of("fakevar")->variant, "high");
}
END_TEST

START_TEST(test_loader_backends_filters_and_orders_families)
{
    fresh(SAFE("fakegood") ":" SAFE("fakegpu"), "fakegpu,fakegood");
    ck_assert_uint_eq(bp_device_count(), 2);
    ck_assert_str_eq(bp_device_name(bp_device_get(0)), "fakegpu0");
    ck_assert_str_eq(bp_device_name(bp_device_get(1)), "fakegood0");
    ck_assert_str_eq(bp_plugin_get(0)->family, "fakegpu");

    fresh(SAFE("fakegood") ":" SAFE("fakegpu"), "fakegood");
    ck_assert_uint_eq(bp_device_count(), 1);
    ck_assert_str_eq(bp_device_name(bp_device_get(0)), "fakegood0");
    assert_refused(SAFE("fakegpu"), BP_PLUGIN_FAIL_FILTERED, "BACKPLANE_BACKENDS=fakegood");
}
END_TEST

START_TEST(test_loader_ignores_relative_plugin_path_entries)
{
    ck_assert_int_eq(chdir(FAULT "/safe"), 0);
    fresh("libbackplane-fakegood.so:.:safe", "fakegood");
    ck_assert_uint_eq(bp_plugin_count(), 0);
    ck_assert_ptr_null(bp_device_by_name("fakegood0"));
    ck_assert_int_eq(bp_last_error()[0] != '\0', 1);
    /* The same file by absolute path is fine. */
    fresh(FAULT "/safe/libbackplane-fakegood.so", "fakegood");
    ck_assert_uint_eq(bp_plugin_count(), 1);
}
END_TEST

START_TEST(test_loader_meta_family_loads_after_the_others)
{
    /* meta is found first in the search order but must see fakegood0. */
    fresh(FAULT "/meta:" SAFE("fakegood"), NULL);
    size_t n = bp_device_count();
    ck_assert_uint_ge(n, 2);
    ck_assert_str_eq(bp_device_name(bp_device_get(n - 1)), "metafake0");
    ck_assert_str_eq(bp_plugin_get(bp_plugin_count() - 1)->family, "meta");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

/* Load position of family, -1 when it did not load. */
static int plugin_index(const char *family)
{
    for (size_t i = 0; i < bp_plugin_count(); i++)
        if (!strcmp(bp_plugin_get(i)->family, family)) return (int)i;
    return -1;
}

START_TEST(test_loader_any_composing_family_loads_after_the_others)
{
    /* "acomposer" sorts first and is no family the host knows: it goes last
     * because it exports bp_plugin_composes, and it parses its own specs. */
    fresh(FAULT "/composer:" SAFE("fakegood"), NULL);
    ck_assert_int_gt(plugin_index("acomposer"), plugin_index("fakegood"));
    ck_assert_int_ge(plugin_index("fakegood"), 0);
    struct bp_device *d = bp_device_by_name("acomposer:fakegood0*2");
    ck_assert_msg(d != NULL, "%s", bp_last_error());
    ck_assert_str_eq(bp_device_name(d), "acomposer0");
    /* Under an explicit order the order is kept. */
    fresh(FAULT "/composer:" SAFE("fakegood"), "acomposer,fakegood");
    ck_assert_str_eq(bp_plugin_get(0)->family, "acomposer");
}
END_TEST

START_TEST(test_loader_failure_code_names_are_stable)
{
    static const struct {
        enum bp_plugin_failure_code code;
        const char *name;
    } expect[] = {
        {1, "NOT_SHARED_OBJECT"}, {2, "MISSING_DEPENDENCY"}, {3, "DLOPEN"},
        {4, "MISSING_ENTRY"},     {5, "ABI_MAJOR"},          {6, "INIT"},
        {7, "DUPLICATE"},         {8, "FILTERED"},           {9, "CRASHED"},
        {10, "TIMEOUT"},          {11, "CANNOT_RUN"},        {12, "OUTSCORED"},
        {13, "BAD_NAME"},         {14, "BAD_REGISTRY"},         {15, "ABI_MINOR"},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_str_eq(bp_plugin_failure_code_name(expect[i].code), expect[i].name);
    ck_assert_str_eq(bp_plugin_failure_code_name((enum bp_plugin_failure_code)99), "UNKNOWN");
}
END_TEST

START_TEST(test_loader_host_services_show_devices_loaded_so_far)
{
    fresh(SAFE("fakegpu") ":" SAFE("fakegood"), "fakegpu,fakegood");
    struct bp_device *good = bp_device_by_name("fakegood0");
    ck_assert_ptr_nonnull(good);
    host_services_fn get = (host_services_fn)bp_device_proc_address(good, "bp_fault_host_services");
    const struct bp_host_services *h = get();
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(h->abi_version, BP_ABI_VERSION);
    ck_assert_uint_ge(h->size, sizeof *h);
    ck_assert_uint_eq(h->device_count(), 2);
    ck_assert_ptr_eq(h->device_get(0), bp_device_by_name("fakegpu0"));
    ck_assert_ptr_null(h->device_get(2));
    ck_assert_ptr_eq(h->device_by_name("fakegood0"), good);
    ck_assert_ptr_null(h->device_by_name("nosuch"));
    ck_assert_ptr_null(h->get_proc_address("bp_no_such_service"));
    setenv("BACKPLANE_META_SPLIT", "3,1", 1);
    ck_assert_str_eq(h->get_env("BACKPLANE_META_SPLIT"), "3,1");
    unsetenv("BACKPLANE_META_SPLIT");
}
END_TEST

START_TEST(test_loader_out_of_range_queries_fail_cleanly)
{
    fresh(SAFE("fakegood"), "fakegood");
    ck_assert_ptr_null(bp_plugin_get(5));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "out of range"));
    ck_assert_ptr_null(bp_plugin_failure_get(bp_plugin_failure_count()));
    ck_assert_ptr_null(bp_device_get(1));
    ck_assert_ptr_null(bp_registry_by_name("nosuch"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "nosuch"));
    ck_assert_ptr_null(bp_registry_by_name(NULL));
}
END_TEST

#define TABLES(f) FAULT "/tables/libbackplane-" f ".so"
#define NAMES(f) FAULT "/names/libbackplane-" f ".so"
#define VERSIONS(f) FAULT "/versions/libbackplane-" f ".so"

START_TEST(test_loader_refuses_device_table_of_size_zero_naming_the_field)
{
    fresh(TABLES("devsize0") ":" SAFE("fakegood"), "devsize0,fakegood");
    assert_refused(TABLES("devsize0"), BP_PLUGIN_FAIL_BAD_REGISTRY,
                   "device 0 (bp_device_iface) ends at byte 0, before its required field get_name");
    ck_assert_ptr_null(plugin_of("devsize0"));
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_probe_names_the_field_of_a_short_table_not_a_crash)
{
    /* The device table ends at a PROT_NONE page before get_type: a host
     * read past it would kill the probe child and blame the plugin. */
    fresh(TABLES("guardshort") ":" SAFE("fakegood"), "guardshort,fakegood");
    struct bp_load_options opts = {.size = sizeof opts, .isolate_probe = true};
    ck_assert_int_eq(bp_load_plugins(&opts), BP_OK);
    assert_refused(TABLES("guardshort"), BP_PLUGIN_FAIL_BAD_REGISTRY,
                   "ends at byte 24, before its required field get_type");
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

START_TEST(test_loader_refuses_registry_abi_version_differing_from_its_symbol)
{
    fresh(TABLES("regabi") ":" SAFE("fakegood"), "regabi,fakegood");
    assert_refused(TABLES("regabi"), BP_PLUGIN_FAIL_ABI_MAJOR,
                   "its registry says ABI 2.0 but its bp_plugin_abi_version() says 1." BP_STR(BP_ABI_MINOR));
    ck_assert_ptr_null(plugin_of("regabi"));
}
END_TEST

START_TEST(test_loader_version_pairs_old_current_and_newer_plugins)
{
    fresh(VERSIONS("verold") ":" VERSIONS("vercur") ":" VERSIONS("vernew") ":" VERSIONS("verneeds"),
          "verold,vercur,vernew,verneeds");
    /* N-1: built with the 1.0 headers' table sizes, it loads and works. */
    const struct bp_plugin_info *old = plugin_of("verold");
    ck_assert_ptr_nonnull(old);
    ck_assert_uint_eq(old->abi_version, BP_ABI_VERSION_MAKE(1, 0));
    struct bp_device *d = bp_device_by_name("verold0");
    ck_assert_str_eq(bp_device_description(d), "fault-injection test plugin");
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_buffer_alloc(bp_device_buffer_type(d), 16, &buf), BP_OK);
    ck_assert_int_eq(bp_buffer_clear(buf, 1), BP_OK);
    bp_buffer_free(buf);
    /* N: needs this host's minor, and has it. */
    ck_assert_ptr_nonnull(plugin_of("vercur"));
    /* N+1 without a minimum: loads, its newer features unused. */
    ck_assert_ptr_nonnull(plugin_of("vernew"));
    ck_assert_uint_eq(plugin_of("vernew")->abi_version, BP_ABI_VERSION + 1);
    /* N+1 needing an N+1 host: refused with both versions and the remedy. */
    assert_refused(VERSIONS("verneeds"), BP_PLUGIN_FAIL_ABI_MINOR, NULL);
    const struct bp_plugin_failure *f = failure_for(VERSIONS("verneeds"));
    char want[96];
    snprintf(want, sizeof want, "needs a host of ABI 1.%d or newer", BP_ABI_MINOR + 1);
    ck_assert_msg(strstr(f->reason, want) != NULL, "reason: %s", f->reason);
    snprintf(want, sizeof want, "this host speaks 1.%d", BP_ABI_MINOR);
    ck_assert_msg(strstr(f->reason, want) != NULL, "reason: %s", f->reason);
    ck_assert_ptr_nonnull(strstr(f->remedy, "Upgrade backplane"));
    ck_assert_ptr_null(plugin_of("verneeds"));
}
END_TEST

static char logged[512];
__attribute__((format(printf, 3, 4)))
static void capture_log(enum bp_log_level level, const char *who, const char *fmt, ...)
{
    (void)level;
    (void)who;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logged, sizeof logged, fmt, ap);
    va_end(ap);
}

START_TEST(test_loader_plugin_side_check_refuses_an_older_host)
{
    /* What a plugin needing 1.1 does in init, for 1.0 hosts that do not
     * read bp_plugin_min_host_version: hosts N-1, N and N+1. */
    struct bp_host_services h = {.size = sizeof h, .log = capture_log};
    struct bp_registry *out = (struct bp_registry *)&h;
    h.abi_version = BP_ABI_VERSION_MAKE(1, 0);
    logged[0] = '\0';
    ck_assert_int_eq(bp_plugin_check_host_version(&h, "acme", 1, &out), BP_ERR_ABI);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(logged, "host ABI 1.0 is older than the 1.1") != NULL, "logged: %s", logged);
    h.abi_version = BP_ABI_VERSION_MAKE(1, 1);
    ck_assert_int_eq(bp_plugin_check_host_version(&h, "acme", 1, &out), BP_OK);
    h.abi_version = BP_ABI_VERSION_MAKE(1, 2);
    ck_assert_int_eq(bp_plugin_check_host_version(&h, "acme", 1, &out), BP_OK);
    h.abi_version = BP_ABI_VERSION_MAKE(2, 1);
    ck_assert_int_eq(bp_plugin_check_host_version(&h, "acme", 1, &out), BP_ERR_ABI);
}
END_TEST

/* What the application's callback received. */
struct log_seen {
    int lines;
    enum bp_log_level level;
    char who[64];
    char message[512];
};

static void remember_line(void *user, enum bp_log_level level, const char *who, const char *message)
{
    struct log_seen *seen = user;
    if (strstr(message, "BACKPLANE_FAKEVAR_VARIANT") == NULL) return;
    seen->lines++;
    seen->level = level;
    snprintf(seen->who, sizeof seen->who, "%s", who);
    snprintf(seen->message, sizeof seen->message, "%s", message);
}

START_TEST(test_log_callback_gets_level_who_and_the_bare_sentence_until_removed)
{
    struct log_seen seen = {0};
    fresh(FAULT "/variants", "fakevar");
    setenv("BACKPLANE_FAKEVAR_VARIANT", "nosuch", 1);
    bp_set_log_callback(remember_line, &seen);
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    ck_assert_int_eq(seen.lines, 1);
    ck_assert_int_eq(seen.level, BP_LOG_WARN);
    ck_assert_str_eq(seen.who, "backplane");
    ck_assert_str_eq(seen.message, "BACKPLANE_FAKEVAR_VARIANT=nosuch names no variant of fakevar "
                                   "that can run here; choosing by score instead.");
    /* Removed: the same warning on the next load goes to stderr, not here. */
    bp_set_log_callback(NULL, NULL);
    bp_unload();
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    ck_assert_int_eq(seen.lines, 1);
    fresh(NULL, NULL);
}
END_TEST

START_TEST(test_loader_plugin_stays_resident_after_unload_and_reloads)
{
    fresh(SAFE("fakegood"), "fakegood");
    init_count_fn count =
        (init_count_fn)bp_device_proc_address(bp_device_by_name("fakegood0"), "bp_fault_init_count");
    ck_assert_ptr_nonnull(count);
    ck_assert_int_eq(count(), 1);
    bp_unload();
    /* Still mapped: dlopen finds it without loading, and its code runs
     * (its shutdown reset the counter). */
    void *h = dlopen(SAFE("fakegood"), RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "the plugin was unmapped by bp_unload");
    dlclose(h);
    ck_assert_int_eq(count(), 0);
    /* A re-load calls init again on the same mapping. */
    struct bp_device *d = bp_device_by_name("fakegood0");
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_eq(bp_device_proc_address(d, "bp_fault_init_count"), (void *)count);
    ck_assert_int_eq(count(), 1);
}
END_TEST

START_TEST(test_loader_refused_plugin_whose_init_succeeded_stays_resident)
{
    /* Init succeeded, then the registry was refused: it may own threads. */
    fresh(SAFE("mismatch"), "mismatch");
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    assert_refused(SAFE("mismatch"), BP_PLUGIN_FAIL_BAD_REGISTRY, NULL);
    void *h = dlopen(SAFE("mismatch"), RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "a plugin whose init succeeded was unmapped");
    dlclose(h);
    /* Refused before init: unmapped at once. */
    fresh(SAFE("abimajor"), "abimajor");
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    ck_assert_ptr_null(dlopen(SAFE("abimajor"), RTLD_NOW | RTLD_NOLOAD));
}
END_TEST

START_TEST(test_loader_lists_a_device_not_named_after_its_family_under_the_family)
{
    /* acme loads first and names its device "cpu": it must not take the
     * real CPU's name. */
    fresh(NAMES("acme"), "acme,cpu");
    struct bp_device *acme = bp_device_by_name("acme:cpu");
    ck_assert_ptr_nonnull(acme);
    ck_assert_str_eq(bp_device_name(acme), "acme:cpu");
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    ck_assert_ptr_ne(cpu, acme);
    ck_assert_ptr_eq(cpu->reg, bp_registry_by_name("cpu"));
}
END_TEST

START_TEST(test_loader_refuses_a_plugin_repeating_a_device_name)
{
    fresh(NAMES("dupdev") ":" SAFE("fakegood"), "dupdev,fakegood");
    assert_refused(NAMES("dupdev"), BP_PLUGIN_FAIL_DUPLICATE,
                   "its device 1 is named 'dupdev0', which another of its devices already has");
    ck_assert_ptr_null(bp_device_by_name("dupdev0"));
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST


static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_loader_loads_good_plugin_and_describes_its_device);
    tcase_add_test(tc, test_loader_discovers_plugins_on_first_use);
    tcase_add_test(tc, test_loader_loads_only_once);
    tcase_add_test(tc, test_loader_reloads_after_unload);
    tcase_add_test(tc, test_loader_refuses_abi_major_mismatch);
    tcase_add_test(tc, test_loader_refuses_missing_entry_symbol);
    tcase_add_test(tc, test_loader_records_init_failure_with_plugin_message);
    tcase_add_test(tc, test_loader_refuses_file_that_is_not_a_shared_object);
    tcase_add_test(tc, test_loader_names_missing_dependency);
    tcase_add_test(tc, test_loader_refuses_registry_naming_another_family);
    tcase_add_test(tc, test_loader_records_bad_file_name_given_explicitly);
    tcase_add_test(tc, test_loader_scans_directory_refusing_each_fault);
    tcase_add_test(tc, test_loader_refuses_duplicate_family_naming_the_winner);
    tcase_add_test(tc, test_loader_isolated_probe_records_crash_with_signal);
    tcase_add_test(tc, test_loader_isolated_probe_times_out_hanging_plugin);
    tcase_add_test(tc, test_loader_isolated_probe_passes_ordinary_refusals_on);
    tcase_add_test(tc, test_loader_picks_highest_scoring_variant);
    tcase_add_test(tc, test_loader_variant_forced_by_environment);
    tcase_add_test(tc, test_loader_forced_variant_that_cannot_run_falls_back_to_score);
    tcase_add_test(tc, test_loader_backends_filters_and_orders_families);
    tcase_add_test(tc, test_loader_ignores_relative_plugin_path_entries);
    tcase_add_test(tc, test_loader_meta_family_loads_after_the_others);
    tcase_add_test(tc, test_loader_any_composing_family_loads_after_the_others);
    tcase_add_test(tc, test_loader_failure_code_names_are_stable);
    tcase_add_test(tc, test_loader_host_services_show_devices_loaded_so_far);
    tcase_add_test(tc, test_loader_out_of_range_queries_fail_cleanly);
    tcase_add_test(tc, test_loader_refuses_device_table_of_size_zero_naming_the_field);
    tcase_add_test(tc, test_loader_probe_names_the_field_of_a_short_table_not_a_crash);
    tcase_add_test(tc, test_loader_refuses_registry_abi_version_differing_from_its_symbol);
    tcase_add_test(tc, test_loader_version_pairs_old_current_and_newer_plugins);
    tcase_add_test(tc, test_loader_plugin_side_check_refuses_an_older_host);
    tcase_add_test(tc, test_loader_plugin_stays_resident_after_unload_and_reloads);
    tcase_add_test(tc, test_loader_refused_plugin_whose_init_succeeded_stays_resident);
    tcase_add_test(tc, test_loader_lists_a_device_not_named_after_its_family_under_the_family);
    tcase_add_test(tc, test_loader_refuses_a_plugin_repeating_a_device_name);
    tcase_add_test(tc, test_log_callback_gets_level_who_and_the_bare_sentence_until_removed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(loader_suite());
}
