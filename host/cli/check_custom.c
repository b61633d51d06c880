/*
 * check_custom.c — the cases of vendor-defined ops (BP_OP_CUSTOM). The
 * harness cannot know a custom op's shapes or meaning, so the plugin
 * publishes them (BP_PROC_CUSTOM_OPS, bp_custom_op.h): each op's input sets
 * and a reference function that the check runs on host memory in place of
 * the CPU device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_harness.h"

static bool is_float_type(int32_t t)
{
    return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16;
}

static struct bp_tensor *build_custom(struct check_builder *b, const struct check_case *c)
{
    static const char *const names[BP_MAX_SRC] = {"src0", "src1", "src2", "src3"};
    const struct bp_custom_op_case *k = c->custom_case;
    struct bp_tensor *src[BP_MAX_SRC] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < k->n_src; i++) {
        const int64_t *ne = k->src_ne[i];
        src[i] = check_input(b, names[i], (enum bp_type)k->src_type[i], CHECK_FILL_UNIFORM, 0,
                             ne[0], ne[1], ne[2], ne[3]);
        if (!src[i]) return NULL;
    }
    return bp_custom(b->ctx, c->custom->name, src, k->n_src, k->params, k->n_params,
                     (enum bp_type)k->type, BP_MAX_DIMS, k->ne);
}

/* "f16[16,4,2] f32[16]": each source, trailing unit dims dropped. */
static void describe(const struct bp_custom_op_case *k, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < k->n_src && n < cap; i++) {
        int dims = BP_MAX_DIMS;
        while (dims > 1 && k->src_ne[i][dims - 1] == 1) dims--;
        n += (size_t)snprintf(buf + n, cap - n, "%s%s[", i ? " " : "",
                              bp_type_name((enum bp_type)k->src_type[i]));
        for (int d = 0; d < dims && n < cap; d++)
            n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "",
                                  (long long)k->src_ne[i][d]);
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "]");
    }
}

/* Why the check cannot run this input set, or NULL. */
static const char *case_problem(const struct bp_custom_op_case *k)
{
    if (k->n_src < 0 || k->n_src > BP_MAX_SRC) return "n_src is outside 0..4";
    for (int i = 0; i < k->n_src; i++)
        if (!is_float_type(k->src_type[i])) return "a source type is not f32, f16 or bf16";
    if (k->n_params < 0 || k->n_params > BP_CUSTOM_MAX_PARAMS) return "n_params is outside 0..8";
    if (!(k->max_nmse >= 0.0)) return "max_nmse is not a number >= 0";
    return NULL;
}

size_t check_custom_cases(struct bp_device *dev, struct check_case **out)
{
    *out = NULL;
    bp_custom_ops_fn list_fn = (bp_custom_ops_fn)bp_device_proc_address(dev, BP_PROC_CUSTOM_OPS);
    size_t n_ops = 0;
    const struct bp_custom_op_info *const *ops = list_fn ? list_fn(dev->reg, &n_ops) : NULL;
    if (!ops) return 0;
    size_t total = 0;
    for (size_t i = 0; i < n_ops; i++)
        if (ops[i] && BP_IFACE_HAS(ops[i], n_cases) && ops[i]->cases) total += ops[i]->n_cases;
    struct check_case *cases = total ? calloc(total, sizeof *cases) : NULL;
    if (!cases) return 0;
    size_t n = 0;
    for (size_t i = 0; i < n_ops; i++) {
        const struct bp_custom_op_info *op = ops[i];
        const char *why = !op ? "is NULL"
                          : !BP_IFACE_HAS(op, n_cases) ? "has a size too small to hold n_cases"
                          : !bp_custom_op_name_valid(op->name) ? "has no \"<vendor>.<op>\" name"
                          : op->n_cases && !op->cases ? "counts cases but its cases array is NULL"
                          : NULL;
        if (why) {
            fprintf(stderr, "backplane: check: custom op %zu of device %s %s; it is skipped, fix "
                    "the plugin's BP_PROC_CUSTOM_OPS list.\n", i, bp_device_name(dev), why);
            continue;
        }
        for (size_t j = 0; op->cases && j < op->n_cases; j++) {
            why = case_problem(&op->cases[j]);
            if (why) {
                fprintf(stderr, "backplane: check: case %zu of custom op %s on %s is skipped: %s.\n",
                        j, op->name, bp_device_name(dev), why);
                continue;
            }
            struct check_case *c = &cases[n++];
            c->op = BP_OP_CUSTOM;
            c->type = c->type2 = (enum bp_type)op->cases[j].type;
            c->build = build_custom;
            c->custom = op;
            c->custom_case = &op->cases[j];
            describe(c->custom_case, c->desc, sizeof c->desc);
        }
    }
    if (!n) {
        free(cases);
        cases = NULL;
    }
    *out = cases;
    return n;
}

const char *check_case_op_label(const struct check_case *c)
{
    return c->custom ? c->custom->name : bp_op_name(c->op);
}
