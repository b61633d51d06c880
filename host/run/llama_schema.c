/*
 * llama_schema.c — the rows of THE LLAMA SCHEMA (llama_schema.h) and the
 * few functions that read them. The row order is the tensors' layout order
 * (builtin models, their GGUF files): it must not change, or the built-in
 * models' files change.
 */
#include "llama_schema.h"
#include "arch.h"

#include <assert.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static_assert(BP_SCHEMA_ROW_COUNT <= BP_ARCH_MAX_ROWS, "struct bp_arch.rows holds every row");

#define GLOBAL(f) .per_layer = false, .field = offsetof(struct bp_run_model, f)
#define LAYER(f) .per_layer = true, .field = offsetof(struct bp_run_layer, f)
#define VEC(d) .n_dims = 1, .ne = { d, d }
#define MAT(d0, d1) .n_dims = 2, .ne = { d0, d1 }
#define EXPS(d0, d1) .n_dims = 3, .ne = { d0, d1, BP_LLAMA_DIM_EXPERT }
/* A norm or RoPE factor: f32, mirrored. */
#define F32VEC(d, pres) VEC(d), .presence = (pres), .split = BP_LLAMA_MIRROR, .f32 = true, \
                        .init = BP_LLAMA_INIT_NORM
/* A bias: optional, f32, cut like its projection's outputs. */
#define BIAS(d, sp) VEC(d), .presence = BP_LLAMA_OPTIONAL, .split = (sp), .f32 = true, \
                    .init = BP_LLAMA_INIT_EMBED

