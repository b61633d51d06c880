/*
 * check_quiet.h — forced into every libcheck suite (tests/CMakeLists.txt):
 * an assertion that passes costs a comparison and nothing more.
 *
 * libcheck's ck_assert_msg, under which every typed ck_assert_* macro
 * expands, reports the location of each passing assertion to the process
 * that runs the suite (_mark_point: a write to a pipe or file). Suites that
 * check results element by element or byte by byte would spend most of
 * their time in those system calls, and far more under valgrind. A failing
 * assertion still reports its file, line, expression and message; a crash
 * is located by the sanitizers' and valgrind's stack traces instead of the
 * last passing assertion.
 */
#ifndef BP_TESTS_CHECK_QUIET_H
#define BP_TESTS_CHECK_QUIET_H

#include <check.h>

#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                                                   \
    ((expr) ? (void)0                                                                              \
            : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif
