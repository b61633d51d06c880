/*
 * quant_presets.h — llama.cpp's quantization presets (the llama_ftype file
 * types `llama-quantize` takes by name) and the type each one gives every
 * tensor, as llama.cpp's quantizer chooses it without an importance matrix
 * or overrides (src/llama-quant.cpp: tensor_allows_quantization,
 * llama_tensor_get_type_impl, tensor_type_fallback). The choice is tables
 * (quant_presets.c): which tensors are converted, the category a name falls
 * in, the rules per preset and category, and the fallback types for rows
 * that do not divide into blocks. `backplane quantize` (quantize_model.c)
 * applies them.
 */
#ifndef BP_RUN_QUANT_PRESETS_H
#define BP_RUN_QUANT_PRESETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

/* A preset: a llama_ftype and the type most tensors get. */
struct bp_quant_preset {
    const char *name;        /* llama.cpp's name: "Q4_K_M" */
    uint32_t ftype;          /* its general.file_type (llama_ftype) */
    enum bp_type base;       /* llama_ftype_get_default_type */
    const char *about;       /* one line for --help */
};

/* The presets, in llama-quantize's order; immutable, any thread. */
extern const struct bp_quant_preset bp_quant_presets[];
extern const size_t bp_quant_preset_count;

/* The preset called name (case-insensitive), or NULL. */
const struct bp_quant_preset *bp_quant_preset_by_name(const char *name);

/* What the rules read about the model, from its metadata and tensor names. */
struct bp_quant_model {
    int64_t n_layer;         /* <arch>.block_count */
    int64_t n_gqa;           /* head_count / head_count_kv of layer 0 (0 when kv is 0) */
    int64_t n_expert;        /* <arch>.expert_count, 0 when absent */
    int64_t n_attn_v;        /* tensors in the attn_v category (attn_v, attn_qkv, attn_kv_b) */
    bool tied;               /* no output.weight: token_embd is the output projection */
    bool falcon;             /* general.architecture "falcon" */
    bool is_70b;             /* llama.cpp calls the model 70B (bp_quant_model_is_70b) */
};

/* How far the choice has come: llama.cpp's i_attention_wv and i_ffn_down,
 * advanced by bp_quant_choose as it visits the tensors in file order. Start
 * at zero. */
struct bp_quant_counters {
    int64_t attn_v;
    int64_t ffn_down;
};

/* Whether llama.cpp's quantizer converts a tensor of this name and number
 * of dimensions (trailing dimensions of 1 not counted): 2-D or more, a name
 * ending in "weight", not a norm, expert gate, position embedding or one of
 * llama.cpp's other small exceptions. */
bool bp_quant_tensor_converted(const char *name, int n_dims);

/* The layer a tensor name starts with ("blk.N.", N read as sscanf's %d
 * reads it); false when it starts otherwise or N does not fit an int. */
bool bp_quant_name_layer(const char *name, int *layer);

/* Whether a tensor name is in the attn_v category (counted in n_attn_v). */
bool bp_quant_is_attn_v(const char *name);

/* Whether llama.cpp sizes a model of this architecture, layer count and head
 * counts as LLM_TYPE_70B (which bumps its attn_v types). */
bool bp_quant_model_is_70b(const char *arch, int64_t n_layer, int64_t n_head, int64_t n_head_kv,
                           int64_t n_expert);

/* The type tensor `name` (ne0 elements per row, n_dims as above, stored as
 * cur) gets under preset p, advancing c as llama.cpp does; tensors that are
 * not converted keep cur. Returns BP_OK, or BP_ERR_UNSUPPORTED with one
 * sentence in err when llama.cpp refuses the tensor (an expert model's
 * ffn_down whose name does not give its layer). */
bp_status bp_quant_choose(const struct bp_quant_preset *p, const struct bp_quant_model *m,
                          struct bp_quant_counters *c, const char *name, int n_dims, int64_t ne0,
                          enum bp_type cur, enum bp_type *out, char *err, size_t err_cap);

#endif /* BP_RUN_QUANT_PRESETS_H */