const struct bp_llama_tensor bp_llama_schema[BP_SCHEMA_ROW_COUNT] = {
    [BP_SCHEMA_ROW_TOKEN_EMBD] = { "token_embd.weight", GLOBAL(tok_embd), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_VOCAB),
                         .presence = BP_LLAMA_REQUIRED, .split = BP_LLAMA_MIRROR,
                         .init = BP_LLAMA_INIT_EMBED },
    /* RoPE frequency factors (Llama 3.x's llama3 scaling; longrope's pair). */
    [BP_SCHEMA_ROW_ROPE_FREQS] = { "rope_freqs.weight", GLOBAL(rope_freqs),
                                   F32VEC(BP_LLAMA_DIM_ROT_HALF, BP_LLAMA_OPTIONAL) },
    [BP_SCHEMA_ROW_ROPE_LONG] = { "rope_factors_long.weight", GLOBAL(rope_long),
                        F32VEC(BP_LLAMA_DIM_ROT_HALF, BP_LLAMA_OPTIONAL) },
    [BP_SCHEMA_ROW_ROPE_SHORT] = { "rope_factors_short.weight", GLOBAL(rope_short),
                         F32VEC(BP_LLAMA_DIM_ROT_HALF, BP_LLAMA_OPTIONAL) },
    [BP_SCHEMA_ROW_ATTN_NORM] = { "attn_norm.weight", LAYER(attn_norm), F32VEC(BP_LLAMA_DIM_EMBD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_ATTN_QKV] = { "attn_qkv.weight", LAYER(wqkv), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_PARTS),
                       .presence = BP_LLAMA_FUSED, .split = BP_LLAMA_COLS_PARTS, .mul_mat_only = true,
                       .init = BP_LLAMA_INIT_PARTS, .n_parts = 3,
                       .parts = { BP_SCHEMA_ROW_ATTN_Q, BP_SCHEMA_ROW_ATTN_K, BP_SCHEMA_ROW_ATTN_V } },
    [BP_SCHEMA_ROW_ATTN_Q] = { "attn_q.weight", LAYER(wq), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_Q),
                     .presence = BP_LLAMA_PART, .split = BP_LLAMA_COLS_Q, .mul_mat_only = true,
                     .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_ATTN_K] = { "attn_k.weight", LAYER(wk), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_KV),
                     .presence = BP_LLAMA_PART, .split = BP_LLAMA_COLS_KV, .mul_mat_only = true,
                     .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_ATTN_V] = { "attn_v.weight", LAYER(wv), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_KV),
                     .presence = BP_LLAMA_PART, .split = BP_LLAMA_COLS_KV, .mul_mat_only = true,
                     .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_ATTN_QKV_B] = { "attn_qkv.bias", LAYER(bqkv), BIAS(BP_LLAMA_DIM_PARTS, BP_LLAMA_COLS_PARTS),
                         .n_parts = 3,
                         .parts = { BP_SCHEMA_ROW_ATTN_Q_B, BP_SCHEMA_ROW_ATTN_K_B, BP_SCHEMA_ROW_ATTN_V_B } },
    [BP_SCHEMA_ROW_ATTN_Q_B] = { "attn_q.bias", LAYER(bq), BIAS(BP_LLAMA_DIM_Q, BP_LLAMA_COLS_Q) },
    [BP_SCHEMA_ROW_ATTN_K_B] = { "attn_k.bias", LAYER(bk), BIAS(BP_LLAMA_DIM_KV, BP_LLAMA_COLS_KV) },
    [BP_SCHEMA_ROW_ATTN_V_B] = { "attn_v.bias", LAYER(bv), BIAS(BP_LLAMA_DIM_KV, BP_LLAMA_COLS_KV) },
    /* Per-head RMS norms of Q and K (Qwen 3, Gemma 3). */
    [BP_SCHEMA_ROW_ATTN_Q_NORM] = { "attn_q_norm.weight", LAYER(q_norm), F32VEC(BP_LLAMA_DIM_HEAD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_ATTN_K_NORM] = { "attn_k_norm.weight", LAYER(k_norm), F32VEC(BP_LLAMA_DIM_HEAD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_ATTN_OUTPUT] = { "attn_output.weight", LAYER(wo), MAT(BP_LLAMA_DIM_Q, BP_LLAMA_DIM_EMBD),
                          .presence = BP_LLAMA_REQUIRED, .split = BP_LLAMA_ROWS_Q,
                          .mul_mat_only = true, .init = BP_LLAMA_INIT_LINEAR,
                          .input = "attn_out_in" },
    /* Added once after the row-parallel sum, so mirrored. */
    [BP_SCHEMA_ROW_ATTN_OUTPUT_B] = { "attn_output.bias", LAYER(bo), BIAS(BP_LLAMA_DIM_EMBD, BP_LLAMA_MIRROR) },
    [BP_SCHEMA_ROW_POST_ATTN_NORM] = { "post_attention_norm.weight", LAYER(post_attn_norm),
                             F32VEC(BP_LLAMA_DIM_EMBD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_FFN_NORM] = { "ffn_norm.weight", LAYER(ffn_norm), F32VEC(BP_LLAMA_DIM_EMBD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_FFN_GATE] = { "ffn_gate.weight", LAYER(gate), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF),
                       .presence = BP_LLAMA_REQUIRED, .moe = BP_LLAMA_MOE_DENSE, .split = BP_LLAMA_COLS_FF, .mul_mat_only = true,
                       .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_UP] = { "ffn_up.weight", LAYER(up), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF_UP),
                     .presence = BP_LLAMA_REQUIRED, .moe = BP_LLAMA_MOE_DENSE, .split = BP_LLAMA_COLS_FF, .mul_mat_only = true,
                     .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_DOWN] = { "ffn_down.weight", LAYER(down), MAT(BP_LLAMA_DIM_FF, BP_LLAMA_DIM_EMBD),
                       .presence = BP_LLAMA_REQUIRED, .moe = BP_LLAMA_MOE_DENSE, .split = BP_LLAMA_ROWS_FF, .mul_mat_only = true,
                       .init = BP_LLAMA_INIT_LINEAR, .input = "ffn_down_in" },
    [BP_SCHEMA_ROW_FFN_GATE_B] = { "ffn_gate.bias", LAYER(bgate), BIAS(BP_LLAMA_DIM_FF, BP_LLAMA_COLS_FF),
                                   .moe = BP_LLAMA_MOE_DENSE },
    [BP_SCHEMA_ROW_FFN_UP_B] = { "ffn_up.bias", LAYER(bup), BIAS(BP_LLAMA_DIM_FF_UP, BP_LLAMA_COLS_FF),
                                 .moe = BP_LLAMA_MOE_DENSE },
    [BP_SCHEMA_ROW_FFN_DOWN_B] = { "ffn_down.bias", LAYER(bdown), BIAS(BP_LLAMA_DIM_EMBD, BP_LLAMA_MIRROR),
                                   .moe = BP_LLAMA_MOE_DENSE },
    /* Mixture of experts: the router's logits per expert, and the experts'
     * gate, up and down projections stacked along dim 2, which MUL_MAT_ID
     * reads (only it, as src[0]; so may the router's, through MUL_MAT). */
    [BP_SCHEMA_ROW_FFN_GATE_INP] = { "ffn_gate_inp.weight", LAYER(gate_inp),
                           MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_EXPERT), .presence = BP_LLAMA_REQUIRED,
                           .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_MIRROR, .mul_mat_only = true,
                           .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_GATE_EXPS] = { "ffn_gate_exps.weight", LAYER(gate_exps),
                            EXPS(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF_EXP), .presence = BP_LLAMA_REQUIRED,
                            .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_COLS_FF_EXP, .mul_mat_only = true,
                            .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_UP_EXPS] = { "ffn_up_exps.weight", LAYER(up_exps),
                          EXPS(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF_EXP), .presence = BP_LLAMA_REQUIRED,
                          .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_COLS_FF_EXP, .mul_mat_only = true,
                          .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_DOWN_EXPS] = { "ffn_down_exps.weight", LAYER(down_exps),
                            EXPS(BP_LLAMA_DIM_FF_EXP, BP_LLAMA_DIM_EMBD), .presence = BP_LLAMA_REQUIRED,
                            .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_ROWS_FF_EXP, .mul_mat_only = true,
                            .init = BP_LLAMA_INIT_LINEAR, .input = "ffn_moe_down_in" },
    /* A shared expert beside the routed ones (Qwen2-MoE): a dense SwiGLU
     * FFN, cut like one, whose output is scaled per token by the sigmoid of
     * the gate vector's dot with the FFN's input. The vector is f32, as
     * llama.cpp's quantizer leaves every 1-D tensor. */
    [BP_SCHEMA_ROW_FFN_GATE_INP_SHEXP] = { "ffn_gate_inp_shexp.weight", LAYER(gate_inp_shexp), VEC(BP_LLAMA_DIM_EMBD),
                                 .presence = BP_LLAMA_REQUIRED, .moe = BP_LLAMA_MOE_ONLY,
                                 .split = BP_LLAMA_MIRROR, .f32 = true, .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_GATE_SHEXP] = { "ffn_gate_shexp.weight", LAYER(gate_shexp),
                             MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF_SHEXP), .presence = BP_LLAMA_REQUIRED,
                             .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_COLS_FF, .mul_mat_only = true,
                             .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_UP_SHEXP] = { "ffn_up_shexp.weight", LAYER(up_shexp),
                           MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_FF_SHEXP), .presence = BP_LLAMA_REQUIRED,
                           .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_COLS_FF, .mul_mat_only = true,
                           .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_FFN_DOWN_SHEXP] = { "ffn_down_shexp.weight", LAYER(down_shexp),
                             MAT(BP_LLAMA_DIM_FF_SHEXP, BP_LLAMA_DIM_EMBD), .presence = BP_LLAMA_REQUIRED,
                             .moe = BP_LLAMA_MOE_ONLY, .split = BP_LLAMA_ROWS_FF, .mul_mat_only = true,
                             .init = BP_LLAMA_INIT_LINEAR, .input = "ffn_shexp_down_in" },
    [BP_SCHEMA_ROW_POST_FFW_NORM] = { "post_ffw_norm.weight", LAYER(post_ffw_norm),
                            F32VEC(BP_LLAMA_DIM_EMBD, BP_LLAMA_REQUIRED) },
    [BP_SCHEMA_ROW_OUTPUT_NORM] = { "output_norm.weight", GLOBAL(out_norm),
                                    F32VEC(BP_LLAMA_DIM_EMBD, BP_LLAMA_REQUIRED) },
    /* Tied (absent): the embedding is the output projection, read by
     * GET_ROWS too, so it stays mirrored and in the default layout. */
    [BP_SCHEMA_ROW_OUTPUT] = { "output.weight", GLOBAL(output), MAT(BP_LLAMA_DIM_EMBD, BP_LLAMA_DIM_VOCAB),
                     .presence = BP_LLAMA_UNTIED, .split = BP_LLAMA_COLS_VOCAB, .mul_mat_only = true,
                     .init = BP_LLAMA_INIT_LINEAR },
    [BP_SCHEMA_ROW_OUTPUT_B] = { "output.bias", GLOBAL(output_b), BIAS(BP_LLAMA_DIM_VOCAB, BP_LLAMA_COLS_VOCAB) },
};
const size_t bp_llama_schema_rows = BP_SCHEMA_ROW_COUNT;

