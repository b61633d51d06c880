/* identity.c — BP_PROC_DEVICE_IDENTITY for the CPU: the package (socket)
 * and NUMA node of the CPUs this process may run on, from sysfs. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cpu_internal.h"

#define SYS_CPU "/sys/devices/system/cpu/cpu"
#define MAX_NODES 256

static int read_int(const char *path)
{
    FILE *f = fopen(path, "r");
    int v = -1;
    if (!f) return -1;
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* A CPU's node is the nodeN link inside its sysfs directory. */
static int node_of_cpu(int cpu)
{
    char path[96];
    for (int n = 0; n < MAX_NODES; n++) {
        snprintf(path, sizeof path, SYS_CPU "%d/node%d", cpu, n);
        if (access(path, F_OK) == 0) return n;
    }
    return -1;
}

/* The value every allowed CPU shares, -1 when they differ or one is unknown:
 * a process pinned with numactl reports its node, an unpinned one on a
 * two-socket machine reports neither. */
static void merge(int32_t *acc, int v, bool first)
{
    if (first) *acc = v;
    else if (*acc != v) *acc = -1;
}

bp_status cpu_device_identity(struct bp_device *dev, struct bp_device_identity *out)
{
    if (!dev || !out || out->size < sizeof out->size) return BP_ERR_INVALID_ARGUMENT;
    cpu_set_t set;
    CPU_ZERO(&set);
    int32_t package = -1, node = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        bool first = true;
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, &set)) continue;
            char path[96];
            snprintf(path, sizeof path, SYS_CPU "%d/topology/physical_package_id", c);
            merge(&package, read_int(path), first);
            merge(&node, node_of_cpu(c), first);
            first = false;
        }
    }
    if (BP_IFACE_HAS(out, has_uuid)) out->has_uuid = false;
    if (BP_IFACE_HAS(out, pci_bus_id)) out->pci_bus_id[0] = '\0';
    if (BP_IFACE_HAS(out, software)) out->software = false;
    if (BP_IFACE_HAS(out, cpu_package)) out->cpu_package = package;
    if (BP_IFACE_HAS(out, numa_node)) out->numa_node = node;
    return BP_OK;
}
