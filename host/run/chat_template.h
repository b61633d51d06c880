/*
 * chat_template.h — chat messages to one prompt string, the way llama.cpp's
 * native llama_chat_apply_template does it: no Jinja. A template is either
 * one of llama.cpp's built-in names ("chatml", "llama3", ...) or a model's
 * Jinja source, which is never run: marker substrings in it pick a format,
 * tested in llama.cpp's order. A template that matches nothing is refused
 * with a sentence, never guessed at.
 *
 * The formats are a table in chat_template.c (one row per family: what
 * each role's message becomes, the generation prompt, a few switches); the
 * detection is a second table of marker rules, first match wins.
 */
#ifndef BP_RUN_CHAT_TEMPLATE_H
#define BP_RUN_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include <backplane/bp_status.h>

#include "gguf.h"

/* The formats llama.cpp knows (its llm_chat_template, in its order). */
enum bp_chat_template {
    BP_CHAT_TEMPLATE_UNKNOWN = -1,
    BP_CHAT_CHATML,
    BP_CHAT_LLAMA2,
    BP_CHAT_LLAMA2_SYS,
    BP_CHAT_LLAMA2_SYS_BOS,
    BP_CHAT_LLAMA2_SYS_STRIP,
    BP_CHAT_MISTRAL_V1,
    BP_CHAT_MISTRAL_V3,
    BP_CHAT_MISTRAL_V3_TEKKEN,
    BP_CHAT_MISTRAL_V7,
    BP_CHAT_MISTRAL_V7_TEKKEN,
    BP_CHAT_PHI3,
    BP_CHAT_PHI4,
    BP_CHAT_FALCON3,
    BP_CHAT_ZEPHYR,
    BP_CHAT_MONARCH,
    BP_CHAT_GEMMA,
    BP_CHAT_ORION,
    BP_CHAT_OPENCHAT,
    BP_CHAT_VICUNA,
    BP_CHAT_VICUNA_ORCA,
    BP_CHAT_DEEPSEEK,
    BP_CHAT_DEEPSEEK2,
    BP_CHAT_DEEPSEEK3,
    BP_CHAT_DEEPSEEK_OCR,
    BP_CHAT_COMMAND_R,
    BP_CHAT_LLAMA3,
    BP_CHAT_CHATGLM3,
    BP_CHAT_CHATGLM4,
    BP_CHAT_GLMEDGE,
    BP_CHAT_MINICPM,
    BP_CHAT_EXAONE3,
    BP_CHAT_EXAONE4,
    BP_CHAT_EXAONE_MOE,
    BP_CHAT_RWKV_WORLD,
    BP_CHAT_GRANITE,
    BP_CHAT_GRANITE_4_0,
    BP_CHAT_GRANITE_4_1,
    BP_CHAT_GIGACHAT,
    BP_CHAT_MEGREZ,
    BP_CHAT_YANDEX,
    BP_CHAT_BAILING,
    BP_CHAT_BAILING_THINK,
    BP_CHAT_BAILING2,
    BP_CHAT_LLAMA4,
    BP_CHAT_SMOLVLM,
    BP_CHAT_DOTS1,
    BP_CHAT_HUNYUAN_MOE,
    BP_CHAT_GPT_OSS,
    BP_CHAT_HUNYUAN_DENSE,
    BP_CHAT_HUNYUAN_VL,
    BP_CHAT_KIMI_K2,
    BP_CHAT_SEED_OSS,
    BP_CHAT_GROK2,
    BP_CHAT_PANGU_EMBEDDED,
    BP_CHAT_SOLAR_OPEN,
    BP_CHAT_TEMPLATE_COUNT
};

/* One message: both strings NUL-terminated; NULL reads as "". */
struct bp_chat_message {
    const char *role;
    const char *content;
};

/* The format tmpl selects: a built-in name exactly, else the first marker
 * rule it satisfies; NULL means "chatml". BP_CHAT_TEMPLATE_UNKNOWN when
 * neither (the empty string included, as in llama.cpp). */
enum bp_chat_template bp_chat_template_detect(const char *tmpl);

/* The format's name: llama.cpp's built-in name, or "dots1" for the one
 * format that only its markers select. NULL for an id out of range. */
const char *bp_chat_template_name(enum bp_chat_template id);

/* llama.cpp's built-in names in its order (strcmp order, as
 * llama_chat_builtin_templates lists them): fills out[0..cap) and returns
 * how many there are. The strings are static. */
size_t bp_chat_template_builtin_names(const char **out, size_t cap);

/* Formats msgs[0..n) as format id, with the generation prompt when
 * add_assistant (formats without one ignore it). The result replaces the
 * contents of *buf (NULL with *cap 0 to start; realloc'd as needed, the
 * caller frees), NUL-terminated, *len bytes. BP_ERR_INVALID_ARGUMENT for an
 * id out of range, BP_ERR_OUT_OF_MEMORY (buffer kept, contents undefined). */
bp_status bp_chat_template_apply(enum bp_chat_template id, const struct bp_chat_message *msgs,
                                 size_t n, bool add_assistant, char **buf, size_t *len,
                                 size_t *cap);

/* The first non-blank line of tmpl, trimmed, control bytes as spaces, cut
 * at 60 bytes (never inside a UTF-8 character) with "..." when longer, into
 * buf (cap >= 64; NULL tmpl reads as ""). */
void bp_chat_template_first_line(const char *tmpl, char *buf, size_t cap);

/* The refusal of a template no rule matches: one sentence into err that
 * quotes its first line (bp_chat_template_first_line). */
void bp_chat_template_unknown(const char *tmpl, char *err, size_t cap);

/* Detect and apply in one: BP_ERR_UNSUPPORTED and bp_chat_template_unknown's
 * sentence for an unknown template; otherwise as bp_chat_template_apply
 * (with a sentence on failure). */
bp_status bp_chat_template_format(const char *tmpl, const struct bp_chat_message *msgs, size_t n,
                                  bool add_assistant, char **buf, size_t *len, size_t *cap,
                                  char *err, size_t err_cap);

/* ------------------------------------------------------------- models */

/* The chat template of a GGUF file as llama_model_chat_template gives it:
 * tokenizer.chat_template copied into *out (malloc'd, the caller frees);
 * without one, "mistral-v7-tekken" for a 40-layer model of the tekken
 * pre-tokenizer (llama.cpp's one fallback), else *out = NULL: chatml.
 * An empty template counts as none, as llama.cpp's chat front ends do.
 * BP_ERR_INVALID_ARGUMENT (a sentence) when the key is not a string. */
bp_status bp_chat_template_of_gguf(const struct bp_gguf *g, char **out, char *err, size_t cap);

/* The template of a --model argument: NULL (chatml) for "builtin:NAME",
 * else bp_chat_template_of_gguf on the file's metadata (the weights are
 * not read). One sentence in err on failure. */
bp_status bp_chat_template_of_model(const char *model, char **out, char *err, size_t cap);

/* The format name of g's template ("chatml" without one), or NULL with
 * bp_chat_template_unknown's sentence (or the key's) in err. */
const char *bp_chat_template_gguf_family(const struct bp_gguf *g, char *err, size_t cap);

#endif /* BP_RUN_CHAT_TEMPLATE_H */
