/*
 * bp_host_helpers.h — boilerplate the host writes once so that a plugin need
 * not (ABI 1.1): a ready host-memory buffer type and a strided element
 * accessor. A plugin reaches them by name through host->get_proc_address,
 * so it still never links libbackplane; a 1.0 host answers NULL.
 *
 * A device that computes on host memory needs only its kernels, supports_op
 * and the registry/device/backend tables: examples/plugin/example_plugin.c
 * is such a device in about a hundred lines.
 */
#ifndef BP_HOST_HELPERS_H
#define BP_HOST_HELPERS_H

#include <stdbool.h>
#include <stdint.h>

#include "bp_plugin.h"
#include "bp_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Alignment of every tensor offset and buffer base of the host buffer type. */
#define BP_HOST_BUFFER_ALIGNMENT 64

/* Makes *buft a buffer type of plain host memory that belongs to dev:
 * BP_HOST_BUFFER_ALIGNMENT-aligned buffers with set/get/clear, copy_tensor
 * from any host buffer (anything else the host stages), is_host true, name
 * "host-memory". The host fills iface, device and context; its tables live
 * as long as libbackplane. buft is the plugin's storage and must outlive
 * every buffer allocated from it (static storage is the usual choice).
 * Thread-safe. BP_ERR_INVALID_ARGUMENT (logged) when buft or dev is NULL. */
#define BP_HOST_PROC_HOST_BUFFER_TYPE_INIT "bp_host_buffer_type_init"
typedef bp_status (*bp_host_buffer_type_init_fn)(struct bp_buffer_type *buft,
                                                  struct bp_device *dev);

/* Element (i0, i1, i2, i3) of tensor t, an F32, F16 or BF16 view in host
 * memory (t->data dereferenceable), read through its strides as a float.
 * Each index is taken modulo ne[d] (negative ones too), which is the ADD/MUL
 * broadcast of bp_ops.h: a repeating source reads with the result's indices
 * and no index reaches outside the view. Any other type, or an empty
 * dimension, reads NaN: check types in supports_op. Thread-safe. */
#define BP_HOST_PROC_ELEMENT_GET_F32 "bp_element_get_f32"
typedef float (*bp_element_get_f32_fn)(const struct bp_tensor *t, int64_t i0, int64_t i1,
                                       int64_t i2, int64_t i3);

/* Writes v to element (i0, i1, i2, i3) of t, indices as in get, rounded to
 * nearest-even for F16/BF16. Any other type, or an empty dimension, writes
 * nothing. Thread-safe for distinct elements. */
#define BP_HOST_PROC_ELEMENT_SET_F32 "bp_element_set_f32"
typedef void (*bp_element_set_f32_fn)(struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                      int64_t i3, float v);

/* All three, looked up at once. */
struct bp_host_helpers {
    bp_host_buffer_type_init_fn buffer_type_init;
    bp_element_get_f32_fn get;
    bp_element_set_f32_fn set;
};

/* Fills *h from the host table; false, with one logged sentence naming the
 * missing helper, when the host is older than 1.1 (every field is then NULL).
 * `family` is the plugin's name for the log. Call it from init, after
 * bp_plugin_check_host. */
static inline bool bp_host_helpers_get(const struct bp_host_services *host, const char *family,
                                       struct bp_host_helpers *h)
{
    static const char *const names[] = {BP_HOST_PROC_HOST_BUFFER_TYPE_INIT,
                                        BP_HOST_PROC_ELEMENT_GET_F32,
                                        BP_HOST_PROC_ELEMENT_SET_F32};
    void *fns[3] = {NULL, NULL, NULL};
    const bool can_ask = BP_IFACE_HAS(host, get_proc_address) && host->get_proc_address;
    h->buffer_type_init = NULL;
    h->get = NULL;
    h->set = NULL;
    for (int i = 0; i < 3; i++) {
        fns[i] = can_ask ? host->get_proc_address(names[i]) : NULL;
        if (!fns[i]) {
            if (BP_IFACE_HAS(host, log) && host->log)
                host->log(BP_LOG_ERROR, family,
                          "the host (ABI %u.%u) does not offer '%s' (ABI 1.1 host helpers); "
                          "upgrade libbackplane.",
                          (unsigned)BP_ABI_VERSION_MAJOR(host->abi_version),
                          (unsigned)BP_ABI_VERSION_MINOR(host->abi_version), names[i]);
            return false;
        }
    }
    h->buffer_type_init = (bp_host_buffer_type_init_fn)fns[0];
    h->get = (bp_element_get_f32_fn)fns[1];
    h->set = (bp_element_set_f32_fn)fns[2];
    return true;
}

#ifdef __cplusplus
}
#endif
#endif /* BP_HOST_HELPERS_H */
