/* identity_print.c — device identity as text and JSON (identity_print.h). */
#include <stdio.h>
#include <string.h>

#include "identity_print.h"

/* Append one part to buf, after sep unless it is the first; the text stays
 * terminated and clipped to cap. */
static void add(char *buf, size_t cap, size_t *used, const char *sep, const char *part)
{
    if (*used >= cap) return;
    const int w = snprintf(buf + *used, cap - *used, "%s%s", *used ? sep : "", part);
    if (w > 0) *used += (size_t)w;
    if (*used >= cap) *used = cap - 1;
}

const char *cli_identity_text(struct bp_device *dev, char *buf, size_t cap)
{
    if (!cap) return buf;
    buf[0] = '\0';
    struct bp_device_identity id = { .size = sizeof id };
    char uuid[40], part[96];
    size_t used = 0;
    (void)bp_device_identity(dev, &id);
    if (id.has_uuid) {
        snprintf(part, sizeof part, "uuid %s", bp_identity_uuid_string(&id, uuid, sizeof uuid));
        add(buf, cap, &used, ", ", part);
    }
    if (id.pci_bus_id[0]) {
        snprintf(part, sizeof part, "pci %s", id.pci_bus_id);
        add(buf, cap, &used, ", ", part);
    }
    if (id.software) add(buf, cap, &used, ", ", "software implementation");
    if (id.cpu_package >= 0) {
        snprintf(part, sizeof part, "package %d", id.cpu_package);
        add(buf, cap, &used, ", ", part);
    }
    if (id.numa_node >= 0) {
        snprintf(part, sizeof part, "NUMA node %d", id.numa_node);
        add(buf, cap, &used, ", ", part);
    }
    struct bp_device *twin = bp_device_same_physical(dev);
    if (twin) {
        enum bp_device_type t = bp_device_type(twin);
        const char *kind = t == BP_DEVICE_TYPE_GPU || t == BP_DEVICE_TYPE_IGPU ? "GPU" : "device";
        char same[80];
        snprintf(same, sizeof same, "same %s as %s", kind, bp_device_name(twin));
        add(buf, cap, &used, "; ", same);
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
