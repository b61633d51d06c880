/*
 * arch.h — MODEL ARCHITECTURES AS DATA. One struct bp_arch per
 * `general.architecture` the runner computes (one file each, arch_<name>.c):
 * which rows of the tensor schema (llama_schema.h) it has, the metadata keys
 * it reads with their types, its RoPE pairing, activation and the few
 * switches of the shared graph builder (decoder.c) that set it apart from
 * llama. model.c reads keys and binds tensors through these tables; a key
 * of a known name with another type, a tensor no row of the architecture
 * names, or a key value the runner does not compute is refused with a
 * sentence, never ignored.
 */
#ifndef BP_RUN_ARCH_H
#define BP_RUN_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bp_gguf;
struct bp_run_hparams;

/* Whether an architecture has a schema row, and how (0: it has not; such a
 * tensor in a file is refused as one no code reads). */
enum bp_arch_use {
    BP_ARCH_NO = 0,
    BP_ARCH_USE,        /* as the row's own presence says (required, fused, part, untied, optional) */
    BP_ARCH_OPTIONAL,   /* optional here, whatever the row says */
};

enum bp_arch_act {
    BP_ARCH_ACT_SILU,   /* SwiGLU: silu(gate) * up */
    BP_ARCH_ACT_GELU,   /* GeGLU: gelu(gate) * up (tanh approximation) */
};

/* Switches of the shared graph builder. */
enum bp_arch_flag {
    BP_ARCH_EMBED_SCALE = 1u << 0, /* embeddings times sqrt(n_embd) (Gemma) */
    BP_ARCH_FUSED_UP = 1u << 1,    /* ffn_up holds gate then up, 2 n_ff rows (Phi-3) */
    BP_ARCH_ROT_FULL = 1u << 2,    /* rope.dimension_count must equal the head size */
    BP_ARCH_Q_EMBD = 1u << 3,      /* query width must be n_embd: head size n_embd / n_head */
    BP_ARCH_SWA_NO_SCALING = 1u << 4, /* sliding-window layers rotate without rope scaling (Gemma 3) */
    /* rope_freqs only without longrope scaling, the long/short factors only
     * with it (llama.cpp's llama loader asks for one or the other); without
     * this flag the long/short factors are read whenever present (Phi-3). */
    BP_ARCH_FACTORS_BY_SCALING = 1u << 5,
    BP_ARCH_ATTN_TEMP = 1u << 6,   /* attention.temperature_scale scales Q by position (Mistral 3) */
    /* Mixture of experts (expert_count > 0) runs: the dense FFN rows give way
     * to the router and stacked experts (llama_schema.h, BP_LLAMA_MOE_*), and
     * the FFN is llama.cpp's build_moe_ffn with softmax gating, top-k and the
     * chosen weights renormalised to sum 1 (Mixtral, Qwen3-MoE). */
    BP_ARCH_MOE = 1u << 7,
    BP_ARCH_MOE_ONLY = 1u << 8,    /* expert_count is required (qwen3moe) */
    /* The chosen experts are weighted by their softmax probabilities as
     * they are, not renormalised (llama.cpp's norm_w false: Qwen2-MoE). */
    BP_ARCH_MOE_UNNORMED = 1u << 9,
    /* An absent expert_feed_forward_length means feed_forward_length /
     * expert_used_count (Qwen2-MoE, as llama.cpp's loader says). */
    BP_ARCH_FF_EXP_PER_USED = 1u << 10,
};

/* llama.cpp's LLAMA_MAX_EXPERTS. */
#define BP_ARCH_MAX_EXPERTS 512

/* How a metadata key's value lands in struct bp_run_hparams. */
enum bp_arch_kv {
    BP_ARCH_KV_U32,     /* u32 into an int64_t field; u32[n_layer] accepted when all equal */
    BP_ARCH_KV_F32,     /* f32 into a float field */
    BP_ARCH_KV_STR,     /* a string, checked by the reader (rope scaling type) */
    BP_ARCH_KV_BOOL,    /* bool into a bool field */
};

/* One key an architecture reads: "<arch>." + suffix. */
struct bp_arch_key {
    const char *suffix;
    enum bp_arch_kv kind;
    bool required;
    size_t field;       /* offsetof in struct bp_run_hparams; SIZE_MAX: checked, not stored */
};

#define BP_ARCH_MAX_ROWS 48

/* A table's rows by name: `.rows = { BP_ARCH_ROW(ATTN_Q_NORM) = BP_ARCH_USE }`
 * with the indices of llama_schema.c (BP_SCHEMA_ROW_*). */
#define BP_ARCH_ROW(name) [BP_SCHEMA_ROW_##name]

struct bp_arch {
    const char *name;               /* general.architecture */
    int rope_mode;                  /* BP_ROPE_MODE_NORMAL or BP_ROPE_MODE_NEOX */
    enum bp_arch_act act;
    unsigned flags;                 /* enum bp_arch_flag */
    uint8_t rows[BP_ARCH_MAX_ROWS]; /* enum bp_arch_use per schema row */
    const struct bp_arch_key *keys; /* beyond bp_arch_common_keys; NULL-suffix terminated */
    /* Defaults of keys the file may leave out. */
    int64_t swa_period;             /* layer l slides iff l % period < period - 1; 0: no window */
    int64_t n_swa;                  /* window when the key is absent (0: none) */
    float attn_softcap, final_softcap; /* caps when the keys are absent (0: none) */
    float rope_base_swa;            /* sliding layers' base when absent (0: the global base) */
    /* The depth at which the attention scale is 1/sqrt(n_embd / n_head)
     * rather than 1/sqrt(head_dim) (Gemma's 27B models, as llama.cpp
     * hard-codes it; GGUF has no key for it); 0: never. */
    int64_t qscale_embd_depth;
};

/* Keys every architecture reads (context, sizes, heads, RoPE and its
 * scaling, norm epsilon, experts); NULL-suffix terminated. */
extern const struct bp_arch_key bp_arch_common_keys[];

/* The architecture called name (len bytes, not NUL-terminated); NULL when
 * the runner has none of that name. */
const struct bp_arch *bp_arch_find(const char *name, size_t len);
/* The architectures, NULL-terminated (for messages and `info`). */
extern const struct bp_arch *const bp_archs[];
extern const struct bp_arch bp_arch_llama, bp_arch_qwen2, bp_arch_qwen3, bp_arch_gemma2, bp_arch_gemma3,
    bp_arch_phi3, bp_arch_mistral3, bp_arch_qwen3moe, bp_arch_qwen2moe;

/* Read hp's metadata for architecture a from g: every key of the common
 * table and a's own, with their types checked (a known key of another type
 * is refused naming both types), then the values that change the
 * arithmetic checked (scaling types, experts, head and RoPE sizes). One
 * sentence in err on refusal. */
int bp_arch_read_hparams(const struct bp_arch *a, const struct bp_gguf *g, struct bp_run_hparams *hp,
                         char *err, size_t cap);

struct bp_gguf_writer;
/* Write hp's keys into w as bp_arch_read_hparams reads them back: every key
 * of the common table and hp's architecture's whose value is set, with the
 * table's type, and rope.scaling.type when it is not linear. */
int bp_arch_write_hparams(const struct bp_run_hparams *hp, struct bp_gguf_writer *w);

/* Whether layer l of hp's model attends through a sliding window. */
bool bp_arch_layer_swa(const struct bp_run_hparams *hp, int64_t l);

#endif /* BP_RUN_ARCH_H */
