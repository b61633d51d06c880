/* ops_custom.c — BP_OP_CUSTOM, the vendor-defined op (bp_ops.h,
 * bp_custom_op.h): the host checks the node's form (name, source count,
 * parameter count, result shape); the meaning is the op's vendor's. */
#include <stdio.h>
#include <string.h>

#include "tensor_internal.h"

struct bp_tensor *bp_custom(struct bp_context *ctx, const char *name, struct bp_tensor *const *srcs,
                            int n_src, const int32_t *params, int n_params, enum bp_type type,
                            int n_dims, const int64_t *ne)
{
    const enum bp_op op = BP_OP_CUSTOM;
    if (!bp__op_ctx_ok(ctx, op)) return NULL;
    if (!bp_custom_op_name_valid(name))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "the name '%.*s' is not a custom-op name; use \"<vendor>.<op>\" of "
                           "lower-case letters, digits, '_' and '.', shorter than %d bytes.",
                           name ? 64 : 6, name ? name : "(null)", BP_CUSTOM_NAME_MAX);
    if (n_src < 0 || n_src > BP_MAX_SRC || (n_src > 0 && !srcs))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "%s: %d sources%s; pass 0 to %d sources in srcs.", name, n_src,
                           n_src > 0 && !srcs ? " but srcs is NULL" : "", BP_MAX_SRC);
    /* A NULL source is an earlier constructor's failure: return NULL as
     * every constructor does, the context keeps that error. */
    for (int i = 0; i < n_src; i++)
        if (!srcs[i]) return NULL;
    if (n_params < 0 || n_params > BP_CUSTOM_MAX_PARAMS || (n_params > 0 && !params))
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "%s: %d parameter words%s; pass 0 to %d words in params.", name,
                           n_params, n_params > 0 && !params ? " but params is NULL" : "",
                           BP_CUSTOM_MAX_PARAMS);
    if (n_dims < 1 || n_dims > BP_MAX_DIMS || !ne)
        return bp__op_fail(ctx, op, BP_ERR_INVALID_ARGUMENT,
                           "%s: the result has %d dimensions%s; give 1 to %d sizes in ne.", name,
                           n_dims, ne ? "" : " and ne is NULL", BP_MAX_DIMS);
    int64_t full[BP_MAX_DIMS] = {1, 1, 1, 1};
    memcpy(full, ne, (size_t)n_dims * sizeof *ne);
    struct bp_tensor *s[BP_MAX_SRC] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < n_src; i++) s[i] = srcs[i];
    struct bp_tensor *t = bp__op_result(ctx, op, type, full, s[0], s[1], s[2], s[3]);
    if (!t) return NULL;
    /* The name field is zero-padded: two nodes of one op compare equal word by word. */
    memset(t->op_params, 0, sizeof t->op_params);
    memcpy(t->op_params, name, strlen(name));
    if (n_params > 0)
        memcpy(&t->op_params[BP_CUSTOM_PARAM_FIRST], params, (size_t)n_params * sizeof *params);
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}
