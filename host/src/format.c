/* format.c — human-readable byte counts for messages and the CLI. */
#include <stdio.h>

#include "internal.h"

const char *bp_format_bytes(size_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || cap == 0) return buf ? buf : "";
    if (bytes < 1024) {
        snprintf(buf, cap, "%zu B", bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    /* Move up a unit also when one decimal would round to 1024.0. */
    while (u < 6 && v >= 1023.95) {
        v /= 1024.0;
        u++;
    }
    int tenths = (int)(v * 10.0 + 0.5);
    if (tenths % 10 == 0) snprintf(buf, cap, "%d %s", tenths / 10, units[u]);
    else snprintf(buf, cap, "%.1f %s", (double)tenths / 10.0, units[u]);
    return buf;
}
