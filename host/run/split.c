/*
 * split.c — THE SPLIT TABLE: how each weight and cache of a Llama model is
 * spread over the devices of a meta device (column-parallel, then
 * row-parallel, after Megatron-LM), as data for the meta plugin's rule
 * matcher. Each weight's rule is its row's split column in the Llama
 * schema (llama_schema.c); this file turns those into numbers:
 *
 *   COLS_Q / COLS_KV / COLS_FF  by output features (axis 1)
 *   COLS_PARTS                  by output features in segments (Q | K | V)
 *   ROWS_Q / ROWS_FF            by input features (axis 0) -> partial sums
 *   COLS_FF_EXP / ROWS_FF_EXP   stacked experts, each cut like the dense
 *                               FFN: every device a slice of every expert
 *   COLS_VOCAB                  by vocabulary (axis 1)
 *   a row-parallel weight's     the scheduler's copies of its input
 *   input ("blk.*.<input>#*")   (attn_out_in, ffn_down_in): by their rows
 *   blk.*.cache_k/v             by kv heads (axis 2)
 *   everything else             mirrored (norms, token_embd, inputs)
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
#include "arch.h"
#include "llama_schema.h"

#include <stddef.h>
#include <stdint.h>
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

/* The units of one model: Q features in whole GQA groups and whole blocks
 * of every row-parallel Q weight's rows (attn_output); FFN features in whole
 * blocks of every row-parallel FFN weight's rows (ffn_down), over all layers. */
struct units {
    int64_t q, kv, ff, ff_exp, one;
};

/* Each split rule of the schema: the axis it cuts and its unit. */
static const struct {
    int state;
    size_t unit; /* offsetof(struct units, ...) */
} split_rules[] = {
    [BP_LLAMA_MIRROR] = { BP_META_SPLIT_MIRRORED, offsetof(struct units, one) },
    [BP_LLAMA_COLS_Q] = { BP_META_SPLIT_AXIS_1, offsetof(struct units, q) },
    [BP_LLAMA_COLS_KV] = { BP_META_SPLIT_AXIS_1, offsetof(struct units, kv) },
    [BP_LLAMA_COLS_FF] = { BP_META_SPLIT_AXIS_1, offsetof(struct units, ff) },
    [BP_LLAMA_COLS_VOCAB] = { BP_META_SPLIT_AXIS_1, offsetof(struct units, one) },
    [BP_LLAMA_COLS_PARTS] = { BP_META_SPLIT_AXIS_1, SIZE_MAX }, /* segments: row_split */
    [BP_LLAMA_ROWS_Q] = { BP_META_SPLIT_AXIS_0, offsetof(struct units, q) },
    [BP_LLAMA_ROWS_FF] = { BP_META_SPLIT_AXIS_0, offsetof(struct units, ff) },
    [BP_LLAMA_COLS_FF_EXP] = { BP_META_SPLIT_AXIS_1, offsetof(struct units, ff_exp) },
    [BP_LLAMA_ROWS_FF_EXP] = { BP_META_SPLIT_AXIS_0, offsetof(struct units, ff_exp) },
};

static int64_t *unit_of(struct units *u, enum bp_llama_split sp)
{
    return (int64_t *)(void *)((char *)u + split_rules[sp].unit);
}

static struct units model_units(const struct bp_run_model *m)
{
    const struct bp_run_hparams *hp = &m->hp;
    const int64_t group = hp->n_head / hp->n_head_kv;
    struct units u = { .q = group * hp->head_dim, .ff = 1, .ff_exp = 1, .one = 1 };
    for (size_t i = 0; i < bp_llama_schema_rows; i++) {
        const struct bp_llama_tensor *r = &bp_llama_schema[i];
        if (split_rules[r->split].state != BP_META_SPLIT_AXIS_0) continue;
        int64_t *unit = unit_of(&u, r->split);
        for (int64_t l = 0; l < (r->per_layer ? hp->n_layer : 1); l++) {
            const struct bp_run_weight *w = bp_llama_get(r, m, r->per_layer ? l : -1);
            if (w) *unit = lcm64(*unit, bp_type_block_size(w->type));
        }
    }
    u.kv = u.q / group;
    return u;
}

/* The split of a row's tensor. A fused row is cut in segments, each like
 * its part (consecutive parts with the same rule and dim are one segment
 * repeated: Q | K V). */
static struct bp_meta_split row_split_2d(const struct bp_llama_tensor *r, const struct bp_run_hparams *hp,
                                         struct units *u);

/* A bias (1-D) is cut along axis 0 as its projection's outputs (axis 1). */
static struct bp_meta_split row_split(const struct bp_llama_tensor *r, const struct bp_run_hparams *hp,
                                      struct units *u)
{
    struct bp_meta_split sp = row_split_2d(r, hp, u);
    if (r->n_dims == 1 && sp.state == BP_META_SPLIT_AXIS_1) sp.state = BP_META_SPLIT_AXIS_0;
    return sp;
}

