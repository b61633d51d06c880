/*
 * quant_presets.c — llama.cpp's presets and per-tensor type choice as
 * tables (the contract is in quant_presets.h). Every table below follows
 * src/llama-quant.cpp of the llama.cpp that node-llama-cpp 3.22.1 ships,
 * in its order where order decides: the category of a name is the first
 * pattern that matches, and the type of a tensor is the first rule whose
 * preset, category and conditions all hold. Only the branches that can
 * fire for the presets here are written; llama.cpp's IQ1-IQ3, TQ and MXFP4
 * branches never apply to them, and neither does anything that needs an
 * importance matrix.
 */
#include "quant_presets.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Preset indices: the rules name presets by bit. */
enum {
    P_Q4_0, P_Q4_1, P_Q5_0, P_Q5_1, P_Q2_K, P_Q3_K_S, P_Q3_K_M, P_Q3_K_L, P_IQ4_NL, P_IQ4_XS,
    P_Q4_K_S, P_Q4_K_M, P_Q5_K_S, P_Q5_K_M, P_Q6_K, P_Q8_0, P_F16, P_BF16, P_F32, P_COUNT
};

const struct bp_quant_preset bp_quant_presets[P_COUNT] = {
    [P_Q4_0] = { "Q4_0", 2, BP_TYPE_Q4_0, "4.5 bpw legacy; output.weight Q6_K" },
    [P_Q4_1] = { "Q4_1", 3, BP_TYPE_Q4_1, "5.0 bpw legacy with a minimum; output.weight Q6_K" },
    [P_Q5_0] = { "Q5_0", 8, BP_TYPE_Q5_0, "5.5 bpw legacy; output.weight Q6_K" },
    [P_Q5_1] = { "Q5_1", 9, BP_TYPE_Q5_1, "6.0 bpw legacy with a minimum; output.weight Q6_K" },
    [P_Q2_K] = { "Q2_K", 10, BP_TYPE_Q2_K,
                 "Q2_K; attn_v Q3_K (Q4_K at 4+ heads per kv head), ffn_down Q3_K" },
    [P_Q3_K_S] = { "Q3_K_S", 11, BP_TYPE_Q3_K, "Q3_K throughout; output.weight Q6_K" },
    [P_Q3_K_M] = { "Q3_K_M", 12, BP_TYPE_Q3_K,
                   "Q3_K; attn_v, ffn_down, attn_output Q4_K (first layers Q5_K)" },
    [P_Q3_K_L] = { "Q3_K_L", 13, BP_TYPE_Q3_K, "Q3_K; attn_v, ffn_down and attn_output Q5_K" },
    [P_IQ4_NL] = { "IQ4_NL", 25, BP_TYPE_IQ4_NL,
                   "4.5 bpw non-linear; first eighth of ffn_down Q5_K" },
    [P_IQ4_XS] = { "IQ4_XS", 30, BP_TYPE_IQ4_XS,
                   "4.25 bpw non-linear; first eighth of ffn_down Q5_K" },
    [P_Q4_K_S] = { "Q4_K_S", 14, BP_TYPE_Q4_K, "Q4_K; first four attn_v and first eighth of ffn_down Q5_K" },
    [P_Q4_K_M] = { "Q4_K_M", 15, BP_TYPE_Q4_K, "Q4_K; about half of attn_v and ffn_down Q6_K" },
    [P_Q5_K_S] = { "Q5_K_S", 16, BP_TYPE_Q5_K, "Q5_K throughout; output.weight Q6_K" },
    [P_Q5_K_M] = { "Q5_K_M", 17, BP_TYPE_Q5_K, "Q5_K; about half of attn_v and ffn_down Q6_K" },
    [P_Q6_K] = { "Q6_K", 18, BP_TYPE_Q6_K, "Q6_K throughout" },
    [P_Q8_0] = { "Q8_0", 7, BP_TYPE_Q8_0, "Q8_0 throughout" },
    /* float types: no rules and no fallbacks (llama.cpp applies both only
     * when the base type is a quantized one) */
    [P_F16] = { "F16", 1, BP_TYPE_F16, "16-bit floats" },
    [P_BF16] = { "BF16", 32, BP_TYPE_BF16, "bfloat16" },
    [P_F32] = { "F32", 0, BP_TYPE_F32, "32-bit floats" },
};
const size_t bp_quant_preset_count = P_COUNT;

