/*
 * arch_qwen2moe.c — `qwen2moe` (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B), as
 * llama.cpp's src/models/qwen2moe.cpp: qwen2's attention (NEOX RoPE, Q/K/V
 * biases, queries n_embd wide, no output bias) and in every layer a mixture
 * of experts with softmax gating and top-k whose chosen weights are NOT
 * renormalised, plus a shared expert: a SwiGLU FFN of
 * expert_shared_feed_forward_length (default feed_forward_length) whose
 * output is scaled by sigmoid(ffn_gate_inp_shexp . x) and added. An
 * expert is expert_feed_forward_length wide, or feed_forward_length /
 * expert_used_count without the key. llama.cpp requires output.weight;
 * a file without it runs here with the embedding as the output.
 */
#include "arch_rows.h"

#include <stddef.h>

#include <backplane/backplane.h>

static const struct bp_arch_key qwen2moe_keys[] = {
    { "expert_feed_forward_length", BP_ARCH_KV_U32, false, offsetof(struct bp_run_hparams, n_ff_exp) },
    { "expert_shared_feed_forward_length", BP_ARCH_KV_U32, false,
      offsetof(struct bp_run_hparams, n_ff_shexp) },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_qwen2moe = {
    .name = "qwen2moe",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL | BP_ARCH_Q_EMBD | BP_ARCH_MOE | BP_ARCH_MOE_ONLY | BP_ARCH_MOE_UNNORMED |
             BP_ARCH_FF_EXP_PER_USED,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,
        BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_MOE_ROWS,
        BP_ARCH_ROW(FFN_GATE_INP_SHEXP) = BP_ARCH_USE, BP_ARCH_ROW(FFN_GATE_SHEXP) = BP_ARCH_USE,
        BP_ARCH_ROW(FFN_UP_SHEXP) = BP_ARCH_USE, BP_ARCH_ROW(FFN_DOWN_SHEXP) = BP_ARCH_USE,
    },
    .keys = qwen2moe_keys,
};
