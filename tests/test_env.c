/* test_env.c — the BACKPLANE_* helpers (compiled in from host/src/env.c;
 * the warning a user sees is in test_loader.c, since this suite's copy of
 * log.c is not the library's). */
#include <unistd.h>

#include "loader_internal.h"
#include "loader_test_util.h"
#include "suite_main.h"

START_TEST(test_env_edit_distance_matches_hand_computed_values)
{
    ck_assert_uint_eq(bp__edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(bp__edit_distance("flaw", "lawn"), 2);
    ck_assert_uint_eq(bp__edit_distance("", "abc"), 3);
    ck_assert_uint_eq(bp__edit_distance("same", "same"), 0);
}
END_TEST

START_TEST(test_env_suggests_closest_known_name)
{
    ck_assert_str_eq(bp__env_suggest("BACKPLANE_PLUGIN_PTH"), "BACKPLANE_PLUGIN_PATH");
    ck_assert_str_eq(bp__env_suggest("BACKPLANE_BAKCENDS"), "BACKPLANE_BACKENDS");
    ck_assert_str_eq(bp__env_suggest("BACKPLANE_DEVICE"), "BACKPLANE_DEVICES");
    ck_assert_ptr_null(bp__env_suggest("BACKPLANE_SOMETHING_ELSE_ENTIRELY"));
}
END_TEST

START_TEST(test_env_knows_listed_names_and_the_variant_pattern)
{
    for (const char *const *k = bp__known_env_vars; *k; k++) ck_assert(bp__env_is_known(*k));
    ck_assert(bp__env_is_known("BACKPLANE_FAKEVAR_VARIANT"));
    ck_assert(bp__env_is_known("BACKPLANE_MY_GPU2_VARIANT"));
    ck_assert(!bp__env_is_known("BACKPLANE__VARIANT"));
    ck_assert(!bp__env_is_known("BACKPLANE_fake_VARIANT"));
    ck_assert(!bp__env_is_known("BACKPLANE_VARIANT"));
    ck_assert(!bp__env_is_known("BACKPLANE_PLUGIN_PTH"));
    ck_assert(!bp__env_is_known(NULL));
}
END_TEST

START_TEST(test_env_getenv_reads_the_environment)
{
    setenv("BACKPLANE_CPU_THREADS", "3", 1);
    ck_assert_str_eq(bp__getenv("BACKPLANE_CPU_THREADS"), "3");
    unsetenv("BACKPLANE_CPU_THREADS");
    ck_assert_ptr_null(bp__getenv("BACKPLANE_CPU_THREADS"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_env_edit_distance_matches_hand_computed_values);
    tcase_add_test(tc, test_env_suggests_closest_known_name);
    tcase_add_test(tc, test_env_knows_listed_names_and_the_variant_pattern);
    tcase_add_test(tc, test_env_getenv_reads_the_environment);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
