/*
 * tensor_internal.h — what the context, tensor, op, allocation, graph and
 * backend files of libbackplane share. Nothing here is installed.
 */
#ifndef BP_HOST_TENSOR_INTERNAL_H
#define BP_HOST_TENSOR_INTERNAL_H

#include <stdbool.h>

#include "internal.h"

/* context.c — a zeroed tensor slot of ctx, or NULL (and ctx marked failed)
 * when the context is full. */
BP_HIDDEN struct bp_tensor *bp__context_new_tensor(struct bp_context *ctx, const char *what);
/* Set the last error and, if ctx has none yet, its sticky error. Returns status. */
BP_HIDDEN bp_status bp__context_fail(struct bp_context *ctx, bp_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The live context whose tensor t is, or NULL (a tensor made elsewhere). */
BP_HIDDEN struct bp_context *bp__context_of(const struct bp_tensor *t);
/* The sentence of the context's sticky error ("" when none). */
BP_HIDDEN const char *bp__context_error(const struct bp_context *ctx);

/* tensor.c */
/* A new contiguous leaf tensor in ctx after validating type and shape; on
 * failure NULL, with the error (prefixed by `what`) set on ctx. */
BP_HIDDEN struct bp_tensor *bp__tensor_make(struct bp_context *ctx, const char *what,
                                            enum bp_type type, const int64_t ne[4]);
/* Row-major strides for a packed tensor; false when they overflow size_t. */
BP_HIDDEN bool bp__contiguous_strides(enum bp_type type, const int64_t ne[4], size_t nb[4]);
/* True when the tensor has memory (its buffer is set). */
BP_HIDDEN bool bp__tensor_allocated(const struct bp_tensor *t);
/* "'name' [a, b, c, d]" (or "(unnamed) [..]") into buf; returns buf. */
BP_HIDDEN const char *bp__tensor_describe(const struct bp_tensor *t, char *buf, size_t cap);
/* "'name'" or "(unnamed)" into buf; returns buf. */
BP_HIDDEN const char *bp__tensor_label(const struct bp_tensor *t, char *buf, size_t cap);
/* Give a view whose source has memory its data and buffer, and run the
 * buffer's init_tensor. No-op (BP_OK) when t is not a view, already has
 * memory, or its source has none yet. */
BP_HIDDEN bp_status bp__view_resolve(struct bp_tensor *t);
/* alloc.c — offsets that reuse memory along g (as bp_context_alloc_graph
 * lays out a context) for ts[0..n) of sizes[i] bytes (aligned by the
 * caller): a tensor a node of g computes lives from that node to its last
 * reader (of it or a view of it); leaves and OUTPUT nodes live throughout.
 * offs[i] and the arena's size *total; BP_ERR_OUT_OF_MEMORY, set. */
BP_HIDDEN bp_status bp__graph_offsets(struct bp_tensor *const *ts, const size_t *sizes, size_t n,
                                      const struct bp_graph *g, size_t *offs, size_t *total);
/* Bytes from t's start to the end of its last element, with overflow
 * checks: false when the shape's byte span does not fit in size_t. */
BP_HIDDEN bool bp__span_bytes(enum bp_type type, const int64_t ne[4], const size_t nb[4],
                              size_t *out);

/* ops.c — helpers shared by the op constructors (ops_*.c). Every failing
 * helper sets the last error and the context's sticky error and returns
 * NULL, so a constructor can `return bp__op_fail(...)`. */
typedef char bp__operand_buf[BP_MAX_NAME + 112];
/* "role 'name' [a, b, c, d]" into buf; returns buf. */
BP_HIDDEN const char *bp__operand(const char *role, const struct bp_tensor *t, bp__operand_buf buf);
/* "<OP>: <sentence>" */
BP_HIDDEN struct bp_tensor *bp__op_fail(struct bp_context *ctx, enum bp_op op, bp_status status,
                                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "<OP>: <ra a> and <rb b> <sentence>" — a shape disagreement (BP_ERR_SHAPE). */
BP_HIDDEN struct bp_tensor *bp__op_mismatch(struct bp_context *ctx, enum bp_op op, const char *ra,
                                            const struct bp_tensor *a, const char *rb,
                                            const struct bp_tensor *b, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* "<OP>: <role t> is <type>; it must be <want>." (BP_ERR_INVALID_ARGUMENT) */
BP_HIDDEN struct bp_tensor *bp__op_type_fail(struct bp_context *ctx, enum bp_op op, const char *role,
                                             const struct bp_tensor *t, const char *want);
/* False (with the last error set) when ctx is NULL. */
BP_HIDDEN bool bp__op_ctx_ok(struct bp_context *ctx, enum bp_op op);
/* A new contiguous result of the op with sources s0..s3 (NULL when absent). */
BP_HIDDEN struct bp_tensor *bp__op_result(struct bp_context *ctx, enum bp_op op, enum bp_type type,
                                          const int64_t ne[4], struct bp_tensor *s0,
                                          struct bp_tensor *s1, struct bp_tensor *s2,
                                          struct bp_tensor *s3);
/* A new result that aliases base's memory at base + offs with the given
 * shape and strides (view_src flattened to the owner of the memory). */
BP_HIDDEN struct bp_tensor *bp__op_view(struct bp_context *ctx, enum bp_op op, struct bp_tensor *base,
                                        const int64_t ne[4], const size_t nb[4], size_t offs,
                                        struct bp_tensor *s0, struct bp_tensor *s1,
                                        struct bp_tensor *s2);
/* F32, F16 or BF16: the "F" of bp_ops.h (devices narrow it in supports_op). */
BP_HIDDEN bool bp__is_float(const struct bp_tensor *t);
/* big % small == 0, with 0 repeating only over 0. */
BP_HIDDEN bool bp__repeats(int64_t big, int64_t small);
/* Byte alignment that keeps elements of a type aligned (2 or 4). */
BP_HIDDEN size_t bp__type_align(enum bp_type type);

/* buffer.c */
BP_HIDDEN const char *bp__buft_name(struct bp_buffer_type *buft);
BP_HIDDEN const char *bp__buffer_name(struct bp_buffer *buf);
/* An object of kind ("buffer", "backend") that maker (a "buffer type" or
 * "device" named name, of plugin family) made with a table that fails its
 * check p: logs the problem and returns BP_ERR_PLUGIN with one sentence.
 * The caller gives the object back first when its table reaches free. */
BP_HIDDEN bp_status bp__refuse_made(const char *maker, const char *name, const char *family, const char *kind,
                                    struct bp_iface_problem p);
/* The write (set_tensor, data read) or read (get_tensor, data written) of
 * size bytes at offset of t, or of buf's raw bytes when t is NULL, for the
 * entry point what, whose checks have passed; a failure is one sentence. */
BP_HIDDEN bp_status bp__buffer_io(const char *what, struct bp_buffer *buf, const struct bp_tensor *t, void *data,
                                  size_t offset, size_t size, bool write);

#endif /* BP_HOST_TENSOR_INTERNAL_H */
