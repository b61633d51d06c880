/*
 * tokenizer_builtin.h — the synthetic tokenizer of the built-in models, so
 * that `backplane run --prompt` works on them: a SentencePiece-style
 * vocabulary of n_vocab tokens (<unk> <s> </s>, the 256 byte tokens, "▁",
 * the printable ASCII characters, then "▁x", "▁xy", "xy", "▁xyz", "xyz"
 * ... of lowercase letters until the vocabulary is full; score = -id).
 * Every text encodes (bytes fall back to <0xNN>); the random weights make
 * the generated text gibberish, which is the point of a synthetic model.
 */
#ifndef BP_RUN_TOKENIZER_BUILTIN_H
#define BP_RUN_TOKENIZER_BUILTIN_H

#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_tokenizer.h>

/* The tokenizer of n_vocab (>= 512) tokens; one sentence in err on failure. */
bp_status bp_run_builtin_tokenizer(int64_t n_vocab, struct bp_tokenizer **out, char *err, size_t cap);

/* The tokenizer of a `--model` argument: "builtin:NAME" gets the synthetic
 * one of NAME's vocabulary, a path the one in the file's metadata (never
 * its weights). One sentence in err on failure. */
bp_status bp_run_tokenizer_for(const char *model, struct bp_tokenizer **out, char *err, size_t cap);

#endif /* BP_RUN_TOKENIZER_BUILTIN_H */
