/* chat_family.c — see chat_family.h. */
#include "chat_family.h"

#include <stdio.h>

#include "gguf.h"

void cli_chat_family(const struct bp_gguf *g, char *buf, size_t cap)
{
    const struct bp_gguf_kv *kv = g ? bp_gguf_find_kv(g, "tokenizer.chat_template") : NULL;
    snprintf(buf, cap, "%s", kv ? "present" : "none (chatml by default)");
}
