/*
 * arch_qwen2.c — `qwen2` (Qwen2, Qwen2.5, QwQ, DeepSeek-R1-Distill-Qwen), as
 * llama.cpp's src/models/qwen2.cpp: llama with NEOX RoPE, Q/K/V biases and
 * an optional output bias; queries are n_embd wide, heads rotate whole.
 */
#include "arch_rows.h"

#include <backplane/backplane.h>

const struct bp_arch bp_arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL | BP_ARCH_Q_EMBD,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,
        BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_ROW(OUTPUT_B) = BP_ARCH_USE,
    },
};
