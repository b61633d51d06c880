/* plugin.c — the mpi plugin's entry, registry and proc-address table. It
 * lists no devices of its own: slot devices are made on request
 * (bp_dist_devices), and MPI is initialised only when a process asks for
 * the group (bp_dist_init), so loading the plugin costs nothing. */
#include <string.h>

#include "mpi_internal.h"

const struct bp_host_services *dist_host;

static const char *reg_get_name(struct bp_registry *reg) { (void)reg; return DIST_NAME; }
static size_t reg_get_device_count(struct bp_registry *reg) { (void)reg; return 0; }
static struct bp_device *reg_get_device(struct bp_registry *reg, size_t i) { (void)reg, (void)i; return NULL; }

static const struct bp_feature *reg_get_features(struct bp_registry *reg)
{
    (void)reg;
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    static struct bp_feature f[] = { { "mpi_library", version }, { NULL, NULL } };
    int len = 0;
    if (!version[0]) MPI_Get_library_version(version, &len);
    /* Open MPI's string runs on with build details after the first line. */
    version[strcspn(version, "\n,")] = '\0';
    return f;
}

static void *reg_get_proc_address(struct bp_registry *reg, const char *name)
{
    (void)reg;
    if (!name) return NULL;
    static const struct { const char *name; void *fn; } procs[] = {
        { BP_PROC_DIST_INIT, (void *)(bp_dist_init_fn)dist_init },
        { BP_PROC_DIST_INFO, (void *)(bp_dist_info_fn)dist_info },
        { BP_PROC_DIST_BCAST, (void *)(bp_dist_bcast_fn)dist_bcast },
        { BP_PROC_DIST_ALLREDUCE_F32, (void *)(bp_dist_allreduce_f32_fn)dist_allreduce_f32 },
        { BP_PROC_DIST_RAW_ALLREDUCE_F32, (void *)(bp_dist_raw_allreduce_f32_fn)dist_raw_allreduce_f32 },
        { BP_PROC_DIST_AGREE, (void *)(bp_dist_agree_fn)dist_agree },
        { BP_PROC_DIST_SET_STEP, (void *)(bp_dist_set_step_fn)dist_set_step },
        { BP_PROC_DIST_DEVICES, (void *)(bp_dist_devices_fn)dist_devices },
        { BP_PROC_DIST_COMM_PATH, (void *)(bp_dist_comm_path_fn)dist_comm_path },
        { BP_PROC_COMM_INIT, (void *)(bp_comm_init_fn)dist_comm_init },
        { BP_PROC_COMM_ALLREDUCE_TENSOR, (void *)(bp_comm_allreduce_tensor_fn)dist_comm_allreduce_tensor },
        { BP_PROC_COMM_FREE, (void *)(bp_comm_free_fn)dist_comm_free },
        { BP_PROC_GET_FEATURES, (void *)(bp_get_features_fn)reg_get_features },
        { BP_PROC_WEIGHT_BUFFER_TYPE, (void *)(bp_weight_buffer_type_fn)dist_slot_weight_buffer_type },
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
        if (!strcmp(procs[i].name, name)) return procs[i].fn;
    return NULL;
}

static void reg_shutdown(struct bp_registry *reg)
{
    (void)reg;
    dist_finalize();
    dist_slots_free_all();
}

static const struct bp_registry_iface dist_registry_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_get_name,
    .get_device_count = reg_get_device_count,
    .get_device = reg_get_device,
    .get_proc_address = reg_get_proc_address,
    .shutdown = reg_shutdown,
};

struct bp_registry dist_registry = {
    .iface = &dist_registry_iface,
    .abi_version = BP_ABI_VERSION,
};

static bp_status dist_plugin_init(const struct bp_host_services *host, struct bp_registry **out)
{
    const bp_status st = bp_plugin_check_host(host, DIST_NAME, out);
    if (st != BP_OK) return st;
    if (!BP_IFACE_HAS(host, get_env) || !host->get_env) return BP_ERR_INVALID_ARGUMENT;
    dist_host = host;
    *out = &dist_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(dist_plugin_init)
