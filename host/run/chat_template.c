/*
 * chat_template.c — llama.cpp's native chat formats (chat_template.h) as two
 * tables: FORMATS, what each family writes for each role, and RULES, the
 * marker substrings that pick a family from a Jinja source, in llama.cpp's
 * order. One small engine runs every row of FORMATS.
 *
 * Multi-byte markers are written as UTF-8: "｜" is U+FF5C (fullwidth bar),
 * "▁" U+2581, "：" U+FF1A, exactly the bytes llama.cpp compares and writes.
 */
#include "chat_template.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_error.h"

/* ------------------------------------------------------------ formats */

/* A message row: the role it takes (NULL: any role no earlier row took; a
 * message no row takes is left out) and what it writes. In fmt:
 *   %c the content   %t the content trimmed of C-locale white space
 *   %r the role      %R the role in ASCII capitals   %C its first letter so
 *   %p the system text held back (ROW_HOLD), then "\n\n"; nothing when none. */
enum {
    ROW_ENDS_TURN = 1,  /* the next message reopens the turn (format's reopen) */
    ROW_HOLD = 2,       /* written into the held-back system text, not the output */
    ROW_FIRST_ONLY = 4, /* only as the chat's first message; elsewhere left out */
};

struct row {
    const char *role;
    const char *fmt;
    unsigned flags;
    const char *last;   /* also written when this is the chat's last message */
};

struct format {
    const char *name;        /* llama.cpp's name */
    bool builtin;            /* the name is one of llama.cpp's built-in names */
    const char *start;       /* written first */
    const char *no_system;   /* written next unless the first message is "system" */
    bool no_system_if_empty; /* ... and for a chat of no messages */
    const char *reopen;      /* before a message that follows a ROW_ENDS_TURN one */
    bool closed_at_start;    /* the first message opens a turn too */
    const char *between;     /* between two messages */
    struct row rows[6];
    const char *gen;         /* the generation prompt (add_assistant) */
};

#define R(role, fmt) { role, fmt, 0, NULL }
#define ANY(fmt) { NULL, fmt, 0, NULL }

/* llama2 and its variants: one [INST] turn per user message and reply. */
#define LLAMA2(nm, sys, user, reply, reopen_text) \
    { .name = nm, .builtin = true, .start = "[INST] ", .reopen = reopen_text, \
      .rows = { R("system", sys), R("user", user), { NULL, reply, ROW_ENDS_TURN, NULL } } }
#define MISTRAL(nm, open, user, reply) \
    { .name = nm, .builtin = true, .reopen = open, .closed_at_start = true, \
      .rows = { R("system", "%c\n\n"), R("user", user), { NULL, reply, ROW_ENDS_TURN, NULL } } }
#define GRANITE(nm, tool_call) \
    { .name = nm, .builtin = true, \
      .rows = { R("assistant_tool_call", tool_call "<|tool_call|>%c<|end_of_text|>\n"), \
                ANY("<|start_of_role|>%r<|end_of_role|>%c<|end_of_text|>\n") }, \
      .gen = "<|start_of_role|>assistant<|end_of_role|>" }
#define BAILING(nm, gen_text) \
    { .name = nm, .builtin = true, \
      .rows = { R("user", "<role>HUMAN</role>%c"), ANY("<role>%R</role>%c") }, .gen = gen_text }

