/*
 * arch.c — the key table every architecture reads, the list of
 * architectures, and the metadata reader that checks each key's type and
 * refuses values the runner does not compute (arch.h).
 */
#include "arch.h"
#include "gguf.h"
#include "model.h"
#include "run_error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const struct bp_arch *const bp_archs[] = {
    &bp_arch_llama, &bp_arch_qwen2, &bp_arch_qwen3, &bp_arch_gemma2, &bp_arch_gemma3, &bp_arch_phi3,
    &bp_arch_mistral3, &bp_arch_qwen3moe, &bp_arch_qwen2moe, NULL,
};

#define HP(f) offsetof(struct bp_run_hparams, f)
#define CHECKED SIZE_MAX

/* As llama.cpp's load_hparams reads them (src/llama-model.cpp): counts are
 * u32, factors f32, and a known key of another type is an error there too. */
const struct bp_arch_key bp_arch_common_keys[] = {
    { "context_length", BP_ARCH_KV_U32, true, HP(n_ctx_train) },
    { "embedding_length", BP_ARCH_KV_U32, true, HP(n_embd) },
    { "block_count", BP_ARCH_KV_U32, true, HP(n_layer) },
    { "feed_forward_length", BP_ARCH_KV_U32, true, HP(n_ff) },
    { "attention.head_count", BP_ARCH_KV_U32, true, HP(n_head) },
    { "attention.head_count_kv", BP_ARCH_KV_U32, false, HP(n_head_kv) },
    { "attention.key_length", BP_ARCH_KV_U32, false, HP(head_dim) },
    { "attention.value_length", BP_ARCH_KV_U32, false, HP(value_length) },
    { "attention.layer_norm_rms_epsilon", BP_ARCH_KV_F32, true, HP(rms_eps) },
    { "attention.causal", BP_ARCH_KV_BOOL, false, HP(non_causal) },
    { "rope.dimension_count", BP_ARCH_KV_U32, false, HP(n_rot) },
    { "rope.freq_base", BP_ARCH_KV_F32, false, HP(rope_base) },
    { "rope.scaling.type", BP_ARCH_KV_STR, false, CHECKED },
    { "rope.scaling.factor", BP_ARCH_KV_F32, false, HP(rope_factor) },
    { "rope.scale_linear", BP_ARCH_KV_F32, false, HP(rope_scale_linear) },
    { "rope.scaling.original_context_length", BP_ARCH_KV_U32, false, HP(n_ctx_orig) },
    { "rope.scaling.attn_factor", BP_ARCH_KV_F32, false, HP(rope_attn_factor) },
    { "expert_count", BP_ARCH_KV_U32, false, HP(n_expert) },
    { "expert_used_count", BP_ARCH_KV_U32, false, HP(n_expert_used) },
    { "vocab_size", BP_ARCH_KV_U32, false, CHECKED },
    { NULL, 0, false, 0 },
};

const struct bp_arch *bp_arch_find(const char *name, size_t len)
{
    for (size_t i = 0; bp_archs[i]; i++)
        if (strlen(bp_archs[i]->name) == len && !memcmp(bp_archs[i]->name, name, len)) return bp_archs[i];
    return NULL;
}

bool bp_arch_layer_swa(const struct bp_run_hparams *hp, int64_t l)
{
    return hp->n_swa > 0 && hp->swa_period > 0 && l % hp->swa_period < hp->swa_period - 1;
}

static const char *vtype_name(uint32_t t)
{
    static const char *const names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                         "string", "array", "u64", "i64", "f64" };
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static const char *kind_name(enum bp_arch_kv k)
{
    switch (k) {
    case BP_ARCH_KV_U32: return "u32";
    case BP_ARCH_KV_F32: return "f32";
    case BP_ARCH_KV_STR: return "string";
    case BP_ARCH_KV_BOOL: return "bool";
    }
    return "?";
}

static uint32_t kind_vtype(enum bp_arch_kv k)
{
    switch (k) {
    case BP_ARCH_KV_U32: return BP_GGUF_U32;
    case BP_ARCH_KV_F32: return BP_GGUF_F32;
    case BP_ARCH_KV_STR: return BP_GGUF_STRING;
    case BP_ARCH_KV_BOOL: return BP_GGUF_BOOL;
    }
    return BP_GGUF_U32;
}

/* A u32 array with one value per layer, all equal (per-layer sizes that
 * differ are not something the graph builder makes). */