#undef GLOBAL
#undef LAYER
#undef VEC
#undef MAT
#undef EXPS
#undef F32VEC
#undef BIAS

int64_t bp_llama_dim_value(const struct bp_run_hparams *hp, enum bp_llama_dim d)
{
    switch (d) {
    case BP_LLAMA_DIM_EMBD: return hp->n_embd;
    case BP_LLAMA_DIM_VOCAB: return hp->n_vocab;
    case BP_LLAMA_DIM_FF: return hp->n_ff;
    case BP_LLAMA_DIM_Q: return hp->n_head * hp->head_dim;
    case BP_LLAMA_DIM_KV: return hp->n_head_kv * hp->head_dim;
    case BP_LLAMA_DIM_HEAD: return hp->head_dim;
    case BP_LLAMA_DIM_ROT_HALF: return hp->n_rot / 2;
    case BP_LLAMA_DIM_FF_UP: return hp->n_ff_up ? hp->n_ff_up : hp->n_ff;
    case BP_LLAMA_DIM_EXPERT: return hp->n_expert;
    case BP_LLAMA_DIM_FF_EXP: return hp->n_ff_exp ? hp->n_ff_exp : hp->n_ff;
    case BP_LLAMA_DIM_FF_SHEXP: return hp->n_ff_shexp ? hp->n_ff_shexp : hp->n_ff;
    case BP_LLAMA_DIM_PARTS: break;
    }
    return 0; /* PARTS is a row's, not the hyper-parameters' */
}

