/*
 * split.h — the runner's tensor-parallel split table (Megatron rules) for
 * meta devices, written as a bp_meta rule table (<backplane/bp_meta.h>), and
 * the glue that gives it to a meta device.
 */
#ifndef BP_RUN_SPLIT_H
#define BP_RUN_SPLIT_H

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "model.h"

#define BP_RUN_SPLIT_MAX_RULES 48

/* The rules for one model, one per split row of the Llama schema
 * (llama_schema.h): name patterns ("blk.*.attn_q.weight") with the split
 * each gets; tensors no rule names are mirrored. The table is per
 * model because its granularities follow the head size, the GQA grouping
 * and the weights' block sizes. The KV caches are "blk.N.cache_k" and
 * "blk.N.cache_v", so the rule matcher gives them the layer's rotation. */
struct bp_run_split_table {
    struct bp_meta_rule rules[BP_RUN_SPLIT_MAX_RULES];
    char patterns[BP_RUN_SPLIT_MAX_RULES][64]; /* the rules' patterns, made from the schema */
    struct bp_meta_rule_table table;
};
void bp_run_split_table_init(struct bp_run_split_table *t, const struct bp_run_model *m);

/* Give dev the table (bp_meta_set_split_fn with bp_meta_rules_split_fn).
 * BP_OK without doing anything when dev is not a meta device. t must stay
 * where it is while tensors are placed on dev. */
bp_status bp_run_split_install(struct bp_device *dev, const struct bp_run_split_table *t,
                               char *err, size_t err_cap);

/* A device by name (bp_device_by_name: "meta:A,B" and "meta:A*N" are the
 * meta plugin's device for that spec, made on first use; ratios come from
 * BACKPLANE_META_SPLIT or are even). NULL and a sentence in err when a name
 * is unknown. */
struct bp_device *bp_run_find_device(const char *name, char *err, size_t err_cap);

#endif /* BP_RUN_SPLIT_H */
