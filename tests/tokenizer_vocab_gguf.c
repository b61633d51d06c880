/*
 * tokenizer_vocab_gguf.c — test set-up: builds a GGUF file carrying a real
 * vocabulary from the data of the npm packages llama-tokenizer-js (LLaMA 1/2
 * SentencePiece, 32 000 tokens, merges as 16-bit id pairs) or
 * llama3-tokenizer-js (LLaMA 3 byte-level BPE, 128 000 tokens + 256
 * specials, merges as 17-bit id pairs), both base64 in a JavaScript file.
 *
 *   tokenizer_vocab_gguf spm  llama-tokenizer.js  out.gguf
 *   tokenizer_vocab_gguf bpe  data-converted.js   out.gguf PRE
 *
 * The SentencePiece scores are the vocabulary's order (score = -id for
 * normal tokens), which is the order SentencePiece's trainer ranks pieces
 * in. The file has llama.* hyper-parameters but no tensors: a tokenizer
 * file, which llama.cpp opens with vocab_only and `backplane tokenize` reads.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; *len = (size_t)n; }
    return buf;
}

/* The base64 text of `const NAME = "..."`, decoded (malloc'd). */
static uint8_t *js_base64(const char *js, const char *name, size_t *out_len)
{
    char pat[128];
    snprintf(pat, sizeof pat, "const %s = \"", name);
    const char *p = strstr(js, pat);
    if (!p) return NULL;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    if (!e) return NULL;
    uint8_t *out = malloc((size_t)(e - p) / 4 * 3 + 4);
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; p < e; p++) {
        int v;
        char c = *p;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else continue;   /* '=' padding, line breaks */
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    *out_len = n;
    return out;
}

