/*
 * tokenizer_pre.h — the pre-tokenizers of byte-level BPE vocabularies: how
 * text is cut into words before merges, one per `tokenizer.ggml.pre` family,
 * matching llama.cpp's splits (its hand-written GPT-2 and Llama 3 matchers,
 * and, for the expressions it runs through std::regex, its "collapsed"
 * categories where every non-ASCII code point that is not white space, a
 * number or punctuation counts as a letter).
 */
#ifndef BP_RUN_TOKENIZER_PRE_H
#define BP_RUN_TOKENIZER_PRE_H

#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_status.h>

enum bp_pre_kind { BP_PRE_DEFAULT, BP_PRE_LLAMA3, BP_PRE_QWEN2, BP_PRE_GPT2 };

/* The family of a tokenizer.ggml.pre value; -1 when it is not one we know. */
int bp_pre_kind_from_name(const char *name, size_t len);
/* The family's canonical name ("llama3", ...). */
const char *bp_pre_kind_name(enum bp_pre_kind k);

/* A growable list of word lengths (in code points). */
struct bp_pre_words {
    size_t *len;
    size_t n, cap;
};

/* Cuts cps[0..n) into words (lengths appended to *out, which the caller
 * frees). Fails only when memory runs out. */
bp_status bp_pretokenize(enum bp_pre_kind k, const uint32_t *cps, size_t n, struct bp_pre_words *out);

#endif /* BP_RUN_TOKENIZER_PRE_H */
