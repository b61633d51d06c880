/*
 * check_split.c — the split pass of `backplane check` on a meta device.
 *
 * With every leaf MIRRORED each sub-device computes the whole graph, so
 * comparing each copy (check_run.c) proves each sub-device's kernels, but
 * not the meta device's own work: cutting operands into slices, running
 * sub-graphs side by side and gathering the slices. Here one input of each
 * case is split along an axis the meta plugin has a rule for (a weight
 * column-parallel, rows, heads, table columns), so every sub-device
 * computes its share and the gathered output is compared with the
 * reference.
 *
 * A rule applies only to inputs laid out contiguously (a permuted view of a
 * split leaf moves the split to another axis, which is the business of the
 * meta suites, not of an op check) and only where the split axis has at
 * least two elements.
 */
#include <string.h>

#include "check_harness.h"

struct split_rule {
    enum bp_op op;
    const char *inputs[3]; /* the leaf names the case's builder gives them */
    int axis;
    bool (*applies)(const struct check_case *c);
};

static bool rows_of_a(const struct check_case *c)
{
    return LAYOUT0(c->variant) == LAYOUT_CONTIGUOUS && c->a[1] >= 2;
}

/* b is either broadcast over the rows or has all of them (the meta device
 * then cuts it to each device's rows). */
static bool rows_of_binary(const struct check_case *c)
{
    return c->variant == 0 && c->a[1] >= 2 && (c->b[1] == 1 || c->b[1] == c->a[1]);
}

static bool rows_without_mask(const struct check_case *c)
{
    return !(c->variant & WITH_MASK) && rows_of_a(c);
}

/* With a mask the rows are the mask's too: split the batch the mask repeats over. */
static bool batch_with_mask(const struct check_case *c)
{
    return (c->variant & WITH_MASK) && LAYOUT0(c->variant) == LAYOUT_CONTIGUOUS && c->a[2] >= 2 &&
           c->b[2] == 1;
}

/* Columns of a table: at least two whole blocks of its type. */
static bool table_columns(const struct check_case *c)
{
    return c->a[0] >= 2 * bp_type_block_size(c->type);
}

/* Attention by heads: q, k and v laid out plainly, at least two kv heads. */
static bool heads(const struct check_case *c)
{
    return LAYOUT0(c->variant) == LAYOUT_CONTIGUOUS && c->b[2] >= 2;
}

/* Experts cut like a dense FFN: the stacked weights by output rows (axis
 * 1, at least two), every device a slice of every expert. */
static bool expert_rows(const struct check_case *c)
{
    return c->a[1] >= 2;
}

/* Rows of the routing ops' input (TOP_K, SUM_ROWS read whole rows). */
static bool rows_of_plain_a(const struct check_case *c)
{
    return LAYOUT1(c->variant) == LAYOUT_CONTIGUOUS && c->a[1] >= 2;
}

static const struct split_rule rules[] = {
    {BP_OP_MUL_MAT, {"w"}, 1, rows_of_a},          /* column-parallel: output rows per device */
    {BP_OP_ADD, {"a"}, 1, rows_of_binary},
    {BP_OP_MUL, {"a"}, 1, rows_of_binary},
    {BP_OP_SCALE, {"x"}, 1, rows_of_a},
    {BP_OP_SILU, {"x"}, 1, rows_of_a},
    {BP_OP_GELU, {"x"}, 1, rows_of_a},
    {BP_OP_SQR, {"x"}, 1, rows_of_a},
    {BP_OP_TANH, {"x"}, 1, rows_of_a},
    {BP_OP_RMS_NORM, {"x"}, 1, rows_of_a},
    {BP_OP_SOFT_MAX, {"x"}, 1, rows_without_mask},
    {BP_OP_SOFT_MAX, {"x"}, 2, batch_with_mask},
    {BP_OP_ROPE, {"x"}, 1, rows_of_a},             /* heads */
    {BP_OP_ROPE_EXT, {"x"}, 1, rows_of_a},         /* heads; the factors stay whole */
    {BP_OP_GET_ROWS, {"table"}, 0, table_columns},
    {BP_OP_FLASH_ATTN_EXT, {"q", "k", "v"}, 2, heads},
    {BP_OP_FLASH_ATTN_SOFTCAP, {"q", "k", "v"}, 2, heads},
    {BP_OP_MUL_MAT_ID, {"w"}, 1, expert_rows},
    {BP_OP_TOP_K, {"x"}, 1, rows_of_plain_a},
    {BP_OP_SUM_ROWS, {"x"}, 1, rows_of_a},
    {BP_OP_DIV, {"a"}, 1, rows_of_binary},
    {BP_OP_CLAMP, {"x"}, 1, rows_of_a},
};

static const struct split_rule *rule_of(const struct check_case *c)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rules[i].op == c->op && rules[i].applies(c)) return &rules[i];
    return NULL;
}

bool check_case_splits(const struct check_case *c)
{
    return rule_of(c) != NULL;
}

int check_split_fn(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    const struct check_case *c = user;
    const struct split_rule *r = rule_of(c);
    for (size_t i = 0; r && i < sizeof r->inputs / sizeof r->inputs[0] && r->inputs[i]; i++) {
        if (strcmp(t->name, r->inputs[i]) != 0) continue;
        memset(out, 0, sizeof *out);
        out->state = r->axis;
        /* Grouped-query attention: a device's query heads must be the
         * groups of its kv heads, so q is cut in whole groups. */
        if ((c->op == BP_OP_FLASH_ATTN_EXT || c->op == BP_OP_FLASH_ATTN_SOFTCAP) && !strcmp(t->name, "q"))
            out->granularity = c->a[2] / c->b[2];
        return 1;
    }
    return 0;
}
