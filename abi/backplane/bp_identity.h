/*
 * bp_identity.h — a device's stable identity (ABI 1.1, additive).
 *
 * Names and indices change with enumeration order and with the plugin a
 * device is reached through (the same GPU is cuda0 and vulkan1); the
 * identity does not. A plugin offers it through its registry's
 * get_proc_address(BP_PROC_DEVICE_IDENTITY); a plugin without it simply has
 * no identity to report.
 */
#ifndef BP_IDENTITY_H
#define BP_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bp_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BP_UUID_BYTES 16
#define BP_PCI_BUS_ID_LEN 32

/* Filled by the plugin. Fields are appended, never reordered; the caller
 * sets `size` to sizeof as it compiled it and zeroes the rest, and the
 * plugin writes only the fields `size` covers (BP_IFACE_HAS). */
struct bp_device_identity {
    size_t   size;
    bool     has_uuid;                        /* uuid is the platform's (CUDA, Vulkan) */
    uint8_t  uuid[BP_UUID_BYTES];
    /* "0000:65:00.0" (domain:bus:device.function, lower-case hex), or ""
     * when the device is not on PCI or the driver does not say. */
    char     pci_bus_id[BP_PCI_BUS_ID_LEN];
    /* A software implementation of a GPU API running on the CPU (lavapipe,
     * llvmpipe, SwiftShader): never a default over a real device. */
    bool     software;
    /* The CPU package (socket) and NUMA node the device belongs to, -1 when
     * unknown or not meaningful. */
    int32_t  cpu_package;
    int32_t  numa_node;
};

/* Fill *out for dev, a device of this registry. BP_ERR_INVALID_ARGUMENT for
 * a NULL or foreign device or a NULL out. Any
 * thread; must not allocate device memory. */
#define BP_PROC_DEVICE_IDENTITY "bp_device_identity"
typedef bp_status (*bp_device_identity_fn)(struct bp_device *dev,
                                           struct bp_device_identity *out);

/* True when two identities name one physical device: equal UUIDs when both
 * have one, else equal PCI addresses when both have one. Software devices
 * and CPUs have neither and are never "the same" by this test. */
static inline bool bp_identity_same(const struct bp_device_identity *a,
                                    const struct bp_device_identity *b)
{
    if (a->has_uuid && b->has_uuid)
        return memcmp(a->uuid, b->uuid, BP_UUID_BYTES) == 0;
    return a->pci_bus_id[0] && strcmp(a->pci_bus_id, b->pci_bus_id) == 0;
}

#ifdef __cplusplus
}
#endif
#endif /* BP_IDENTITY_H */