static struct bp_meta_split row_split_2d(const struct bp_llama_tensor *r, const struct bp_run_hparams *hp,
                                         struct units *u)
{
    const struct bp_arch *a = hp->arch ? hp->arch : &bp_arch_llama;
    const int last = r->n_dims - 1;
    if (r->split == BP_LLAMA_COLS_FF && r->ne[last] == BP_LLAMA_DIM_FF_UP && (a->flags & BP_ARCH_FUSED_UP)) {
        /* [gate | up]: two segments, each cut like ffn_down's rows */
        struct bp_meta_split sp = axis(BP_META_SPLIT_AXIS_1, 0);
        sp.seg[sp.n_segments++] = (struct bp_meta_segment){ .ne = hp->n_ff, .repeat = 2, .granularity = u->ff };
        return sp;
    }
    if (r->split != BP_LLAMA_COLS_PARTS)
        return axis(split_rules[r->split].state, *unit_of(u, r->split));
    struct bp_meta_split sp = axis(split_rules[r->split].state, 0);
    for (int i = 0; i < r->n_parts; i++) {
        const struct bp_llama_tensor *p = &bp_llama_schema[r->parts[i]];
        const struct bp_llama_tensor *prev = i > 0 ? &bp_llama_schema[r->parts[i - 1]] : NULL;
        if (prev && p->split == prev->split && p->ne[last] == prev->ne[last]) {
            sp.seg[sp.n_segments - 1].repeat++;
        } else if (sp.n_segments < BP_META_MAX_SEGMENTS) {
            sp.seg[sp.n_segments++] = (struct bp_meta_segment){
                .ne = bp_llama_dim_value(hp, p->ne[last]), .repeat = 1,
                .granularity = *unit_of(u, p->split) };
        }
    }
    return sp;
}

void bp_run_split_table_init(struct bp_run_split_table *t, const struct bp_run_model *m)
{
    const struct bp_run_hparams *hp = &m->hp;
    struct units u = model_units(m);
    size_t n = 0;
    /* A rule for every split row this model may hold, fused QKV or not.
     * Tied: the embedding is the output projection and stays mirrored (the
     * decoder's copy of it is named output.weight, so no rule may name it). */
    for (size_t i = 0; i < bp_llama_schema_rows && n < BP_RUN_SPLIT_MAX_RULES; i++) {
        const struct bp_llama_tensor *r = &bp_llama_schema[i];
        if (r->split == BP_LLAMA_MIRROR || bp_llama_row_use_hp(hp, r) == BP_LLAMA_ABSENT ||
            (r->presence == BP_LLAMA_UNTIED && m->tied_output))
            continue;
        bp_llama_tensor_name(r, -1, t->patterns[n], sizeof t->patterns[n]);
        t->rules[n] = (struct bp_meta_rule){ .pattern = t->patterns[n], .split = row_split(r, hp, &u) };
        n++;
    }
    /* The row-parallel weights' inputs when the scheduler copies them in
     * from another device (its copies are named "<source>#<device>"): cut
     * like the weights' rows, so each device multiplies its own slice. A
     * batched step gathers its attention rows in "blk.N.attn_rows", the
     * output projection's input: cut the same way. */
    for (size_t i = 0; i < bp_llama_schema_rows && n < BP_RUN_SPLIT_MAX_RULES; i++) {
        const struct bp_llama_tensor *r = &bp_llama_schema[i];
        if (!r->input) continue;
        snprintf(t->patterns[n], sizeof t->patterns[n], "blk.*.%s#*", r->input);
        t->rules[n] = (struct bp_meta_rule){ .pattern = t->patterns[n], .split = row_split(r, hp, &u) };
        n++;
        if (!strcmp(r->input, "attn_out_in") && n < BP_RUN_SPLIT_MAX_RULES)
            t->rules[n++] = (struct bp_meta_rule){ .pattern = "blk.*.attn_rows", .split = row_split(r, hp, &u) };
    }
#define RULE(pat, sp) t->rules[n++] = (struct bp_meta_rule){ .pattern = (pat), .split = (sp) }
    if (n + 2 <= BP_RUN_SPLIT_MAX_RULES) {
        RULE("blk.*.cache_k", axis(BP_META_SPLIT_AXIS_2, u.kv / hp->head_dim));
        RULE("blk.*.cache_v", axis(BP_META_SPLIT_AXIS_2, u.kv / hp->head_dim));
    }
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
    /* "meta:..." is parsed by the meta plugin, behind bp_device_by_name. */
    struct bp_device *d = bp_device_by_name(name);
    if (!d) snprintf(err, cap, "%s", bp_last_error());
    return d;
}
