/*
 * run_text.c — prompts as text, sampling options and streamed output for
 * `backplane run` (run_text.h). Option parsing is a table: each sampling
 * option names its field, range and meaning once, for the parser and the
 * help alike.
 */
#include "run_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tokenizer_builtin.h"

const char run_text_help[] =
    "  --prompt TEXT        the prompt as text, tokenized by the model's tokenizer (GGUF\n"
    "                       metadata; built-in models have a synthetic one); the\n"
    "                       generated text is printed as it is produced\n"
    "  --prompt-file F      the prompt text from a file (its bytes exactly)\n"
    "  --temp T             sampling temperature (default 0: greedy)\n"
    "  --top-k N            sample among the N most likely tokens (default 40; 0: all)\n"
    "  --top-p P            ... the fewest whose probability adds up to P (default 0.95)\n"
    "  --min-p P            ... those at least P times the most likely (default 0.05)\n"
    "  --repeat-penalty R   divide the logits of recent tokens by R (default 1: off)\n"
    "  --repeat-last-n N    how many recent tokens (default 64)\n"
    "  --seed N             the sampler's seed (default 0); a seed gives the same tokens\n"
    "                       on every device and thread count for the same logits\n"
    "  --ignore-eos         keep generating past the end-of-generation token\n";

enum kind { K_FLOAT, K_INT, K_U64 };

static const struct {
    const char *name;
    enum kind kind;
    size_t off;
    double lo, hi;
    const char *want;
} num_opts[] = {
    { "--temp", K_FLOAT, offsetof(struct bp_sampling_params, temp), 0, 100, "a number from 0 to 100" },
    { "--top-k", K_INT, offsetof(struct bp_sampling_params, top_k), 0, 1 << 30, "a number >= 0" },
    { "--top-p", K_FLOAT, offsetof(struct bp_sampling_params, top_p), 0, 1, "a number from 0 to 1" },
    { "--min-p", K_FLOAT, offsetof(struct bp_sampling_params, min_p), 0, 1, "a number from 0 to 1" },
    { "--repeat-penalty", K_FLOAT, offsetof(struct bp_sampling_params, repeat_penalty), 0.01, 100,
      "a number from 0.01 to 100" },
    { "--repeat-last-n", K_INT, offsetof(struct bp_sampling_params, repeat_last_n), 0, 1 << 20,
      "a number from 0 to 1048576" },
    { "--seed", K_U64, offsetof(struct bp_sampling_params, seed), 0, 0, "a number >= 0" },
};

void run_text_defaults(struct run_text_opts *t)
{
    *t = (struct run_text_opts){ .sp = BP_SAMPLING_DEFAULTS };
}

int run_text_option(struct run_text_opts *t, const char *a, const char *v)
{
    if (!strcmp(a, "--ignore-eos")) { t->ignore_eos = true; return 1; }
    const bool prompt = !strcmp(a, "--prompt"), file = !strcmp(a, "--prompt-file");
    size_t k = 0;
    while (k < sizeof num_opts / sizeof num_opts[0] && strcmp(a, num_opts[k].name)) k++;
    if (!prompt && !file && k == sizeof num_opts / sizeof num_opts[0]) return 0;
    if (!v) return cli_usage_error("run", "%s needs a value.", a), -1;
    if (prompt) { t->prompt = v; return 2; }
    if (file) { t->prompt_file = v; return 2; }
    char *end;
    errno = 0;
    void *field = (char *)&t->sp + num_opts[k].off;
    if (num_opts[k].kind == K_U64) {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') goto bad;
        *(uint64_t *)field = x;
        return 2;
    }
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= num_opts[k].lo && x <= num_opts[k].hi)) goto bad;
    if (num_opts[k].kind == K_INT) {
        if (x != (double)(int32_t)x) goto bad;
        *(int32_t *)field = (int32_t)x;
    } else
        *(float *)field = (float)x;
    return 2;
bad:
    return cli_usage_error("run", "%s wants %s, not '%s'.", a, num_opts[k].want, v), -1;
}

