/*
 * plan.h — the memory plan: what a session of a model would allocate on a
 * device (weights in the device's weight layout, the KV cache, the step
 * buffers), computed from shapes alone before anything is allocated, so
 * `backplane run` can refuse a model that does not fit and `--plan` can say
 * why.
 */
#ifndef BP_RUN_PLAN_H
#define BP_RUN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "model.h"

struct bp_run_plan_options {
    int64_t n_ctx;             /* KV positions, as bp_run_session_options (0: 512, capped) */
    int64_t n_prompt;          /* the longest prefill (tokens in one eval); 0: 1 */
    /* As bp_run_session_options.offload_layers: with a cpu fallback, layers
     * from this one on (and the embedding and output) live on the cpu. */
    int64_t offload_layers;
    int64_t cpu_moe_layers;    /* as bp_run_session_options.cpu_moe_layers */
    bool prefill_all;          /* the prefill computes logits at every position */
    /* As bp_run_session_options.strict: an op the device declines is the
     * plan's error too (the session would fail on it), not a fallback row. */
    bool strict;
};

/* One device's share; d[0] is the session's device, d[1] the cpu fallback
 * (present whenever the device is not a CPU, since the scheduler places
 * step buffers and declined ops there even without --offload-layers). */
struct bp_run_plan_device {
    struct bp_device *dev;
    size_t weights;            /* its weights, in the buffer types the session uses */
    size_t experts;            /* of weights: the stacked experts (ffn_*_exps) */
    size_t output_copy;        /* of weights: a tied output's copy in the weight layout */
    size_t kv_cache;
    size_t decode;             /* decode-step buffers of every capacity up to n_ctx (kept) */
    size_t prefill;            /* the prefill's buffers (kept for the next prompt) */
    size_t allreduce;          /* a meta device's all-reduce scratch on a sub-device */
    size_t peak;               /* weights + kv_cache + decode + prefill + allreduce */
    size_t mem_free, mem_total;
};

struct bp_run_plan {
    int64_t n_ctx, n_prompt;
    int64_t n_layer;           /* the model's layers */
    int64_t offload_layers;    /* layers on d[0] (n_layer without offloading) */
    int64_t cpu_moe_layers;    /* layers whose experts are on the cpu fallback (0: none) */
    size_t n_devices;          /* 1, or 2 with a cpu fallback */
    struct bp_run_plan_device d[2];
    /* When d[0] is a meta device: its sub-devices' shares in split order (a
     * device named twice gets two rows), each sized by the meta plugin's own
     * placement (bp_meta_measure_tensors/_graph); d[0] holds their sums. */
    size_t n_subs;
    struct bp_run_plan_device sub[BP_META_MAX_DEVICES];
};

/* Plan a session of m on dev as bp_run_session_new would place it: the
 * session's own placement code (backends, choose_homes, make_tensors, the
 * graphs) sized instead of allocated; no model or step memory is
 * allocated (the backends are started, as the scheduler needs them). On a
 * meta device each sub-device gets its row (plan.sub). Errors: a status
 * and one sentence in err. */
bp_status bp_run_plan_make(const struct bp_run_model *m, struct bp_device *dev,
                           const struct bp_run_plan_options *opts, struct bp_run_plan *out,
                           char *err, size_t err_cap);

/* False, with one sentence in why naming the device, what it needs, what
 * it has free and what to try (on a device with a cpu fallback, the
 * --offload-layers that would fit), when a device's peak exceeds its free memory.
 * Rows of one physical device (a meta device's cpu*2, and the cpu
 * fallback) are summed; the sentence names a meta device's sub-device.
 * A device reporting no memory figures (0 free) is not judged. */
bool bp_run_plan_fits(const struct bp_run_plan *p, char *why, size_t cap);

/* The plan for people, and as the JSON object {"n_ctx", "n_prompt",
 * "devices": [{...}], "fits"}. */
void bp_run_plan_print(const struct bp_run_plan *p, const struct bp_run_model *m, bool json);

#endif /* BP_RUN_PLAN_H */
