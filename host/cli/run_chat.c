/*
 * run_chat.c — `backplane run --chat` (run_chat.h). Each turn formats the
 * whole conversation with the chat template and feeds the session only the
 * text after what its KV cache already holds, the way llama.cpp's
 * simple-chat example does: the cache holds the formatted prompt so far
 * plus the reply's tokens as they were generated. When the new prompt does
 * not start with that text (a template that trims the reply, say), the
 * cache is emptied and the whole conversation read again: the session can
 * only forget everything, not the tail alone.
 */
#include "run_chat.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_template.h"
#include "cli.h"

struct text {
    char *buf;
    size_t len, cap;
};

static bool text_add(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        while (cap < t->len + n + 1) cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) return false;
        t->buf = b;
        t->cap = cap;
    }
    if (n) memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
    return true;
}

struct chat {
    const struct run_chat_opts *o;
    struct bp_run_session *s;
    const struct bp_tokenizer *tok;
    struct run_gen g;
    float *logits;               /* the last evaluated position's */
    enum bp_chat_template format;
    struct bp_chat_message *msg; /* roles static, contents owned */
    size_t n_msg, cap_msg;
    char *prompt;                /* the conversation formatted, with the reply prompt */
    size_t prompt_len, prompt_cap;
    struct text seen;            /* the text whose tokens the KV cache holds */
    struct text reply;           /* the reply so far, its tokens' pieces */
};

static bool add_message(struct chat *c, const char *role, const char *content, size_t len)
{
    if (c->n_msg == c->cap_msg) {
        const size_t cap = c->cap_msg ? 2 * c->cap_msg : 8;
        struct bp_chat_message *m = realloc(c->msg, cap * sizeof *m);
        if (!m) return false;
        c->msg = m;
        c->cap_msg = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, content, len);
    copy[len] = '\0';
    c->msg[c->n_msg++] = (struct bp_chat_message){ .role = role, .content = copy };
    return true;
}