struct bp_tokenizer *run_text_tokenizer(const struct run_text_opts *t, const char *model)
{
    const bool need = t->prompt || t->prompt_file;
    struct bp_tokenizer *tok = NULL;
    char err[1024];
    if (!need && !strncmp(model, "builtin:", 8)) return NULL;
    if (bp_run_tokenizer_for(model, &tok, err, sizeof err) != BP_OK && need)
        cli_error("--prompt needs the model's tokenizer, but %s; give token ids with "
                  "--prompt-tokens instead.", err);
    return tok;
}

int32_t *run_text_prompt(const struct run_text_opts *t, const struct bp_tokenizer *tok, int64_t *n)
{
    char *buf = NULL;
    size_t len = t->prompt ? strlen(t->prompt) : 0;
    if (t->prompt_file) {
        FILE *f = fopen(t->prompt_file, "rb");
        if (!f) {
            cli_error("cannot read the prompt file '%s': %s.", t->prompt_file, strerror(errno));
            return NULL;
        }
        size_t cap = 4096;
        len = 0;
        buf = malloc(cap);
        while (buf && (len += fread(buf + len, 1, cap - len, f)) == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            else buf = b;
        }
        fclose(f);
    }
    int32_t *ids = NULL;
    size_t count = 0;
    if ((t->prompt_file && !buf) ||
        bp_tokenizer_encode(tok, buf ? buf : t->prompt, len, BP_TOKENIZE_ADD_SPECIAL, &ids, &count) != BP_OK)
        cli_error("out of memory reading the prompt.");
    else if (count == 0) {
        cli_error("the prompt is empty and the model adds no BOS token; give some text.");
        free(ids);
        ids = NULL;
    }
    free(buf);
    *n = (int64_t)count;
    return ids;
}

static bool append(struct run_gen *g, const char *s, size_t n)
{
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        while (cap < g->len + n + 1) cap *= 2;
        char *t = realloc(g->text, cap);
        if (!t) return false;
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
    if (g->print) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);   /* a token appears when it is made */
    }
    return true;
}

bool run_gen_begin(struct run_gen *g, const struct run_text_opts *t, const struct bp_tokenizer *tok,
                   int64_t n_vocab, const int32_t *prompt, int64_t n_prompt, bool print)
{
    *g = (struct run_gen){ .tok = tok, .ignore_eos = t->ignore_eos };
    g->sampler = bp_sampler_new(&t->sp, (int32_t)n_vocab);
    if (!g->sampler || (tok && !(g->stream = bp_token_stream_new(tok)))) {
        cli_error("out of memory for the sampler.");
        run_gen_end(g);
        return false;
    }
    for (int64_t i = 0; i < n_prompt; i++) bp_sampler_accept(g->sampler, prompt[i]);
    if (print && tok) {   /* the prompt as the model read it, then the continuation */
        char *text;
        size_t len;
        if (bp_tokenizer_decode(tok, prompt, (size_t)n_prompt, &text, &len) == BP_OK) {
            fwrite(text, 1, len, stdout);
            free(text);
        }
        g->print = true;
    }
    return append(g, "", 0);
}

int32_t run_gen_next(struct run_gen *g, const float *logits)
{
    return bp_sampler_sample(g->sampler, logits);
}

bool run_gen_emit(struct run_gen *g, int32_t token)
{
    bp_sampler_accept(g->sampler, token);
    if (!g->tok) return false;
    size_t n;
    const char *s = bp_token_stream_push(g->stream, token, &n);
    append(g, s, n);
    return !g->ignore_eos && bp_tokenizer_is_eog(g->tok, token);
}

void run_gen_accept(struct run_gen *g, const int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++) bp_sampler_accept(g->sampler, ids[i]);
}

void run_gen_next_reply(struct run_gen *g)
{
    if (g->stream) {
        size_t n;
        const char *s = bp_token_stream_flush(g->stream, &n);
        append(g, s, n);
    }
    if (g->print) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    g->len = 0;
    if (g->text) g->text[0] = '\0';
}

void run_gen_end(struct run_gen *g)
{
    if (g->stream) {
        size_t n;
        const char *s = bp_token_stream_flush(g->stream, &n);
        append(g, s, n);
    }
    if (g->print) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    bp_sampler_free(g->sampler);
    bp_token_stream_free(g->stream);
    g->sampler = NULL;
    g->stream = NULL;
}
