/*
 * score.c — the variant's bp_plugin_score. Built WITHOUT ISA flags (see
 * CMakeLists.txt): the loader calls it before it knows whether the rest of
 * this shared object can run, so it must not contain a single AVX
 * instruction. CPU_VARIANT_ID is set per variant by the build.
 */
#include <backplane/bp_abi.h>

#include "cpu_features.h"

static int cpu_score(void)
{
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
    return cpu_variant_score(CPU_VARIANT_ID, &isa);
}

BP_PLUGIN_DEFINE_SCORE(cpu_score)