/* Other names llama-quantize takes for a preset. */
static const struct { const char *alias; int preset; } aliases[] = {
    { "Q3_K", P_Q3_K_M }, { "Q4_K", P_Q4_K_M }, { "Q5_K", P_Q5_K_M },
};

const struct bp_quant_preset *bp_quant_preset_by_name(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < P_COUNT; i++)
        if (!strcasecmp(bp_quant_presets[i].name, name)) return &bp_quant_presets[i];
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(aliases[i].alias, name)) return &bp_quant_presets[aliases[i].preset];
    return NULL;
}

/* ------------------------------------------------- which tensors convert */

/* Names containing one of these keep their type (tensor_allows_quantization):
 * norms, MoE routers, Gemma 3n's small per-layer tensors, Mamba and RWKV
 * small weights, T5's relative bias, vision and audio encoder parts. */
static const char *const kept_if_contains[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
    "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd",
};
/* Whole names that keep their type: position embeddings and BERT's token
 * types. */
static const char *const kept_if_named[] = { "position_embd.weight", "token_types.weight" };

bool bp_quant_tensor_converted(const char *name, int n_dims)
{
    if (n_dims < 2) return false;
    const size_t n = strlen(name);
    /* llama.cpp tests name.rfind("weight") == name.size() - 6, which a
     * 5-character name also passes (both sides are npos there). */
    if (!(n >= 6 ? !strcmp(name + n - 6, "weight") : n == 5)) return false;
    for (size_t i = 0; i < sizeof kept_if_contains / sizeof kept_if_contains[0]; i++)
        if (strstr(name, kept_if_contains[i])) return false;
    for (size_t i = 0; i < sizeof kept_if_named / sizeof kept_if_named[0]; i++)
        if (!strcmp(name, kept_if_named[i])) return false;
    return true;
}

/* ------------------------------------------------------------ categories */

enum cat {
    C_TOKEN_EMBD, C_ATTN_Q, C_ATTN_V, C_ATTN_K, C_ATTN_QKV, C_ATTN_KV_B, C_ATTN_OUTPUT,
    C_FFN_UP, C_FFN_GATE, C_FFN_DOWN, C_OUTPUT, C_OTHER
};

/* tensor_get_category: the first row that matches, whole name or part. */
static const struct { bool whole; const char *text; enum cat cat; } categories[] = {
    { true, "output.weight", C_OUTPUT },
    { true, "token_embd.weight", C_TOKEN_EMBD },
    { true, "per_layer_token_embd.weight", C_TOKEN_EMBD },
    { false, "attn_qkv.weight", C_ATTN_QKV },
    { false, "attn_kv_b.weight", C_ATTN_KV_B },
    { false, "attn_v.weight", C_ATTN_V },
    { false, "attn_k.weight", C_ATTN_K },
    { false, "attn_q.weight", C_ATTN_Q },
    { false, "attn_output.weight", C_ATTN_OUTPUT },
    { false, "ffn_up", C_FFN_UP },
    { false, "ffn_gate", C_FFN_GATE },
    { false, "ffn_down", C_FFN_DOWN },
};

static enum cat category_of(const char *name)
{
    for (size_t i = 0; i < sizeof categories / sizeof categories[0]; i++)
        if (categories[i].whole ? !strcmp(name, categories[i].text) : strstr(name, categories[i].text) != NULL)
            return categories[i].cat;
    return C_OTHER;
}

#define CAT(c) (1u << (c))
/* category_is_attn_v: fused QKV and MLA's kv_b follow attn_v's rules (and
 * llama.cpp's separate ATTENTION_QKV branch, after it, is never reached). */
#define ATTN_V_LIKE (CAT(C_ATTN_V) | CAT(C_ATTN_QKV) | CAT(C_ATTN_KV_B))

bool bp_quant_is_attn_v(const char *name)
{
    return (CAT(category_of(name)) & ATTN_V_LIKE) != 0;
}

/* ----------------------------------------------------------------- rules */

/* Conditions a rule can require (all of its bits must hold). (i, n) is the
 * tensor's position among its kind: for attn_v-like tensors the count seen
 * so far of n_attn_v, for ffn_down the layer of n_layer. */
