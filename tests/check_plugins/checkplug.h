/*
 * checkplug.h — the skeleton shared by the deliberately broken plugins that
 * prove `backplane check` catches broken devices. Each plugin supplies one
 * device description (which nodes it takes and how it computes one node)
 * and BP_PLUGIN_DEFINE(checkplug_init); everything else — registry, device,
 * a synchronous backend — lives in checkplug.c, and the memory is the
 * host's buffer type (bp_host_helpers.h).
 */
#ifndef BP_CHECKPLUG_H
#define BP_CHECKPLUG_H

#include <backplane/bp_abi.h>

struct checkplug_def {
    const char *family;       /* also the device name */
    const char *description;
    bool (*supports)(const struct bp_tensor *node);
    /* Computes one non-view node; tensors' data are host addresses. */
    bp_status (*compute)(struct bp_tensor *node);
};

/* Defined by each plugin. */
extern const struct checkplug_def checkplug;

bp_status checkplug_init(const struct bp_host_services *host, struct bp_registry **out);

/* Element i (logical row-major order) of a tensor, read as f32 through its strides. */
float checkplug_get(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
/* Byte address of element (i0..i3) through the strides. */
void *checkplug_at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

#endif /* BP_CHECKPLUG_H */
