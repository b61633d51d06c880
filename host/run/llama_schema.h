/*
 * llama_schema.h — THE LLAMA SCHEMA: every weight tensor of a Llama model
 * as one row of a table (name, shape from the hyper-parameters, presence,
 * tensor-parallel split, whether only MUL_MAT reads it, how the built-in
 * generator fills it, where the binder stores it). The binder (model.c),
 * the built-in generator (builtin.c), the split table (split.c) and the
 * decoder's buffer choice (decoder.c) iterate it; the decoder's arithmetic
 * reads the bound fields. Adding a tensor is one row here (and one field in
 * struct bp_run_layer or bp_run_model) plus the arithmetic that uses it.
 */
#ifndef BP_RUN_LLAMA_SCHEMA_H
#define BP_RUN_LLAMA_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* A dimension, named by the hyper-parameter it follows. */
enum bp_llama_dim {
    BP_LLAMA_DIM_EMBD,   /* n_embd */
    BP_LLAMA_DIM_VOCAB,  /* n_vocab */
    BP_LLAMA_DIM_FF,     /* n_ff */
    BP_LLAMA_DIM_Q,      /* n_head * head_dim: query features */
    BP_LLAMA_DIM_KV,     /* n_head_kv * head_dim: key or value features */
    BP_LLAMA_DIM_PARTS,  /* the sum of the parts' last dim that a fused row stacks */
    BP_LLAMA_DIM_HEAD,   /* head_dim */
    BP_LLAMA_DIM_ROT_HALF, /* n_rot / 2: one RoPE factor per rotated pair */
    BP_LLAMA_DIM_FF_UP,  /* ffn_up's rows: n_ff, or 2 n_ff when it holds the gate too */
    BP_LLAMA_DIM_EXPERT, /* n_expert */
    BP_LLAMA_DIM_FF_EXP, /* an expert's feed-forward width: n_ff_exp, or n_ff when 0 */
    BP_LLAMA_DIM_FF_SHEXP, /* the shared expert's width: n_ff_shexp, or n_ff when 0 */
};

/* Which models of an architecture have a row: every one, or only those
 * with (MOE) or without (DENSE) experts (<arch>.expert_count > 0). */
enum bp_llama_moe {
    BP_LLAMA_MOE_ANY = 0,
    BP_LLAMA_MOE_DENSE,  /* the dense FFN: replaced by the experts in a MoE model */
    BP_LLAMA_MOE_ONLY,   /* the router and the stacked experts */
};

/* When a row's tensor exists (an architecture may leave a row out or make it
 * optional: arch.h). */
enum bp_llama_presence {
    BP_LLAMA_ABSENT,     /* not in this architecture: a tensor of its name is refused */
    BP_LLAMA_REQUIRED,
    BP_LLAMA_FUSED,      /* optional; when present it replaces its parts (which are then not read);
                          * its row comes before theirs, so the binder sees it first */
    BP_LLAMA_PART,       /* required unless the fused row naming it is present */
    BP_LLAMA_UNTIED,     /* optional; absent means the embedding is the output projection */
    BP_LLAMA_OPTIONAL,   /* read when present (biases, RoPE factors); never generated */
};

/* The Megatron split of a meta device: which axis is cut and in which unit
 * (units are computed per model in split.c so that slices line up). */
enum bp_llama_split {
    BP_LLAMA_MIRROR,     /* every device holds all of it */
    BP_LLAMA_COLS_Q,     /* by output features (axis 1), whole GQA groups of query heads */
    BP_LLAMA_COLS_KV,    /* by output features (axis 1), the kv heads of those groups */
    BP_LLAMA_COLS_FF,    /* by output features (axis 1), whole blocks of ffn_down's rows */
    BP_LLAMA_COLS_VOCAB, /* by vocabulary (axis 1) */
    BP_LLAMA_COLS_PARTS, /* by output features in segments, each cut like its part */
    BP_LLAMA_ROWS_Q,     /* by input features (axis 0) like COLS_Q: partial sums */
    BP_LLAMA_ROWS_FF,    /* by input features (axis 0) like COLS_FF: partial sums */
    /* Stacked experts, each cut like a dense FFN (every device holds a slice
     * of every expert, so the routing never decides which device works). */
    BP_LLAMA_COLS_FF_EXP, /* by each expert's output features (axis 1) */
    BP_LLAMA_ROWS_FF_EXP, /* by each expert's input features (axis 0): partial sums */
};

/* How the built-in generator fills a row (builtin.c has the numbers). */
enum bp_llama_init {
    BP_LLAMA_INIT_NORM,     /* around 1, kept in f32 */
    BP_LLAMA_INIT_EMBED,    /* around 0, wide */
    BP_LLAMA_INIT_LINEAR,   /* around 0, scaled for unit-variance outputs */
    BP_LLAMA_INIT_PARTS,    /* the parts' streams stacked, so fused and separate agree */
};

