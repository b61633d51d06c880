/*
 * request.h — the body of a completion request, parsed (Jansson) and
 * checked field by field before anything is queued: a field of the wrong
 * type or out of range is a 400 whose message names it.
 */
#ifndef BP_SERVE_REQUEST_H
#define BP_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "error.h"
#include "sampling.h"

#define SERVE_MAX_STOP 16       /* stop strings per request */
#define SERVE_MAX_TOP_LOGPROBS 20

enum serve_kind { SERVE_CHAT, SERVE_COMPLETION };

struct serve_params {
    enum serve_kind kind;
    char *model;                    /* as sent, or NULL */
    /* chat: the messages (strings owned here) */
    struct bp_chat_message *msgs;
    size_t n_msgs;
    /* completion: the prompt as text, or as token ids */
    char *prompt;
    size_t prompt_len;
    int32_t *prompt_ids;
    size_t n_prompt_ids;
    int64_t max_tokens;             /* -1: until the slot's context is full */
    char *stop[SERVE_MAX_STOP];
    size_t n_stop;
    struct bp_sampling_params sp;
    bool seed_given;
    bool stream, include_usage;
    bool logprobs;
    int top_logprobs;               /* alternatives per token, 0..20 */
};

/* Parses body[0..len) as a request of kind into p (zeroed first; free it
 * with serve_params_free whatever the result). false with e set (400 and
 * the field's name) when the JSON is malformed or a field is invalid. */
bool serve_params_parse(const char *body, size_t len, enum serve_kind kind, struct serve_params *p,
                        struct serve_error *e);
void serve_params_free(struct serve_params *p);

#endif /* BP_SERVE_REQUEST_H */