static int u32_array(const struct bp_gguf_kv *kv, const char *key, uint64_t *v, char *err, size_t cap)
{
    if (kv->arr_type != BP_GGUF_U32 || kv->arr_count == 0)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's key '%s' is an array of %s; it must be u32 (one per layer).", key,
                           vtype_name(kv->arr_type));
    uint32_t first, x;
    memcpy(&first, kv->arr_data, 4);
    for (uint64_t i = 1; i < kv->arr_count; i++) {
        memcpy(&x, kv->arr_data + 4 * i, 4);
        if (x != first)
            return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                               "the model's key '%s' gives its layers different values (%u and %u); "
                               "the runner needs one value for every layer.", key, first, x);
    }
    *v = first;
    return BP_OK;
}

/* One key: its type checked, its value stored (absent: the field is left). */
static int read_key(const struct bp_gguf *g, const char *arch, const struct bp_arch_key *k,
                    struct bp_run_hparams *hp, char *err, size_t cap)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, k->suffix);
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    if (!kv) {
        if (!k->required) return BP_OK;
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                           "the model has no metadata key '%s', which a %s model needs; the file is "
                           "incomplete.", key, arch);
    }
    char *field = k->field == CHECKED ? NULL : (char *)hp + k->field;
    if (kv->type == BP_GGUF_ARRAY && k->kind == BP_ARCH_KV_U32) {
        uint64_t v = 0;
        int s = u32_array(kv, key, &v, err, cap);
        if (s != BP_OK) return s;
        if (field) *(int64_t *)(void *)field = (int64_t)v;
        return BP_OK;
    }
    if (kv->type != kind_vtype(k->kind))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's key '%s' has type %s, but it is read as %s (as llama.cpp reads "
                           "it); the file was written wrongly.", key, vtype_name(kv->type), kind_name(k->kind));
    if (!field) return BP_OK;
    switch (k->kind) {
    case BP_ARCH_KV_U32: *(int64_t *)(void *)field = (int64_t)kv->v.u; break;
    case BP_ARCH_KV_F32: *(float *)(void *)field = (float)kv->v.f; break;
    case BP_ARCH_KV_BOOL:
        /* the one bool, attention.causal, is stored inverted (the default is causal) */
        *(bool *)(void *)field = kv->v.u == 0;
        break;
    case BP_ARCH_KV_STR: break;
    }
    return BP_OK;
}

static int read_scaling(const struct bp_gguf *g, const char *arch, struct bp_run_hparams *hp, char *err,
                        size_t cap)
{
    static const struct { const char *name; enum bp_run_rope_scaling type; } types[] = {
        { "none", BP_RUN_ROPE_NONE }, { "linear", BP_RUN_ROPE_LINEAR },
        { "yarn", BP_RUN_ROPE_YARN }, { "longrope", BP_RUN_ROPE_LONGROPE },
    };
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    hp->rope_scaling = BP_RUN_ROPE_LINEAR;
    if (!kv) return BP_OK;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (kv->v.s.len == strlen(types[i].name) && !memcmp(kv->v.s.ptr, types[i].name, kv->v.s.len)) {
            hp->rope_scaling = types[i].type;
            return BP_OK;
        }
    return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                       "the model's %s is '%.*s', which neither backplane nor llama.cpp knows (none, "
                       "linear, yarn or longrope); Llama 3.x scaling belongs in a rope_freqs.weight "
                       "tensor, so the file was converted wrongly.", key,
                       (int)(kv->v.s.len > 32 ? 32 : kv->v.s.len), kv->v.s.ptr);
}

static int positive(int64_t v, const char *what, const char *arch, char *err, size_t cap)
{
    if (v > 0 && v <= (1 << 30)) return BP_OK;
    return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                       "the model's %s.%s is %" PRId64 ", not a positive integer below 2^30; the file "
                       "is corrupt.", arch, what, v);
}