/* Evaluates ids at the next positions; false after a sentence. */
static bool eval(struct chat *c, const int32_t *ids, int64_t n)
{
    char err[1024];
    const int64_t past = bp_run_session_n_past(c->s), ctx = bp_run_session_n_ctx(c->s);
    if (past + n > ctx) {
        cli_error("the conversation needs %" PRId64 " positions but the KV cache holds %" PRId64
                  "; start again with a larger --n-ctx.", past + n, ctx);
        return false;
    }
    if (bp_run_session_eval(c->s, ids, n, false, c->logits, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        return false;
    }
    return true;
}

/* Brings the KV cache to the formatted conversation (see the top). */
static bool read_prompt(struct chat *c)
{
    bool scratch = bp_run_session_n_past(c->s) == 0 || c->seen.len > c->prompt_len ||
                   memcmp(c->prompt, c->seen.buf, c->seen.len) != 0;
    for (;;) {
        if (scratch) {
            bp_run_session_reset(c->s);
            c->seen.len = 0;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        const unsigned flags = BP_TOKENIZE_PARSE_SPECIAL | (scratch ? BP_TOKENIZE_ADD_SPECIAL : 0);
        if (bp_tokenizer_encode(c->tok, c->prompt + c->seen.len, c->prompt_len - c->seen.len, flags, &ids,
                                &n) != BP_OK) {
            cli_error("%s", bp_last_error());
            return false;
        }
        /* Nothing new leaves no logits to sample the reply from: read it all. */
        if (n == 0 && !scratch) {
            scratch = true;
            continue;
        }
        if (n == 0) {
            cli_error("the chat template made an empty prompt and the model adds no BOS token; "
                      "there is nothing to reply to.");
            return false;
        }
        const bool ok = eval(c, ids, (int64_t)n);
        if (ok) run_gen_accept(&c->g, ids, (int64_t)n);
        free(ids);
        if (!ok) return false;
        c->seen.len = 0;
        if (!text_add(&c->seen, c->prompt, c->prompt_len)) {
            cli_error("out of memory.");
            return false;
        }
        return true;
    }
}

/* Generates one reply into c->reply, streaming it; false after a sentence. */
static bool generate(struct chat *c)
{
    char small[256], *piece = small;
    size_t piece_cap = sizeof small;
    bool ok = true;
    c->reply.len = 0;
    for (int64_t k = 0;; k++) {
        int32_t t = run_gen_next(&c->g, c->logits);
        if (run_gen_emit(&c->g, t)) break;   /* end of generation: not part of the reply */
        size_t n = bp_tokenizer_piece(c->tok, t, true, piece, piece_cap);
        if (n > piece_cap) {
            char *p = malloc(n);
            if (piece != small) free(piece);
            if (!(piece = p)) { ok = false; cli_error("out of memory."); break; }
            piece_cap = n;
            bp_tokenizer_piece(c->tok, t, true, piece, piece_cap);
        }
        if (!text_add(&c->reply, piece, n)) { ok = false; cli_error("out of memory."); break; }
        if (c->o->max_reply && k + 1 >= c->o->max_reply) break;
        if (!eval(c, &t, 1)) { ok = false; break; }
        if (!text_add(&c->seen, piece, n)) { ok = false; cli_error("out of memory."); break; }
    }
    if (piece != small) free(piece);
    run_gen_next_reply(&c->g);
    return ok;
}

int run_chat(const struct run_chat_opts *o, const struct run_text_opts *t, struct bp_run_session *s,
             const struct bp_tokenizer *tok, int64_t n_vocab, FILE *in)
{
    struct chat c = { .o = o, .s = s, .tok = tok, .format = bp_chat_template_detect(o->tmpl) };
    int rc = CLI_EXIT_FAIL;
    char *line = NULL;
    size_t line_cap = 0;
    const bool tty = isatty(fileno(in));
    bool first = o->first != NULL;
    if (c.format == BP_CHAT_TEMPLATE_UNKNOWN) {
        char err[512];
        bp_chat_template_unknown(o->tmpl, err, sizeof err);
        cli_error("%s", err);
        return CLI_EXIT_FAIL;
    }
    if (!run_gen_begin(&c.g, t, tok, n_vocab, NULL, 0, true)) return CLI_EXIT_FAIL;
    if (!(c.logits = malloc((size_t)n_vocab * sizeof *c.logits)) ||
        (o->system && !add_message(&c, "system", o->system, strlen(o->system)))) {
        cli_error("out of memory.");
        goto out;
    }
    for (;;) {
        const char *user = o->first;
        size_t len;
        if (first) {
            len = strlen(user);
            first = false;
            printf("> %s\n", user);   /* a turn the terminal did not show */
        } else {
            if (tty) {
                fputs("> ", stdout);
                fflush(stdout);
            }
            const ssize_t got = getline(&line, &line_cap, in);
            if (got < 0) {
                if (ferror(in)) {
                    cli_error("reading the next turn from stdin failed.");
                    goto out;
                }
                if (tty) putchar('\n');
                break;
            }
            len = (size_t)got;
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
            line[len] = '\0';
            if (!len) continue;
            if (!tty) printf("> %s\n", line);   /* a transcript when the turns are piped in */
            user = line;
        }
        fflush(stdout);
        if (!add_message(&c, "user", user, len)) { cli_error("out of memory."); goto out; }
        if (bp_chat_template_apply(c.format, c.msg, c.n_msg, true, &c.prompt, &c.prompt_len, &c.prompt_cap)
            != BP_OK) {
            cli_error("out of memory formatting the conversation.");
            goto out;
        }
        if (!read_prompt(&c) || !generate(&c)) goto out;
        if (!add_message(&c, "assistant", c.reply.buf ? c.reply.buf : "", c.reply.len)) {
            cli_error("out of memory.");
            goto out;
        }
    }
    rc = CLI_EXIT_OK;
out:
    c.g.print = false;   /* each reply ended its own line */
    run_gen_end(&c.g);
    free(c.g.text);
    for (size_t i = 0; i < c.n_msg; i++) free((char *)c.msg[i].content);
    free(c.msg);
    free(c.prompt);
    free(c.seen.buf);
    free(c.reply.buf);
    free(c.logits);
    free(line);
    return rc;
}
