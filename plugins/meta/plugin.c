/* plugin.c — the meta plugin's entry, registry and proc-address table. */
#include <stdio.h>
#include <string.h>

#include "meta_internal.h"

const struct bp_host_services *meta_host;

static const char *reg_get_name(struct bp_registry *reg) { (void)reg; return META_NAME; }
static size_t reg_get_device_count(struct bp_registry *reg) { (void)reg; return meta_device_count(); }
static struct bp_device *reg_get_device(struct bp_registry *reg, size_t i) { (void)reg; return meta_device_at(i); }

static const struct bp_feature *reg_get_features(struct bp_registry *reg)
{
    (void)reg;
    return meta_devices_features();
}

static void *reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (!name) return NULL;
    static const struct { const char *name; void *fn; } procs[] = {
        {BP_PROC_META_DEVICE_FROM_SPEC, (void *)(bp_meta_device_from_spec_fn)meta_device_from_spec},
        {BP_PROC_DEVICE_FROM_SPEC, (void *)(bp_device_from_spec_fn)meta_device_from_spec},
        {BP_PROC_META_DEVICE_NEW, (void *)(bp_meta_device_new_fn)meta_device_new},
        {BP_PROC_META_SET_SPLIT_FN, (void *)(bp_meta_set_split_fn_fn)meta_set_split_fn},
        {BP_PROC_META_TENSOR_SPLIT, (void *)(bp_meta_tensor_split_fn)meta_tensor_split_query},
        {BP_PROC_META_GET_STATS, (void *)(bp_meta_get_stats_fn)meta_get_stats},
        {BP_PROC_META_BUFFER_DEVICE_BYTES, (void *)(bp_meta_buffer_device_bytes_fn)meta_buffer_device_bytes},
        {BP_PROC_META_DEVICE_SUB_DEVICES, (void *)(bp_meta_device_sub_devices_fn)meta_device_sub_devices},
        {BP_PROC_META_TENSOR_GET_COPY, (void *)(bp_meta_tensor_get_copy_fn)meta_tensor_get_copy},
        {BP_PROC_META_MEASURE_TENSORS, (void *)(bp_meta_measure_tensors_fn)meta_measure_tensors},
        {BP_PROC_META_MEASURE_GRAPH, (void *)(bp_meta_measure_graph_fn)meta_measure_graph},
        {BP_PROC_GET_FEATURES, (void *)(bp_get_features_fn)reg_get_features},
        {BP_PROC_WEIGHT_BUFFER_TYPE, (void *)(bp_weight_buffer_type_fn)meta_weight_buffer_type},
        {BP_PROC_DEVICE_IDENTITY, (void *)(bp_device_identity_fn)meta_device_identity},
        {BP_PROC_META_ALLREDUCE_PROBE, (void *)(bp_meta_allreduce_probe_fn)meta_ar_probe},
        {BP_PROC_META_ALLREDUCE_CHOICE, (void *)(bp_meta_allreduce_choice_fn)meta_ar_choice},
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (!strcmp(procs[i].name, name)) return procs[i].fn;
    return NULL;
}

static void reg_shutdown(struct bp_registry *reg)
{
    (void)reg;
    meta_devices_free_all();
    meta_ar_sets_free_all();
}

static const struct bp_registry_iface meta_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_get_name,
    .get_device_count = reg_get_device_count,
    .get_device = reg_get_device,
    .get_proc_address = reg_get_proc_address,
    .shutdown = reg_shutdown,
};

struct bp_registry meta_registry = {
    .iface = &meta_registry_iface,
    .abi_version = BP_ABI_VERSION,
    .variant = NULL,
    .context = NULL,
};

static bp_status meta_init(const struct bp_host_services *host, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(host, META_NAME, out);
    if (st != BP_OK)
        return st;
    /* meta composes other plugins' devices: it needs the host's lookups. */
    if (!host->log || !BP_IFACE_HAS(host, device_by_name) || !host->device_by_name ||
        !BP_IFACE_HAS(host, get_env) || !host->get_env)
        return BP_ERR_INVALID_ARGUMENT;
    meta_host = host;
    /* A meta: entry in BACKPLANE_DEVICES becomes meta0 now, so that it is in
     * the device list (`backplane info meta0`); a bad spec is reported and
     * the plugin still loads. */
    const char *env = host->get_env("BACKPLANE_DEVICES");
    const char *m = env ? strstr(env, "meta:") : NULL;
    if (m) {
        struct bp_device *d = NULL;
        if (meta_device_from_spec(m, &d) != BP_OK)
            meta_log(BP_LOG_WARN, "BACKPLANE_DEVICES entry '%s' did not make a meta device; see the "
                     "message above.", m);
    }
    *out = &meta_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(meta_init)
BP_PLUGIN_DEFINE_COMPOSES()
