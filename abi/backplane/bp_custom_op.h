/*
 * bp_custom_op.h — vendor-defined ops (BP_OP_CUSTOM, ABI 1.1): reading the
 * name and parameters a node carries, and what a plugin publishes so that
 * `backplane check` can test its custom ops against a reference.
 *
 * The route, end to end:
 *   - the application builds the node with bp_custom(ctx, "acme.fused_thing",
 *     srcs, n_src, params, n_params, type, n_dims, ne) (backplane.h), stating
 *     the result's type and shape;
 *   - every device is asked supports_op as for any op; a device that knows
 *     the name (bp_custom_op_is) and accepts the sources says true, every
 *     other declines (the shipped cpu, vulkan and cuda plugins decline all
 *     custom ops; meta declines them too: it has no rule to split one);
 *   - a plugin lists its custom ops through its registry's proc
 *     BP_PROC_CUSTOM_OPS, each with a reference implementation and the input
 *     shapes to test, and `backplane check --device <it>` runs every listed
 *     case on the device and compares it with the reference like any case.
 *
 * Header-only; the layout constants live with the op in bp_ops.h.
 */
#ifndef BP_CUSTOM_OP_H
#define BP_CUSTOM_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bp_ops.h"
#include "bp_plugin.h"
#include "bp_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

static_assert(BP_CUSTOM_NAME_MAX == BP_CUSTOM_PARAM_FIRST * 4 &&
              BP_CUSTOM_PARAM_FIRST + BP_CUSTOM_MAX_PARAMS == BP_MAX_OP_PARAMS,
              "the BP_OP_CUSTOM op-param layout fills op_params exactly");

/* True for a well-formed custom-op name: "<vendor>.<op>", shorter than
 * BP_CUSTOM_NAME_MAX bytes, of lower-case letters, digits, '_' and '.',
 * containing a '.' and neither starting nor ending with one. */
static inline bool bp_custom_op_name_valid(const char *name)
{
    if (!name) return false;
    size_t n = 0;
    for (; name[n]; n++) {
        const char c = name[n];
        if (n + 1 >= BP_CUSTOM_NAME_MAX) return false;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    }
    return n >= 3 && name[0] != '.' && name[n - 1] != '.' && strchr(name, '.') != NULL;
}

/* The name a CUSTOM node carries, or NULL when t is not a CUSTOM node or its
 * name field is not NUL-terminated (a node to decline). Points into t. */
static inline const char *bp_custom_op_name(const struct bp_tensor *t)
{
    if (!t || t->op != BP_OP_CUSTOM) return NULL;
    const char *name = (const char *)t->op_params;
    return memchr(name, '\0', BP_CUSTOM_NAME_MAX) ? name : NULL;
}

/* True when t is a CUSTOM node named `name`: the first test of a device's
 * supports_op for its own custom ops. */
static inline bool bp_custom_op_is(const struct bp_tensor *t, const char *name)
{
    const char *n = bp_custom_op_name(t);
    return n && name && strcmp(n, name) == 0;
}

/* The op's own parameter word i (0 <= i < BP_CUSTOM_MAX_PARAMS), as an
 * integer or as a float stored bit-for-bit. */
static inline int32_t bp_custom_op_param_i32(const struct bp_tensor *t, int i)
{
    return t->op_params[BP_CUSTOM_PARAM_FIRST + i];
}

static inline float bp_custom_op_param_f32(const struct bp_tensor *t, int i)
{
    return bp_op_param_f32(t, BP_CUSTOM_PARAM_FIRST + i);
}

/* ---- what a plugin publishes for `backplane check` ---- */

/* One input set on which check runs a custom op: sources of the given types
 * (F32, F16 or BF16; filled with values uniform in [-1, 1)) and shapes,
 * contiguous; the result's type and shape; the op's parameters; and the
 * largest normalised mean squared error against the reference that passes.
 * Layout frozen for ABI major 1. */
struct bp_custom_op_case {
    int32_t n_src;                             /* 0..BP_MAX_SRC */
    int32_t src_type[BP_MAX_SRC];              /* enum bp_type */
    int64_t src_ne[BP_MAX_SRC][BP_MAX_DIMS];   /* unused dims 1 */
    int32_t type;                              /* the result's enum bp_type */
    int64_t ne[BP_MAX_DIMS];
    int32_t n_params;                          /* 0..BP_CUSTOM_MAX_PARAMS */
    int32_t params[BP_CUSTOM_MAX_PARAMS];
    double  max_nmse;                          /* e.g. 1e-6 for f32 results */
};

/* Computes the CUSTOM node on the host: node->data and every source's data
 * are host memory, contiguous, of the case's types. Any thread; returns
 * BP_OK or a status after logging one sentence. Owned by the plugin. */
typedef bp_status (*bp_custom_op_reference_fn)(struct bp_tensor *node);

struct bp_custom_op_info {
    size_t size;                               /* sizeof as the plugin compiled it */
    const char *name;                          /* "<vendor>.<op>" */
    const char *description;                   /* one line, may be NULL */
    bp_custom_op_reference_fn reference;       /* NULL: check reports the op untested */
    const struct bp_custom_op_case *cases;     /* n_cases entries */
    size_t n_cases;
};

/* The custom ops of this registry's devices, as an array of *n pointers to
 * descriptions in the plugin's static storage (each device still answers
 * per node in supports_op). Registry proc; NULL when the plugin has none. */
#define BP_PROC_CUSTOM_OPS "bp_custom_ops"
typedef const struct bp_custom_op_info *const *(*bp_custom_ops_fn)(struct bp_registry *reg,
                                                                    size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* BP_CUSTOM_OP_H */
