/*
 * prefetch.c — how far ahead the x8 decode kernels ask for weight bytes
 * (CPU_X8_L2_PREFETCH_BYTES, CPU_X8_L1_PREFETCH_BYTES in repack.h), chosen
 * once per process from the CPU's vendor and family: the distances that
 * keep a kernel at the read bandwidth differ between core families.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu_features.h"
#include "repack.h"

struct cpu_x8_prefetch cpu_x8_prefetch_bytes = { 4096, 2048, 2048 };

/* First match wins; family 0 matches any family of the vendor, an empty
 * vendor any CPU. The Intel figures are in repack.h. AMD family 1Ah: on a
 * 2-vCPU EPYC VM (family 26 model 2), one thread, Q4_0 K = 4096 N = 32768
 * (75 MB) at one activation row, `bench mul_mat` against the same run's
 * read probe, alternating pairs under a load average of 8-14 from other
 * sessions: 16384 / 4096 streamed 6.9-7.0 -> 9.5-10.3 GB/s (0.47-0.65 ->
 * 0.68-0.92 of the read) in 3 of 3 pairs, and 0.96 against 0.58 at 4096 /
 * 2048 and 0.71 at 8192 / 4096 in a sweep; Q5_0 split (1 pair of 3 faster,
 * within the load's noise). `scripts/prefetch-sweep.sh` over whole decodes
 * (`run --bandwidth`, Q4_K_S, Q6_K, IQ4_XS, Q5_K_M, 2-3 alternating rounds,
 * load average 8-12, read probe 7-23 GB/s) could not rank 4096 / 2048,
 * 8192 / 4096, 16384 / 4096 and 32768 / 8192 (medians 0.66-0.73 of the
 * read, ranges 0.50-0.95 each); only an L1 distance of 8 KiB (16384 / 8192)
 * came last for all four types (median 0.61). So 16384 / 4096 stays, as
 * fitted on Q4_0 above, and the L1 distance stays at 4 KiB or less. Zen 3/4
 * keep the Intel distances: not measured here.
 * The 32-weight-block walks (Q4_0, Q5_0, Q8_0) on the same VM, quiet (load
 * 1.0-1.4, read probe 27-35 GB/s), one thread: an L1 request at 4 KiB cost
 * them what it gains the K-quants. `bench mul_mat` K = 2048 N = 5632,
 * alternating builds, L1 4096 -> 0 (a request for the line being read,
 * which the demand load then meets in flight): Q4_0 0.75-0.76 -> 0.81-0.85
 * of the read (22.6-23.0 -> 25.2-26.4 GB/s, 3 of 3 pairs), Q5_0 0.74-0.80
 * -> 0.85, Q8_0 0.68-0.80 -> 0.73-0.84 (2 of 2 each); whole decodes of the
 * 1B Q4_0 file 0.70-0.77 -> 0.82-0.92 (3 of 3). L1 at 512-1024 bytes was
 * worse than either (0.60-0.74). Q4_K_M decodes, the other way: L1 0
 * against 4096 lost 3 of 3 (0.71-0.77 against 0.78-0.84). */
static const struct {
    const char *vendor;
    unsigned family;
    const char *name;
    struct cpu_x8_prefetch d;
} table[] = {
    { "AuthenticAMD", 0x1A, "AMD family 1Ah (Zen 5)", { 16384, 4096, 0 } },
    { "AuthenticAMD", 0x19, "AMD family 19h (Zen 3/4)", { 4096, 2048, 2048 } },
    { "GenuineIntel", 0, "Intel", { 4096, 2048, 2048 } },
    { "", 0, "default", { 4096, 2048, 2048 } },
};

/* A distance from the environment: a multiple of 64 from 0 to 64 KiB,
 * ending at a comma or at the end. */
static bool parse_bytes(const char *s, int *out)
{
    char *end;
    const long v = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',') || v < 0 || v > 65536 || v % 64)
        return false;
    *out = (int)v;
    return true;
}

bool cpu_x8_prefetch_choose(const char *env, char *desc, size_t cap)
{
    struct cpu_family f;
    cpu_family_detect(&f);
    size_t i = 0;
    while (table[i].vendor[0] && !(strcmp(table[i].vendor, f.vendor) == 0 &&
                                   (!table[i].family || table[i].family == f.family)))
        i++;
    struct cpu_x8_prefetch d = table[i].d;
    bool ok = true;
    if (env && *env) {
        /* "L2,L1[,L1_32]" in bytes */
        struct cpu_x8_prefetch e;
        const char *c1 = strchr(env, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        ok = c1 && parse_bytes(env, &e.l2) && parse_bytes(c1 + 1, &e.l1) &&
             (!c2 || (parse_bytes(c2 + 1, &e.l1_32) && !strchr(c2 + 1, ',')));
        if (!c2)
            e.l1_32 = e.l1;
        if (ok)
            d = e;
    }
    cpu_x8_prefetch_bytes = d;
    snprintf(desc, cap, "L2 %d, L1 %d (32-weight blocks %d) bytes ahead (%s)", d.l2, d.l1, d.l1_32,
             env && *env && ok ? "BACKPLANE_CPU_PREFETCH" : table[i].name);
    return ok;
}