static const struct format FORMATS[BP_CHAT_TEMPLATE_COUNT] = {
    [BP_CHAT_CHATML] = { .name = "chatml", .builtin = true,
        .rows = { ANY("<|im_start|>%r\n%c<|im_end|>\n") }, .gen = "<|im_start|>assistant\n" },
    [BP_CHAT_LLAMA2] = LLAMA2("llama2", "%c\n", "%c [/INST]", "%c</s>", "[INST] "),
    [BP_CHAT_LLAMA2_SYS] = LLAMA2("llama2-sys", "<<SYS>>\n%c\n<</SYS>>\n\n", "%c [/INST]", "%c</s>",
                                  "[INST] "),
    [BP_CHAT_LLAMA2_SYS_BOS] = LLAMA2("llama2-sys-bos", "<<SYS>>\n%c\n<</SYS>>\n\n", "%c [/INST]",
                                      "%c</s>", "<s>[INST] "),
    [BP_CHAT_LLAMA2_SYS_STRIP] = LLAMA2("llama2-sys-strip", "<<SYS>>\n%t\n<</SYS>>\n\n",
                                        "%t [/INST]", "%t</s>", "[INST] "),
    [BP_CHAT_MISTRAL_V1] = MISTRAL("mistral-v1", " [INST] ", "%c [/INST]", " %c</s>"),
    [BP_CHAT_MISTRAL_V3] = MISTRAL("mistral-v3", "[INST] ", "%c[/INST]", " %t</s>"),
    [BP_CHAT_MISTRAL_V3_TEKKEN] = MISTRAL("mistral-v3-tekken", "[INST]", "%c[/INST]", "%c</s>"),
    [BP_CHAT_MISTRAL_V7] = { .name = "mistral-v7", .builtin = true,
        .rows = { R("system", "[SYSTEM_PROMPT] %c[/SYSTEM_PROMPT]"), R("user", "[INST] %c[/INST]"),
                  ANY(" %c</s>") } },
    [BP_CHAT_MISTRAL_V7_TEKKEN] = { .name = "mistral-v7-tekken", .builtin = true,
        .rows = { R("system", "[SYSTEM_PROMPT]%c[/SYSTEM_PROMPT]"), R("user", "[INST]%c[/INST]"),
                  ANY("%c</s>") } },
    [BP_CHAT_PHI3] = { .name = "phi3", .builtin = true,
        .rows = { ANY("<|%r|>\n%c<|end|>\n") }, .gen = "<|assistant|>\n" },
    [BP_CHAT_PHI4] = { .name = "phi4", .builtin = true,
        .rows = { ANY("<|im_start|>%r<|im_sep|>%c<|im_end|>") },
        .gen = "<|im_start|>assistant<|im_sep|>" },
    [BP_CHAT_FALCON3] = { .name = "falcon3", .builtin = true,
        .rows = { ANY("<|%r|>\n%c\n") }, .gen = "<|assistant|>\n" },
    [BP_CHAT_ZEPHYR] = { .name = "zephyr", .builtin = true,
        .rows = { ANY("<|%r|>\n%c<|endoftext|>\n") }, .gen = "<|assistant|>\n" },
    [BP_CHAT_MONARCH] = { .name = "monarch", .builtin = true, .between = "<s>",
        .rows = { ANY("%r\n%c</s>\n") }, .gen = "<s>assistant\n" },
    /* Gemma has no system turn: system text joins the next user turn. */
    [BP_CHAT_GEMMA] = { .name = "gemma", .builtin = true,
        .rows = { { "system", "%t", ROW_HOLD, NULL },
                  R("assistant", "<start_of_turn>model\n%t<end_of_turn>\n"),
                  R("model", "<start_of_turn>model\n%t<end_of_turn>\n"),
                  ANY("<start_of_turn>%r\n%p%t<end_of_turn>\n") },
        .gen = "<start_of_turn>model\n" },
    [BP_CHAT_ORION] = { .name = "orion", .builtin = true,
        .rows = { { "system", "%c", ROW_HOLD, NULL },
                  R("user", "Human: %p%c\n\nAssistant: </s>"), ANY("%c</s>") } },
    [BP_CHAT_OPENCHAT] = { .name = "openchat", .builtin = true,
        .rows = { R("system", "%c<|end_of_turn|>"), ANY("GPT4 Correct %C: %c<|end_of_turn|>") },
        .gen = "GPT4 Correct Assistant:" },
    [BP_CHAT_VICUNA] = { .name = "vicuna", .builtin = true,
        .rows = { R("system", "%c\n\n"), R("user", "USER: %c\n"),
                  R("assistant", "ASSISTANT: %c</s>\n") },
        .gen = "ASSISTANT:" },
    [BP_CHAT_VICUNA_ORCA] = { .name = "vicuna-orca", .builtin = true,
        .rows = { R("system", "SYSTEM: %c\n"), R("user", "USER: %c\n"),
                  R("assistant", "ASSISTANT: %c</s>\n") },
        .gen = "ASSISTANT:" },
    [BP_CHAT_DEEPSEEK] = { .name = "deepseek", .builtin = true,
        .rows = { R("system", "%c"), R("user", "### Instruction:\n%c\n"),
                  R("assistant", "### Response:\n%c\n<|EOT|>\n") },
        .gen = "### Response:\n" },
    [BP_CHAT_DEEPSEEK2] = { .name = "deepseek2", .builtin = true,
        .rows = { R("system", "%c\n\n"), R("user", "User: %c\n\n"),
                  R("assistant", "Assistant: %c<｜end▁of▁sentence｜>") },
        .gen = "Assistant:" },
    [BP_CHAT_DEEPSEEK3] = { .name = "deepseek3", .builtin = true,
        .rows = { R("system", "%c\n\n"), R("user", "<｜User｜>%c"),
                  R("assistant", "<｜Assistant｜>%c<｜end▁of▁sentence｜>") },
        .gen = "<｜Assistant｜>" },
    [BP_CHAT_DEEPSEEK_OCR] = { .name = "deepseek-ocr", .builtin = true, .rows = { ANY("%c") } },
    [BP_CHAT_COMMAND_R] = { .name = "command-r", .builtin = true,
        .rows = { R("system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>%t<|END_OF_TURN_TOKEN|>"),
                  R("user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>%t<|END_OF_TURN_TOKEN|>"),
                  R("assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>%t<|END_OF_TURN_TOKEN|>") },
        .gen = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" },
    [BP_CHAT_LLAMA3] = { .name = "llama3", .builtin = true,
        .rows = { ANY("<|start_header_id|>%r<|end_header_id|>\n\n%t<|eot_id|>") },
        .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n" },
    [BP_CHAT_CHATGLM3] = { .name = "chatglm3", .builtin = true, .start = "[gMASK]sop",
        .rows = { ANY("<|%r|>\n %c") }, .gen = "<|assistant|>" },
    [BP_CHAT_CHATGLM4] = { .name = "chatglm4", .builtin = true, .start = "[gMASK]<sop>",
        .rows = { ANY("<|%r|>\n%c") }, .gen = "<|assistant|>\n" },
    [BP_CHAT_GLMEDGE] = { .name = "glmedge", .builtin = true,
        .rows = { ANY("<|%r|>\n%c") }, .gen = "<|assistant|>" },
    [BP_CHAT_MINICPM] = { .name = "minicpm", .builtin = true,
        .rows = { R("user", "<用户>%t<AI>"), ANY("%t") } },
    [BP_CHAT_EXAONE3] = { .name = "exaone3", .builtin = true,
        .rows = { R("system", "[|system|]%t[|endofturn|]\n"), R("user", "[|user|]%t\n"),
                  R("assistant", "[|assistant|]%t[|endofturn|]\n") },
        .gen = "[|assistant|]" },
    [BP_CHAT_EXAONE4] = { .name = "exaone4", .builtin = true,
        .rows = { R("system", "[|system|]%t[|endofturn|]\n"), R("user", "[|user|]%t\n"),
                  R("assistant", "[|assistant|]%t[|endofturn|]\n"),
                  R("tool", "[|tool|]%t[|endofturn|]\n") },
        .gen = "[|assistant|]" },
    [BP_CHAT_EXAONE_MOE] = { .name = "exaone-moe", .builtin = true,
        .rows = { R("system", "<|system|>\n%t<|endofturn|>\n"), R("user", "<|user|>\n%t<|endofturn|>\n"),
                  R("assistant", "<|assistant|>\n%t<|endofturn|>\n"),
                  R("tool", "<|tool|>\n%t<|endofturn|>\n") },
        .gen = "<|assistant|>\n" },
    /* The reply prompt follows a last user message whatever add_assistant says. */
    [BP_CHAT_RWKV_WORLD] = { .name = "rwkv-world", .builtin = true,
        .rows = { R("system", "System: %t\n\n"), { "user", "User: %t\n\n", 0, "Assistant:" },
                  R("assistant", "Assistant: %t\n\n") } },
    [BP_CHAT_GRANITE] = GRANITE("granite", "<|start_of_role|>assistant_tool_call<|end_of_role|>"),
    [BP_CHAT_GRANITE_4_0] = GRANITE("granite-4.0", "<|start_of_role|>assistant<|end_of_role|>"),
    [BP_CHAT_GRANITE_4_1] = GRANITE("granite-4.1", "<|start_of_role|>assistant<|end_of_role|>"),
    [BP_CHAT_GIGACHAT] = { .name = "gigachat", .builtin = true, .start = "<s>",
        .rows = { { "system", "%c<|message_sep|>", ROW_FIRST_ONLY, NULL },
                  R("user", "user<|role_sep|>%c<|message_sep|>available functions<|role_sep|>[]"
                            "<|message_sep|>"),
                  R("assistant", "assistant<|role_sep|>%c<|message_sep|>") },
        .gen = "assistant<|role_sep|>" },
    [BP_CHAT_MEGREZ] = { .name = "megrez", .builtin = true,
        .rows = { ANY("<|role_start|>%r<|role_end|>%c<|turn_end|>") },
        .gen = "<|role_start|>assistant<|role_end|>" },
    [BP_CHAT_YANDEX] = { .name = "yandex", .builtin = true,
        .rows = { R("user", " Пользователь: %c\n\n"), R("assistant", " Ассистент: %c\n\n") },
        .gen = " Ассистент:[SEP]" },
    [BP_CHAT_BAILING] = BAILING("bailing", "<role>ASSISTANT</role>"),
    [BP_CHAT_BAILING_THINK] = BAILING("bailing-think", "<role>ASSISTANT</role><think>"),
    [BP_CHAT_BAILING2] = { .name = "bailing2", .builtin = true,
        .no_system = "<role>SYSTEM</role>detailed thinking off<|role_end|>", .no_system_if_empty = true,
        .rows = { R("user", "<role>HUMAN</role>%c<|role_end|>"), ANY("<role>%R</role>%c<|role_end|>") },
        .gen = "<role>ASSISTANT</role>" },
    [BP_CHAT_LLAMA4] = { .name = "llama4", .builtin = true,
        .rows = { ANY("<|header_start|>%r<|header_end|>\n\n%t<|eot|>") },
        .gen = "<|header_start|>assistant<|header_end|>\n\n" },
    /* <|im_start|> is SmolVLM's BOS here, not a chatml turn. */
    [BP_CHAT_SMOLVLM] = { .name = "smolvlm", .builtin = true, .start = "<|im_start|>",
        .rows = { R("system", "%c\n\n"), R("user", "User: %c<end_of_utterance>\n"),
                  ANY("Assistant: %c<end_of_utterance>\n") },
        .gen = "Assistant:" },
    [BP_CHAT_DOTS1] = { .name = "dots1", .builtin = false,
        .rows = { R("system", "<|system|>%c<|endofsystem|>"),
                  R("user", "<|userprompt|>%c<|endofuserprompt|>"),
                  ANY("<|response|>%c<|endofresponse|>") },
        .gen = "<|response|>" },
    [BP_CHAT_HUNYUAN_MOE] = { .name = "hunyuan-moe", .builtin = true,
        .rows = { R("system", "<|startoftext|>%c<|extra_4|>"), R("assistant", "%c<|eos|>"),
                  ANY("<|startoftext|>%c<|extra_0|>") } },
    [BP_CHAT_GPT_OSS] = { .name = "gpt-oss", .builtin = true,
        .rows = { R("assistant", "<|start|>assistant<|message|>%c<|return|>"),
                  ANY("<|start|>%r<|message|>%c<|end|>") },
        .gen = "<|start|>assistant" },
    [BP_CHAT_HUNYUAN_DENSE] = { .name = "hunyuan-dense", .builtin = true,
        .rows = { { "system", "%c<｜hy_place▁holder▁no▁3｜>", ROW_FIRST_ONLY, NULL },
                  R("assistant", "<｜hy_Assistant｜>%c<｜hy_place▁holder▁no▁2｜>"),
                  R("user", "<｜hy_User｜>%c<｜hy_Assistant｜>") } },
    [BP_CHAT_HUNYUAN_VL] = { .name = "hunyuan-vl", .builtin = true,
        .start = "<｜hy_begin▁of▁sentence｜>",
        .rows = { { "system", "%c<｜hy_place▁holder▁no▁3｜>", ROW_FIRST_ONLY, NULL },
                  R("user", "%c<｜hy_User｜>"), R("assistant", "%c<｜hy_Assistant｜>") } },
    /* A role it does not know still gets its content and <|im_end|>. */
    [BP_CHAT_KIMI_K2] = { .name = "kimi-k2", .builtin = true,
        .rows = { R("system", "<|im_system|>system<|im_middle|>%c<|im_end|>"),
                  R("user", "<|im_user|>user<|im_middle|>%c<|im_end|>"),
                  R("assistant", "<|im_assistant|>assistant<|im_middle|>%c<|im_end|>"),
                  R("tool", "<|im_system|>tool<|im_middle|>%c<|im_end|>"), ANY("%c<|im_end|>") },
        .gen = "<|im_assistant|>assistant<|im_middle|>" },
    [BP_CHAT_SEED_OSS] = { .name = "seed_oss", .builtin = true,
        .rows = { R("assistant", "<seed:bos>assistant\n%t<seed:eos>"), ANY("<seed:bos>%r\n%c<seed:eos>") },
        .gen = "<seed:bos>assistant\n" },
    [BP_CHAT_GROK2] = { .name = "grok-2", .builtin = true,
        .rows = { R("system", "System: %t<|separator|>\n\n"), R("user", "Human: %t<|separator|>\n\n"),
                  R("assistant", "Assistant: %c<|separator|>\n\n") },
        .gen = "Assistant:" },
    [BP_CHAT_PANGU_EMBEDDED] = { .name = "pangu-embedded", .builtin = true,
        .no_system = "[unused9]系统：[unused10]",
        .rows = { R("system", "[unused9]系统：%c[unused10]"), R("user", "[unused9]用户：%c[unused10]"),
                  R("assistant", "[unused9]助手：%c[unused10]"), R("tool", "[unused9]工具：%c[unused10]"),
                  R("function", "[unused9]方法：%c[unused10]") },
        .gen = "[unused9]助手：" },
    [BP_CHAT_SOLAR_OPEN] = { .name = "solar-open", .builtin = true,
        .rows = { ANY("<|begin|>%r<|content|>%c<|end|>") }, .gen = "<|begin|>assistant" },
};

/* ---------------------------------------------------------- detection */

/* A clause holds when the template starts with `starts` or contains one of
 * has[]; a rule when all its clauses do (unused clauses are empty and hold). */
struct clause {
    const char *starts;
    const char *has[2];
};

struct rule {
    struct clause all[4];
    enum bp_chat_template id;
};

#define HAS(s) { NULL, { s, NULL } }
#define EITHER(a, b) { NULL, { a, b } }
/* llama.cpp's gate for the Mistral and llama2 families. */
#define MISTRAL_GATE { "mistral", { "[INST]", NULL } }
#define MISTRAL_OFFICIAL EITHER("' [INST] ' + system_message", "[AVAILABLE_TOOLS]")
#define GRANITE_TOOLS EITHER("<tool_call>", "<tools>")

/* In llama.cpp's order; within a family the narrower rule comes first and
 * the family's plain rule last, which is how its nested tests read. */
static const struct rule RULES[] = {
    { { HAS("<|im_start|>"), HAS("<|im_sep|>") }, BP_CHAT_PHI4 },
    { { HAS("<|im_start|>"), HAS("<end_of_utterance>") }, BP_CHAT_SMOLVLM },
    { { HAS("<|im_start|>") }, BP_CHAT_CHATML },
    { { MISTRAL_GATE, HAS("[SYSTEM_PROMPT]") }, BP_CHAT_MISTRAL_V7 },
    { { MISTRAL_GATE, MISTRAL_OFFICIAL, HAS(" [INST]") }, BP_CHAT_MISTRAL_V1 },
    { { MISTRAL_GATE, MISTRAL_OFFICIAL, HAS("\"[INST]\"") }, BP_CHAT_MISTRAL_V3_TEKKEN },
    { { MISTRAL_GATE, MISTRAL_OFFICIAL }, BP_CHAT_MISTRAL_V3 },
    { { MISTRAL_GATE, HAS("content.strip()") }, BP_CHAT_LLAMA2_SYS_STRIP },
    { { MISTRAL_GATE, HAS("bos_token + '[INST]") }, BP_CHAT_LLAMA2_SYS_BOS },
    { { MISTRAL_GATE, HAS("<<SYS>>") }, BP_CHAT_LLAMA2_SYS },
    { { MISTRAL_GATE }, BP_CHAT_LLAMA2 },
    { { HAS("<|assistant|>"), HAS("<|end|>") }, BP_CHAT_PHI3 },
    { { HAS("[gMASK]<sop>") }, BP_CHAT_CHATGLM4 },
    { { HAS("<|assistant|>"), HAS("<|user|>"), HAS("<|tool_declare|>") }, BP_CHAT_EXAONE_MOE },
    { { HAS("<|assistant|>"), HAS("<|user|>"), HAS("</s>") }, BP_CHAT_FALCON3 },
    { { HAS("<|assistant|>"), HAS("<|user|>") }, BP_CHAT_GLMEDGE },
    { { HAS("<|{{ item['role'] }}|>"), HAS("<|begin_of_image|>") }, BP_CHAT_GLMEDGE },
    { { HAS("<|user|>"), HAS("<|endoftext|>") }, BP_CHAT_ZEPHYR },
    { { HAS("bos_token + message['role']") }, BP_CHAT_MONARCH },
    { { HAS("<start_of_turn>") }, BP_CHAT_GEMMA },
    { { HAS("'\\n\\nAssistant: ' + eos_token") }, BP_CHAT_ORION },
    { { HAS("GPT4 Correct ") }, BP_CHAT_OPENCHAT },
    { { HAS("USER: "), HAS("ASSISTANT: "), HAS("SYSTEM: ") }, BP_CHAT_VICUNA_ORCA },
    { { HAS("USER: "), HAS("ASSISTANT: ") }, BP_CHAT_VICUNA },
    { { HAS("### Instruction:"), HAS("<|EOT|>") }, BP_CHAT_DEEPSEEK },
    { { HAS("<|START_OF_TURN_TOKEN|>"), HAS("<|USER_TOKEN|>") }, BP_CHAT_COMMAND_R },
    { { HAS("<|start_header_id|>"), HAS("<|end_header_id|>") }, BP_CHAT_LLAMA3 },
    { { HAS("[gMASK]sop") }, BP_CHAT_CHATGLM3 },
    { { HAS("<用户>") }, BP_CHAT_MINICPM },
    { { HAS("'Assistant: ' + message['content'] + eos_token") }, BP_CHAT_DEEPSEEK2 },
    { { HAS("<｜Assistant｜>"), HAS("<｜User｜>"), HAS("<｜end▁of▁sentence｜>") }, BP_CHAT_DEEPSEEK3 },
    { { HAS("[|system|]"), HAS("[|assistant|]"), HAS("[|endofturn|]"), HAS("[|tool|]") }, BP_CHAT_EXAONE4 },
    { { HAS("[|system|]"), HAS("[|assistant|]"), HAS("[|endofturn|]") }, BP_CHAT_EXAONE3 },
    { { EITHER("rwkv-world", "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}") }, BP_CHAT_RWKV_WORLD },
    { { HAS("<|start_of_role|>"), GRANITE_TOOLS, HAS("g4_default_system_message") }, BP_CHAT_GRANITE_4_0 },
    { { HAS("<|start_of_role|>"), GRANITE_TOOLS }, BP_CHAT_GRANITE_4_1 },
    { { HAS("<|start_of_role|>") }, BP_CHAT_GRANITE },
    { { HAS("message['role'] + additional_special_tokens[0] + message['content'] + "
            "additional_special_tokens[1]") }, BP_CHAT_GIGACHAT },
    { { HAS("<|role_start|>") }, BP_CHAT_MEGREZ },
    { { HAS(" Ассистент:") }, BP_CHAT_YANDEX },
    { { HAS("<role>ASSISTANT</role>"), HAS("'HUMAN'") }, BP_CHAT_BAILING },
    { { HAS("<role>ASSISTANT</role>"), HAS("\"HUMAN\""), HAS("<think>") }, BP_CHAT_BAILING_THINK },
    { { HAS("<role>ASSISTANT</role>"), HAS("<role>HUMAN</role>"), HAS("<|role_end|>") }, BP_CHAT_BAILING2 },
    { { HAS("<|header_start|>"), HAS("<|header_end|>") }, BP_CHAT_LLAMA4 },
    { { HAS("<|endofuserprompt|>") }, BP_CHAT_DOTS1 },
    { { HAS("<|extra_0|>"), HAS("<|extra_4|>") }, BP_CHAT_HUNYUAN_MOE },
    { { HAS("<|start|>"), HAS("<|channel|>") }, BP_CHAT_GPT_OSS },
    { { HAS("<｜hy_Assistant｜>"), HAS("<｜hy_begin▁of▁sentence｜>") }, BP_CHAT_HUNYUAN_VL },
    { { HAS("<｜hy_Assistant｜>"), HAS("<｜hy_place▁holder▁no▁3｜>") }, BP_CHAT_HUNYUAN_DENSE },
    { { HAS("<|im_assistant|>assistant<|im_middle|>") }, BP_CHAT_KIMI_K2 },
    { { HAS("<seed:bos>") }, BP_CHAT_SEED_OSS },
    { { HAS("'Assistant: '  + message['content'] + '<|separator|>") }, BP_CHAT_GROK2 },
    { { HAS("[unused9]系统：[unused10]") }, BP_CHAT_PANGU_EMBEDDED },
    { { HAS("<|begin|>"), HAS("<|end|>"), HAS("<|content|>") }, BP_CHAT_SOLAR_OPEN },
};

static bool clause_holds(const struct clause *c, const char *tmpl)
{
    if (!c->starts && !c->has[0]) return true;
    if (c->starts && !strncmp(tmpl, c->starts, strlen(c->starts))) return true;
    for (int i = 0; i < 2; i++)
        if (c->has[i] && strstr(tmpl, c->has[i])) return true;
    return false;
}

enum bp_chat_template bp_chat_template_detect(const char *tmpl)
{
    if (!tmpl) return BP_CHAT_CHATML;
    for (int id = 0; id < BP_CHAT_TEMPLATE_COUNT; id++)
        if (FORMATS[id].builtin && !strcmp(tmpl, FORMATS[id].name)) return (enum bp_chat_template)id;
    for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) {
        bool all = true;
        for (size_t c = 0; all && c < sizeof RULES[r].all / sizeof RULES[r].all[0]; c++)
            all = clause_holds(&RULES[r].all[c], tmpl);
        if (all) return RULES[r].id;
    }
    return BP_CHAT_TEMPLATE_UNKNOWN;
}

const char *bp_chat_template_name(enum bp_chat_template id)
{
    return id >= 0 && id < BP_CHAT_TEMPLATE_COUNT ? FORMATS[id].name : NULL;
}

size_t bp_chat_template_builtin_names(const char **out, size_t cap)
{
    /* Each pass takes the smallest name after the previous one: the table
     * stays in llama.cpp's enum order and needs no sorted copy. */
    size_t count = 0;
    const char *prev = NULL;
    for (int id = 0; id < BP_CHAT_TEMPLATE_COUNT; id++) count += FORMATS[id].builtin;
    for (size_t k = 0; k < cap && k < count; k++) {
        const char *next = NULL;
        for (int id = 0; id < BP_CHAT_TEMPLATE_COUNT; id++) {
            const char *n = FORMATS[id].name;
            if (FORMATS[id].builtin && (!prev || strcmp(n, prev) > 0) && (!next || strcmp(n, next) < 0))
                next = n;
        }
        out[k] = prev = next;
    }
    return count;
}

/* ----------------------------------------------------------- the engine */

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->oom) return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1) cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) { o->oom = true; return; }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void puts_(struct out *o, const char *s)
{
    if (s) put(o, s, strlen(s));
}

