/*
 * host_memory.c — where the CPU buffers' memory comes from.
 *
 * Weights are read once per token from end to end, and with 4 KiB pages
 * that is one TLB miss per 4 KiB: on the 2-core test VM (nested paging
 * makes every miss a two-level walk) a plain streaming read of 512 MB ran
 * at 22 GB/s on one thread with 4 KiB pages and 30 GB/s with 2 MiB pages.
 * So buffers of CPU_HUGE_MIN bytes or more are 2 MiB aligned and asked
 * for transparent huge pages (madvise; the kernel's default THP mode,
 * "madvise", gives them only to memory that asks). Where THP is off, or
 * BACKPLANE_CPU_HUGEPAGES=0 says not to, they are ordinary allocations;
 * either way the memory is the same to everything else.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cpu_internal.h"

#define CPU_HUGE_PAGE ((size_t)2 << 20)

/* What THP mode the kernel is in: "always", "madvise", "never", or
 * "unknown" when /sys does not say (not Linux, or no THP support). */
static void thp_mode(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return;
    char line[128];
    if (fgets(line, sizeof line, f)) {
        const char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b && b > a + 1)
            snprintf(out, cap, "%.*s", (int)(b - a - 1), a + 1);
    }
    fclose(f);
}

void cpu_host_memory_init(struct cpu_plugin *pl)
{
    char mode[32];
    thp_mode(mode, sizeof mode);
    const char *s = cpu_getenv(pl, "BACKPLANE_CPU_HUGEPAGES");
    bool off = false;
    if (s && *s) {
        if (!strcmp(s, "0"))
            off = true;
        else if (strcmp(s, "1") != 0)
            cpu_log(pl, BP_LOG_WARN,
                    "BACKPLANE_CPU_HUGEPAGES='%s' is neither 0 nor 1; asking for huge pages "
                    "as by default.", s);
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    pl->huge_pages = !off && strcmp(mode, "never") != 0 && strcmp(mode, "unknown") != 0;
#else
    pl->huge_pages = false;
#endif
    if (off)
        snprintf(pl->huge_pages_str, sizeof pl->huge_pages_str, "off (BACKPLANE_CPU_HUGEPAGES=0)");
    else if (pl->huge_pages)
        snprintf(pl->huge_pages_str, sizeof pl->huge_pages_str, "2 MiB for buffers >= %zu MiB "
                 "(THP %s)", CPU_HUGE_MIN >> 20, mode);
    else
        snprintf(pl->huge_pages_str, sizeof pl->huge_pages_str, "none (THP %s)", mode);
}

void *cpu_host_alloc(const struct cpu_plugin *pl, size_t size)
{
    (void)pl; /* read only where madvise exists */
    if (size == 0)
        size = CPU_BUFFER_ALIGNMENT;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (pl->huge_pages && size >= CPU_HUGE_MIN && size <= SIZE_MAX - CPU_HUGE_PAGE) {
        const size_t padded = (size + CPU_HUGE_PAGE - 1) / CPU_HUGE_PAGE * CPU_HUGE_PAGE;
        void *p = aligned_alloc(CPU_HUGE_PAGE, padded);
        /* A refusal (an old kernel, a container's policy) leaves ordinary
         * pages, which work the same: nothing to report. */
        if (p)
            (void)madvise(p, padded, MADV_HUGEPAGE);
        return p;
    }
#endif
    if (size > SIZE_MAX - CPU_BUFFER_ALIGNMENT)
        return NULL;
    return aligned_alloc(CPU_BUFFER_ALIGNMENT,
                         (size + CPU_BUFFER_ALIGNMENT - 1) / CPU_BUFFER_ALIGNMENT * CPU_BUFFER_ALIGNMENT);
}
