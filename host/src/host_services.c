/* host_services.c — the table of host functions handed to every plugin. */
#include <stdio.h>
#include <string.h>

#include "host_helpers.h"
#include "loader_internal.h"

#include <backplane/bp_quantize.h>

/* The last warning or error a plugin logged during its init, so that an INIT
 * failure record can say what the plugin itself said. Per thread: the probe
 * child and the loading thread each have their own. */
static _Thread_local bool capturing;
static _Thread_local char captured[512];

void bp__plugin_log_capture_begin(void)
{
    captured[0] = '\0';
    capturing = true;
}

const char *bp__plugin_log_capture_end(void)
{
    capturing = false;
    return captured;
}

__attribute__((format(printf, 3, 4)))
static void host_log(enum bp_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    if (capturing && level >= BP_LOG_WARN) {
        va_start(ap, fmt);
        vsnprintf(captured, sizeof captured, fmt, ap);
        va_end(ap);
    }
    va_start(ap, fmt);
    bp__vlog(level, who, fmt, ap);
    va_end(ap);
}

/* Services offered by name (each with its typedef in the ABI headers): the
 * reference conversions of bp_quant.h and the helpers of bp_host_helpers.h.
 * Add a row to offer another. */
static const struct {
    const char *name;
    void *fn;
} host_procs[] = {
    {BP_HOST_PROC_QUANTIZE, (void *)(bp_quantize_fn)bp_quantize},
    {BP_HOST_PROC_DEQUANTIZE, (void *)(bp_dequantize_fn)bp_dequantize},
    {BP_HOST_PROC_HOST_BUFFER_TYPE_INIT, (void *)(bp_host_buffer_type_init_fn)bp__host_buffer_type_init},
    {BP_HOST_PROC_ELEMENT_GET_F32, (void *)(bp_element_get_f32_fn)bp__element_get_f32},
    {BP_HOST_PROC_ELEMENT_SET_F32, (void *)(bp_element_set_f32_fn)bp__element_set_f32},
    {NULL, NULL},
};

static void *host_get_proc_address(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; host_procs[i].name; i++)
        if (!strcmp(host_procs[i].name, name)) return host_procs[i].fn;
    return NULL;
}

static const struct bp_host_services services = {
    .size = sizeof(struct bp_host_services),
    .abi_version = BP_ABI_VERSION,
    .log = host_log,
    .get_env = bp__getenv,
    .device_count = bp__devices_count_loaded,
    .device_get = bp__devices_get_loaded,
    .device_by_name = bp__devices_find_loaded,
    .get_proc_address = host_get_proc_address,
};

const struct bp_host_services *bp__host_services(void)
{
    return &services;
}
