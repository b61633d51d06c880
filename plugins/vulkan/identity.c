/* identity.c — BP_PROC_DEVICE_IDENTITY for Vulkan devices: the driver's
 * device UUID (core 1.1), the PCI address when VK_EXT_pci_bus_info is
 * offered, and VK_PHYSICAL_DEVICE_TYPE_CPU as "software" (lavapipe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static bool has_extension(const struct vk_fns *f, VkPhysicalDevice phys, const char *name)
{
    uint32_t n = 0;
    if (f->vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext) return false;
    bool found = false;
    if (f->vkEnumerateDeviceExtensionProperties(phys, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

void vk_identity_probe(const struct vk_fns *f, struct vk_dev *d)
{
    VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT };
    VkPhysicalDeviceIDProperties id = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES };
    bool with_pci = has_extension(f, d->phys, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
    if (with_pci) id.pNext = &pci;
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &id };
    f->vkGetPhysicalDeviceProperties2(d->phys, &p2);
    memcpy(d->uuid, id.deviceUUID, sizeof d->uuid);
    /* A driver that does not know leaves zeros: no identity beats a shared one. */
    d->has_uuid = false;
    for (size_t i = 0; i < sizeof d->uuid; i++) d->has_uuid |= d->uuid[i] != 0;
    d->pci_bus_id[0] = '\0';
    if (with_pci)
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%04x:%02x:%02x.%x",
                 (unsigned)pci.pciDomain, (unsigned)pci.pciBus, (unsigned)pci.pciDevice,
                 (unsigned)pci.pciFunction);
    d->software = p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

bp_status vk_device_identity(struct bp_device *dev, struct bp_device_identity *out)
{
    if (!dev || !out || dev->iface != &vk_device_iface || out->size < sizeof out->size)
        return BP_ERR_INVALID_ARGUMENT;
    const struct vk_dev *d = vk_dev_of(dev);
    if (BP_IFACE_HAS(out, has_uuid)) out->has_uuid = d->has_uuid;
    if (BP_IFACE_HAS(out, uuid)) memcpy(out->uuid, d->uuid, sizeof out->uuid);
    if (BP_IFACE_HAS(out, pci_bus_id))
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", d->pci_bus_id);
    if (BP_IFACE_HAS(out, software)) out->software = d->software;
    if (BP_IFACE_HAS(out, cpu_package)) out->cpu_package = -1;
    if (BP_IFACE_HAS(out, numa_node)) out->numa_node = -1;
    return BP_OK;
}
