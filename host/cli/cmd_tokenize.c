/*
 * cmd_tokenize.c — `backplane tokenize`: a model's tokenizer on text, as
 * llama.cpp's llama_tokenize would run it (BOS/EOS as the model says,
 * special-token text as plain text unless --parse-special), or --decode
 * ids back to text. Reads the model's metadata only, never its weights.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_tokenizer.h>

#include "cli.h"
#include "json.h"
#include "../run/tokenizer_builtin.h"

static void help(void)
{
    puts("usage: backplane tokenize --model PATH|builtin:NAME (--text T | --file F | --decode IDS)\n"
         "                          [--parse-special] [--json]\n\n"
         "Prints the token ids of a text under the model's tokenizer (GGUF metadata:\n"
         "tokenizer.ggml.*; the weights are not read), or the text of token ids.\n\n"
         "  --model PATH|builtin:NAME  a GGUF file, or a built-in model's synthetic tokenizer\n"
         "  --text T                   the text, exactly as given\n"
         "  --file F                   the file's bytes, exactly (no newline added or removed)\n"
         "  --decode 1,2,3             print the text of these ids instead\n"
         "  --parse-special            special-token text (<s>, <|eot_id|>) becomes its token\n"
         "  --json                     {\"ids\": [...], \"tokens\": [{\"id\", \"piece\"}...]}; with\n"
         "                             --decode {\"text\": ...}; pieces that are part of a\n"
         "                             UTF-8 sequence show U+FFFD\n");
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("cannot read '%s': %s.", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *b = realloc(buf, cap *= 2);
        if (!b) { free(buf); buf = NULL; }
        else buf = b;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        cli_error("reading '%s' failed.", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* s[0..n) as JSON-safe UTF-8 (bytes that are not valid UTF-8 -> U+FFFD). */
static void json_piece(struct json_writer *w, const char *key, const char *s, size_t n)
{
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    if (!o) return;
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = l > 0 && i + l <= n;
        for (size_t j = 1; ok && j < l; j++) ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
        if (ok) { memcpy(o + k, s + i, l); k += l; i += l; }
        else { memcpy(o + k, "\xEF\xBF\xBD", 3); k += 3; i++; }
    }
    o[k] = 0;
    json_string(w, key, o);
    free(o);
}

static int decode(struct bp_tokenizer *t, const char *list, bool json)
{
    size_t cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    size_t n = 0;
    for (const char *c = list; ids && *c;) {
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno || v < 0 || v >= bp_tokenizer_n_tokens(t) || (*end && *end != ',')) {
            cli_error("--decode has '%.*s', which is not a token id in [0, %" PRId32 ").",
                      (int)strcspn(c, ","), c, bp_tokenizer_n_tokens(t));
            free(ids);
            return CLI_EXIT_FAIL;
        }
        ids[n++] = (int32_t)v;
        c = *end ? end + 1 : end;
    }
    char *text;
    size_t len;
    if (!ids || bp_tokenizer_decode(t, ids, n, &text, &len) != BP_OK) {
        cli_error("%s", ids ? bp_last_error() : "out of memory.");
        free(ids);
        return CLI_EXIT_FAIL;
    }
    if (json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_piece(&w, "text", text, len);
        json_object_end(&w);
        json_finish(&w);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
    }
    free(text);
    free(ids);
    return CLI_EXIT_OK;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL, *ids = NULL;
    bool json = false, special = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return CLI_EXIT_OK; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--parse-special")) special = true;
        else if (!strcmp(a, "--model") || !strcmp(a, "--text") || !strcmp(a, "--file") ||
                 !strcmp(a, "--decode")) {
            if (!v) return cli_usage_error("tokenize", "%s needs a value.", a);
            *(a[2] == 'm' ? &model : a[2] == 't' ? &text : a[2] == 'f' ? &file : &ids) = v;
            i++;
        } else
            return cli_usage_error("tokenize", "unknown option '%s'.", a);
    }
    if (!model) return cli_usage_error("tokenize", "--model is required.");
    if (!!text + !!file + !!ids != 1)
        return cli_usage_error("tokenize", "give exactly one of --text, --file and --decode.");
    char err[1024];
    struct bp_tokenizer *t;
    if (bp_run_tokenizer_for(model, &t, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        return CLI_EXIT_FAIL;
    }
    int rc = CLI_EXIT_FAIL;
    if (ids) {
        rc = decode(t, ids, json);
        bp_tokenizer_free(t);
        return rc;
    }
    size_t len = text ? strlen(text) : 0;
    char *buf = file ? read_all(file, &len) : NULL;
    int32_t *out = NULL;
    size_t n = 0;
    if (file && !buf) goto done;
    if (bp_tokenizer_encode(t, buf ? buf : text, len, BP_TOKENIZE_ADD_SPECIAL |
                            (special ? BP_TOKENIZE_PARSE_SPECIAL : 0), &out, &n) != BP_OK) {
        cli_error("%s", bp_last_error());
        goto done;
    }
    if (json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_array_begin(&w, "ids");
        for (size_t i = 0; i < n; i++) json_int(&w, NULL, out[i]);
        json_array_end(&w);
        json_array_begin(&w, "tokens");
        for (size_t i = 0; i < n; i++) {
            char piece[512];
            size_t pl = bp_tokenizer_piece(t, out[i], true, piece, sizeof piece);
            json_object_begin(&w, NULL);
            json_int(&w, "id", out[i]);
            json_piece(&w, "piece", piece, pl < sizeof piece ? pl : sizeof piece);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_object_end(&w);
        json_finish(&w);
    } else {
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", out[i]);
        putchar('\n');
    }
    rc = CLI_EXIT_OK;
done:
    free(out);
    free(buf);
    bp_tokenizer_free(t);
    return rc;
}
