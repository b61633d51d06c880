/*
 * bp_status.h — status codes returned by every fallible call, host and plugin.
 *
 * ABI: values are frozen. New codes are appended before BP_STATUS_COUNT and
 * recorded in abi/CHANGELOG.md. A caller that sees a code it does not know
 * treats it as a generic failure.
 */
#ifndef BP_STATUS_H
#define BP_STATUS_H

#include <assert.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bp_status {
    BP_OK                  = 0,
    BP_ERR_INVALID_ARGUMENT = 1,  /* a NULL, out-of-range or inconsistent argument */
    BP_ERR_UNSUPPORTED     = 2,  /* the device/plugin declines this op, type or feature */
    BP_ERR_OUT_OF_MEMORY   = 3,  /* host or device allocation failed */
    BP_ERR_DEVICE_LOST     = 4,  /* the device stopped answering; recreate the backend */
    BP_ERR_SHAPE           = 5,  /* tensor shapes do not fit the op */
    BP_ERR_NOT_FOUND       = 6,  /* no such device, plugin, tensor or symbol */
    BP_ERR_IO              = 7,  /* reading or writing a file failed */
    BP_ERR_ABI             = 8,  /* plugin and host ABI versions are incompatible */
    BP_ERR_PLUGIN          = 9,  /* a plugin failed to load or initialise */
    BP_ERR_TIMEOUT         = 10, /* an operation did not finish within its limit */
    BP_ERR_INTERNAL        = 11, /* a bug: an invariant did not hold */
    BP_STATUS_COUNT
} bp_status;

static_assert(BP_ERR_INTERNAL == 11, "bp_status values are frozen");

/* Short stable name of a status ("BP_ERR_SHAPE"); never NULL. */
static inline const char *bp_status_name(bp_status s)
{
    switch (s) {
    case BP_OK: return "BP_OK";
    case BP_ERR_INVALID_ARGUMENT: return "BP_ERR_INVALID_ARGUMENT";
    case BP_ERR_UNSUPPORTED: return "BP_ERR_UNSUPPORTED";
    case BP_ERR_OUT_OF_MEMORY: return "BP_ERR_OUT_OF_MEMORY";
    case BP_ERR_DEVICE_LOST: return "BP_ERR_DEVICE_LOST";
    case BP_ERR_SHAPE: return "BP_ERR_SHAPE";
    case BP_ERR_NOT_FOUND: return "BP_ERR_NOT_FOUND";
    case BP_ERR_IO: return "BP_ERR_IO";
    case BP_ERR_ABI: return "BP_ERR_ABI";
    case BP_ERR_PLUGIN: return "BP_ERR_PLUGIN";
    case BP_ERR_TIMEOUT: return "BP_ERR_TIMEOUT";
    case BP_ERR_INTERNAL: return "BP_ERR_INTERNAL";
    default: return "BP_ERR_UNKNOWN";
    }
}

#ifdef __cplusplus
}
#endif
#endif /* BP_STATUS_H */
