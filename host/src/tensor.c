/* tensor.c — leaf tensors, names, and reading/writing tensor bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tensor_internal.h"

bool bp__span_bytes(enum bp_type type, const int64_t ne[4], const size_t nb[4], size_t *out)
{
    *out = 0;
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (ne[i] <= 0) return true;
    int64_t bs = bp_type_block_size(type);
    if (bs <= 0) return false;
    size_t n = bp_type_size(type);
    for (int i = 0; i < BP_MAX_DIMS; i++) {
        uint64_t steps = (uint64_t)((i == 0 ? ne[0] / bs : ne[i]) - 1);
        size_t add;
        if (steps > SIZE_MAX || __builtin_mul_overflow((size_t)steps, nb[i], &add) ||
            __builtin_add_overflow(n, add, &n))
            return false;
    }
    *out = n;
    return true;
}

bool bp__contiguous_strides(enum bp_type type, const int64_t ne[4], size_t nb[4])
{
    int64_t bs = bp_type_block_size(type);
    if (bs <= 0) return false;
    nb[0] = bp_type_size(type);
    uint64_t blocks = (uint64_t)(ne[0] / bs);
    if (blocks > SIZE_MAX || __builtin_mul_overflow(nb[0], (size_t)blocks, &nb[1])) return false;
    for (int i = 2; i < BP_MAX_DIMS; i++) {
        if ((uint64_t)ne[i - 1] > SIZE_MAX ||
            __builtin_mul_overflow(nb[i - 1], (size_t)ne[i - 1], &nb[i]))
            return false;
    }
    /* The whole tensor must be addressable too. */
    size_t total;
    if ((uint64_t)ne[3] > SIZE_MAX || __builtin_mul_overflow(nb[3], (size_t)ne[3], &total)) return false;
    return true;
}

struct bp_tensor *bp__tensor_make(struct bp_context *ctx, const char *what, enum bp_type type,
                                  const int64_t ne[4])
{
    if ((unsigned)type >= BP_TYPE_COUNT) {
        bp__context_fail(ctx, BP_ERR_INVALID_ARGUMENT,
                         "%s: type %d is not a bp_type; use one of BP_TYPE_*.", what, (int)type);
        return NULL;
    }
    for (int i = 0; i < BP_MAX_DIMS; i++) {
        if (ne[i] < 0) {
            bp__context_fail(ctx, BP_ERR_SHAPE,
                             "%s: dimension %d is %" PRId64 "; sizes must be 0 or more.", what, i, ne[i]);
            return NULL;
        }
    }
    int64_t bs = bp_type_block_size(type);
    if (ne[0] % bs != 0) {
        bp__context_fail(ctx, BP_ERR_SHAPE,
                         "%s: a %s tensor needs ne[0] to be a multiple of its block size %" PRId64
                         ", but it is %" PRId64 ".", what, bp_type_name(type), bs, ne[0]);
        return NULL;
    }
    size_t nb[4];
    if (!bp__contiguous_strides(type, ne, nb)) {
        bp__context_fail(ctx, BP_ERR_SHAPE,
                         "%s: shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                         "] of %s is too large to address; use smaller dimensions.",
                         what, ne[0], ne[1], ne[2], ne[3], bp_type_name(type));
        return NULL;
    }
    struct bp_tensor *t = bp__context_new_tensor(ctx, what);
    if (!t) return NULL;
    t->type = type;
    t->op = BP_OP_NONE;
    memcpy(t->ne, ne, sizeof t->ne);
    memcpy(t->nb, nb, sizeof t->nb);
    return t;
}

struct bp_tensor *bp_tensor_new(struct bp_context *ctx, enum bp_type type, int n_dims,
                                const int64_t *ne)
{
    if (!ctx) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_tensor_new: the context is NULL; create one with bp_context_new.");
        return NULL;
    }
    if (n_dims < 1 || n_dims > BP_MAX_DIMS || !ne) {
        bp__context_fail(ctx, BP_ERR_INVALID_ARGUMENT,
                         "bp_tensor_new: n_dims is %d and ne is %s; pass 1 to 4 dimensions.",
                         n_dims, ne ? "set" : "NULL");
        return NULL;
    }
    int64_t full[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) full[i] = ne[i];
    return bp__tensor_make(ctx, "bp_tensor_new", type, full);
}

struct bp_tensor *bp_tensor_new_1d(struct bp_context *ctx, enum bp_type type, int64_t ne0)
{
    return bp_tensor_new(ctx, type, 1, (int64_t[]){ne0});
}

struct bp_tensor *bp_tensor_new_2d(struct bp_context *ctx, enum bp_type type, int64_t ne0, int64_t ne1)
{
    return bp_tensor_new(ctx, type, 2, (int64_t[]){ne0, ne1});
}

