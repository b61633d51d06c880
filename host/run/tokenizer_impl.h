/*
 * tokenizer_impl.h — what the tokenizer's files share: the loaded
 * vocabulary, its hash tables, and the encoders behind bp_tokenizer.h.
 */
#ifndef BP_RUN_TOKENIZER_IMPL_H
#define BP_RUN_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_tokenizer.h>

#include "tokenizer_pre.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum bp_tok_type {
    BP_TOK_UNDEFINED = 0, BP_TOK_NORMAL = 1, BP_TOK_UNKNOWN = 2, BP_TOK_CONTROL = 3,
    BP_TOK_USER_DEFINED = 4, BP_TOK_UNUSED = 5, BP_TOK_BYTE = 6,
};

enum bp_tok_model { BP_TOK_SPM, BP_TOK_BPE };

/* Open addressing from a byte string to an id. */
struct bp_str_map {
    uint32_t *slot;      /* id + 1; 0 is empty */
    size_t mask;
};

/* Open addressing from a pair of token ids to a merge. */
struct bp_merge {
    uint64_t key;        /* left << 32 | right, + 1; 0 is empty */
    int32_t rank, result;
};

struct bp_tokenizer {
    enum bp_tok_model model;
    enum bp_pre_kind pre;
    int32_t n;
    /* Token texts as the file spells them (SPM: U+2581 for spaces). */
    char *text_arena;
    size_t *text_off;    /* n + 1 offsets */
    /* What each token decodes to with special = false (BPE: bytes back
     * from GPT-2's mapping; SPM: spaces restored, <0xNN> as the byte). */
    char *piece_arena;
    size_t *piece_off;   /* n + 1 offsets */
    float *score;
    uint8_t *type;       /* enum bp_tok_type */
    /* SPM: token text -> id. BPE: the token's raw bytes -> id. */
    struct bp_str_map map;
    struct bp_merge *merges;
    size_t merge_mask;
    int32_t *special;    /* ids split out of text before encoding, longest first */
    size_t n_special;
    int32_t bos, eos, unk, eot;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    int32_t byte_token[256];  /* SPM: the token of each byte (-1: none) */
};

static inline const char *bp_tok_text(const struct bp_tokenizer *t, int32_t id, size_t *len)
{
    *len = t->text_off[id + 1] - t->text_off[id];
    return t->text_arena + t->text_off[id];
}

/* The id of the byte string s[0..len) in the map, or -1. */
int32_t bp_str_map_find(const struct bp_tokenizer *t, const char *s, size_t len);
/* The merge of tokens (l, r), or NULL. */
const struct bp_merge *bp_merge_find(const struct bp_tokenizer *t, int32_t l, int32_t r);
/* The bytes a map key of token id is made of (SPM: its text; BPE: its piece). */
const char *bp_tok_key(const struct bp_tokenizer *t, int32_t id, size_t *len);

/* A growable id list. */
struct bp_ids {
    int32_t *v;
    size_t n, cap;
};
bool bp_ids_push(struct bp_ids *a, int32_t id);

/* Encoders of one run of plain text (specials already split out). */
bp_status bp_tok_encode_spm(const struct bp_tokenizer *t, const char *text, size_t len,
                            struct bp_ids *out);
bp_status bp_tok_encode_bpe(const struct bp_tokenizer *t, const char *text, size_t len,
                            struct bp_ids *out);

#endif /* BP_RUN_TOKENIZER_IMPL_H */