int bp_arch_read_hparams(const struct bp_arch *a, const struct bp_gguf *g, struct bp_run_hparams *hp,
                         char *err, size_t cap)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = a;
    hp->rope_base = 10000.0f;
    hp->n_swa = a->n_swa;
    hp->swa_period = a->swa_period;
    hp->attn_softcap = a->attn_softcap;
    hp->final_softcap = a->final_softcap;
    hp->rope_base_swa = a->rope_base_swa;
    int s;
    for (const struct bp_arch_key *k = bp_arch_common_keys; k->suffix; k++)
        if ((s = read_key(g, a->name, k, hp, err, cap)) != BP_OK) return s;
    for (const struct bp_arch_key *k = a->keys; k && k->suffix; k++)
        if ((s = read_key(g, a->name, k, hp, err, cap)) != BP_OK) return s;
    if ((s = read_scaling(g, a->name, hp, err, cap)) != BP_OK) return s;

    if ((s = positive(hp->n_layer, "block_count", a->name, err, cap)) ||
        (s = positive(hp->n_embd, "embedding_length", a->name, err, cap)) ||
        (s = positive(hp->n_ff, "feed_forward_length", a->name, err, cap)) ||
        (s = positive(hp->n_head, "attention.head_count", a->name, err, cap)) ||
        (s = positive(hp->n_ctx_train, "context_length", a->name, err, cap)))
        return s;
    /* Bounds what binding allocates per layer before any tensor is looked
     * up (a fuzzed block_count of 2^30 in a few-kB file). */
    if ((uint64_t)hp->n_layer > g->n_tensors)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's %s.block_count %" PRId64 " exceeds its %" PRIu64 " tensors (each "
                           "block has several); the file is corrupt.", a->name, hp->n_layer, g->n_tensors);
    if (!hp->n_head_kv) hp->n_head_kv = hp->n_head;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's metadata is inconsistent: head_count %" PRId64 ", head_count_kv %"
                           PRId64 " (the kv heads must divide the heads).", hp->n_head, hp->n_head_kv);
    if (!hp->head_dim) {
        if (hp->n_embd % hp->n_head != 0)
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                               "the model's embedding_length %" PRId64 " is not a multiple of its "
                               "head_count %" PRId64 " and it has no attention.key_length; the file is "
                               "corrupt.", hp->n_embd, hp->n_head);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    if (!hp->value_length) hp->value_length = hp->head_dim;
    if ((s = positive(hp->head_dim, "attention.key_length", a->name, err, cap))) return s;
    if (hp->value_length != hp->head_dim || hp->head_dim % 2 != 0)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                           "the model's %s.attention.key_length %" PRId64 " and value_length %" PRId64
                           " differ; the runner (like llama.cpp's graph) needs them equal and even.", a->name,
                           hp->head_dim, hp->value_length);
    if ((a->flags & BP_ARCH_Q_EMBD) && hp->head_dim * hp->n_head != hp->n_embd)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                           "the model's heads are %" PRId64 " x %" PRId64 " wide but a %s model's queries "
                           "are embedding_length (%" PRId64 ") wide; the file is not a valid %s model.",
                           hp->n_head, hp->head_dim, a->name, hp->n_embd, a->name);
    if (!hp->n_rot) hp->n_rot = hp->head_dim;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's %s.rope.dimension_count %" PRId64 " is odd, not positive or larger "
                           "than the head size %" PRId64 "; the file is corrupt.", a->name, hp->n_rot,
                           hp->head_dim);
    if ((a->flags & BP_ARCH_ROT_FULL) && hp->n_rot != hp->head_dim)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                           "the model's %s.rope.dimension_count is %" PRId64 " but its heads are %" PRId64
                           " wide; a %s model rotates whole heads (llama.cpp refuses it too).", a->name,
                           hp->n_rot, hp->head_dim, a->name);
    if (!(hp->rope_base > 0.0f) || !isfinite(hp->rope_base) || !(hp->rms_eps >= 0.0f) ||
        !(hp->rope_factor >= 0.0f) || !(hp->rope_scale_linear >= 0.0f) || !(hp->rope_attn_factor >= 0.0f) ||
        !(hp->rope_base_swa >= 0.0f) || !isfinite(hp->rope_factor) || !isfinite(hp->rope_attn_factor))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's RoPE base, scaling factors or norm epsilon are negative or not "
                           "numbers; the file is corrupt.");
    if (hp->non_causal)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                           "the model's %s.attention.causal is false: it is an encoder (embedding) model, "
                           "and `backplane run` runs causal decoders only.", a->name);
    if ((hp->n_expert > 0 || hp->n_expert_used > 0) && !(a->flags & BP_ARCH_MOE))
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                           "the model is a %s mixture of experts (%s.expert_count %" PRId64 ", %" PRId64
                           " used), which backplane does not run; it runs the experts of llama (Mixtral), "
                           "qwen3moe and qwen2moe models.", a->name, a->name, hp->n_expert, hp->n_expert_used);
    if ((a->flags & BP_ARCH_MOE_ONLY) && hp->n_expert <= 0)
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                           "the model has no %s.expert_count, which a %s model needs; the file is "
                           "incomplete.", a->name, a->name);
    if ((hp->n_expert > 0 || hp->n_expert_used > 0) &&
        !(hp->n_expert_used > 0 && hp->n_expert_used <= hp->n_expert && hp->n_expert <= BP_ARCH_MAX_EXPERTS))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's %s.expert_used_count %" PRId64 " and expert_count %" PRId64
                           " do not make a mixture of experts (0 < used <= count <= %d, as llama.cpp "
                           "asserts); the file is corrupt.", a->name, hp->n_expert_used, hp->n_expert,
                           BP_ARCH_MAX_EXPERTS);
    if (hp->n_ff_exp < 0 || hp->n_ff_exp > (1 << 30))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's %s.expert_feed_forward_length is %" PRId64 "; the file is corrupt.",
                           a->name, hp->n_ff_exp);
    if (hp->n_ff_shexp < 0 || hp->n_ff_shexp > (1 << 30))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's %s.expert_shared_feed_forward_length is %" PRId64 "; the file is "
                           "corrupt.", a->name, hp->n_ff_shexp);
    if ((a->flags & BP_ARCH_FF_EXP_PER_USED) && hp->n_ff_exp == 0 && hp->n_expert_used > 0) {
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
        if (hp->n_ff_exp == 0)
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                               "the model has no %s.expert_feed_forward_length and its feed_forward_length "
                               "%" PRId64 " divided by %" PRId64 " experts used is 0; the file is corrupt.",
                               a->name, hp->n_ff, hp->n_expert_used);
    }
    if (hp->n_ctx_orig < 0 || hp->n_swa < 0 || hp->swa_period < 0)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                           "the model's original context or sliding window is negative; the file is "
                           "corrupt.");
    if (a->flags & BP_ARCH_FUSED_UP) hp->n_ff_up = 2 * hp->n_ff;
    if (a->qscale_embd_depth && hp->n_layer == a->qscale_embd_depth)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    return BP_OK;
}

