/*
 * bp_tokenizer.h — text to token ids and back, from the tokenizer a GGUF
 * model file carries in its metadata (application API).
 *
 * Two models, as llama.cpp reads them from `tokenizer.ggml.model`:
 *   - "llama": SentencePiece-style, merges driven by `tokenizer.ggml.scores`,
 *     a space before the text (`add_space_prefix`, default on), spaces as
 *     U+2581, and bytes the vocabulary lacks as `<0xNN>` tokens;
 *   - "gpt2": byte-level BPE, merges by rank (`tokenizer.ggml.merges`), after
 *     the pre-tokenizer that `tokenizer.ggml.pre` names: "default",
 *     "llama3"/"llama-bpe", "qwen2" or "gpt-2" (and their aliases). Another
 *     value is refused with a sentence naming it, never guessed.
 * BOS and EOS are added as `tokenizer.ggml.add_bos_token` /
 * `add_eos_token` say when encoding with BP_TOKENIZE_ADD_SPECIAL.
 *
 * A tokenizer is immutable once loaded: any number of threads may encode and
 * decode with it at once. A stream (bp_token_stream) belongs to one thread.
 */
#ifndef BP_TOKENIZER_H
#define BP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bp_tokenizer;

enum bp_tokenize_flags {
    BP_TOKENIZE_ADD_SPECIAL = 1,   /* add BOS/EOS as the model's metadata says */
    BP_TOKENIZE_PARSE_SPECIAL = 2, /* "<s>", "<|eot_id|>" in the text become their tokens */
};

/* Reads the tokenizer of the GGUF file at path: its metadata only, never the
 * weights. On success *out owns everything it needs (the file is closed).
 * On failure returns a status, sets bp_last_error() to one sentence (no
 * tokenizer, arrays of different lengths, a merge naming an unknown token,
 * an unknown tokenizer.ggml.pre, ...) and sets *out to NULL. */
BP_API bp_status bp_tokenizer_load(const char *path, struct bp_tokenizer **out);
/* The same from a GGUF image in memory (copied from; the caller keeps it). */
BP_API bp_status bp_tokenizer_load_memory(const void *gguf, size_t size, struct bp_tokenizer **out);
/* Frees t (NULL is fine). */
BP_API void bp_tokenizer_free(struct bp_tokenizer *t);

/* "llama" or "gpt2"; and the pre-tokenizer family ("" for "llama"). */
BP_API const char *bp_tokenizer_model(const struct bp_tokenizer *t);
BP_API const char *bp_tokenizer_pre(const struct bp_tokenizer *t);
/* Number of tokens; the BOS and EOS ids (-1 when the model has none). */
BP_API int32_t bp_tokenizer_n_tokens(const struct bp_tokenizer *t);
BP_API int32_t bp_tokenizer_bos(const struct bp_tokenizer *t);
BP_API int32_t bp_tokenizer_eos(const struct bp_tokenizer *t);
/* True when id ends a generation: EOS, or an end-of-turn control token
 * ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", ...). */
BP_API bool bp_tokenizer_is_eog(const struct bp_tokenizer *t, int32_t id);

/* Encodes text[0..len) (any bytes; invalid UTF-8 is kept by byte tokens in
 * "llama" models, and read as U+FFFD in "gpt2" ones, as llama.cpp does) into
 * *ids, a malloc'd array the caller frees, of *n ids (NULL, 0 for none).
 * flags: enum bp_tokenize_flags. Fails (a status and bp_last_error()) only
 * on a NULL argument or when memory runs out. */
BP_API bp_status bp_tokenizer_encode(const struct bp_tokenizer *t, const char *text, size_t len,
                                     unsigned flags, int32_t **ids, size_t *n);

/* The bytes token id stands for (a partial UTF-8 sequence for byte tokens),
 * with control tokens empty unless special. Returns the length and copies
 * at most cap bytes to buf (no NUL); 0 for an id out of range. */
BP_API size_t bp_tokenizer_piece(const struct bp_tokenizer *t, int32_t id, bool special, char *buf,
                                 size_t cap);
/* The text of ids[0..n) (control tokens skipped), with the space that a
 * "llama" model puts before the text removed from the first piece: the
 * inverse of encode. *text is a malloc'd NUL-terminated string of *len
 * bytes that the caller frees. BP_ERR_INVALID_ARGUMENT (and a sentence in
 * bp_last_error()) names the first id that is out of range. */
BP_API bp_status bp_tokenizer_decode(const struct bp_tokenizer *t, const int32_t *ids, size_t n,
                                     char **text, size_t *len);

/* Streaming decode for text that is printed as it is generated: push each
 * token; what comes back is always whole UTF-8 (a sequence split across
 * tokens is held back until complete; bytes that can never be valid UTF-8
 * come out as U+FFFD). */
struct bp_token_stream;
/* A stream over t (which must outlive it); NULL when t is NULL or memory
 * runs out. */
BP_API struct bp_token_stream *bp_token_stream_new(const struct bp_tokenizer *t);
BP_API void bp_token_stream_free(struct bp_token_stream *s);
/* Pushes id (an id out of range is ignored); returns the text now complete,
 * *len bytes, valid until the next call on s. */
BP_API const char *bp_token_stream_push(struct bp_token_stream *s, int32_t id, size_t *len);
/* The end: what is still held back, as U+FFFD per incomplete sequence. */
BP_API const char *bp_token_stream_flush(struct bp_token_stream *s, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* BP_TOKENIZER_H */
