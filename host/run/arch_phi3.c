/*
 * arch_phi3.c — `phi3` (Phi-3, Phi-3.5, Phi-4, Phi-4-mini), as llama.cpp's
 * src/models/phi3.cpp: a fused QKV, a fused gate|up projection (2 n_ff
 * rows, gate first), NEOX RoPE over the first rope.dimension_count values
 * of each head with longrope's long or short factors, an optional output
 * bias. Its sliding window is read and, as llama.cpp does, not applied.
 */
#include "arch_rows.h"
#include "model.h"

#include <backplane/backplane.h>

static const struct bp_arch_key phi3_keys[] = {
    { "attention.sliding_window", BP_ARCH_KV_U32, false, SIZE_MAX },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_phi3 = {
    .name = "phi3",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_FUSED_UP | BP_ARCH_Q_EMBD,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_ROW(ROPE_LONG) = BP_ARCH_USE, BP_ARCH_ROW(ROPE_SHORT) = BP_ARCH_USE,
        BP_ARCH_ROW(OUTPUT_B) = BP_ARCH_USE,
    },
    .keys = phi3_keys,
};
