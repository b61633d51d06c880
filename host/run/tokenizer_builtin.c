/* tokenizer_builtin.c — the built-in models' synthetic vocabulary, written
 * as a GGUF image in memory and read back through the public loader, so it
 * is exactly what a file with that vocabulary would give. */
#include "tokenizer_builtin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "run_error.h"

#define SP "\xE2\x96\x81"

/* The name-th lowercase word of len letters ("aa", "ab", ...). */
static void word(char *out, size_t idx, int len)
{
    for (int i = len - 1; i >= 0; i--) {
        out[i] = (char)('a' + idx % 26);
        idx /= 26;
    }
    out[len] = 0;
}

bp_status bp_run_builtin_tokenizer(int64_t n_vocab, struct bp_tokenizer **out, char *err, size_t cap)
{
    *out = NULL;
    if (n_vocab < 512 || n_vocab > (1 << 20))
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "the synthetic tokenizer needs a "
                           "vocabulary of 512 to 2^20 tokens, not %lld.", (long long)n_vocab);
    const size_t n = (size_t)n_vocab;
    char (*text)[16] = calloc(n, sizeof *text);
    const char **ptr = calloc(n, sizeof *ptr);
    float *score = calloc(n, sizeof *score);
    int32_t *type = calloc(n, sizeof *type);
    bp_status s = BP_ERR_OUT_OF_MEMORY;
    struct bp_gguf_writer *w = NULL;
    uint8_t *img = NULL;
    size_t size, k = 0;
    if (!text || !ptr || !score || !type) goto out;
    strcpy(text[k], "<unk>"); type[k++] = 2;
    strcpy(text[k], "<s>"); type[k++] = 3;
    strcpy(text[k], "</s>"); type[k++] = 3;
    for (int b = 0; b < 256; b++) { snprintf(text[k], 16, "<0x%02X>", b); type[k++] = 6; }
    strcpy(text[k], SP); type[k++] = 1;
    for (int c = 0x21; c <= 0x7E; c++) { text[k][0] = (char)c; type[k++] = 1; }
    for (int c = 0; c < 52; c++) {
        snprintf(text[k], 16, SP "%c", c < 26 ? 'a' + c : 'A' + c - 26);
        type[k++] = 1;
    }
    for (int len = 2; k < n && len <= 6; len++) {
        size_t count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (int sp = 1; sp >= 0; sp--)
            for (size_t i = 0; i < count && k < n; i++) {
                char wd[8];
                word(wd, i, len);
                snprintf(text[k], 16, "%s%s", sp ? SP : "", wd);
                type[k++] = 1;
            }
    }
    for (size_t i = 0; i < n; i++) {
        ptr[i] = text[i];
        if (type[i] == 1) score[i] = -(float)i;
    }
    if ((s = bp_gguf_writer_new(3, 32, &w)) ||
        (s = bp_gguf_add_string(w, "tokenizer.ggml.model", "llama")) ||
        (s = bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", ptr, n)) ||
        (s = bp_gguf_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, score, n)) ||
        (s = bp_gguf_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, type, n)) ||
        (s = bp_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 1)) ||
        (s = bp_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", 2)) ||
        (s = bp_gguf_writer_image(w, &img, &size)))
        goto out;
    if ((s = bp_tokenizer_load_memory(img, size, out)) != BP_OK)
        bp_run_fail(err, cap, s, "%s", bp_last_error());
out:
    if (s == BP_ERR_OUT_OF_MEMORY && !*out) bp_run_fail(err, cap, s, "out of memory for the synthetic tokenizer.");
    bp_gguf_writer_free(w);
    free(img);
    free(text);
    free(ptr);
    free(score);
    free(type);
    return s;
}

bp_status bp_run_tokenizer_for(const char *model, struct bp_tokenizer **out, char *err, size_t cap)
{
    *out = NULL;
    if (!strncmp(model, "builtin:", 8)) {
        const int64_t n = bp_run_builtin_n_vocab(model + 8);
        if (!n)
            return bp_run_fail(err, cap, BP_ERR_NOT_FOUND, "there is no built-in model '%s'; "
                               "the built-in models are builtin:test and builtin:tiny.", model + 8);
        return bp_run_builtin_tokenizer(n, out, err, cap);
    }
    bp_status s = bp_tokenizer_load(model, out);
    if (s != BP_OK) bp_run_fail(err, cap, s, "%s", bp_last_error());
    return s;
}