/* The rows' indices in bp_llama_schema (the architectures' tables name rows
 * by them). */
enum bp_schema_row {
    BP_SCHEMA_ROW_TOKEN_EMBD,
    BP_SCHEMA_ROW_ROPE_FREQS,
    BP_SCHEMA_ROW_ROPE_LONG,
    BP_SCHEMA_ROW_ROPE_SHORT,
    BP_SCHEMA_ROW_ATTN_NORM,
    BP_SCHEMA_ROW_ATTN_QKV,
    BP_SCHEMA_ROW_ATTN_Q,
    BP_SCHEMA_ROW_ATTN_K,
    BP_SCHEMA_ROW_ATTN_V,
    BP_SCHEMA_ROW_ATTN_QKV_B,
    BP_SCHEMA_ROW_ATTN_Q_B,
    BP_SCHEMA_ROW_ATTN_K_B,
    BP_SCHEMA_ROW_ATTN_V_B,
    BP_SCHEMA_ROW_ATTN_Q_NORM,
    BP_SCHEMA_ROW_ATTN_K_NORM,
    BP_SCHEMA_ROW_ATTN_OUTPUT,
    BP_SCHEMA_ROW_ATTN_OUTPUT_B,
    BP_SCHEMA_ROW_POST_ATTN_NORM,
    BP_SCHEMA_ROW_FFN_NORM,
    BP_SCHEMA_ROW_FFN_GATE,
    BP_SCHEMA_ROW_FFN_UP,
    BP_SCHEMA_ROW_FFN_DOWN,
    BP_SCHEMA_ROW_FFN_GATE_B,
    BP_SCHEMA_ROW_FFN_UP_B,
    BP_SCHEMA_ROW_FFN_DOWN_B,
    BP_SCHEMA_ROW_FFN_GATE_INP,
    BP_SCHEMA_ROW_FFN_GATE_EXPS,
    BP_SCHEMA_ROW_FFN_UP_EXPS,
    BP_SCHEMA_ROW_FFN_DOWN_EXPS,
    BP_SCHEMA_ROW_FFN_GATE_INP_SHEXP,
    BP_SCHEMA_ROW_FFN_GATE_SHEXP,
    BP_SCHEMA_ROW_FFN_UP_SHEXP,
    BP_SCHEMA_ROW_FFN_DOWN_SHEXP,
    BP_SCHEMA_ROW_POST_FFW_NORM,
    BP_SCHEMA_ROW_OUTPUT_NORM,
    BP_SCHEMA_ROW_OUTPUT,
    BP_SCHEMA_ROW_OUTPUT_B,
    BP_SCHEMA_ROW_COUNT
};

#define BP_LLAMA_MAX_PARTS 3

struct bp_llama_tensor {
    const char *name;            /* "attn_q.weight"; per-layer rows are "blk.N." + name */
    bool per_layer;
    int n_dims;                  /* 1 to 3 (stacked experts) */
    enum bp_llama_dim ne[3];     /* ne[i] unused from i = n_dims on */
    enum bp_llama_presence presence;
    enum bp_llama_moe moe;       /* dense-only, MoE-only or both */
    enum bp_llama_split split;
    /* Only MUL_MAT reads it (as src[0]), so it may live in a device's
     * weight layout (bp_device_weight_buffer_type). */
    bool mul_mat_only;
    /* Stored in f32 whatever the requested weight type (norms, as
     * llama.cpp's converters keep them). */
    bool f32;
    enum bp_llama_init init;
    /* Where the binder stores it: in struct bp_run_layer when per_layer,
     * else in struct bp_run_model (a const struct bp_run_weight *). */
    size_t field;
    /* A fused row: the rows (indices into bp_llama_schema) it stacks along
     * dim 1, in order. */
    int n_parts;
    int parts[BP_LLAMA_MAX_PARTS];
    /* A row-parallel weight: the name the decoder gives its input
     * ("blk.N." + input), which the split table cuts like the weight's rows
     * when the scheduler copies it between devices. NULL: none. */
    const char *input;
};

/* The rows, in the order a model's tensors are laid out (builtin models and
 * the GGUF files they are saved as): each maximal run of per-layer rows is
 * repeated for every layer in place. Immutable; any thread. */
extern const struct bp_llama_tensor bp_llama_schema[];
extern const size_t bp_llama_schema_rows;

/* The value of dim d for hp. */
int64_t bp_llama_dim_value(const struct bp_run_hparams *hp, enum bp_llama_dim d);

