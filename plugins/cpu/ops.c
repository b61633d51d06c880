/*
 * ops.c — THE OP TABLE: for each op, whether a node can be computed and the
 * kernel that computes it. Adding an op is one line here plus its file in
 * ops/. View ops have no kernel: graph_compute skips them.
 */
#include "ops.h"

const struct cpu_op_entry cpu_op_table[BP_OP_COUNT] = {
    [BP_OP_GET_ROWS] = { .supports = cpu_supports_get_rows, .compute = cpu_compute_get_rows,
                         .prepare = cpu_prepare_get_rows },
    [BP_OP_MUL_MAT] = { .supports = cpu_supports_mul_mat, .compute = cpu_compute_mul_mat,
                        .scratch = cpu_scratch_mul_mat, .work = cpu_work_mul_mat },
    [BP_OP_ADD] = { .supports = cpu_supports_binary, .compute = cpu_compute_add },
    [BP_OP_MUL] = { .supports = cpu_supports_binary, .compute = cpu_compute_mul },
    [BP_OP_SCALE] = { .supports = cpu_supports_unary, .compute = cpu_compute_scale },
    [BP_OP_RMS_NORM] = { .supports = cpu_supports_rms_norm, .compute = cpu_compute_rms_norm },
    [BP_OP_SOFT_MAX] = { .supports = cpu_supports_soft_max, .compute = cpu_compute_soft_max },
    [BP_OP_ROPE] = { .supports = cpu_supports_rope, .compute = cpu_compute_rope,
                     .scratch = cpu_scratch_rope },
    [BP_OP_ROPE_EXT] = { .supports = cpu_supports_rope, .compute = cpu_compute_rope,
                         .scratch = cpu_scratch_rope },
    [BP_OP_SILU] = { .supports = cpu_supports_unary, .compute = cpu_compute_silu },
    [BP_OP_GELU] = { .supports = cpu_supports_unary, .compute = cpu_compute_gelu },
    [BP_OP_SQR] = { .supports = cpu_supports_unary, .compute = cpu_compute_sqr },
    [BP_OP_TANH] = { .supports = cpu_supports_unary, .compute = cpu_compute_tanh },
    [BP_OP_CPY] = { .supports = cpu_supports_cpy, .compute = cpu_compute_cpy },
    [BP_OP_CONT] = { .supports = cpu_supports_cont, .compute = cpu_compute_cont },
    [BP_OP_SET_ROWS] = { .supports = cpu_supports_set_rows, .compute = cpu_compute_set_rows,
                         .prepare = cpu_prepare_set_rows },
    [BP_OP_FLASH_ATTN_EXT] = { .supports = cpu_supports_flash_attn,
                               .compute = cpu_compute_flash_attn,
                               .scratch = cpu_scratch_flash_attn },
    [BP_OP_FLASH_ATTN_SOFTCAP] = { .supports = cpu_supports_flash_attn,
                                   .compute = cpu_compute_flash_attn,
                                   .scratch = cpu_scratch_flash_attn },
    [BP_OP_MUL_MAT_ID] = { .supports = cpu_supports_mul_mat_id, .compute = cpu_compute_mul_mat_id,
                           .prepare = cpu_prepare_mul_mat_id, .scratch = cpu_scratch_mul_mat_id,
                           .work = cpu_work_mul_mat_id },
    [BP_OP_TOP_K] = { .supports = cpu_supports_top_k, .compute = cpu_compute_top_k,
                      .scratch = cpu_scratch_top_k },
    [BP_OP_SUM_ROWS] = { .supports = cpu_supports_sum_rows, .compute = cpu_compute_sum_rows },
    [BP_OP_DIV] = { .supports = cpu_supports_binary, .compute = cpu_compute_div },
    [BP_OP_CLAMP] = { .supports = cpu_supports_unary, .compute = cpu_compute_clamp },
};

bool cpu_supports_node(const struct bp_tensor *node)
{
    /* The op's own shape rules (bp_op_shapes.h) first: each entry's
     * supports then only says which types and layouts its kernel takes. */
    if (!bp_op_shapes_ok(node))
        return false;
    if (bp_op_is_view((enum bp_op)node->op))
        return true;
    /* Only MUL_MAT and MUL_MAT_ID read the x8 layout, only as their whole weight. */
    if (cpu_tensor_touches_repacked(node))
        return false;
    for (int i = 0; i < BP_MAX_SRC; i++)
        if (cpu_tensor_touches_repacked(node->src[i]) &&
            !((node->op == BP_OP_MUL_MAT || node->op == BP_OP_MUL_MAT_ID) && i == 0 &&
              cpu_tensor_repacked(node->src[0])))
            return false;
    const struct cpu_op_entry *e = &cpu_op_table[node->op];
    return e->compute && e->supports && e->supports(node);
}