void bp_llama_tensor_shape(const struct bp_llama_tensor *r, const struct bp_run_hparams *hp, int64_t ne[4])
{
    ne[0] = ne[1] = ne[2] = ne[3] = 1;
    for (int i = 0; i < r->n_dims; i++) ne[i] = bp_llama_dim_value(hp, r->ne[i]);
    const int last = r->n_dims - 1; /* a fused row stacks its parts along its last dim */
    if (r->ne[last] == BP_LLAMA_DIM_PARTS) {
        ne[last] = 0;
        for (int i = 0; i < r->n_parts; i++)
            ne[last] += bp_llama_dim_value(hp, bp_llama_schema[r->parts[i]].ne[last]);
    }
}

const char *bp_llama_tensor_name(const struct bp_llama_tensor *r, int64_t l, char *buf, size_t cap)
{
    if (!r->per_layer) snprintf(buf, cap, "%s", r->name);
    else if (l < 0) snprintf(buf, cap, "blk.*.%s", r->name);
    else snprintf(buf, cap, "blk.%" PRId64 ".%s", l, r->name);
    return buf;
}

const struct bp_llama_tensor *bp_llama_fused_of(const struct bp_llama_tensor *r)
{
    for (size_t i = 0; r->presence == BP_LLAMA_PART && i < BP_SCHEMA_ROW_COUNT; i++)
        for (int k = 0; k < bp_llama_schema[i].n_parts; k++)
            if (&bp_llama_schema[bp_llama_schema[i].parts[k]] == r) return &bp_llama_schema[i];
    return NULL;
}

const struct bp_llama_tensor *bp_llama_vocab_row(void)
{
    for (size_t i = 0; i < BP_SCHEMA_ROW_COUNT; i++)
        if (!bp_llama_schema[i].per_layer && bp_llama_schema[i].presence == BP_LLAMA_REQUIRED &&
            bp_llama_schema[i].n_dims == 2 && bp_llama_schema[i].ne[1] == BP_LLAMA_DIM_VOCAB)
            return &bp_llama_schema[i];
    return &bp_llama_schema[BP_SCHEMA_ROW_TOKEN_EMBD]; /* not reached: the table has one */
}

enum bp_llama_presence bp_llama_row_use(const struct bp_arch *a, const struct bp_llama_tensor *r)
{
    switch ((enum bp_arch_use)(a ? a : &bp_arch_llama)->rows[r - bp_llama_schema]) {
    case BP_ARCH_NO: return BP_LLAMA_ABSENT;
    case BP_ARCH_OPTIONAL: return BP_LLAMA_OPTIONAL;
    case BP_ARCH_USE: break;
    }
    return r->presence;
}

enum bp_llama_presence bp_llama_row_use_hp(const struct bp_run_hparams *hp, const struct bp_llama_tensor *r)
{
    if ((r->moe == BP_LLAMA_MOE_DENSE && hp->n_expert > 0) || (r->moe == BP_LLAMA_MOE_ONLY && hp->n_expert <= 0))
        return BP_LLAMA_ABSENT;
    return bp_llama_row_use(hp->arch, r);
}

bool bp_llama_row_present(const struct bp_arch *a, const struct bp_llama_tensor *r, bool fused, bool tied)
{
    switch (bp_llama_row_use(a, r)) {
    case BP_LLAMA_REQUIRED: return true;
    case BP_LLAMA_FUSED: return fused;
    case BP_LLAMA_PART: return !fused;
    case BP_LLAMA_UNTIED: return !tied;
    case BP_LLAMA_ABSENT: case BP_LLAMA_OPTIONAL: return false;
    }
    return false;
}