/* llama.cpp trims with isspace() in the C locale. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static char ascii_upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

static void expand(struct out *o, const char *fmt, const char *role, const char *content,
                   struct out *held)
{
    for (const char *f = fmt; *f; f++) {
        const char *lit = f;
        while (*f && *f != '%') f++;
        put(o, lit, (size_t)(f - lit));
        if (!*f) break;
        const char d = *++f;
        if (d == 'c') puts_(o, content);
        else if (d == 'r') puts_(o, role);
        else if (d == 't') {
            size_t a = 0, b = strlen(content);
            while (a < b && is_space(content[a])) a++;
            while (b > a && is_space(content[b - 1])) b--;
            put(o, content + a, b - a);
        } else if (d == 'R' || d == 'C') {
            for (size_t i = 0; role[i]; i++) {
                const char c = d == 'R' || i == 0 ? ascii_upper(role[i]) : role[i];
                put(o, &c, 1);
            }
        } else if (d == 'p') {
            if (held->len) {
                put(o, held->buf, held->len);
                put(o, "\n\n", 2);
                held->len = 0;
            }
        } else if (!d) break;
    }
}

static const struct row *find_row(const struct format *f, const char *role)
{
    for (size_t i = 0; i < sizeof f->rows / sizeof f->rows[0] && f->rows[i].fmt; i++)
        if (!f->rows[i].role || !strcmp(f->rows[i].role, role)) return &f->rows[i];
    return NULL;
}

bp_status bp_chat_template_apply(enum bp_chat_template id, const struct bp_chat_message *msgs,
                                 size_t n, bool add_assistant, char **buf, size_t *len,
                                 size_t *cap)
{
    if (id < 0 || id >= BP_CHAT_TEMPLATE_COUNT || !buf || !len || !cap || (n && !msgs))
        return BP_ERR_INVALID_ARGUMENT;
    const struct format *f = &FORMATS[id];
    struct out o = { .buf = *buf, .cap = *cap }, held = { 0 };
    put(&o, "", 0);
    puts_(&o, f->start);
    const char *first = n && msgs[0].role ? msgs[0].role : "";
    if (f->no_system && (n ? strcmp(first, "system") != 0 : f->no_system_if_empty))
        puts_(&o, f->no_system);
    bool in_turn = !f->closed_at_start;
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role ? msgs[i].role : "";
        const char *content = msgs[i].content ? msgs[i].content : "";
        if (f->reopen && !in_turn) puts_(&o, f->reopen);
        in_turn = true;
        const struct row *r = find_row(f, role);
        if (!r || ((r->flags & ROW_FIRST_ONLY) && i > 0)) continue;
        if (i > 0) puts_(&o, f->between);
        expand(r->flags & ROW_HOLD ? &held : &o, r->fmt, role, content, &held);
        if (r->last && i + 1 == n) puts_(&o, r->last);
        if (r->flags & ROW_ENDS_TURN) in_turn = false;
    }
    if (add_assistant) puts_(&o, f->gen);
    free(held.buf);
    *buf = o.buf;
    *cap = o.cap;
    *len = o.len;
    return o.oom || held.oom ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

void bp_chat_template_first_line(const char *tmpl, char *buf, size_t cap)
{
    const char *s = tmpl ? tmpl : "";
    while (*s && is_space(*s)) s++;
    size_t n = strcspn(s, "\r\n");
    while (n > 0 && is_space(s[n - 1])) n--;
    const size_t max = 60;
    size_t k = 0;
    for (size_t i = 0; i < n && i < max && k + 4 < cap; i++) {
        /* cut before a UTF-8 sequence that would not fit whole */
        const unsigned char c = (unsigned char)s[i];
        const size_t l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (i + l > max) break;
        buf[k++] = c < 0x20 || c == 0x7F ? ' ' : (char)c;
    }
    if (k < n && k + 4 <= cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    if (cap) buf[k < cap ? k : cap - 1] = '\0';
}