/* The shape of row r for hp: n_dims values in ne, the rest 1. */
void bp_llama_tensor_shape(const struct bp_llama_tensor *r, const struct bp_run_hparams *hp,
                           int64_t ne[4]);

/* The full name of row r in layer l ("blk.3.attn_q.weight"); l < 0 gives the
 * rule pattern "blk.*.attn_q.weight". Global rows ignore l. Returns buf;
 * truncates to cap (names fit BP_GGUF_MAX_NAME). */
const char *bp_llama_tensor_name(const struct bp_llama_tensor *r, int64_t l, char *buf, size_t cap);


/* The fused row that stacks part row r (presence BP_LLAMA_PART); NULL for
 * any other row. */
const struct bp_llama_tensor *bp_llama_fused_of(const struct bp_llama_tensor *r);

/* The row the vocabulary size is read from: the first required global row
 * whose dim 1 is the vocabulary (token_embd.weight). Never NULL. */
const struct bp_llama_tensor *bp_llama_vocab_row(void);

struct bp_arch;
/* Row r's presence in architecture a (NULL: llama), as a's table says. */
enum bp_llama_presence bp_llama_row_use(const struct bp_arch *a, const struct bp_llama_tensor *r);
/* Row r's presence in a model of hyper-parameters hp: its architecture's
 * (bp_llama_row_use), and absent when r is dense-only and hp has experts
 * or MoE-only and hp has none. */
enum bp_llama_presence bp_llama_row_use_hp(const struct bp_run_hparams *hp, const struct bp_llama_tensor *r);
/* Whether row r is made for a model of architecture a (NULL: llama) with
 * fused QKV / tied output: required rows, and fused, part or untied rows as
 * fused and tied say; optional rows never. */
bool bp_llama_row_present(const struct bp_arch *a, const struct bp_llama_tensor *r, bool fused, bool tied);

/* The pointer slot of row r (layer l) in m: &m->layers[l].<field> or
 * &m-><field>; bp_llama_get reads it (NULL: not bound). */
const struct bp_run_weight **bp_llama_slot(const struct bp_llama_tensor *r, struct bp_run_model *m,
                                           int64_t l);
const struct bp_run_weight *bp_llama_get(const struct bp_llama_tensor *r,
                                         const struct bp_run_model *m, int64_t l);

/* Iterate a model's tensors in layout order: calls fn for each present row
 * and layer (l = -1 for global rows); stops at the first non-zero return
 * and returns it. */
int bp_llama_schema_walk(const struct bp_run_hparams *hp, bool fused, bool tied,
                         int (*fn)(void *user, const struct bp_llama_tensor *r, int64_t l),
                         void *user);

/* ------------------------------------------------ llama.cpp's type mixes */

/* Which layers a mix rule takes. */
enum bp_llama_layers {
    BP_LLAMA_EVERY_LAYER,
    /* llama.cpp's use_more_bits(i, n): the first n/8 layers, the last
     * n - 7n/8, and every third between (i - n/8) % 3 == 2 (10 of 22). */
    BP_LLAMA_MORE_BITS,
};

/* One row of a mix: the schema row it retypes, in which layers (global rows
 * ignore layers), and the type. */
struct bp_llama_mix_rule {
    int row;                    /* index into bp_llama_schema */
    enum bp_llama_layers layers;
    enum bp_type type;
};

#define BP_LLAMA_MAX_MIX_RULES 4

/* A llama.cpp file type's per-tensor types, as its quantizer
 * (llama_tensor_get_type in src/llama-quant.cpp, without an imatrix or
 * overrides) chooses them for a Llama model: every matrix in base except
 * where a rule says otherwise; f32 rows (norms) stay f32. A tied embedding
 * is the output projection and takes the output row's rule, as there. */
struct bp_llama_mix {
    const char *name;           /* llama.cpp's name of the file type: "q4_K_M" */
    uint32_t ftype;             /* its general.file_type (llama_ftype) */
    enum bp_type base;
    int n_rules;
    struct bp_llama_mix_rule rules[BP_LLAMA_MAX_MIX_RULES];
};

/* The mixes, immutable; any thread. */
extern const struct bp_llama_mix bp_llama_mixes[];
extern const size_t bp_llama_mix_count;

/* The mix called name (case-insensitive), or NULL. */
const struct bp_llama_mix *bp_llama_mix_by_name(const char *name);

/* The storage type of row r in layer l (-1: global) of a model with
 * n_layer layers and a tied (or untied) output: f32 for f32 rows, else the
 * mix's rule or base. Pure; any thread. */
enum bp_type bp_llama_mix_type(const struct bp_llama_mix *mix, const struct bp_llama_tensor *r,
                               int64_t l, int64_t n_layer, bool tied);

#endif /* BP_RUN_LLAMA_SCHEMA_H */
