/*
 * comm_policy.h — the all-reduce decisions of the CUDA plugin that need no
 * GPU: parsing BACKPLANE_CUDA_ALLREDUCE, choosing NCCL / internal / none for
 * a set of participants, and the FP32-or-BF16 wire-type threshold. Plain C,
 * no CUDA header, unit-tested in tests/test_cuda_policy.c on any machine.
 */
#ifndef BP_CUDA_COMM_POLICY_H
#define BP_CUDA_COMM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cuda_allreduce_mode {
    CUDA_ALLREDUCE_NCCL = 0,     /* default: one NCCL communicator per device */
    CUDA_ALLREDUCE_INTERNAL = 1, /* our two-participant peer-copy + add path */
    CUDA_ALLREDUCE_NONE = 2,     /* decline: the caller uses its own path */
};

const char *cuda_allreduce_mode_name(enum cuda_allreduce_mode m);

/* Parse the BACKPLANE_CUDA_ALLREDUCE value. NULL or "" gives the default
 * (nccl). A value that is not nccl, internal or none (case-insensitive)
 * gives the default and writes one sentence to why (cap bytes) saying so;
 * otherwise why is set to "". Returns the mode to use. */
enum cuda_allreduce_mode cuda_parse_allreduce_env(const char *value, char *why, size_t cap);

/* Elements of an F32 tensor from which the all-reduce travels in BF16
 * (convert, reduce, convert back). Default CUDA_BF16_MIN_ELEMENTS; the
 * value of BACKPLANE_CUDA_ALLREDUCE_BF16_MIN when it is a count >= 0, or
 * "off" for never (returns INT64_MAX). A bad value keeps the default and
 * writes a sentence to why. */
#define CUDA_BF16_MIN_ELEMENTS 32768
int64_t cuda_parse_bf16_min_env(const char *value, char *why, size_t cap);

/* True when an F32 tensor of n elements should be reduced in BF16. */
bool cuda_reduce_in_bf16(int64_t n_elements, int64_t bf16_min);

/* True when some device index appears twice in ids[0..n). */
bool cuda_devices_repeat(const int *ids, size_t n);

/* The path a communicator over devices ids[0..n) takes, given the requested
 * mode and whether libnccl.so.2 could be loaded (nccl_loadable is only
 * consulted when NCCL would otherwise be chosen; pass a callback result).
 * Fallback order: nccl -> internal -> none. NCCL needs distinct devices
 * (virtual devices on one GPU disable it); internal needs exactly two
 * participants. When the result differs from the request, one sentence
 * saying why goes to why; otherwise why is "". */
enum cuda_allreduce_mode cuda_choose_allreduce(enum cuda_allreduce_mode requested,
                                               const int *ids, size_t n,
                                               bool (*nccl_loadable)(void *ctx), void *ctx,
                                               char *why, size_t cap);

/* The path of a multi-process communicator (bp_comm_init_rank): NCCL when
 * requested (the default) and libnccl.so.2 loads, else NONE, so that the
 * ranks reduce through host memory (the internal path is single-process).
 * A result other than the request gets a sentence in why. */
enum cuda_allreduce_mode cuda_choose_rank_comm(enum cuda_allreduce_mode requested,
                                               bool (*nccl_loadable)(void *ctx), void *ctx,
                                               char *why, size_t cap);

#endif /* BP_CUDA_COMM_POLICY_H */