void bp_chat_template_unknown(const char *tmpl, char *err, size_t cap)
{
    char line[80];
    bp_chat_template_first_line(tmpl, line, sizeof line);
    const int names = (int)bp_chat_template_builtin_names(NULL, 0);
    if (!line[0])
        bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the chat template is %s, which llama.cpp's "
                    "formatter refuses too; name one of its %d built-in formats (chatml, llama3, "
                    "...) instead.", tmpl && *tmpl ? "blank" : "empty", names);
    else
        bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the chat template whose first line is \"%s\" is "
                    "not one llama.cpp formats without Jinja: it is none of the %d built-in names "
                    "(chatml, llama3, ...) and has none of the markers llama.cpp detects a format by.",
                    line, names);
}

bp_status bp_chat_template_format(const char *tmpl, const struct bp_chat_message *msgs, size_t n,
                                  bool add_assistant, char **buf, size_t *len, size_t *cap,
                                  char *err, size_t err_cap)
{
    const enum bp_chat_template id = bp_chat_template_detect(tmpl);
    if (id == BP_CHAT_TEMPLATE_UNKNOWN) {
        bp_chat_template_unknown(tmpl, err, err_cap);
        return BP_ERR_UNSUPPORTED;
    }
    const bp_status s = bp_chat_template_apply(id, msgs, n, add_assistant, buf, len, cap);
    if (s != BP_OK)
        bp_run_fail(err, err_cap, s, "%s", s == BP_ERR_OUT_OF_MEMORY ? "out of memory formatting the chat."
                                                                   : "a message has no role or content.");
    return s;
}

