/* identity.c — BP_PROC_DEVICE_IDENTITY for CUDA devices: the UUID from
 * cudaDeviceProp (what nvidia-smi -L prints) and the PCI address from
 * cudaDeviceGetPCIBusId, so cuda0 can be matched to its Vulkan twin. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_internal.h"

void cuda_identity_probe(struct cuda_device *cd, const struct cudaDeviceProp *prop)
{
    memcpy(cd->uuid, prop->uuid.bytes, sizeof cd->uuid);
    cd->has_uuid = false;
    for (size_t i = 0; i < sizeof cd->uuid; i++) cd->has_uuid |= cd->uuid[i] != 0;
    char raw[BP_PCI_BUS_ID_LEN] = "";
    unsigned dom, bus, dev, fn;
    cd->pci_bus_id[0] = '\0';
    /* CUDA prints "0000:65:00.0" or "00000000:65:00.0" by version; one
     * canonical spelling lets the host compare it with Vulkan's. */
    if (cudaDeviceGetPCIBusId(raw, (int)sizeof raw, cd->id) == cudaSuccess &&
        sscanf(raw, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
        snprintf(cd->pci_bus_id, sizeof cd->pci_bus_id, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    else
        (void)cudaGetLastError();
}

bp_status cuda_device_identity(struct bp_device *dev, struct bp_device_identity *out)
{
    if (!dev || !dev->context || !out || out->size < sizeof out->size)
        return BP_ERR_INVALID_ARGUMENT;
    const struct cuda_device *cd = dev->context;
    if (BP_IFACE_HAS(out, has_uuid)) out->has_uuid = cd->has_uuid;
    if (BP_IFACE_HAS(out, uuid)) memcpy(out->uuid, cd->uuid, sizeof out->uuid);
    if (BP_IFACE_HAS(out, pci_bus_id))
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", cd->pci_bus_id);
    if (BP_IFACE_HAS(out, software)) out->software = false;
    if (BP_IFACE_HAS(out, cpu_package)) out->cpu_package = -1;
    if (BP_IFACE_HAS(out, numa_node)) out->numa_node = -1;
    return BP_OK;
}
