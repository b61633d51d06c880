/* test_devices.c — the device list and the default-device choice
 * (BACKPLANE_DEVICES), over the fault-injection plugins. */
#include "loader_test_util.h"
#include "suite_main.h"

typedef const char *(*last_spec_fn)(void);

#define GOOD_AND_GPU SAFE("fakegood") ":" SAFE("fakegpu")

START_TEST(test_devices_default_prefers_a_gpu)
{
    fresh(GOOD_AND_GPU, "fakegood,fakegpu");
    struct bp_device *out[4] = {0};
    size_t n = 99;
    ck_assert_int_eq(bp_default_devices(out, 4, &n), BP_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(bp_device_name(out[0]), "fakegpu0");
}
END_TEST

START_TEST(test_devices_default_falls_back_to_the_cpu)
{
    fresh(SAFE("fakegood"), "fakegood");
    struct bp_device *out[1] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(bp_device_name(out[0]), "fakegood0");
}
END_TEST

START_TEST(test_devices_default_without_devices_is_not_found)
{
    fresh(SAFE("fakegood"), "nosuchfamily");
    struct bp_device *out[1] = {0};
    size_t n = 7;
    ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_ERR_NOT_FOUND);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "no GPU or CPU device"));
}
END_TEST

START_TEST(test_devices_env_list_selects_devices_in_order)
{
    fresh(GOOD_AND_GPU, "fakegood,fakegpu");
    setenv("BACKPLANE_DEVICES", " fakegood0 , fakegpu0,fakegood0", 1);
    struct bp_device *out[4] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 4, &n), BP_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(bp_device_name(out[0]), "fakegood0");
    ck_assert_str_eq(bp_device_name(out[1]), "fakegpu0");
    ck_assert_str_eq(bp_device_name(out[2]), "fakegood0");
}
END_TEST

START_TEST(test_devices_env_list_with_unknown_name_lists_available_ones)
{
    fresh(GOOD_AND_GPU, "fakegood,fakegpu");
    setenv("BACKPLANE_DEVICES", "fakegood0,vulkan7", 1);
    struct bp_device *out[4] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 4, &n), BP_ERR_NOT_FOUND);
    const char *e = bp_last_error();
    ck_assert_ptr_nonnull(strstr(e, "'vulkan7'"));
    ck_assert_ptr_nonnull(strstr(e, "fakegood0, fakegpu0"));
}
END_TEST

START_TEST(test_devices_env_list_longer_than_array_is_refused)
{
    fresh(GOOD_AND_GPU, "fakegood,fakegpu");
    setenv("BACKPLANE_DEVICES", "fakegood0,fakegpu0", 1);
    struct bp_device *out[1] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(bp_device_name(out[0]), "fakegood0");
    ck_assert_int_eq(bp_default_devices(NULL, 1, &n), BP_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_devices_meta_spec_without_meta_plugin_is_not_found)
{
    fresh(SAFE("fakegood"), "fakegood");
    setenv("BACKPLANE_DEVICES", "meta:fakegood0,fakegood0", 1);
    struct bp_device *out[2] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 2, &n), BP_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "no plugin of family 'meta' is loaded"));
}
END_TEST

START_TEST(test_devices_meta_spec_goes_to_the_meta_plugin_whole)
{
    fresh(FAULT "/meta:" SAFE("fakegood"), "fakegood,meta");
    setenv("BACKPLANE_DEVICES", "fakegood0, meta:fakegood0,fakegood0", 1);
    struct bp_device *out[4] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 4, &n), BP_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(bp_device_name(out[0]), "fakegood0");
    ck_assert_str_eq(bp_device_name(out[1]), "metafake0");
    last_spec_fn spec = (last_spec_fn)bp_device_proc_address(out[1], "bp_fault_last_spec");
    ck_assert_str_eq(spec(), "meta:fakegood0,fakegood0");
}
END_TEST

START_TEST(test_devices_by_name_unknown_sets_error)
{
    fresh(SAFE("fakegood"), "fakegood");
    ck_assert_ptr_null(bp_device_by_name("cuda3"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "'cuda3'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "fakegood0"));
    ck_assert_ptr_null(bp_device_by_name(NULL));
}
END_TEST

START_TEST(test_devices_accessors_tolerate_null)
{
    ck_assert_str_eq(bp_device_name(NULL), "");
    ck_assert_str_eq(bp_device_description(NULL), "");
    size_t f = 5, t = 5;
    bp_device_memory(NULL, &f, &t);
    ck_assert_uint_eq(f, 0);
    ck_assert_uint_eq(t, 0);
    ck_assert(!bp_device_supports_op(NULL, NULL));
    ck_assert_ptr_null(bp_device_proc_address(NULL, "x"));
    ck_assert_ptr_null(bp_device_buffer_type(NULL));
    ck_assert_str_eq(bp_device_type_name(BP_DEVICE_TYPE_META), "META");
    ck_assert_str_eq(bp_device_type_name(BP_DEVICE_TYPE_IGPU), "IGPU");
    ck_assert_str_eq(bp_device_type_name((enum bp_device_type)42), "unknown");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("devices");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_devices_default_prefers_a_gpu);
    tcase_add_test(tc, test_devices_default_falls_back_to_the_cpu);
    tcase_add_test(tc, test_devices_default_without_devices_is_not_found);
    tcase_add_test(tc, test_devices_env_list_selects_devices_in_order);
    tcase_add_test(tc, test_devices_env_list_with_unknown_name_lists_available_ones);
    tcase_add_test(tc, test_devices_env_list_longer_than_array_is_refused);
    tcase_add_test(tc, test_devices_meta_spec_without_meta_plugin_is_not_found);
    tcase_add_test(tc, test_devices_meta_spec_goes_to_the_meta_plugin_whole);
    tcase_add_test(tc, test_devices_by_name_unknown_sets_error);
    tcase_add_test(tc, test_devices_accessors_tolerate_null);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