enum {
    W_GQA4 = 1 << 0,         /* n_head / n_head_kv >= 4 */
    W_FIRST2 = 1 << 1,       /* i < 2 */
    W_FIRST4 = 1 << 2,       /* i < 4 */
    W_EIGHTH = 1 << 3,       /* i < n/8 */
    W_SIXTEENTH = 1 << 4,    /* i < n/16 */
    W_MORE_BITS = 1 << 5,    /* use_more_bits(i, n): first and last eighth, every third between */
    W_FALCON = 1 << 6,
    W_NOT_FALCON = 1 << 7,
    W_EXPERT8 = 1 << 8,      /* exactly 8 experts */
    W_ROW_PARTIAL = 1 << 9,  /* ne0 is not a multiple of the base type's block */
    W_70B = 1 << 10,
};

#define PRE(p) (1u << (p))
#define ALL_PRESETS ((1u << P_COUNT) - 1)
/* The type the rule keeps: the base type, unchanged (ends the search). */
#define KEEP BP_TYPE_COUNT

struct rule {
    uint32_t presets;
    uint32_t cats;
    uint32_t when;
    enum bp_type type;
};

/* llama_tensor_get_type_impl for these presets, first match wins. A tied
 * token_embd is looked up as output.weight. */
static const struct rule rules[] = {
    /* output.weight (and a tied token_embd) */
    { ALL_PRESETS, CAT(C_OUTPUT), W_FALCON, BP_TYPE_Q8_0 },
    { ALL_PRESETS, CAT(C_OUTPUT), W_ROW_PARTIAL, BP_TYPE_Q8_0 },
    { PRE(P_Q8_0), CAT(C_OUTPUT), 0, KEEP },
    { ALL_PRESETS, CAT(C_OUTPUT), 0, BP_TYPE_Q6_K },
    /* attn_v, attn_qkv, attn_kv_b */
    { PRE(P_Q2_K), ATTN_V_LIKE, W_GQA4, BP_TYPE_Q4_K },
    { PRE(P_Q2_K), ATTN_V_LIKE, 0, BP_TYPE_Q3_K },
    { PRE(P_Q3_K_M), ATTN_V_LIKE, W_FIRST2, BP_TYPE_Q5_K },
    { PRE(P_Q3_K_M), ATTN_V_LIKE, 0, BP_TYPE_Q4_K },
    { PRE(P_Q3_K_L), ATTN_V_LIKE, 0, BP_TYPE_Q5_K },
    { PRE(P_IQ4_NL) | PRE(P_IQ4_XS), ATTN_V_LIKE, W_GQA4, BP_TYPE_Q5_K },
    { PRE(P_Q4_K_M) | PRE(P_Q5_K_M), ATTN_V_LIKE, W_MORE_BITS, BP_TYPE_Q6_K },
    { PRE(P_Q4_K_S), ATTN_V_LIKE, W_FIRST4, BP_TYPE_Q5_K },
    /* attn_k */
    { ALL_PRESETS, CAT(C_ATTN_K), W_EXPERT8, BP_TYPE_Q8_0 },
    /* ffn_down */
    { PRE(P_Q2_K), CAT(C_FFN_DOWN), 0, BP_TYPE_Q3_K },
    { PRE(P_Q3_K_M), CAT(C_FFN_DOWN), W_SIXTEENTH, BP_TYPE_Q5_K },
    { PRE(P_Q3_K_M), CAT(C_FFN_DOWN), W_NOT_FALCON, BP_TYPE_Q4_K },
    { PRE(P_Q3_K_M), CAT(C_FFN_DOWN), W_MORE_BITS, BP_TYPE_Q4_K },
    { PRE(P_Q3_K_M), CAT(C_FFN_DOWN), 0, BP_TYPE_Q3_K },
    { PRE(P_Q3_K_L), CAT(C_FFN_DOWN), W_FALCON, BP_TYPE_Q4_K },
    { PRE(P_Q3_K_L), CAT(C_FFN_DOWN), 0, BP_TYPE_Q5_K },
    { PRE(P_Q4_K_M), CAT(C_FFN_DOWN), W_FALCON | W_SIXTEENTH, BP_TYPE_Q6_K },
    { PRE(P_Q4_K_M), CAT(C_FFN_DOWN), W_FALCON | W_MORE_BITS, BP_TYPE_Q5_K },
    { PRE(P_Q4_K_M), CAT(C_FFN_DOWN), W_FALCON, KEEP },
    { PRE(P_Q4_K_M), CAT(C_FFN_DOWN), W_MORE_BITS, BP_TYPE_Q6_K },
    { PRE(P_IQ4_NL) | PRE(P_IQ4_XS), CAT(C_FFN_DOWN), W_EIGHTH, BP_TYPE_Q5_K },
    { PRE(P_Q5_K_M), CAT(C_FFN_DOWN), W_MORE_BITS, BP_TYPE_Q6_K },
    { PRE(P_Q4_K_S), CAT(C_FFN_DOWN), W_NOT_FALCON | W_EIGHTH, BP_TYPE_Q5_K },
    /* attn_output */
    { PRE(P_Q3_K_L), CAT(C_ATTN_OUTPUT), W_FALCON, BP_TYPE_Q4_K },
    { ALL_PRESETS, CAT(C_ATTN_OUTPUT), W_FALCON, KEEP },
    { PRE(P_Q2_K) | PRE(P_Q3_K_S) | PRE(P_Q3_K_M) | PRE(P_IQ4_NL) | PRE(P_Q4_K_S) | PRE(P_Q4_K_M) |
      PRE(P_IQ4_XS), CAT(C_ATTN_OUTPUT), W_EXPERT8, BP_TYPE_Q5_K },
    { ALL_PRESETS, CAT(C_ATTN_OUTPUT), W_EXPERT8, KEEP },
    { PRE(P_Q2_K), CAT(C_ATTN_OUTPUT), 0, BP_TYPE_Q3_K },
    { PRE(P_Q3_K_M), CAT(C_ATTN_OUTPUT), 0, BP_TYPE_Q4_K },
    { PRE(P_Q3_K_L), CAT(C_ATTN_OUTPUT), 0, BP_TYPE_Q5_K },
};

