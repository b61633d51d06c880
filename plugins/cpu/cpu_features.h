/*
 * cpu_features.h — what the running CPU and OS can execute, found with
 * CPUID and XGETBV. Compiled WITHOUT ISA flags (it decides whether the
 * variant's own code may run at all), so it is safe on any x86-64 or arm64.
 */
#ifndef BP_CPU_FEATURES_H
#define BP_CPU_FEATURES_H

#include <stdbool.h>

struct cpu_isa {
    bool sse2, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_vnni, avx512_bf16;
    bool gfni; /* not required by any variant: kernels ask for it at run time */
    bool os_avx;     /* XCR0 saves YMM state: the OS lets us use AVX */
    bool os_avx512;  /* XCR0 saves opmask and ZMM state */
    bool amx_tile, amx_int8, amx_bf16;
    bool os_amx;     /* XCR0 has XTILECFG | XTILEDATA (the process must still ask for them) */
    bool neon, dotprod;
};

/* Probe the running machine (cheap; call as often as needed). */
void cpu_isa_detect(struct cpu_isa *isa);

/* The CPUID vendor string and family (base + extended; model likewise);
 * empty and 0 where there is no CPUID. */
struct cpu_family {
    char vendor[13];
    unsigned family, model;
};
void cpu_family_detect(struct cpu_family *f);

/* Variant levels, in the order a machine prefers them. */
enum cpu_variant_id {
    CPU_VARIANT_SCALAR = 1,
    CPU_VARIANT_NEON = 2,
    CPU_VARIANT_AVX2 = 3,
    CPU_VARIANT_AVX512 = 4,
};

/* The loader score of variant id on this machine: 0 when it cannot run. */
int cpu_variant_score(enum cpu_variant_id id, const struct cpu_isa *isa);

#endif
