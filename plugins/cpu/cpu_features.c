/*
 * cpu_features.c — CPUID/XGETBV (x86-64) and HWCAP (arm64) probing. No ISA
 * flags: this code runs before anyone knows which instructions are legal.
 * A CPU that reports AVX-512 is not enough: the OS must also save the wider
 * register state on context switches (XCR0), or the first ZMM instruction
 * faults; that is why every AVX level checks XGETBV too.
 */
#include <string.h>

#include "cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void)
{
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

void cpu_isa_detect(struct cpu_isa *isa)
{
    memset(isa, 0, sizeof *isa);
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    isa->sse2 = d & (1u << 26);
    bool osxsave = c & (1u << 27);
    isa->avx = c & (1u << 28);
    isa->fma = c & (1u << 12);
    isa->f16c = c & (1u << 29);
    if (osxsave) {
        unsigned long long xcr0 = xgetbv0();
        isa->os_avx = (xcr0 & 0x6) == 0x6;             /* XMM | YMM */
        isa->os_avx512 = isa->os_avx && (xcr0 & 0xe0) == 0xe0; /* opmask | ZMM_hi256 | hi16_ZMM */
        isa->os_amx = (xcr0 & 0x60000) == 0x60000;            /* XTILECFG | XTILEDATA */
    }
    unsigned max = __get_cpuid_max(0, NULL);
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        isa->avx2 = b & (1u << 5);
        isa->avx512f = b & (1u << 16);
        isa->avx512dq = b & (1u << 17);
        isa->avx512bw = b & (1u << 30);
        isa->avx512vl = b & (1u << 31);
        isa->avx512_vnni = c & (1u << 11);
        isa->gfni = c & (1u << 8);
        isa->amx_bf16 = d & (1u << 22);
        isa->amx_tile = d & (1u << 24);
        isa->amx_int8 = d & (1u << 25);
        __cpuid_count(7, 1, a, b, c, d);
        isa->avx512_bf16 = a & (1u << 5);
    }
}

void cpu_family_detect(struct cpu_family *f)
{
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    memcpy(f->vendor, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const unsigned base = (a >> 8) & 0xF, model = (a >> 4) & 0xF;
    f->family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
    f->model = base == 0xF || base == 0x6 ? model | (((a >> 16) & 0xF) << 4) : model;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

void cpu_family_detect(struct cpu_family *f)
{
    memset(f, 0, sizeof *f);
}

void cpu_isa_detect(struct cpu_isa *isa)
{
    memset(isa, 0, sizeof *isa);
    unsigned long hw = getauxval(AT_HWCAP);
    isa->neon = true; /* mandatory on AArch64 */
    isa->dotprod = hw & HWCAP_ASIMDDP;
}

#else
void cpu_isa_detect(struct cpu_isa *isa)
{
    memset(isa, 0, sizeof *isa);
}

void cpu_family_detect(struct cpu_family *f)
{
    memset(f, 0, sizeof *f);
}
#endif

int cpu_variant_score(enum cpu_variant_id id, const struct cpu_isa *isa)
{
    switch (id) {
    case CPU_VARIANT_SCALAR:
        return 1;
    case CPU_VARIANT_NEON:
        return isa->neon && isa->dotprod ? 20 : 0;
    case CPU_VARIANT_AVX2:
        return isa->avx && isa->avx2 && isa->fma && isa->f16c && isa->os_avx ? 30 : 0;
    case CPU_VARIANT_AVX512:
        return isa->avx512f && isa->avx512bw && isa->avx512vl && isa->avx512dq &&
                       isa->avx512_vnni && isa->avx2 && isa->fma && isa->f16c && isa->os_avx512
                   ? 40
                   : 0;
    }
    return 0;
}
