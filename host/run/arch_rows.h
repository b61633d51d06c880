/*
 * arch_rows.h — the schema rows every Llama-like architecture shares
 * (embedding, attention and FFN projections, their norms, the output), for
 * the architectures' tables (arch_<name>.c) to start from.
 */
#ifndef BP_RUN_ARCH_ROWS_H
#define BP_RUN_ARCH_ROWS_H

#include "arch.h"
#include "llama_schema.h"

/* Every row but ffn_gate (Phi-3 fuses it into ffn_up) and output (Gemma 2
 * always ties it): each table says those two itself, so no initialiser
 * overrides another. */
#define BP_ARCH_DECODER_ROWS                                                              \
    BP_ARCH_ROW(TOKEN_EMBD) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_NORM) = BP_ARCH_USE,          \
    BP_ARCH_ROW(ATTN_QKV) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_Q) = BP_ARCH_USE,               \
    BP_ARCH_ROW(ATTN_K) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_V) = BP_ARCH_USE,                 \
    BP_ARCH_ROW(ATTN_OUTPUT) = BP_ARCH_USE, BP_ARCH_ROW(FFN_NORM) = BP_ARCH_USE,          \
    BP_ARCH_ROW(FFN_UP) = BP_ARCH_USE, BP_ARCH_ROW(FFN_DOWN) = BP_ARCH_USE,               \
    BP_ARCH_ROW(OUTPUT_NORM) = BP_ARCH_USE

/* Q, K and V biases, separate or fused (llama.cpp's create_tensor_qkv). */
#define BP_ARCH_QKV_BIAS_ROWS                                                             \
    BP_ARCH_ROW(ATTN_QKV_B) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_Q_B) = BP_ARCH_USE,           \
    BP_ARCH_ROW(ATTN_K_B) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_V_B) = BP_ARCH_USE

/* Everything llama.cpp's llama loader reads (mistral3 reads the same):
 * biases on every projection, an optional output, and the RoPE factors. */
#define BP_ARCH_LLAMA_ROWS                                                                \
    BP_ARCH_DECODER_ROWS, BP_ARCH_QKV_BIAS_ROWS,                                          \
    BP_ARCH_ROW(FFN_GATE) = BP_ARCH_USE, BP_ARCH_ROW(OUTPUT) = BP_ARCH_USE,               \
    BP_ARCH_ROW(ROPE_FREQS) = BP_ARCH_USE, BP_ARCH_ROW(ROPE_LONG) = BP_ARCH_USE,          \
    BP_ARCH_ROW(ROPE_SHORT) = BP_ARCH_USE, BP_ARCH_ROW(ATTN_OUTPUT_B) = BP_ARCH_USE,      \
    BP_ARCH_ROW(FFN_GATE_B) = BP_ARCH_USE, BP_ARCH_ROW(FFN_UP_B) = BP_ARCH_USE,           \
    BP_ARCH_ROW(FFN_DOWN_B) = BP_ARCH_USE

/* The router and the stacked experts (present only with expert_count > 0). */
#define BP_ARCH_MOE_ROWS                                                                  \
    BP_ARCH_ROW(FFN_GATE_INP) = BP_ARCH_USE, BP_ARCH_ROW(FFN_GATE_EXPS) = BP_ARCH_USE,    \
    BP_ARCH_ROW(FFN_UP_EXPS) = BP_ARCH_USE, BP_ARCH_ROW(FFN_DOWN_EXPS) = BP_ARCH_USE

#endif /* BP_RUN_ARCH_ROWS_H */
