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
