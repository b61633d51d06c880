/*
 * arch_llama.c — `llama` (Llama 1-3.x, Mistral, Mixtral's dense kin, and the
 * many files converted as llama), as llama.cpp's src/models/llama.cpp reads
 * it: adjacent-pair RoPE (the converter permutes Q and K), SwiGLU, optional
 * biases on every projection, a tied or untied output, rope_freqs (Llama
 * 3.x) or longrope factors. With expert_count > 0 (Mixtral) the FFN is a
 * mixture of experts: softmax router, top-k, weights renormalised.
 */
#include "arch_rows.h"

#include <backplane/backplane.h>

const struct bp_arch bp_arch_llama = {
    .name = "llama",
    .rope_mode = BP_ROPE_MODE_NORMAL,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL | BP_ARCH_FACTORS_BY_SCALING | BP_ARCH_MOE,
    .rows = { BP_ARCH_LLAMA_ROWS, BP_ARCH_MOE_ROWS },
};
