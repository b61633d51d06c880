/*
 * cpu_variant_util.h — which CPU variant a suite tests, for the suites that
 * run once per variant (test_cpu_fast, test_cpu_attention).
 *
 * CTest names the variant in BP_TEST_EXPECT_VARIANT; a run by hand may force
 * one with BACKPLANE_CPU_VARIANT or force none, and the checks below hold in
 * all three cases (none of them passes by returning early).
 */
#ifndef BP_CPU_VARIANT_UTIL_H
#define BP_CPU_VARIANT_UTIL_H

/* What libbackplane-cpu-<variant>.so's own score entry says about this
 * machine (0: it cannot run here); -1 when the .so is not in
 * BP_TEST_PLUGIN_DIR, -2 when it exports no score entry. */
int variant_score(const char *variant);

/* Call first in main. 0: run the suite. 77 (skip): the variant CTest asks for
 * cannot run on this CPU. 1: its .so is missing or has no score entry, which
 * is a missing build product, not something the machine lacks. Prints one
 * sentence for 77 and 1. */
int variant_gate(void);

/* Fails the test unless the loaded "cpu" plugin is the variant this run
 * asked for (BP_TEST_EXPECT_VARIANT, else BACKPLANE_CPU_VARIANT) or, when
 * none was asked for, a variant no other built one outscores. */
void expect_loaded_variant_is_the_chosen_one(void);

#endif
