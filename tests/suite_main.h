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

/* tcase_add_loop_test, thinned under valgrind (BP_UNDER_VALGRIND): half of
 * the iterations s..e-1 run there, on a diagonal (0, 3, 4, 7, 8, ...) so
 * that both low bits of an index that packs two choices still vary. Valgrind
 * runs at a tenth of native speed; the sanitizer build runs every iteration. */
static inline void tcase_add_loop_test_thinned(TCase *tc, const TTest *t, int s, int e)
{
    if (!getenv("BP_UNDER_VALGRIND")) {
        tcase_add_loop_test(tc, t, s, e);
        return;
    }
    for (int i = s; i < e; i++)
        if ((i + i / 2) % 2 == 0) tcase_add_loop_test(tc, t, i, i + 1);
}

#endif
