/* host_helpers.h — the plugin helpers of bp_host_helpers.h, offered by name
 * in host_services.c. Not installed. */
#ifndef BP_HOST_HELPERS_INTERNAL_H
#define BP_HOST_HELPERS_INTERNAL_H

#include "internal.h"

#include <backplane/bp_host_helpers.h>

BP_HIDDEN bp_status bp__host_buffer_type_init(struct bp_buffer_type *buft, struct bp_device *dev);
BP_HIDDEN float bp__element_get_f32(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                    int64_t i3);
BP_HIDDEN void bp__element_set_f32(struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                   int64_t i3, float v);

#endif