static int write_key(const struct bp_run_hparams *hp, const char *arch, const struct bp_arch_key *k,
                     struct bp_gguf_writer *w)
{
    if (k->field == CHECKED) return BP_OK;
    const char *field = (const char *)hp + k->field;
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, k->suffix);
    switch (k->kind) {
    case BP_ARCH_KV_U32: {
        int64_t v;
        memcpy(&v, field, sizeof v);
        return v ? bp_gguf_add_u32(w, key, (uint32_t)v) : BP_OK;
    }
    case BP_ARCH_KV_F32: {
        float v;
        memcpy(&v, field, sizeof v);
        return v != 0.0f ? bp_gguf_add_f32(w, key, v) : BP_OK;
    }
    case BP_ARCH_KV_BOOL: { /* attention.causal, stored inverted */
        bool v;
        memcpy(&v, field, sizeof v);
        return v ? bp_gguf_add_bool(w, key, false) : BP_OK;
    }
    case BP_ARCH_KV_STR: break;
    }
    return BP_OK;
}

int bp_arch_write_hparams(const struct bp_run_hparams *hp, struct bp_gguf_writer *w)
{
    static const char *const scaling[] = {
        [BP_RUN_ROPE_LINEAR] = "linear", [BP_RUN_ROPE_NONE] = "none",
        [BP_RUN_ROPE_YARN] = "yarn", [BP_RUN_ROPE_LONGROPE] = "longrope",
    };
    const struct bp_arch *a = hp->arch ? hp->arch : &bp_arch_llama;
    int s = bp_gguf_add_string(w, "general.architecture", a->name);
    for (const struct bp_arch_key *k = bp_arch_common_keys; s == BP_OK && k->suffix; k++)
        s = write_key(hp, a->name, k, w);
    for (const struct bp_arch_key *k = a->keys; s == BP_OK && k && k->suffix; k++)
        s = write_key(hp, a->name, k, w);
    if (s == BP_OK && hp->rope_scaling != BP_RUN_ROPE_LINEAR) {
        char key[96];
        snprintf(key, sizeof key, "%s.rope.scaling.type", a->name);
        s = bp_gguf_add_string(w, key, scaling[hp->rope_scaling]);
    }
    return s;
}
