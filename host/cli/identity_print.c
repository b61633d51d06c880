/* identity_print.c — device identity as text and JSON (identity_print.h). */
#include <stdio.h>
#include <string.h>

#include "identity_print.h"

/* Append ", "-separated parts into buf. */
static void add(char *buf, size_t cap, size_t *used, const char *sep, const char *fmt, const char *s,
                int v)
{
    if (*used >= cap) return;
    int w = snprintf(buf + *used, cap - *used, "%s", *used ? sep : "");
    if (w > 0) *used += (size_t)w;
    if (*used >= cap) return;
    w = s ? snprintf(buf + *used, cap - *used, fmt, s) : snprintf(buf + *used, cap - *used, fmt, v);
    if (w > 0) *used += (size_t)w;
    if (*used >= cap) *used = cap - 1;
}

const char *cli_identity_text(struct bp_device *dev, char *buf, size_t cap)
{
    if (!cap) return buf;
    buf[0] = '\0';
    struct bp_device_identity id = { .size = sizeof id };
    char uuid[40];
    size_t used = 0;
    (void)bp_device_identity(dev, &id);
    if (id.has_uuid) add(buf, cap, &used, ", ", "uuid %s", bp_identity_uuid_string(&id, uuid, sizeof uuid), 0);
    if (id.pci_bus_id[0]) add(buf, cap, &used, ", ", "pci %s", id.pci_bus_id, 0);
    if (id.software) add(buf, cap, &used, ", ", "%s", "software implementation", 0);
    if (id.cpu_package >= 0) add(buf, cap, &used, ", ", "package %d", NULL, id.cpu_package);
    if (id.numa_node >= 0) add(buf, cap, &used, ", ", "NUMA node %d", NULL, id.numa_node);
    struct bp_device *twin = bp_device_same_physical(dev);
    if (twin) {
        enum bp_device_type t = bp_device_type(twin);
        const char *kind = t == BP_DEVICE_TYPE_GPU || t == BP_DEVICE_TYPE_IGPU ? "GPU" : "device";
        char same[80];
        snprintf(same, sizeof same, "same %s as %s", kind, bp_device_name(twin));
        add(buf, cap, &used, "; ", "%s", same, 0);
    }
    return buf;
}

void cli_identity_json(struct json_writer *w, struct bp_device *dev)
{
    struct bp_device_identity id = { .size = sizeof id };
    char uuid[40];
    (void)bp_device_identity(dev, &id);
    struct bp_device *twin = bp_device_same_physical(dev);
    json_object_begin(w, "identity");
    json_string(w, "uuid", id.has_uuid ? bp_identity_uuid_string(&id, uuid, sizeof uuid) : NULL);
    json_string(w, "pci_bus_id", id.pci_bus_id[0] ? id.pci_bus_id : NULL);
    json_bool(w, "software", id.software);
    json_int(w, "cpu_package", id.cpu_package);
    json_int(w, "numa_node", id.numa_node);
    json_string(w, "same_device_as", twin ? bp_device_name(twin) : NULL);
    json_object_end(w);
}
