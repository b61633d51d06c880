/* cpu_variant_util.c — see cpu_variant_util.h. */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_plugin.h>

#include "cpu_test_util.h"
#include "cpu_variant_util.h"

#define CPU_PREFIX "libbackplane-cpu-"

int variant_score(const char *variant)
{
    return variant_file_score(BP_TEST_PLUGIN_DIR, variant);
}

int variant_gate(void)
{
    const char *want = getenv("BP_TEST_EXPECT_VARIANT");
    if (!want) return 0;
    int s = variant_score(want);
    if (s == -1 || s == -2) {
        printf("FAIL: %s/" CPU_PREFIX "%s.so %s; build the cpu plugin's variants first.\n",
               BP_TEST_PLUGIN_DIR, want, s == -1 ? "cannot be loaded" : "exports no score entry");
        return 1;
    }
    if (s == 0) {
        printf("SKIP: the %s variant cannot run on this machine (its score entry says 0).\n", want);
        return 77;
    }
    return 0;
}

/* The loaded cpu plugin's record; fails the test when none is loaded. */
static const struct bp_plugin_info *loaded_cpu(void)
{
    cpu_device();
    for (size_t i = 0; i < bp_plugin_count(); i++)
        if (!strcmp(bp_plugin_get(i)->family, "cpu")) return bp_plugin_get(i);
    ck_abort_msg("no cpu plugin is loaded");
    return NULL;
}

/* The best score among the variants built beside the loaded one. */
static int best_built_score(void)
{
    DIR *d = opendir(BP_TEST_PLUGIN_DIR);
    ck_assert_msg(d != NULL, "cannot list %s", BP_TEST_PLUGIN_DIR);
    int best = 0;
    const size_t np = strlen(CPU_PREFIX);
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n <= np + 3 || strncmp(e->d_name, CPU_PREFIX, np) || strcmp(e->d_name + n - 3, ".so"))
            continue;
        char variant[128];
        snprintf(variant, sizeof variant, "%.*s", (int)(n - np - 3), e->d_name + np);
        int s = variant_score(variant);
        if (s > best) best = s;
    }
    closedir(d);
    return best;
}

void expect_loaded_variant_is_the_chosen_one(void)
{
    const struct bp_plugin_info *cpu = loaded_cpu();
    const char *want = getenv("BP_TEST_EXPECT_VARIANT");
    if (!want || !*want) want = getenv("BACKPLANE_CPU_VARIANT");
    if (want && *want) {
        ck_assert_str_eq(cpu->variant, want);
        return;
    }
    int best = best_built_score();
    ck_assert_msg(best > 0, "no cpu variant in %s can run here", BP_TEST_PLUGIN_DIR);
    ck_assert_msg(variant_score(cpu->variant) == best,
                  "the loader chose variant '%s' (score %d) over one scoring %d", cpu->variant,
                  variant_score(cpu->variant), best);
}
