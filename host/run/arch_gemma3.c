/*
 * arch_gemma3.c — `gemma3` (text), as llama.cpp's src/models/gemma3.cpp:
 * gemma2 without the attention cap, with per-head Q/K norms, sliding-window
 * layers five of every six (only when the file gives a window) rotating at
 * their own base (10000) without the rope scaling the global layers use, an
 * optional final cap and an optional untied output.
 */
#include "arch_rows.h"
#include "model.h"

#include <backplane/backplane.h>

#define HP(f) offsetof(struct bp_run_hparams, f)

static const struct bp_arch_key gemma3_keys[] = {
    { "attention.sliding_window", BP_ARCH_KV_U32, false, HP(n_swa) },
    { "attention.sliding_window_pattern", BP_ARCH_KV_U32, false, HP(swa_period) },
    { "final_logit_softcapping", BP_ARCH_KV_F32, false, HP(final_softcap) },
    { "rope.freq_base_swa", BP_ARCH_KV_F32, false, HP(rope_base_swa) },
    { NULL, 0, false, 0 },
};

const struct bp_arch bp_arch_gemma3 = {
    .name = "gemma3",
    .rope_mode = BP_ROPE_MODE_NEOX,
    .act = BP_ARCH_ACT_GELU,
    .flags = BP_ARCH_EMBED_SCALE | BP_ARCH_SWA_NO_SCALING,
    .rows = {
        BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,
        BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,
        BP_ARCH_ROW(ATTN_Q_NORM) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_K_NORM) = BP_ARCH_USE,
        BP_ARCH_ROW(POST_ATTN_NORM) = BP_ARCH_USE, BP_ARCH_ROW(POST_FFW_NORM) = BP_ARCH_USE,
    },
    .keys = gemma3_keys,
    .swa_period = 6,
    .rope_base_swa = 10000.0f,
    .qscale_embd_depth = 62,
};
