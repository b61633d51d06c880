/*
 * model.h — a Llama-architecture model as the runner sees it: the
 * hyper-parameters and, for each weight, where its bytes are (a GGUF
 * mapping or the built-in generator's memory) with its type and shape.
 * Nothing here touches a device; decoder.c uploads and computes.
 */
#ifndef BP_RUN_MODEL_H
#define BP_RUN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

#include "gguf.h"

/* RoPE scaling types (rope.scaling.type). */
enum bp_run_rope_scaling {
    BP_RUN_ROPE_LINEAR,   /* the default: freq_scale = 1 / factor */
    BP_RUN_ROPE_NONE,
    BP_RUN_ROPE_YARN,
    BP_RUN_ROPE_LONGROPE, /* long or short factors by the context asked for */
};

/* A model's hyper-parameters. The fields after rms_eps are zero in a plain
 * Llama model (the built-in ones); arch.c reads them for the others. */
struct bp_run_hparams {
    int64_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ctx_train;
    float rope_base, rms_eps;
    const struct bp_arch *arch;    /* NULL: llama */
    int64_t n_ff_up;               /* ffn_up's rows when it holds the gate too; 0: n_ff */
    int64_t value_length;          /* 0: head_dim */
    enum bp_run_rope_scaling rope_scaling;
    float rope_factor;             /* rope.scaling.factor (0: none) */
    float rope_scale_linear;       /* the legacy rope.scale_linear (0: none) */
    float rope_attn_factor;        /* rope.scaling.attn_factor (0: 1) */
    float yarn_beta_fast, yarn_beta_slow; /* 0: 32 and 1 */
    float yarn_log_mul;            /* the magnitude's log multiplier (0: none) */
    float attn_temp_scale;         /* Q x (1 + t ln(1 + floor(pos / n_ctx_orig))) (0: none) */
    int64_t n_ctx_orig;            /* rope.scaling.original_context_length (0: n_ctx_train) */
    float rope_base_swa;           /* sliding-window layers' base (0: rope_base) */
    int64_t n_swa, swa_period;     /* window and period (layer l slides iff l % period < period - 1) */
    float attn_softcap, final_softcap; /* 0: none */
    float attn_scale;              /* 0: 1/sqrt(head_dim) */
    int64_t n_expert, n_expert_used;
    int64_t n_ff_exp;              /* an expert's feed-forward width (0: n_ff) */
    int64_t n_ff_shexp;            /* the shared expert's feed-forward width (0: n_ff) */
    bool non_causal;               /* attention.causal = false */
};

struct bp_llama_tensor;
struct bp_arch;
struct bp_llama_mix;

/* One weight: bytes in host memory (not owned here), type, shape, and the
 * schema row it was bound to (llama_schema.h; NULL: a tensor the runner
 * does not read). */
struct bp_run_weight {
    char name[BP_GGUF_MAX_NAME + 1];
    enum bp_type type;
    int n_dims;
    int64_t ne[4];
    const void *data;
    size_t size;
    const struct bp_llama_tensor *row;
};

/* The weights the decoder's arithmetic reads, bound by the schema's rows
 * (llama_schema.c names the field of each). */
struct bp_run_layer {
    const struct bp_run_weight *attn_norm, *wq, *wk, *wv, *wqkv, *wo;
    const struct bp_run_weight *ffn_norm, *gate, *up, *down;
    const struct bp_run_weight *bqkv, *bq, *bk, *bv, *bo, *bgate, *bup, *bdown;
    const struct bp_run_weight *q_norm, *k_norm, *post_attn_norm, *post_ffw_norm;
    const struct bp_run_weight *gate_inp, *gate_exps, *up_exps, *down_exps; /* experts */
    /* the shared expert: its gate's weight vector and its SwiGLU FFN */
    const struct bp_run_weight *gate_inp_shexp, *gate_shexp, *up_shexp, *down_shexp;
};

