/*
 * gguf_seeds.c — writes the GGUF fuzzer's seed corpus into a directory:
 * small files that the reader and the llama binding accept, so that the
 * fuzzer's mutations start past the header checks and reach the tensor
 * table, the string arrays and the model's shape rules.
 *
 * Generated (not committed as binaries) so that the seeds follow the writer:
 * a format change that breaks them breaks this program's own checks first.
 *
 *   gguf_seeds DIR      exit 0 with one file per seed in DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"

/* A llama small enough to mutate quickly: E and F are one Q4_0 block. */
enum { E = 32, F = 32, VOCAB = 8, HEAD_DIM = 16, N_HEAD = 2, N_HEAD_KV = 1 };

struct seed {
    const char *file;
    uint32_t version, alignment;
    int weight_type;  /* of the matrices; norms are always F32 */
    int fused_qkv, tied_output;
};

static const struct seed seeds[] = {
    {"llama_q4_0_v3.gguf", 3, 32, BP_TYPE_Q4_0, 0, 0},
    {"llama_f16_fused_tied_v2.gguf", 2, 64, BP_TYPE_F16, 1, 1},
};

/* Bytes of a tensor with a deterministic, type-agnostic fill. */
static uint8_t scratch[64 * 1024];

static void fill(size_t n)
{
    uint32_t s = 0x9e3779b9u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        scratch[i] = (uint8_t)(s >> 24) & 0x3b; /* keeps f16/f32 exponents finite */
    }
}

static int add(struct bp_gguf_writer *w, const char *name, int type, int64_t ne0, int64_t ne1)
{
    const int64_t ne[2] = {ne0, ne1};
    const size_t bytes = bp_row_size((enum bp_type)type, ne0) * (size_t)ne1;
    if (bytes > sizeof scratch) return 1;
    fill(bytes);
    return bp_gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, scratch) != BP_OK;
}

static int write_llama(const char *dir, const struct seed *sd)
{
    static const char *const tokens[VOCAB] = {"<s>", "</s>", "a", "b", "ab", " ", "\xc3\xa9", ""};
    const float scores[VOCAB] = {0, 0, -1, -1, -2, -1, -3, -4};
    const int t = sd->weight_type, Dq = N_HEAD * HEAD_DIM, Dkv = N_HEAD_KV * HEAD_DIM;
    struct bp_gguf_writer *w = NULL;
    if (bp_gguf_writer_new(sd->version, sd->alignment, &w) != BP_OK) return 1;
    int bad = bp_gguf_add_string(w, "general.architecture", "llama") ||
              bp_gguf_add_string(w, "general.name", sd->file) ||
              bp_gguf_add_u32(w, "llama.block_count", 1) ||
              bp_gguf_add_u32(w, "llama.context_length", 64) ||
              bp_gguf_add_u32(w, "llama.embedding_length", E) ||
              bp_gguf_add_u32(w, "llama.feed_forward_length", F) ||
              bp_gguf_add_u32(w, "llama.attention.head_count", N_HEAD) ||
              bp_gguf_add_u32(w, "llama.attention.head_count_kv", N_HEAD_KV) ||
              bp_gguf_add_u32(w, "llama.rope.dimension_count", HEAD_DIM) ||
              bp_gguf_add_f32(w, "llama.rope.freq_base", 10000.0f) ||
              bp_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f) ||
              bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", tokens, VOCAB) ||
              bp_gguf_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, scores, VOCAB) ||
              bp_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", true) ||
              bp_gguf_add_u64(w, "general.file_type", 2);
    bad = bad || add(w, "token_embd.weight", t, E, VOCAB) ||
          add(w, "output_norm.weight", BP_TYPE_F32, E, 1) ||
          (!sd->tied_output && add(w, "output.weight", t, E, VOCAB)) ||
          add(w, "blk.0.attn_norm.weight", BP_TYPE_F32, E, 1) ||
          (sd->fused_qkv ? add(w, "blk.0.attn_qkv.weight", t, E, Dq + 2 * Dkv)
                         : add(w, "blk.0.attn_q.weight", t, E, Dq) ||
                               add(w, "blk.0.attn_k.weight", t, E, Dkv) ||
                               add(w, "blk.0.attn_v.weight", t, E, Dkv)) ||
          add(w, "blk.0.attn_output.weight", t, Dq, E) ||
          add(w, "blk.0.ffn_norm.weight", BP_TYPE_F32, E, 1) ||
          add(w, "blk.0.ffn_gate.weight", t, E, F) || add(w, "blk.0.ffn_up.weight", t, E, F) ||
          add(w, "blk.0.ffn_down.weight", t, F, E);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sd->file);
    bad = bad || bp_gguf_writer_save(w, path) != BP_OK;
    bp_gguf_writer_free(w);
    if (bad) {
        fprintf(stderr, "gguf_seeds: could not write %s.\n", path);
        return 1;
    }
    /* A seed the binding refuses would keep the fuzzer out of model.c. */
    char err[512];
    struct bp_run_model *m = NULL;
    if (bp_run_model_load_gguf(path, &m, err, sizeof err) != BP_OK) {
        fprintf(stderr, "gguf_seeds: %s does not load as a model: %s\n", path, err);
        return 1;
    }
    bp_run_model_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gguf_seeds DIR\n");
        return 2;
    }
    int bad = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) bad |= write_llama(argv[1], &seeds[i]);
    return bad;
}
