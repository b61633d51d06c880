/*
 * quantprobe.c — a plugin with no devices whose only job is to show what a
 * plugin sees through the host-services table: its registry's proc address
 * "quantprobe_host_quantize" / "..._dequantize" returns what
 * host->get_proc_address(BP_HOST_PROC_QUANTIZE / _DEQUANTIZE) gave it at init.
 */
#include <string.h>

#include <backplane/bp_abi.h>

static void *host_quantize, *host_dequantize;

static const char *get_name(struct bp_registry *reg)
{
    (void)reg;
    return "quantprobe";
}

static size_t get_device_count(struct bp_registry *reg)
{
    (void)reg;
    return 0;
}

static struct bp_device *get_device(struct bp_registry *reg, size_t index)
{
    (void)reg;
    (void)index;
    return NULL;
}

static void *get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (name && !strcmp(name, "quantprobe_host_quantize")) return host_quantize;
    if (name && !strcmp(name, "quantprobe_host_dequantize")) return host_dequantize;
    return NULL;
}

static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = get_name,
    .get_device_count = get_device_count,
    .get_device = get_device,
    .get_proc_address = get_proc_address,
};

static struct bp_registry registry = {.iface = &reg_iface, .abi_version = BP_ABI_VERSION};

static bp_status quantprobe_init(const struct bp_host_services *host, struct bp_registry **out)
{
    host_quantize = host->get_proc_address(BP_HOST_PROC_QUANTIZE);
    host_dequantize = host->get_proc_address(BP_HOST_PROC_DEQUANTIZE);
    *out = &registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(quantprobe_init)
