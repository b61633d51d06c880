/* chat_family.h — the chat template family of a model file, in words. */
#ifndef BP_CLI_CHAT_FAMILY_H
#define BP_CLI_CHAT_FAMILY_H

#include <stddef.h>

struct bp_gguf;

/* Writes the family of g's tokenizer.chat_template into buf ("chatml", or
 * "none (chatml by default)", or why it is not recognised); g may be NULL
 * (a built-in model). */
void cli_chat_family(const struct bp_gguf *g, char *buf, size_t cap);

#endif