static int die(const char *msg)
{
    fprintf(stderr, "tokenizer_vocab_gguf: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) return die("usage: tokenizer_vocab_gguf spm|bpe FILE.js OUT.gguf [PRE]");
    const bool spm = !strcmp(argv[1], "spm");
    size_t jl, vl, ml;
    char *js = read_file(argv[2], &jl);
    if (!js) return die("cannot read the JavaScript data file");
    uint8_t *vocab = js_base64(js, "llama_vocab_base64", &vl);
    uint8_t *mbin = js_base64(js, "llama_merges_binary", &ml);
    if (!vocab || !mbin) return die("no llama_vocab_base64 / llama_merges_binary in the file");
    /* Tokens: the vocabulary's lines (then LLaMA 3's 256 special tokens). */
    size_t n_tok = 1;
    for (size_t i = 0; i < vl; i++) n_tok += vocab[i] == '\n';
    const size_t n_special = spm ? 0 : 256;
    char **tok = calloc(n_tok + n_special, sizeof *tok);
    size_t t = 0, start = 0;
    for (size_t i = 0; i <= vl; i++)
        if (i == vl || vocab[i] == '\n') {
            tok[t] = strndup((const char *)vocab + start, i - start);
            t++;
            start = i + 1;
        }
    static const char *const named[] = {
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
    };
    for (size_t k = 0; k < n_special; k++) {
        char buf[64];
        if (k < 11) snprintf(buf, sizeof buf, "%s", named[k]);
        else snprintf(buf, sizeof buf, "<|reserved_special_token_%zu|>", k - 11 + 3);
        tok[t++] = strdup(buf);
    }
    n_tok = t;
    /* Merges: id pairs, 16 bits little-endian (SPM) or 17 bits big-endian
     * packed (BPE). */
    size_t n_ids = spm ? ml / 2 : ml * 8 / 17;
    uint32_t *ids = malloc(n_ids * sizeof *ids);
    for (size_t i = 0; i < n_ids; i++) {
        if (spm) { ids[i] = mbin[2 * i] | (uint32_t)mbin[2 * i + 1] << 8; continue; }
        uint32_t v = 0;
        for (size_t b = 17 * i; b < 17 * i + 17; b++) v = v << 1 | ((mbin[b / 8] >> (7 - b % 8)) & 1);
        ids[i] = v;
    }
    size_t n_merges = n_ids / 2;
    while (n_merges && ids[2 * n_merges - 2] == 0 && ids[2 * n_merges - 1] == 0) n_merges--;  /* padding */
    char **merges = calloc(n_merges, sizeof *merges);
    for (size_t i = 0; i < n_merges; i++) {
        if (ids[2 * i] >= n_tok || ids[2 * i + 1] >= n_tok) return die("a merge names an id past the vocabulary");
        size_t a = strlen(tok[ids[2 * i]]), b = strlen(tok[ids[2 * i + 1]]);
        merges[i] = malloc(a + b + 2);
        sprintf(merges[i], "%s %s", tok[ids[2 * i]], tok[ids[2 * i + 1]]);
    }
    float *score = calloc(n_tok, sizeof *score);
    int32_t *type = malloc(n_tok * sizeof *type);
    for (size_t i = 0; i < n_tok; i++) {
        type[i] = 1;   /* normal */
        if (spm) {
            if (i == 0) type[i] = 2;                 /* <unk> */
            else if (i < 3) type[i] = 3;             /* <s>, </s> */
            else if (!strncmp(tok[i], "<0x", 3) && strlen(tok[i]) == 6) type[i] = 6;  /* bytes */
            else score[i] = -(float)i;
        } else if (i >= n_tok - n_special)
            type[i] = 3;
    }
    struct bp_gguf_writer *w;
    bp_status s = bp_gguf_writer_new(3, 32, &w);
    if (s) return die("out of memory");
    s = bp_gguf_add_string(w, "general.architecture", "llama");
    if (!s) s = bp_gguf_add_string(w, "general.name", spm ? "llama-spm-vocab" : "llama3-bpe-vocab");
    if (!s) s = bp_gguf_add_u32(w, "llama.context_length", 4096);
    if (!s) s = bp_gguf_add_u32(w, "llama.embedding_length", 64);
    if (!s) s = bp_gguf_add_u32(w, "llama.block_count", 1);
    if (!s) s = bp_gguf_add_u32(w, "llama.feed_forward_length", 128);
    if (!s) s = bp_gguf_add_u32(w, "llama.attention.head_count", 2);
    if (!s) s = bp_gguf_add_u32(w, "llama.attention.head_count_kv", 2);
    if (!s) s = bp_gguf_add_u32(w, "llama.rope.dimension_count", 32);
    if (!s) s = bp_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (!s) s = bp_gguf_add_u32(w, "llama.vocab_size", (uint32_t)n_tok);
    if (!s) s = bp_gguf_add_string(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!s && !spm) s = bp_gguf_add_string(w, "tokenizer.ggml.pre", argc > 4 ? argv[4] : "llama-bpe");
    if (!s) s = bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", (const char *const *)tok, n_tok);
    if (!s && spm) s = bp_gguf_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, score, n_tok);
    if (!s) s = bp_gguf_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, type, n_tok);
    if (!s && !spm) s = bp_gguf_add_string_array(w, "tokenizer.ggml.merges", (const char *const *)merges, n_merges);
    if (!s) s = bp_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", spm ? 1 : 128000);
    if (!s) s = bp_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", spm ? 2 : 128001);
    if (!s && spm) s = bp_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!s) s = bp_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (!s) s = bp_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (!s) s = bp_gguf_writer_save(w, argv[3]);
    bp_gguf_writer_free(w);
    if (s) return die("writing the GGUF file failed");
    printf("%s: %zu tokens, %zu merges\n", argv[3], n_tok, n_merges);
    for (size_t i = 0; i < n_tok; i++) free(tok[i]);
    for (size_t i = 0; i < n_merges; i++) free(merges[i]);
    free(tok); free(merges); free(ids); free(score); free(type); free(vocab); free(mbin); free(js);
    return 0;
}