const struct bp_run_weight **bp_llama_slot(const struct bp_llama_tensor *r, struct bp_run_model *m, int64_t l)
{
    char *base = r->per_layer ? (char *)&m->layers[l] : (char *)m;
    return (const struct bp_run_weight **)(void *)(base + r->field);
}

const struct bp_run_weight *bp_llama_get(const struct bp_llama_tensor *r, const struct bp_run_model *m,
                                         int64_t l)
{
    const char *base = r->per_layer ? (const char *)&m->layers[l] : (const char *)m;
    const struct bp_run_weight *w;
    memcpy(&w, base + r->field, sizeof w);
    return w;
}

int bp_llama_schema_walk(const struct bp_run_hparams *hp, bool fused, bool tied,
                         int (*fn)(void *user, const struct bp_llama_tensor *r, int64_t l), void *user)
{
    size_t i = 0;
    while (i < BP_SCHEMA_ROW_COUNT) {
        const struct bp_llama_tensor *r = &bp_llama_schema[i];
        if (!r->per_layer) {
            int e = bp_llama_row_use_hp(hp, r) != BP_LLAMA_ABSENT &&
                    bp_llama_row_present(hp->arch, r, fused, tied) ? fn(user, r, -1) : 0;
            if (e) return e;
            i++;
            continue;
        }
        size_t end = i; /* the run of per-layer rows from i, repeated per layer */
        while (end < BP_SCHEMA_ROW_COUNT && bp_llama_schema[end].per_layer) end++;
        for (int64_t l = 0; l < hp->n_layer; l++)
            for (size_t j = i; j < end; j++) {
                int e = bp_llama_row_use_hp(hp, &bp_llama_schema[j]) != BP_LLAMA_ABSENT &&
                        bp_llama_row_present(hp->arch, &bp_llama_schema[j], fused, tied)
                            ? fn(user, &bp_llama_schema[j], l) : 0;
                if (e) return e;
            }
        i = end;
    }
    return 0;
}

/* llama.cpp's mixes that backplane's types can hold. Q4_K_S is not one: it
 * puts Q5_K in the first layers' attn_v and ffn_down. Q4_0, Q8_0 and Q6_K
 * stay pure here (a mix is asked for by name), although llama.cpp's Q4_0
 * puts output.weight in Q6_K. */
const struct bp_llama_mix bp_llama_mixes[] = {
    { "q4_K_M", 15, BP_TYPE_Q4_K, 4, {
        { BP_SCHEMA_ROW_OUTPUT, BP_LLAMA_EVERY_LAYER, BP_TYPE_Q6_K },
        /* attn_qkv counts as attn_v there (category_is_attn_v) */
        { BP_SCHEMA_ROW_ATTN_V, BP_LLAMA_MORE_BITS, BP_TYPE_Q6_K },
        { BP_SCHEMA_ROW_ATTN_QKV, BP_LLAMA_MORE_BITS, BP_TYPE_Q6_K },
        { BP_SCHEMA_ROW_FFN_DOWN, BP_LLAMA_MORE_BITS, BP_TYPE_Q6_K },
    } },
};
const size_t bp_llama_mix_count = sizeof bp_llama_mixes / sizeof bp_llama_mixes[0];

const struct bp_llama_mix *bp_llama_mix_by_name(const char *name)
{
    for (size_t i = 0; name && i < bp_llama_mix_count; i++)
        if (!strcasecmp(bp_llama_mixes[i].name, name)) return &bp_llama_mixes[i];
    return NULL;
}

static bool more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

enum bp_type bp_llama_mix_type(const struct bp_llama_mix *mix, const struct bp_llama_tensor *r, int64_t l,
                               int64_t n_layer, bool tied)
{
    if (r->f32) return BP_TYPE_F32;
    if (tied && r == bp_llama_vocab_row()) r = &bp_llama_schema[BP_SCHEMA_ROW_OUTPUT];
    for (int i = 0; i < mix->n_rules; i++) {
        const struct bp_llama_mix_rule *u = &mix->rules[i];
        if (&bp_llama_schema[u->row] == r &&
            (!r->per_layer || u->layers == BP_LLAMA_EVERY_LAYER || more_bits(l, n_layer)))
            return u->type;
    }
    return mix->base;
}