struct bp_run_model {
    char name[128];            /* "builtin:test (f32)" or the file's base name */
    struct bp_run_hparams hp;
    struct bp_run_weight *weights;
    size_t n_weights;
    const struct bp_run_weight *tok_embd, *out_norm, *output; /* output == tok_embd when tied */
    const struct bp_run_weight *output_b, *rope_freqs, *rope_long, *rope_short;
    struct bp_run_layer *layers;
    bool tied_output;
    const struct bp_llama_mix *mix; /* the llama.cpp mix a built-in model was made in; NULL: none */
    struct bp_gguf *gguf;      /* owned when loaded from a file */
    void *owned;               /* the built-in generator's memory */
};

/* Load a GGUF file of the llama architecture. Refuses, with one sentence in
 * err, a file that is not GGUF, truncated, of another version or
 * architecture, or whose tensors are missing, of an unsupported type or of a
 * shape that disagrees with the metadata. */
bp_status bp_run_model_load_gguf(const char *path, struct bp_run_model **out, char *err,
                                 size_t err_cap);
/* Bind an already-parsed GGUF (ownership of g moves to the model on success). */
bp_status bp_run_model_from_gguf(struct bp_gguf *g, const char *name, struct bp_run_model **out,
                                 char *err, size_t err_cap);

/* Built-in configurations: "test" (very small), "tiny" (about 100 M
 * parameters) and "1b" (TinyLlama-1.1B's shape), weights pseudo-random from
 * seed, stored in weight_type (norms stay f32), or with mix (not NULL) in
 * that llama.cpp file type's per-tensor types (llama_schema.h; weight_type
 * is then not read). fused_qkv stores Q, K and V as one attn_qkv tensor.
 * Generated on n_threads threads (0: one per online CPU); the bytes are the
 * same for any thread count. */
struct bp_run_builtin_options {
    enum bp_type weight_type;
    const struct bp_llama_mix *mix;
    uint64_t seed;
    bool fused_qkv;
    /* Called after each weight is generated: done and total bytes. May be NULL. */
    void (*progress)(void *user, size_t done, size_t total);
    void *progress_user;
    int n_threads;
};
bp_status bp_run_model_builtin(const char *name, const struct bp_run_builtin_options *opts,
                               struct bp_run_model **out, char *err, size_t err_cap);
/* Names of the built-in configurations, NULL-terminated. */
const char *const *bp_run_builtin_names(void);
/* The vocabulary size of the built-in configuration name (0: no such one). */
int64_t bp_run_builtin_n_vocab(const char *name);
/* The hyper-parameters of the built-in configuration name and whether its
 * output is tied to the embedding, without generating it; NULL: no such
 * one. Static storage; any thread. */
const struct bp_run_hparams *bp_run_builtin_hparams(const char *name, bool *tied);

/* Write m as a GGUF file (version 3) that bp_run_model_load_gguf reads back. */
bp_status bp_run_model_save_gguf(const struct bp_run_model *m, const char *path, uint32_t version,
                                 uint32_t alignment);

void bp_run_model_free(struct bp_run_model *m);

/* Total weight bytes, and the bytes one decoded token reads (every weight
 * once, except that the embedding table contributes one row unless it is
 * also the output projection, and a stacked expert weight its
 * expert_used_count of expert_count slices: the active experts). */
size_t bp_run_model_weight_bytes(const struct bp_run_model *m);
size_t bp_run_model_decode_bytes(const struct bp_run_model *m);
int64_t bp_run_model_param_count(const struct bp_run_model *m);

/* The storage types of m's matrices (weights of two or more dimensions)
 * and how many matrices have each, the most common first (ties in type
 * order): returns how many types there are, writing at most cap. */
size_t bp_run_model_matrix_types(const struct bp_run_model *m, enum bp_type *types, size_t *counts,
                                 size_t cap);

/* Internal: bind weights by name after m->weights is filled (shared by the
 * GGUF and built-in paths): every row of the Llama schema, its shape checked
 * against m->hp; tensors no row names stay unbound (row NULL). */
bp_status bp_run_model_bind(struct bp_run_model *m, char *err, size_t err_cap);

#endif /* BP_RUN_MODEL_H */
