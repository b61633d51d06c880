/* test_env_warning.c — the warning a user sees for a misspelt BACKPLANE_*
 * variable. Its own suite: the library checks the environment once per
 * process, at the first load, so this must be that load; and test_env's
 * compiled-in copy of log.c is not the library's log channel. */
#include "loader_test_util.h"
#include "log_capture.h"
#include "suite_main.h"

START_TEST(test_env_warns_about_unknown_variable_with_suggestion)
{
    /* The library reads BACKPLANE_LOG once, at its first log line: this is it. */
    setenv("BACKPLANE_LOG", "warn", 1);
    fresh(SAFE("fakegood"), "fakegood");
    setenv("BACKPLANE_PLUGIN_PTH", "/nowhere", 1);
    setenv("BACKPLANE_ZZZZZZZZZZZZZZZZZZZZ", "1", 1);
    setenv("BACKPLANE_FAKEVAR_VARIANT", "low", 1);
    log_capture_begin();
    bp_load_plugins(NULL);
    const char *log = log_capture_end();
    ck_assert_msg(strstr(log, "backplane: warning: BACKPLANE_PLUGIN_PTH is not a backplane "
                              "variable; did you mean BACKPLANE_PLUGIN_PATH?\n") != NULL,
                  "log was: %s", log);
    ck_assert_msg(strstr(log, "BACKPLANE_ZZZZZZZZZZZZZZZZZZZZ is not a backplane variable; it is "
                              "ignored") != NULL, "log was: %s", log);
    ck_assert_msg(strstr(log, "BACKPLANE_FAKEVAR_VARIANT") == NULL, "log was: %s", log);
    ck_assert_ptr_nonnull(bp_device_by_name("fakegood0"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("env_warning");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_env_warns_about_unknown_variable_with_suggestion);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
