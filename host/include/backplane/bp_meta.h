/*
 * bp_meta.h — tensor parallelism for applications: meta devices made from a
 * device list, split-state callbacks, and a rule table that writes the
 * Megatron split rules as data. Needs the meta plugin (libbackplane-meta.so);
 * without it every call returns BP_ERR_NOT_FOUND with a sentence saying so.
 */
#ifndef BACKPLANE_META_H
#define BACKPLANE_META_H

#include <backplane/backplane.h>
#include <backplane/bp_meta_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A meta device over devs[0..n) (a device may repeat: each occurrence gets
 * its own backend and buffers). ratios: n shares, or NULL for
 * BACKPLANE_META_SPLIT / even. split_cb gives leaf tensors their split
 * states (NULL: all MIRRORED). The device belongs to the plugin. */
BP_API bp_status bp_meta_device_new(struct bp_device *const *devs, size_t n, const float *ratios,
                                    bp_meta_split_fn split_cb, void *user, struct bp_device **out);
/* Replace the callback of a meta device (e.g. one from BACKPLANE_DEVICES). */
BP_API bp_status bp_meta_set_split_fn(struct bp_device *meta, bp_meta_split_fn split_cb, void *user);
/* Split state of a tensor in a meta buffer; local_ne (BP_META_MAX_DEVICES
 * entries, may be NULL) gets each device's extent of the split axis. */
BP_API bp_status bp_meta_tensor_split(const struct bp_tensor *t, int32_t *state, int64_t *local_ne);
/* Counters of a meta backend (cuts, reductions, bytes reduced, ...). Set
 * out->size = sizeof *out first: only the fields it covers are written, and
 * never out->size (1.1; a size below sizeof(size_t) is refused). */
BP_API bp_status bp_meta_backend_stats(struct bp_backend *b, struct bp_meta_stats *out);
/* Device bytes a meta buffer holds on each sub-device (bytes has
 * BP_META_MAX_DEVICES entries): each device holds only its slices. */
BP_API bp_status bp_meta_buffer_device_bytes(struct bp_buffer *buf, size_t *bytes);

/* (1.1) A meta device from a spec ("meta:cpu*2", "meta:cpu,vulkan0"; the
 * prefix is optional), as BACKPLANE_DEVICES makes one. The device belongs
 * to the plugin. Errors: NOT_FOUND without the plugin, else its refusal. */
BP_API bp_status bp_meta_device_from_spec(const char *spec, struct bp_device **out);
/* (1.1) The sub-devices of a meta device in split order: *n their count,
 * subs[0..min(cap, *n)) filled. INVALID_ARGUMENT for another device. */
BP_API bp_status bp_meta_device_sub_devices(struct bp_device *meta, struct bp_device **subs,
                                            size_t cap, size_t *n);
/* (1.1) Bytes [offset, offset + size) of sub-device `device`'s own copy of
 * a MIRRORED tensor (bp_tensor_get reads sub-device 0's). INVALID_ARGUMENT
 * for another split state or a device past the count. Any thread that may
 * read the tensor. */
BP_API bp_status bp_meta_tensor_get_copy(const struct bp_tensor *t, size_t device, void *dst,
                                         size_t offset, size_t size);
/* (1.1) The bytes each sub-device of meta would hold (bytes has
 * BP_META_MAX_DEVICES entries) for tensors[0..n), leaves without memory,
 * placed in one meta buffer: the plugin's own placement, nothing allocated,
 * the tensors left as they were. INVALID_ARGUMENT for a tensor with memory. */
BP_API bp_status bp_meta_measure_tensors(struct bp_device *meta, struct bp_tensor *const *tensors,
                                         size_t n, size_t *bytes);
/* (1.1) What computing g on meta would hold per sub-device, nothing
 * allocated: bytes for g's inputs and intermediates (every tensor without
 * memory not among leaves, which are placed but not counted), scratch for
 * the all-reduce's. See BP_PROC_META_MEASURE_GRAPH; caller's thread. */
BP_API bp_status bp_meta_measure_graph(struct bp_device *meta, struct bp_graph *g,
                                       struct bp_tensor *const *leaves, size_t n_leaves, size_t *bytes,
                                       size_t *scratch);

/* ---- rule tables (split_rules.c) ----
 * A rule maps a tensor-name pattern to a split. In patterns '*' matches any
 * run of characters ("blk.*.attn_q.weight"). The first matching rule wins.
 * When the name starts with "blk.<N>." the split's rotation is set to N, so
 * remainders rotate layer by layer. */
struct bp_meta_rule {
    const char *pattern;
    struct bp_meta_split split;
};
struct bp_meta_rule_table {
    const struct bp_meta_rule *rules;
    size_t n_rules;
};
/* 1 and *out filled when a rule matches name, else 0. */
BP_API int bp_meta_rules_match(const struct bp_meta_rule_table *table, const char *name,
                               struct bp_meta_split *out);
/* A bp_meta_split_fn over a rule table: pass it with user = the table. */
BP_API int bp_meta_rules_split_fn(void *user, const struct bp_tensor *t, struct bp_meta_split *out);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_META_H */