/* Adjustments after the rules, applied in turn to attn_v-like tensors of
 * every preset: a 70B model's attn_v is 8x smaller than attn_q, and an
 * 8-expert model's is cheap beside its experts. */
static const struct {
    uint32_t when;
    enum bp_type from_a, from_b; /* KEEP: from any type */
    enum bp_type type;
} attn_v_bumps[] = {
    { W_70B, BP_TYPE_Q3_K, BP_TYPE_Q4_K, BP_TYPE_Q5_K },
    { W_EXPERT8, KEEP, KEEP, BP_TYPE_Q8_0 },
};

/* tensor_type_fallback: the type a row that does not divide into the
 * chosen type's blocks gets instead, F16 when that does not divide either.
 * The 32-value types have no smaller block to fall to: F16 directly, as the
 * llama.cpp that node-llama-cpp 3.22.1 ships was measured to write (the
 * llama-quant.cpp source these tables were read from throws there). */
static const struct { enum bp_type from, to; } fallbacks[] = {
    { BP_TYPE_IQ4_XS, BP_TYPE_IQ4_NL }, { BP_TYPE_Q2_K, BP_TYPE_Q4_0 }, { BP_TYPE_Q3_K, BP_TYPE_Q4_0 },
    { BP_TYPE_Q4_K, BP_TYPE_Q5_0 },     { BP_TYPE_Q5_K, BP_TYPE_Q5_1 }, { BP_TYPE_Q6_K, BP_TYPE_Q8_0 },
    { BP_TYPE_Q4_0, BP_TYPE_F16 },      { BP_TYPE_Q4_1, BP_TYPE_F16 },  { BP_TYPE_Q5_0, BP_TYPE_F16 },
    { BP_TYPE_Q5_1, BP_TYPE_F16 },      { BP_TYPE_Q8_0, BP_TYPE_F16 },  { BP_TYPE_IQ4_NL, BP_TYPE_F16 },
};

static bool more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool holds(uint32_t when, const struct bp_quant_model *m, int64_t i, int64_t n, bool row_partial)
{
    const struct { uint32_t bit; bool value; } conds[] = {
        { W_GQA4, m->n_gqa >= 4 },
        { W_FIRST2, i < 2 },
        { W_FIRST4, i < 4 },
        { W_EIGHTH, i < n / 8 },
        { W_SIXTEENTH, i < n / 16 },
        { W_MORE_BITS, more_bits(i, n) },
        { W_FALCON, m->falcon },
        { W_NOT_FALCON, !m->falcon },
        { W_EXPERT8, m->n_expert == 8 },
        { W_ROW_PARTIAL, row_partial },
        { W_70B, m->is_70b },
    };
    for (size_t k = 0; k < sizeof conds / sizeof conds[0]; k++)
        if ((when & conds[k].bit) && !conds[k].value) return false;
    return true;
}