struct bp_tensor *bp_tensor_new_3d(struct bp_context *ctx, enum bp_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2)
{
    return bp_tensor_new(ctx, type, 3, (int64_t[]){ne0, ne1, ne2});
}

struct bp_tensor *bp_tensor_new_4d(struct bp_context *ctx, enum bp_type type, int64_t ne0, int64_t ne1,
                                   int64_t ne2, int64_t ne3)
{
    return bp_tensor_new(ctx, type, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

struct bp_tensor *bp_tensor_set_name(struct bp_tensor *t, const char *name)
{
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    return t;
}

bool bp__tensor_allocated(const struct bp_tensor *t)
{
    return t && t->buffer != NULL;
}

const char *bp__tensor_label(const struct bp_tensor *t, char *buf, size_t cap)
{
    if (!t) snprintf(buf, cap, "(null)");
    else if (t->name[0]) snprintf(buf, cap, "'%.*s'", BP_MAX_NAME, t->name);
    else snprintf(buf, cap, "(unnamed)");
    return buf;
}

const char *bp__tensor_describe(const struct bp_tensor *t, char *buf, size_t cap)
{
    char label[BP_MAX_NAME + 8];
    if (!t) {
        snprintf(buf, cap, "(null)");
        return buf;
    }
    snprintf(buf, cap, "%s [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
             bp__tensor_label(t, label, sizeof label), t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    return buf;
}

static bp_status view_resolve(struct bp_tensor *t, int depth)
{
    if (!t || !t->view_src || t->buffer) return BP_OK;
    if (depth > 8) return BP_OK; /* a cycle made by hand: leave it unresolved */
    struct bp_tensor *src = t->view_src;
    if (!src->buffer) {
        /* Constructors point views at their memory's owner; a chain made
         * by hand is walked one step at a time. */
        bp_status st = view_resolve(src, depth + 1);
        if (st != BP_OK || !src->buffer) return st;
    }
    struct bp_buffer *buf = src->buffer;
    t->data = (char *)src->data + t->view_offs;
    t->buffer = buf;
    bp_status (*init_tensor)(struct bp_buffer *, struct bp_tensor *) = BP_IFACE_GET(buf->iface, init_tensor);
    if (init_tensor) {
        bp_status st = init_tensor(buf, t);
        if (st != BP_OK) {
            char a[BP_MAX_NAME + 8], b[BP_MAX_NAME + 8];
            t->data = NULL;
            t->buffer = NULL;
            return bp__fail(st, "buffer %s could not set up view %s of %s (%s); see the log for the plugin's reason.",
                            bp__buffer_name(buf), bp__tensor_label(t, a, sizeof a),
                            bp__tensor_label(src, b, sizeof b), bp_status_name(st));
        }
    }
    return BP_OK;
}

bp_status bp__view_resolve(struct bp_tensor *t)
{
    return view_resolve(t, 0);
}

/* Checks shared by bp_tensor_set and bp_tensor_get. */
static bp_status check_io(const char *what, const struct bp_tensor *t, const void *host, size_t offset,
                          size_t size)
{
    char d[BP_MAX_NAME + 96];
    if (!t) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the tensor is NULL.", what);
    if (!host && size) return bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the host pointer is NULL.", what);
    if (!t->buffer) {
        bp__view_resolve((struct bp_tensor *)t); /* contexts hand out mutable tensors */
        if (!t->buffer)
            return bp__fail(BP_ERR_INVALID_ARGUMENT,
                            "%s: tensor %s has no memory yet; allocate its context with bp_context_alloc_tensors first.",
                            what, bp__tensor_describe(t, d, sizeof d));
    }
    size_t n = bp_nbytes(t);
    if (offset > n || size > n - offset)
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "%s: bytes [%zu, %zu + %zu) are outside tensor %s, which holds %zu bytes; pass a range inside it.",
                        what, offset, offset, size, bp__tensor_describe(t, d, sizeof d), n);
    return BP_OK;
}

bp_status bp_tensor_set(struct bp_tensor *t, const void *src, size_t offset, size_t size)
{
    bp_status st = check_io("bp_tensor_set", t, src, offset, size);
    if (st != BP_OK || size == 0) return st;
    /* The plugin only reads src: the cast is for the one helper of both directions. */
    return bp__buffer_io("bp_tensor_set", t->buffer, t, (void *)src, offset, size, true);
}

bp_status bp_tensor_get(const struct bp_tensor *t, void *dst, size_t offset, size_t size)
{
    bp_status st = check_io("bp_tensor_get", t, dst, offset, size);
    if (st != BP_OK || size == 0) return st;
    return bp__buffer_io("bp_tensor_get", t->buffer, t, dst, offset, size, false);
}
