/*
 * run_text.h — the text side of `backplane run` (compiled into the CLI with
 * cmd_run.c): the options for prompts and sampling, the tokenizer of the
 * model, and generation that samples on the host, stops at end of
 * generation and streams the text as it is produced.
 */
#ifndef BP_RUN_TEXT_H
#define BP_RUN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_tokenizer.h>

#include "sampling.h"

struct run_text_opts {
    const char *prompt, *prompt_file;
    bool ignore_eos;
    struct bp_sampling_params sp;
};

/* Defaults: no text prompt, greedy. */
void run_text_defaults(struct run_text_opts *t);
/* Option a (value v, NULL when none follows): 0 when it is not one of ours,
 * else how many arguments it used (1 or 2); -1 after a usage error. */
int run_text_option(struct run_text_opts *t, const char *a, const char *v);
/* The help lines of these options. */
extern const char run_text_help[];

/* The tokenizer of model (a path or builtin:NAME). When the prompt is text
 * it is required: NULL after a sentence that suggests --prompt-tokens.
 * Otherwise a GGUF's tokenizer when it has one (for EOS and the text of
 * the output), else NULL quietly; built-in models then get none. */
struct bp_tokenizer *run_text_tokenizer(const struct run_text_opts *t, const char *model);
/* The prompt's ids (BOS as the model says; malloc'd), or NULL after a
 * sentence. */
int32_t *run_text_prompt(const struct run_text_opts *t, const struct bp_tokenizer *tok, int64_t *n);

/* One generation: the sampler, and the text so far. */
struct run_gen {
    struct bp_sampler *sampler;
    const struct bp_tokenizer *tok;   /* may be NULL */
    struct bp_token_stream *stream;
    bool print, ignore_eos;
    char *text;                       /* the generated text, NUL-terminated */
    size_t len, cap;
};

/* Starts a generation over n_vocab logits; print streams the text to
 * stdout (flushed per token). false after a sentence (out of memory). */
bool run_gen_begin(struct run_gen *g, const struct run_text_opts *t, const struct bp_tokenizer *tok,
                   int64_t n_vocab, const int32_t *prompt, int64_t n_prompt, bool print);
/* The next token for logits. */
int32_t run_gen_next(struct run_gen *g, const float *logits);
/* Records token: its text is printed and kept; true when it ends the
 * generation (end of generation and no --ignore-eos). */
bool run_gen_emit(struct run_gen *g, int32_t token);
void run_gen_end(struct run_gen *g);
/* The sampler's history takes n more tokens the model read (a chat's next
 * prompt), as run_gen_begin takes the first prompt. */
void run_gen_accept(struct run_gen *g, const int32_t *ids, int64_t n);
/* Between two replies of a chat: what the stream held back is printed and
 * kept, then a newline when printing; the text empties for the next reply,
 * and the sampler goes on (its seed and history are the conversation's). */
void run_gen_next_reply(struct run_gen *g);

#endif /* BP_RUN_TEXT_H */