/* The architectures whose 80-layer models llama.cpp's load_hparams calls
 * LLM_TYPE_70B (llama only with grouped-query attention and not 8 experts:
 * 80 layers with n_head_kv == n_head is its 65B). */
static const struct { const char *arch; bool needs_gqa; } sized_70b[] = {
    { "llama", true }, { "qwen2", false }, { "deci", false }, { "olmo", false },
};

bool bp_quant_model_is_70b(const char *arch, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                           int64_t n_expert)
{
    if (n_layer != 80) return false;
    for (size_t i = 0; i < sizeof sized_70b / sizeof sized_70b[0]; i++)
        if (!strcmp(arch, sized_70b[i].arch))
            return !sized_70b[i].needs_gqa || (n_expert != 8 && n_head != n_head_kv);
    return false;
}

/* llama.cpp's layer_info: with experts the layer is read from the name,
 * since expert tensors need not come in layer order. */
static bool layer_of(const struct bp_quant_model *m, const char *name, int64_t counter, int64_t *layer)
{
    if (m->n_expert <= 1) {
        *layer = counter;
        return true;
    }
    int l;
    if (!bp_quant_name_layer(name, &l) || l < 0 || l >= m->n_layer) return false;
    *layer = l;
    return true;
}

bool bp_quant_name_layer(const char *name, int *layer)
{
    /* sscanf(name, "blk.%d.", ...) as llama.cpp reads it, without its
     * undefined result for a number beyond int */
    if (strncmp(name, "blk.", 4) != 0) return false;
    char *end;
    errno = 0;
    const long v = strtol(name + 4, &end, 10);
    if (end == name + 4 || errno == ERANGE || v < INT_MIN || v > INT_MAX) return false;
    *layer = (int)v;
    return true;
}

bp_status bp_quant_choose(const struct bp_quant_preset *p, const struct bp_quant_model *m,
                          struct bp_quant_counters *c, const char *name, int n_dims, int64_t ne0,
                          enum bp_type cur, enum bp_type *out, char *err, size_t err_cap)
{
    *out = cur;
    if (!bp_quant_tensor_converted(name, n_dims)) return BP_OK;
    if (!bp_type_is_quantized(p->base)) {
        *out = p->base;
        return BP_OK;
    }
    enum cat cat = category_of(name);
    if (cat == C_TOKEN_EMBD && m->tied) cat = C_OUTPUT; /* one tensor, the output's rule */
    int64_t i = 0, n = 0;
    if (CAT(cat) & ATTN_V_LIKE) {
        i = c->attn_v;
        n = m->n_attn_v;
    } else if (cat == C_FFN_DOWN) {
        n = m->n_layer;
        if (!layer_of(m, name, c->ffn_down, &i)) {
            snprintf(err, err_cap, "tensor '%s' of this %lld-expert model does not name a layer "
                     "below %lld (blk.N.), which llama.cpp's quantizer needs to place it.", name,
                     (long long)m->n_expert, (long long)m->n_layer);
            return BP_ERR_UNSUPPORTED;
        }
    }
    enum bp_type type = p->base;
    const uint32_t pbit = PRE(p - bp_quant_presets);
    const bool row_partial = ne0 % bp_type_block_size(type) != 0;
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        const struct rule *r = &rules[k];
        if ((r->presets & pbit) && (r->cats & CAT(cat)) && holds(r->when, m, i, n, row_partial)) {
            if (r->type != KEEP) type = r->type;
            break;
        }
    }
    if (CAT(cat) & ATTN_V_LIKE) {
        for (size_t k = 0; k < sizeof attn_v_bumps / sizeof attn_v_bumps[0]; k++)
            if (holds(attn_v_bumps[k].when, m, i, n, row_partial) &&
                (attn_v_bumps[k].from_a == KEEP || type == attn_v_bumps[k].from_a ||
                 type == attn_v_bumps[k].from_b))
                type = attn_v_bumps[k].type;
        c->attn_v++;
    } else if (cat == C_FFN_DOWN) {
        c->ffn_down++;
    }
    if (ne0 % bp_type_block_size(type) != 0) {
        enum bp_type to = BP_TYPE_F16;
        for (size_t k = 0; k < sizeof fallbacks / sizeof fallbacks[0]; k++)
            if (fallbacks[k].from == type) to = fallbacks[k].to;
        type = ne0 % bp_type_block_size(to) != 0 ? BP_TYPE_F16 : to;
    }
    *out = type;
    return BP_OK;
}
