/*
 * arch_qwen3.c — `qwen3` (Qwen3 dense), as llama.cpp's src/models/qwen3.cpp:
 * NEOX RoPE and a per-head RMS norm of Q and K before it; the head size
 * comes from attention.key_length and may differ from n_embd / n_head.
 */
#include "arch_rows.h"

#include <backplane/backplane.h>

const struct bp_arch bp_arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,
        BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_ROW(ATTN_Q_NORM) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_K_NORM) = BP_ARCH_USE,
    },
};
