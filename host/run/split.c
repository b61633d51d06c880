/*
 * split.c — THE SPLIT TABLE: how each weight and cache of a Llama model is
 * spread over the devices of a meta device (column-parallel, then
 * row-parallel, after Megatron-LM), as data for the meta plugin's rule
 * matcher:
 *
 *   blk.*.attn_q/k/v.weight    by output features (axis 1), whole heads
 *   blk.*.attn_qkv.weight      by output features in segments Q | K | V
 *   blk.*.attn_output.weight   by input features (axis 0)  -> partial sums
 *   blk.*.ffn_gate/up.weight   by output features (axis 1)
 *   blk.*.ffn_down.weight      by input features (axis 0)  -> partial sums
 *   output.weight              by vocabulary (axis 1)
 *   blk.*.cache_k/v            by kv heads (axis 2)
 *   blk.*.attn_out_in#*,       the scheduler's copies of attn_output's and
 *   blk.*.ffn_down_in#*        ffn_down's inputs: by their rows (axis 0)
 *   everything else            mirrored (norms, token_embd, inputs)
 *
 * Units are chosen so that the slices line up across tensors: a device
 * holds query heads exactly for the kv heads it holds (a query unit is a
 * whole GQA group), and the row-parallel weights' input slices equal the
 * column-parallel outputs feeding them, also when the row-parallel weight
 * is quantized (units are multiples of its block size, over all layers).
 * The matcher sets every "blk.N." tensor's rotation to N, so remainders
 * move between layers identically for all tensors of a layer.
 */
#include "split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}
static int64_t lcm64(int64_t a, int64_t b) { return a / gcd64(a, b) * b; }

static struct bp_meta_split axis(int state, int64_t granularity)
{
    return (struct bp_meta_split){ .state = state, .granularity = granularity };
}

void bp_run_split_table_init(struct bp_run_split_table *t, const struct bp_run_model *m)
{
    const struct bp_run_hparams *hp = &m->hp;
    const int64_t group = hp->n_head / hp->n_head_kv;
    const int64_t Dq = hp->n_head * hp->head_dim, Dkv = hp->n_head_kv * hp->head_dim;
    /* Q features in whole GQA groups and whole blocks of attn_output's rows;
     * FFN features in whole blocks of ffn_down's rows (every layer's). */
    int64_t uq = group * hp->head_dim, uff = 1;
    for (int64_t l = 0; l < hp->n_layer; l++) {
        uq = lcm64(uq, bp_type_block_size(m->layers[l].wo->type));
        uff = lcm64(uff, bp_type_block_size(m->layers[l].down->type));
    }
    const int64_t ukv = uq / group;

    struct bp_meta_split qkv = axis(BP_META_SPLIT_AXIS_1, 0);
    qkv.n_segments = 2;
    qkv.seg[0] = (struct bp_meta_segment){ .ne = Dq, .repeat = 1, .granularity = uq };
    qkv.seg[1] = (struct bp_meta_segment){ .ne = Dkv, .repeat = 2, .granularity = ukv };

    size_t n = 0;
#define RULE(pat, sp) t->rules[n++] = (struct bp_meta_rule){ .pattern = (pat), .split = (sp) }
    RULE("blk.*.attn_q.weight", axis(BP_META_SPLIT_AXIS_1, uq));
    RULE("blk.*.attn_k.weight", axis(BP_META_SPLIT_AXIS_1, ukv));
    RULE("blk.*.attn_v.weight", axis(BP_META_SPLIT_AXIS_1, ukv));
    RULE("blk.*.attn_qkv.weight", qkv);
    RULE("blk.*.attn_output.weight", axis(BP_META_SPLIT_AXIS_0, uq));
    RULE("blk.*.ffn_gate.weight", axis(BP_META_SPLIT_AXIS_1, uff));
    RULE("blk.*.ffn_up.weight", axis(BP_META_SPLIT_AXIS_1, uff));
    RULE("blk.*.ffn_down.weight", axis(BP_META_SPLIT_AXIS_0, uff));
    /* The row-parallel weights' inputs when the scheduler copies them in
     * from another device (its copies are named "<source>#<device>"): cut
     * like the weights' rows, so each device multiplies its own slice. */
    RULE("blk.*.attn_out_in#*", axis(BP_META_SPLIT_AXIS_0, uq));
    RULE("blk.*.ffn_down_in#*", axis(BP_META_SPLIT_AXIS_0, uff));
    RULE("blk.*.cache_k", axis(BP_META_SPLIT_AXIS_2, ukv / hp->head_dim));
    RULE("blk.*.cache_v", axis(BP_META_SPLIT_AXIS_2, ukv / hp->head_dim));
    /* Tied: the embedding is the output projection and stays mirrored. */
    if (!m->tied_output) RULE("output.weight", axis(BP_META_SPLIT_AXIS_1, 1));
#undef RULE
    t->table = (struct bp_meta_rule_table){ .rules = t->rules, .n_rules = n };
}

bp_status bp_run_split_install(struct bp_device *dev, const struct bp_run_split_table *t, char *err,
                               size_t cap)
{
    if (bp_device_type(dev) != BP_DEVICE_TYPE_META) return BP_OK;
    /* The matcher only reads the table; the callback's user is not const. */
    bp_status s = bp_meta_set_split_fn(dev, bp_meta_rules_split_fn, (void *)&t->table);
    if (s != BP_OK)
        snprintf(err, cap, "meta device '%s' did not take the runner's split table: %s",
                 bp_device_name(dev), bp_last_error());
    return s;
}

struct bp_device *bp_run_find_device(const char *name, char *err, size_t cap)
{
    if (strncmp(name, "meta:", 5) != 0) {
        struct bp_device *d = bp_device_by_name(name);
        if (!d) snprintf(err, cap, "%s", bp_last_error());
        return d;
    }
    struct bp_device *devs[BP_META_MAX_DEVICES];
    size_t n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", name + 5);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long times = 1;
        char *star = strchr(tok, '*');
        if (star) {
            char *end;
            *star = '\0';
            times = strtol(star + 1, &end, 10);
            if (*end || end == star + 1 || times < 1 || times > BP_META_MAX_DEVICES) {
                snprintf(err, cap, "'%s' wants a count from 1 to %d after '*' (as in meta:cpu*2).",
                         name, BP_META_MAX_DEVICES);
                return NULL;
            }
        }
        struct bp_device *d = bp_device_by_name(tok);
        if (!d) {
            snprintf(err, cap, "%s", bp_last_error());
            return NULL;
        }
        for (long k = 0; k < times; k++) {
            if (n == BP_META_MAX_DEVICES) {
                snprintf(err, cap, "'%s' lists more than %d sub-devices.", name, BP_META_MAX_DEVICES);
                return NULL;
            }
            devs[n++] = d;
        }
    }
    if (n == 0) {
        snprintf(err, cap, "'%s' names no sub-device; write e.g. meta:cpu*2 or meta:cpu,vulkan0.",
                 name);
        return NULL;
    }
    struct bp_device *d = NULL;
    if (bp_meta_device_new(devs, n, NULL, NULL, NULL, &d) != BP_OK) {
        snprintf(err, cap, "%s", bp_last_error());
        return NULL;
    }
    return d;
}
