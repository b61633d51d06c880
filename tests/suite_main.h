/* suite_main.h — how every libcheck suite's main ends. */
#ifndef BP_SUITE_MAIN_H
#define BP_SUITE_MAIN_H

#include <check.h>
#include <stdlib.h>

/* Runs every case of s, in forked children unless CK_FORK=no (valgrind runs
 * say so), frees s with its runner, and returns the program's exit status:
 * EXIT_SUCCESS when no case failed, EXIT_FAILURE otherwise. */
static inline int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
