/*
 * run_chat.h — `backplane run --chat` (compiled into the CLI with
 * cmd_run.c): a conversation on a terminal, formatted with the model's chat
 * template (host/run/chat_template.h) and evaluated on one session whose
 * KV cache carries over from turn to turn.
 */
#ifndef BP_RUN_CHAT_H
#define BP_RUN_CHAT_H

#include <stdint.h>
#include <stdio.h>

#include <backplane/bp_tokenizer.h>

#include "decoder.h"
#include "run_text.h"

struct run_chat_opts {
    const char *tmpl;       /* the chat template (name or text; NULL: chatml), known to detect */
    const char *system;     /* a system message first; NULL: none */
    const char *first;      /* the first user turn; NULL: the first line read */
    int64_t max_reply;      /* tokens a reply has at most; 0: until end of generation */
};

/* Runs the conversation: user turns are the lines of in (an empty line is
 * skipped; end of file ends the chat), each reply is streamed to stdout and
 * kept as the assistant's message. s must be fresh (nothing evaluated), tok
 * the model's tokenizer, t the sampling options. Returns the exit status:
 * CLI_EXIT_OK at end of file, CLI_EXIT_FAIL after a sentence (the KV cache
 * is full, an evaluation failed, memory ran out). */
int run_chat(const struct run_chat_opts *c, const struct run_text_opts *t, struct bp_run_session *s,
             const struct bp_tokenizer *tok, int64_t n_vocab, FILE *in);

#endif /* BP_RUN_CHAT_H */
