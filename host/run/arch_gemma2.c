/*
 * arch_gemma2.c — `gemma2`, as llama.cpp's src/models/gemma2.cpp: embeddings
 * times sqrt(n_embd), GeGLU, norms after attention and FFN as well as
 * before, attention scores capped at 50 and logits at 30 (keys may change
 * both), a 4096-token sliding window on every other layer (layers 0, 2, ...),
 * NEOX RoPE, and always a tied output.
 */
#include "arch_rows.h"
#include "model.h"

#include <backplane/backplane.h>

#define HP(f) offsetof(struct bp_run_hparams, f)

static const struct bp_arch_key gemma2_keys[] = {
    { "attention.sliding_window", BP_ARCH_KV_U32, false, HP(n_swa) },
    { "attention.sliding_window_pattern", BP_ARCH_KV_U32, false, HP(swa_period) },
    { "attn_logit_softcapping", BP_ARCH_KV_F32, false, HP(attn_softcap) },
    { "final_logit_softcapping", BP_ARCH_KV_F32, false, HP(final_softcap) },
    { "rope.freq_base_swa", BP_ARCH_KV_F32, false, HP(rope_base_swa) },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_gemma2 = {
    .name = "gemma2",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_GELU,
    .flags = BP_ARCH_EMBED_SCALE,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS, BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE,
        BP_ARCH_ROW(POST_ATTN_NORM) = BP_ARCH_USE, BP_ARCH_ROW(POST_FFW_NORM) = BP_ARCH_USE,
    },
    .keys = gemma2_keys,
    .swa_period = 2,
    .n_swa = 4096,
    .attn_softcap = 50.0f,
    .final_softcap = 30.0f,
    .qscale_embd_depth = 46,
};
