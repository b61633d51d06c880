/* context.c — contexts: a fixed-capacity arena of tensor metadata with a
 * sticky first error, so a whole graph can be built and checked once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

struct bp_context {
    struct bp_context *next;     /* in the list of live contexts */
    size_t cap;
    size_t n;
    struct bp_tensor *tensors;   /* cap slots, allocated once: pointers stay valid */
    bp_status status;            /* first failure, BP_OK until then */
    char error[512];             /* its sentence */
};

/* Live contexts, so that a tensor's context can be found from the tensor
 * alone (bp_graph_build) without storing host state in the ABI struct. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bp_context *live;

bp_status bp_context_new(size_t max_tensors, struct bp_context **out)
{
    if (!out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_context_new: out is NULL; pass the address of a context pointer.");
    *out = NULL;
    struct bp_context *ctx = calloc(1, sizeof *ctx);
    struct bp_tensor *tensors = calloc(max_tensors ? max_tensors : 1, sizeof *tensors);
    if (!ctx || !tensors) {
        free(ctx);
        free(tensors);
        return bp__fail(BP_ERR_OUT_OF_MEMORY,
                        "bp_context_new: could not allocate room for %zu tensors; ask for fewer.",
                        max_tensors);
    }
    ctx->cap = max_tensors;
    ctx->tensors = tensors;
    ctx->status = BP_OK;
    pthread_mutex_lock(&live_lock);
    ctx->next = live;
    live = ctx;
    pthread_mutex_unlock(&live_lock);
    *out = ctx;
    return BP_OK;
}

void bp_context_free(struct bp_context *ctx)
{
    if (!ctx) return;
    pthread_mutex_lock(&live_lock);
    for (struct bp_context **p = &live; *p; p = &(*p)->next) {
        if (*p == ctx) {
            *p = ctx->next;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
    free(ctx->tensors);
    free(ctx);
}

bp_status bp_context_status(const struct bp_context *ctx)
{
    if (!ctx) return BP_ERR_INVALID_ARGUMENT;
    return ctx->status;
}

struct bp_tensor *bp_context_tensor(struct bp_context *ctx, size_t i)
{
    if (!ctx || i >= ctx->n) return NULL;
    return &ctx->tensors[i];
}

size_t bp_context_tensor_count(const struct bp_context *ctx)
{
    return ctx ? ctx->n : 0;
}

struct bp_tensor *bp_context_find(struct bp_context *ctx, const char *name)
{
    if (!ctx || !name) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_context_find: the context or the name is NULL.");
        return NULL;
    }
    for (size_t i = 0; i < ctx->n; i++)
        if (strncmp(ctx->tensors[i].name, name, BP_MAX_NAME) == 0) return &ctx->tensors[i];
    bp__fail(BP_ERR_NOT_FOUND, "no tensor named '%s' in this context; check the name given to bp_tensor_set_name.", name);
    return NULL;
}

bp_status bp__context_fail(struct bp_context *ctx, bp_status status, const char *fmt, ...)
{
    char msg[sizeof ctx->error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx && ctx->status == BP_OK) {
        ctx->status = status;
        memcpy(ctx->error, msg, sizeof msg);
    }
    return bp__fail(status, "%s", msg);
}

struct bp_tensor *bp__context_new_tensor(struct bp_context *ctx, const char *what)
{
    if (!ctx) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: the context is NULL; create one with bp_context_new.", what);
        return NULL;
    }
    if (ctx->n >= ctx->cap) {
        bp__context_fail(ctx, BP_ERR_OUT_OF_MEMORY,
                         "%s: the context is full (%zu tensors); create it with a larger max_tensors.",
                         what, ctx->cap);
        return NULL;
    }
    return &ctx->tensors[ctx->n++];
}

struct bp_context *bp__context_of(const struct bp_tensor *t)
{
    struct bp_context *found = NULL;
    uintptr_t p = (uintptr_t)t;
    pthread_mutex_lock(&live_lock);
    for (struct bp_context *c = live; c; c = c->next) {
        uintptr_t lo = (uintptr_t)c->tensors;
        if (p >= lo && p < lo + c->cap * sizeof *c->tensors) {
            found = c;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
    return found;
}

const char *bp__context_error(const struct bp_context *ctx)
{
    return ctx ? ctx->error : "";
}
