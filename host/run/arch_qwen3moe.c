/*
 * arch_qwen3moe.c — `qwen3moe` (Qwen3-30B-A3B, Qwen3-235B-A22B), as
 * llama.cpp's src/models/qwen3moe.cpp: qwen3's attention (NEOX RoPE, per-head
 * RMS norms of Q and K) and a mixture-of-experts FFN in every layer with
 * softmax gating, top-k (expert_used_count) and the chosen weights
 * renormalised; no shared expert. Each expert is expert_feed_forward_length
 * wide.
 */
#include "arch_rows.h"

#include <stddef.h>

#include <backplane/backplane.h>

static const struct bp_arch_key qwen3moe_keys[] = {
    { "expert_feed_forward_length", BP_ARCH_KV_U32, true, offsetof(struct bp_run_hparams, n_ff_exp) },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_qwen3moe = {
    .name = "qwen3moe",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL | BP_ARCH_MOE | BP_ARCH_MOE_ONLY,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,
        BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_ROW(ATTN_Q_NORM) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_K_NORM) = BP_ARCH_USE,
        BP_ARCH_MOE_ROWS,
    },
    .keys = qwen3moe_keys,
};
