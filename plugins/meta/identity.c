/* identity.c — the meta device's identity, composed from its sub-devices,
 * and the warning when a spec names one physical device twice through two
 * plugins (cuda0 and vulkan1 on one GPU share its memory and compute, so
 * the split would double-count it). */
#include <stdio.h>
#include <string.h>

#include "meta_internal.h"

/* The sub-device's identity, or false when its plugin has none. */
static bool sub_identity(struct bp_device *d, struct bp_device_identity *out)
{
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    out->cpu_package = out->numa_node = -1;
    struct bp_registry *r = d ? d->reg : NULL;
    if (!r || !r->iface || !BP_IFACE_HAS(r->iface, get_proc_address) || !r->iface->get_proc_address)
        return false;
    void *p = r->iface->get_proc_address(r, BP_PROC_DEVICE_IDENTITY);
    if (!p) return false;
    bp_device_identity_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn(d, out) == BP_OK;
}

void meta_warn_same_physical(struct bp_device *const *devs, size_t n)
{
    struct bp_device_identity id[META_MAX_DEV];
    bool have[META_MAX_DEV];
    for (size_t i = 0; i < n && i < META_MAX_DEV; i++) have[i] = sub_identity(devs[i], &id[i]);
    for (size_t j = 1; j < n && j < META_MAX_DEV; j++)
        for (size_t i = 0; i < j; i++) {
            /* The same bp_device twice (meta:cpu*2) is a deliberate split. */
            if (!have[i] || !have[j] || devs[i] == devs[j] || !bp_identity_same(&id[i], &id[j]))
                continue;
            meta_log(BP_LOG_WARN, "sub-devices '%s' and '%s' are the same physical device through "
                     "two plugins; they will share its memory and compute, so list it once unless "
                     "that is intended.", meta_sub_name(devs[i]), meta_sub_name(devs[j]));
            break;
        }
}

bp_status meta_device_identity(struct bp_device *dev, struct bp_device_identity *out)
{
    if (!dev || !out || !meta_is_meta_device(dev) || out->size < sizeof out->size)
        return BP_ERR_INVALID_ARGUMENT;
    const struct meta_device *md = dev->context;
    /* No UUID or bus of its own; software only when every part is, and a
     * package or node only when every part shares it. */
    bool software = md->n > 0;
    int32_t package = -1, node = -1;
    for (size_t i = 0; i < md->n; i++) {
        struct bp_device_identity s;
        bool have = sub_identity(md->sub[i], &s);
        software &= have && s.software;
        package = i == 0 || package == s.cpu_package ? s.cpu_package : -1;
        node = i == 0 || node == s.numa_node ? s.numa_node : -1;
    }
    if (BP_IFACE_HAS(out, has_uuid)) out->has_uuid = false;
    if (BP_IFACE_HAS(out, pci_bus_id)) out->pci_bus_id[0] = '\0';
    if (BP_IFACE_HAS(out, software)) out->software = software;
    if (BP_IFACE_HAS(out, cpu_package)) out->cpu_package = package;
    if (BP_IFACE_HAS(out, numa_node)) out->numa_node = node;
    return BP_OK;
}
