/*
 * comm_policy.c — see comm_policy.h. Everything here is pure: it reads its
 * arguments and writes sentences, so it runs (and is tested) without a GPU.
 */
#include "comm_policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static void say(char *why, size_t cap, const char *msg)
{
    if (why && cap)
        snprintf(why, cap, "%s", msg);
}

const char *cuda_allreduce_mode_name(enum cuda_allreduce_mode m)
{
    switch (m) {
    case CUDA_ALLREDUCE_NCCL: return "nccl";
    case CUDA_ALLREDUCE_INTERNAL: return "internal";
    case CUDA_ALLREDUCE_NONE: return "none";
    default: return "unknown";
    }
}

enum cuda_allreduce_mode cuda_parse_allreduce_env(const char *value, char *why, size_t cap)
{
    say(why, cap, "");
    if (!value || !*value)
        return CUDA_ALLREDUCE_NCCL;
    if (strcasecmp(value, "nccl") == 0)
        return CUDA_ALLREDUCE_NCCL;
    if (strcasecmp(value, "internal") == 0)
        return CUDA_ALLREDUCE_INTERNAL;
    if (strcasecmp(value, "none") == 0)
        return CUDA_ALLREDUCE_NONE;
    if (why && cap)
        snprintf(why, cap,
                 "BACKPLANE_CUDA_ALLREDUCE='%.64s' is not nccl, internal or none; using nccl.",
                 value);
    return CUDA_ALLREDUCE_NCCL;
}

int64_t cuda_parse_bf16_min_env(const char *value, char *why, size_t cap)
{
    say(why, cap, "");
    if (!value || !*value)
        return CUDA_BF16_MIN_ELEMENTS;
    if (strcasecmp(value, "off") == 0)
        return INT64_MAX;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno == 0 && end != value && *end == '\0' && v >= 0 && isdigit((unsigned char)value[0]))
        return (int64_t)v;
    if (why && cap)
        snprintf(why, cap,
                 "BACKPLANE_CUDA_ALLREDUCE_BF16_MIN='%.64s' is not an element count >= 0 or "
                 "'off'; using %d.", value, CUDA_BF16_MIN_ELEMENTS);
    return CUDA_BF16_MIN_ELEMENTS;
}

bool cuda_reduce_in_bf16(int64_t n_elements, int64_t bf16_min)
{
    return bf16_min != INT64_MAX && n_elements >= bf16_min;
}

bool cuda_devices_repeat(const int *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (ids[i] == ids[j]) return true;
    return false;
}

enum cuda_allreduce_mode cuda_choose_allreduce(enum cuda_allreduce_mode requested,
                                               const int *ids, size_t n,
                                               bool (*nccl_loadable)(void *ctx), void *ctx,
                                               char *why, size_t cap)
{
    say(why, cap, "");
    enum cuda_allreduce_mode m = requested;
    if (m == CUDA_ALLREDUCE_NONE)
        return m;
    if (n < 2) {
        say(why, cap, "an all-reduce needs at least two participants; declining.");
        return CUDA_ALLREDUCE_NONE;
    }
    if (m == CUDA_ALLREDUCE_NCCL) {
        if (cuda_devices_repeat(ids, n)) {
            say(why, cap, "a CUDA device is given twice (virtual devices on one GPU) and NCCL "
                          "needs distinct GPUs; using the internal path.");
            m = CUDA_ALLREDUCE_INTERNAL;
        } else if (!nccl_loadable || !nccl_loadable(ctx)) {
            say(why, cap, "libnccl.so.2 could not be loaded; using the internal path (install "
                          "NCCL for more than two GPUs).");
            m = CUDA_ALLREDUCE_INTERNAL;
        } else {
            return m;
        }
    }
    if (m == CUDA_ALLREDUCE_INTERNAL && n != 2) {
        if (why && cap)
            snprintf(why, cap, "the internal all-reduce handles exactly two participants, not "
                               "%zu; declining so the caller uses its own path.", n);
        return CUDA_ALLREDUCE_NONE;
    }
    return m;
}

enum cuda_allreduce_mode cuda_choose_rank_comm(enum cuda_allreduce_mode requested,
                                               bool (*nccl_loadable)(void *ctx), void *ctx,
                                               char *why, size_t cap)
{
    say(why, cap, "");
    if (requested == CUDA_ALLREDUCE_NONE) return CUDA_ALLREDUCE_NONE;
    if (requested == CUDA_ALLREDUCE_INTERNAL) {
        say(why, cap, "the internal all-reduce works within one process; ranks reduce through "
                      "host memory.");
        return CUDA_ALLREDUCE_NONE;
    }
    if (!nccl_loadable || !nccl_loadable(ctx)) {
        say(why, cap, "libnccl.so.2 could not be loaded; ranks reduce through host memory "
                      "(install NCCL for GPU to GPU).");
        return CUDA_ALLREDUCE_NONE;
    }
    return CUDA_ALLREDUCE_NCCL;
}