/* ------------------------------------------------------------- models */

/* The string value of key in g, or NULL (absent, or not a string). */
static const struct bp_gguf_kv *string_kv(const struct bp_gguf *g, const char *key)
{
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    return kv && kv->type == BP_GGUF_STRING ? kv : NULL;
}

static bool kv_equals(const struct bp_gguf_kv *kv, const char *s)
{
    return kv && kv->v.s.len == strlen(s) && !memcmp(kv->v.s.ptr, s, kv->v.s.len);
}

/* llama.cpp's one fallback: Mistral-Small-2503 ships no template, and is
 * known by its tekken pre-tokenizer and 40 layers. */
static bool is_mistral_small_2503(const struct bp_gguf *g)
{
    const struct bp_gguf_kv *arch = string_kv(g, "general.architecture");
    if (!kv_equals(string_kv(g, "tokenizer.ggml.pre"), "tekken") || !arch || arch->v.s.len > 64) return false;
    char key[96];
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch->v.s.len, arch->v.s.ptr);
    uint64_t layers = 0;
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    return kv && bp_gguf_kv_uint(kv, &layers) && layers == 40;
}

bp_status bp_chat_template_of_gguf(const struct bp_gguf *g, char **out, char *err, size_t cap)
{
    *out = NULL;
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, "tokenizer.chat_template");
    if (kv && kv->type != BP_GGUF_STRING)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tokenizer.chat_template is not a string "
                           "(GGUF value type %" PRIu32 "); the file is malformed.", kv->type);
    const char *text = kv ? kv->v.s.ptr : NULL;
    size_t len = kv ? (size_t)kv->v.s.len : 0;
    if (!kv && is_mistral_small_2503(g)) text = "mistral-v7-tekken", len = strlen(text);
    if (len && memchr(text, '\0', len)) len = strlen(text);   /* what a C caller of llama.cpp sees */
    if (!len) return BP_OK;
    if (!(*out = malloc(len + 1)))
        return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the chat template.");
    memcpy(*out, text, len);
    (*out)[len] = '\0';
    return BP_OK;
}

bp_status bp_chat_template_of_model(const char *model, char **out, char *err, size_t cap)
{
    *out = NULL;
    if (!strncmp(model, "builtin:", 8)) return BP_OK;
    struct bp_gguf *g = NULL;
    char e[1024];
    bp_status s = bp_gguf_open(model, &g, e, sizeof e);
    if (s != BP_OK) return bp_run_fail(err, cap, s, "%.200s: %s", model, e);
    s = bp_chat_template_of_gguf(g, out, err, cap);
    bp_gguf_close(g);
    return s;
}

const char *bp_chat_template_gguf_family(const struct bp_gguf *g, char *err, size_t cap)
{
    char *tmpl = NULL;
    if (bp_chat_template_of_gguf(g, &tmpl, err, cap) != BP_OK) return NULL;
    const enum bp_chat_template id = bp_chat_template_detect(tmpl);
    if (id == BP_CHAT_TEMPLATE_UNKNOWN) bp_chat_template_unknown(tmpl, err, cap);
    free(tmpl);
    return bp_chat_template_name(id);
}
