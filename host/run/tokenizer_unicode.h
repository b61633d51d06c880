/*
 * tokenizer_unicode.h — the Unicode facts the tokenizers need: UTF-8 read
 * the way llama.cpp reads it (lenient: no overlong or surrogate checks, an
 * invalid byte becomes U+FFFD), general-category classes, White_Space, and
 * GPT-2's byte-to-unicode mapping.
 */
#ifndef BP_RUN_TOKENIZER_UNICODE_H
#define BP_RUN_TOKENIZER_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bp_ucat {
    BP_UCAT_UNDEFINED, BP_UCAT_LETTER, BP_UCAT_NUMBER, BP_UCAT_PUNCT, BP_UCAT_SYMBOL,
    BP_UCAT_MARK, BP_UCAT_SEPARATOR, BP_UCAT_CONTROL,
};

struct bp_ucat_range {
    uint32_t first;
    uint8_t cat;   /* enum bp_ucat */
};
extern const struct bp_ucat_range bp_ucat_ranges[];
extern const size_t bp_ucat_n_ranges;

/* The class of code point cp (UNDEFINED past U+10FFFF). */
enum bp_ucat bp_ucat_of(uint32_t cp);
/* The White_Space property. */
bool bp_uni_is_space(uint32_t cp);

/* Bytes of the UTF-8 sequence that lead byte b starts, by its high nibble
 * (1 for continuation bytes), as SentencePiece splits text. */
size_t bp_utf8_lead_len(uint8_t b);
/* The code point at s[0..n) (n >= 1) and its byte length in *len; a byte
 * that does not start a complete sequence gives U+FFFD and *len = 1. */
uint32_t bp_utf8_decode(const uint8_t *s, size_t n, size_t *len);
/* Writes cp's UTF-8 (1-4 bytes) to out; returns the length. */
size_t bp_utf8_encode(uint32_t cp, uint8_t out[4]);
/* Bytes of s[0..n) that form complete, valid UTF-8 from the start up to
 * where an incomplete (but so far valid) sequence begins at the end. */
size_t bp_utf8_complete_prefix(const uint8_t *s, size_t n);
/* True when s[0..n) is valid UTF-8 (strict: no overlongs, surrogates). */
bool bp_utf8_valid(const uint8_t *s, size_t n);
/* Length of the valid sequence at s[0..n), 0 when the bytes there are
 * invalid, or -1 when they are a valid but incomplete start. */
int bp_utf8_valid_len(const uint8_t *s, size_t n);

/* GPT-2's byte-level mapping: byte -> code point, and back (-1: none). */
uint32_t bp_byte_to_cp(uint8_t b);
int bp_cp_to_byte(uint32_t cp);

#endif /* BP_RUN_TOKENIZER_UNICODE_H */
