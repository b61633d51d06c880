/*
 * bp_tensor.h — the tensor and graph structs shared by host and plugins.
 *
 * Layout is fixed for an ABI major version: plugins read these structs
 * directly and the meta plugin allocates its own. Fields are never inserted,
 * reordered or resized; `reserved` bytes are zero and may gain meaning in a
 * minor version (a plugin built against an older minor ignores them).
 *
 * Ownership: tensors belong to a host context (or to the plugin that made
 * them); plugins may write only `extra` of a tensor allocated in their own
 * buffer, and `data` during init_tensor.
 */
#ifndef BP_TENSOR_H
#define BP_TENSOR_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "bp_ops.h"
#include "bp_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BP_MAX_DIMS      4
#define BP_MAX_SRC       4
#define BP_MAX_OP_PARAMS 16   /* 32-bit words */
#define BP_MAX_NAME      64

struct bp_buffer;

/* bp_tensor.flags */
#define BP_TENSOR_FLAG_INPUT  (1u << 0)  /* set by the application before compute */
#define BP_TENSOR_FLAG_OUTPUT (1u << 1)  /* read by the application after compute */
#define BP_TENSOR_FLAG_PARAM  (1u << 2)  /* a weight: written once, read many times */

struct bp_tensor {
    int32_t type;                      /* enum bp_type */
    int32_t op;                        /* enum bp_op; BP_OP_NONE for leaves */
    int64_t ne[BP_MAX_DIMS];           /* elements per dimension, unused dims are 1 */
    size_t  nb[BP_MAX_DIMS];           /* byte stride per dimension; nb[0] = type size */
    int32_t op_params[BP_MAX_OP_PARAMS];
    uint32_t flags;                    /* BP_TENSOR_FLAG_* */
    int32_t  reserved0;
    struct bp_tensor *src[BP_MAX_SRC]; /* inputs, NULL when absent */
    struct bp_tensor *view_src;        /* the tensor whose memory this one aliases */
    size_t   view_offs;                /* byte offset into view_src */
    void    *data;                     /* address in the buffer's address space */
    struct bp_buffer *buffer;          /* owning buffer; NULL until allocated */
    void    *extra;                    /* the owning plugin's private slot */
    char     name[BP_MAX_NAME];
    uint8_t  reserved[64];
};

static_assert(BP_MAX_DIMS == 4 && BP_MAX_SRC == 4 && BP_MAX_OP_PARAMS == 16 && BP_MAX_NAME == 64,
              "bp_tensor layout constants are frozen");
static_assert(offsetof(struct bp_tensor, ne) == 8, "bp_tensor layout is frozen");

/* A computation: nodes in an order where every node comes after its sources.
 * Leaves (op NONE) are not listed in nodes. The graph does not own tensors. */
struct bp_graph {
    int32_t n_nodes;
    int32_t capacity;
    struct bp_tensor **nodes;
    void   *reserved[4];
};

/* ---- pure helpers ---- */

static inline int64_t bp_nelements(const struct bp_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static inline int64_t bp_nrows(const struct bp_tensor *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Bytes spanned by the tensor's elements given its strides (0 if empty). */
static inline size_t bp_nbytes(const struct bp_tensor *t)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] <= 0) return 0;
    size_t bs = (size_t)bp_type_block_size((enum bp_type)t->type);
    size_t n = bp_type_size((enum bp_type)t->type);
    n += (size_t)(t->ne[0] / (int64_t)bs - 1) * t->nb[0];
    for (int i = 1; i < BP_MAX_DIMS; i++)
        n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

/* True when the elements are packed in row-major order with no gaps. */
static inline int bp_is_contiguous(const struct bp_tensor *t)
{
    size_t expect = bp_type_size((enum bp_type)t->type);
    if (t->nb[0] != expect) return 0;
    expect = expect * (size_t)(t->ne[0] / bp_type_block_size((enum bp_type)t->type));
    for (int i = 1; i < BP_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return 0;
        expect *= (size_t)t->ne[i];
    }
    return 1;
}

/* True when each row (dim 0) is packed, whatever the outer strides. */
static inline int bp_rows_contiguous(const struct bp_tensor *t)
{
    return t->nb[0] == bp_type_size((enum bp_type)t->type);
}

static inline float bp_op_param_f32(const struct bp_tensor *t, int i)
{
    float f;
    memcpy(&f, &t->op_params[i], sizeof f);
    return f;
}

static inline int32_t bp_op_param_i32(const struct bp_tensor *t, int i)
{
    return t->op_params[i];
}

#ifdef __cplusplus
}
#endif
#endif /* BP_TENSOR_H */
