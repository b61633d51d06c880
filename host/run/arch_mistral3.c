/*
 * arch_mistral3.c — `mistral3` (Ministral 3, Mistral Small/Large files the
 * newer converters write), as llama.cpp reads it: the llama tensors and
 * graph, plus the YaRN keys llama ignores (beta_fast, beta_slow and the log
 * multiplier of the magnitude) and an optional attention temperature that
 * scales Q by 1 + t ln(1 + floor(pos / original context)).
 */
#include "arch_rows.h"
#include "model.h"

#include <backplane/backplane.h>

#define HP(f) offsetof(struct bp_run_hparams, f)

static const struct bp_arch_key mistral3_keys[] = {
    { "rope.scaling.yarn_beta_fast", BP_ARCH_KV_F32, false, HP(yarn_beta_fast) },
    { "rope.scaling.yarn_beta_slow", BP_ARCH_KV_F32, false, HP(yarn_beta_slow) },
    { "rope.scaling.yarn_log_multiplier", BP_ARCH_KV_F32, false, HP(yarn_log_mul) },
    { "attention.temperature_scale", BP_ARCH_KV_F32, false, HP(attn_temp_scale) },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_mistral3 = {
    .name = "mistral3",
    .rope_mode = BP_ROPE_MODE_NORMAL,
    .act = BP_ARCH_ACT_SILU,
    .flags = BP_ARCH_ROT_FULL | BP_ARCH_FACTORS_BY_SCALING | BP_ARCH_ATTN_TEMP,
    .rows = { BP_ARCH_LLAMA_ROWS },
    .keys = mistral3_keys,
};
