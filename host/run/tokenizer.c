/*
 * tokenizer.c — loading a tokenizer from GGUF metadata (every array length,
 * id and merge checked, one sentence per refusal), its hash tables, and
 * encode: special tokens split out first, then the model's encoder per run
 * of plain text, BOS/EOS around, as llama.cpp's llama_tokenize does.
 */
#include "tokenizer_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "gguf.h"
#include "run_error.h"
#include "tokenizer_unicode.h"

#define ERR_CAP 512

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

const char *bp_tok_key(const struct bp_tokenizer *t, int32_t id, size_t *len)
{
    if (t->model == BP_TOK_SPM) return bp_tok_text(t, id, len);
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_arena + t->piece_off[id];
}

int32_t bp_str_map_find(const struct bp_tokenizer *t, const char *s, size_t len)
{
    for (size_t i = hash_bytes(s, len) & t->map.mask;; i = (i + 1) & t->map.mask) {
        uint32_t v = t->map.slot[i];
        if (!v) return -1;
        size_t kl;
        const char *k = bp_tok_key(t, (int32_t)(v - 1), &kl);
        if (kl == len && !memcmp(k, s, len)) return (int32_t)(v - 1);
    }
}

/* Inserts id under its key; a later token of the same text wins, as in
 * llama.cpp's token_to_id. */
static void map_insert(struct bp_tokenizer *t, int32_t id)
{
    size_t len;
    const char *s = bp_tok_key(t, id, &len);
    for (size_t i = hash_bytes(s, len) & t->map.mask;; i = (i + 1) & t->map.mask) {
        uint32_t v = t->map.slot[i];
        size_t kl;
        const char *k = v ? bp_tok_key(t, (int32_t)(v - 1), &kl) : NULL;
        if (!v || (kl == len && !memcmp(k, s, len))) {
            t->map.slot[i] = (uint32_t)id + 1;
            return;
        }
    }
}

static uint64_t merge_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    return key ^ (key >> 33);
}

const struct bp_merge *bp_merge_find(const struct bp_tokenizer *t, int32_t l, int32_t r)
{
    const uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1;
    for (size_t i = merge_hash(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merges[i].key == key) return &t->merges[i];
        if (!t->merges[i].key) return NULL;
    }
}

bool bp_ids_push(struct bp_ids *a, int32_t id)
{
    int32_t *v = bp__grow(a->v, sizeof *v, a->n, &a->cap, 64);
    if (!v) return false;
    a->v = v;
    a->v[a->n++] = id;
    return true;
}

void bp_tokenizer_free(struct bp_tokenizer *t)
{
    if (!t) return;
    free(t->text_arena);
    free(t->text_off);
    free(t->piece_arena);
    free(t->piece_off);
    free(t->score);
    free(t->type);
    free(t->map.slot);
    free(t->merges);
    free(t->special);
    free(t);
}

/* ------------------------------------------------------------ loading */

/* Walks a GGUF string array element by element (the reader has checked
 * that the array lies inside the file). */
struct str_iter {
    const uint8_t *p, *end;
};

static bool next_str(struct str_iter *it, const char **s, size_t *len)
{
    uint64_t n;
    if ((size_t)(it->end - it->p) < 8) return false;
    memcpy(&n, it->p, 8);
    if (n > (uint64_t)(it->end - it->p) - 8) return false;
    *s = (const char *)it->p + 8;
    *len = (size_t)n;
    it->p += 8 + n;
    return true;
}

static const struct bp_gguf_kv *kv_array(const struct bp_gguf *g, const char *key, uint32_t type,
                                         const char *type_name, bool required, bp_status *st,
                                         char *err, size_t cap)
{
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    *st = BP_OK;
    if (!kv) {
        if (required)
            *st = bp_run_fail(err, cap, BP_ERR_NOT_FOUND, "the model has no %s array, which its "
                              "tokenizer needs; the file's tokenizer metadata is incomplete.", key);
        return NULL;
    }
    if (kv->type != BP_GGUF_ARRAY || kv->arr_type != type) {
        *st = bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "%s is not an array of %s; the "
                          "file's tokenizer metadata is malformed.", key, type_name);
        return NULL;
    }
    return kv;
}

static bool kv_id(const struct bp_gguf *g, const char *key, int32_t n, int32_t *out, bp_status *st,
                  char *err, size_t cap)
{
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    uint64_t v;
    if (!kv) return true;
    if (!bp_gguf_kv_uint(kv, &v) || v >= (uint64_t)n) {
        *st = bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "%s is not a token id below the "
                          "vocabulary's %" PRId32 " tokens; the file's tokenizer metadata is "
                          "wrong.", key, n);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static void kv_bool(const struct bp_gguf *g, const char *key, bool *out)
{
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    if (kv && kv->type == BP_GGUF_BOOL) *out = kv->v.u != 0;
}

/* A token's piece with special = false: what it decodes to. */
static bool make_piece(struct bp_tokenizer *t, int32_t id, char *dst, size_t *len)
{
    size_t tl;
    const char *s = bp_tok_text(t, id, &tl);
    const uint8_t ty = t->type[id];
    *len = 0;
    if (ty == BP_TOK_USER_DEFINED) {
        memcpy(dst, s, tl);
        *len = tl;
        return true;
    }
    if (ty == BP_TOK_BYTE && t->model == BP_TOK_SPM) {
        unsigned b;
        if (tl == 6 && sscanf(s, "<0x%2x>", &b) == 1) { dst[0] = (char)b; *len = 1; }
        return true;
    }
    if (ty != BP_TOK_NORMAL) return true;
    if (t->model == BP_TOK_SPM) {                 /* U+2581 -> ' ' */
        for (size_t i = 0; i < tl;)
            if (i + 3 <= tl && !memcmp(s + i, "\xE2\x96\x81", 3)) { dst[(*len)++] = ' '; i += 3; }
            else dst[(*len)++] = s[i++];
        return true;
    }
    /* GPT-2's mapping back to bytes; a code point outside it is spelled
     * out as llama.cpp's llama_decode_text does. */
    for (size_t i = 0; i < tl;) {
        size_t cl;
        uint32_t cp = bp_utf8_decode((const uint8_t *)s + i, tl - i, &cl);
        int b = bp_cp_to_byte(cp);
        if (b >= 0) dst[(*len)++] = (char)b;
        else {
            *len += (size_t)sprintf(dst + *len, "[UNK_BYTE_0x");
            for (size_t k = 0; k < cl; k++) *len += (size_t)sprintf(dst + *len, "%02x", (uint8_t)s[i + k]);
            memcpy(dst + *len, s, tl);
            *len += tl;
            dst[(*len)++] = ']';
        }
        i += cl;
    }
    return true;
}

static bp_status load_tokens(struct bp_tokenizer *t, const struct bp_gguf *g, char *err, size_t cap)
{
    bp_status st;
    const struct bp_gguf_kv *tok = kv_array(g, "tokenizer.ggml.tokens", BP_GGUF_STRING, "strings",
                                            true, &st, err, cap);
    if (!tok) return st;
    if (tok->arr_count == 0 || tok->arr_count > INT32_MAX / 2)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tokenizer.ggml.tokens has %" PRIu64
                           " entries; a vocabulary needs 1 to 2^30.", tok->arr_count);
    t->n = (int32_t)tok->arr_count;
    const struct bp_gguf_kv *sc = kv_array(g, "tokenizer.ggml.scores", BP_GGUF_F32, "f32", false,
                                           &st, err, cap);
    if (st) return st;
    const struct bp_gguf_kv *ty = kv_array(g, "tokenizer.ggml.token_type", BP_GGUF_I32, "i32",
                                           false, &st, err, cap);
    if (st) return st;
    if ((sc && sc->arr_count != tok->arr_count) || (ty && ty->arr_count != tok->arr_count))
        return bp_run_fail(err, cap, BP_ERR_SHAPE, "the tokenizer's arrays disagree in length: %"
                           PRIu64 " tokens but %" PRIu64 " %s; the file's tokenizer metadata is "
                           "inconsistent.", tok->arr_count, sc && sc->arr_count != tok->arr_count
                           ? sc->arr_count : ty->arr_count,
                           sc && sc->arr_count != tok->arr_count ? "scores" : "token types");
    const size_t n = (size_t)t->n;
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    t->piece_off = malloc((n + 1) * sizeof *t->piece_off);
    t->score = calloc(n, sizeof *t->score);
    t->type = malloc(n);
    if (!t->text_off || !t->piece_off || !t->score || !t->type) goto oom;
    struct str_iter it = { tok->arr_data, g->base + g->size };
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (!next_str(&it, &s, &len))
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tokenizer.ggml.tokens runs "
                               "past the end of the file; the file is truncated.");
        total += len;
    }
    if (!(t->text_arena = malloc(total + 1))) goto oom;
    it.p = tok->arr_data;
    total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = NULL;
        size_t len = 0;
        next_str(&it, &s, &len);
        t->text_off[i] = total;
        memcpy(t->text_arena + total, s, len);
        total += len;
    }
    t->text_off[n] = total;
    t->text_arena[total] = '\0';
    for (size_t i = 0; i < n; i++) {
        int32_t v = BP_TOK_NORMAL;
        float f = 0;
        if (ty) memcpy(&v, ty->arr_data + 4 * i, 4);
        if (sc) memcpy(&f, sc->arr_data + 4 * i, 4);
        t->type[i] = v >= 0 && v <= BP_TOK_BYTE ? (uint8_t)v : BP_TOK_UNDEFINED;
        t->score[i] = f;
    }
    /* Pieces: grown as they are made; one token's piece is at most
     * len * (21 + len) bytes (each code point spelled out in full). */
    size_t used = 0, pcap = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = t->text_off[i + 1] - t->text_off[i];
        const size_t worst = len * (21 + len) + 8;
        if (used + worst > pcap) {
            size_t c = pcap ? 2 * pcap : 1 << 16;
            while (c < used + worst) c *= 2;
            char *a = realloc(t->piece_arena, c);
            if (!a) goto oom;
            t->piece_arena = a;
            pcap = c;
        }
        t->piece_off[i] = used;
        make_piece(t, (int32_t)i, t->piece_arena + used, &len);
        used += len;
    }
    t->piece_off[n] = used;
    return BP_OK;
oom:
    return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary.");
}

static bp_status build_map(struct bp_tokenizer *t, char *err, size_t cap)
{
    size_t size = 16;
    while (size < 2 * (size_t)t->n) size *= 2;
    if (!(t->map.slot = calloc(size, sizeof *t->map.slot)))
        return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the vocabulary.");
    t->map.mask = size - 1;
    for (int32_t i = 0; i < t->n; i++) {
        /* A byte-level token whose text has code points outside GPT-2's
         * mapping can never be produced from text: leave it out. */
        if (t->model == BP_TOK_BPE && t->type[i] == BP_TOK_NORMAL) {
            size_t pl;
            const char *p = bp_tok_key(t, i, &pl);
            if (pl >= 12 && !memcmp(p, "[UNK_BYTE_0x", 12)) continue;
        }
        map_insert(t, i);
    }
    return BP_OK;
}

static bp_status load_merges(struct bp_tokenizer *t, const struct bp_gguf *g, char *err, size_t cap)
{
    bp_status st;
    const struct bp_gguf_kv *kv = kv_array(g, "tokenizer.ggml.merges", BP_GGUF_STRING, "strings",
                                           true, &st, err, cap);
    if (!kv) return st;
    if (kv->arr_count > INT32_MAX / 4)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tokenizer.ggml.merges has %" PRIu64
                           " entries, more than a tokenizer can use.", kv->arr_count);
    size_t size = 16;
    while (size < 2 * (size_t)kv->arr_count) size *= 2;
    if (!(t->merges = calloc(size, sizeof *t->merges)))
        return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the merges.");
    t->merge_mask = size - 1;
    struct str_iter it = { kv->arr_data, g->base + g->size };
    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint64_t r = 0; r < kv->arr_count; r++) {
        const char *s;
        size_t len;
        if (!next_str(&it, &s, &len)) {
            free(tmp);
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tokenizer.ggml.merges runs "
                               "past the end of the file; the file is truncated.");
        }
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        int32_t ids[3] = { -1, -1, -1 };
        if (sp) {
            /* Keys of a byte-level map are raw bytes: map each side back. */
            const char *part[3] = { s, sp + 1, NULL };
            size_t plen[3] = { (size_t)(sp - s), len - (size_t)(sp - s) - 1, 0 };
            if (tmp_cap < 4 * len + 4) {
                free(tmp);
                tmp_cap = 4 * len + 4;
                if (!(tmp = malloc(tmp_cap)))
                    return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the merges.");
            }
            size_t cat = 0;
            for (int k = 0; k < 2; k++) {
                size_t start = cat;
                bool ok = true;
                for (size_t i = 0; i < plen[k];) {
                    size_t cl;
                    int b = bp_cp_to_byte(bp_utf8_decode((const uint8_t *)part[k] + i, plen[k] - i, &cl));
                    if (b < 0) ok = false;
                    tmp[cat++] = (char)b;
                    i += cl;
                }
                ids[k] = ok ? bp_str_map_find(t, tmp + start, cat - start) : -1;
            }
            ids[2] = bp_str_map_find(t, tmp, cat);
        }
        if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0) {
            free(tmp);
            return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "merge %" PRIu64 " ('%.*s') %s; "
                               "the file's tokenizer metadata is inconsistent.", r,
                               (int)(len > 64 ? 64 : len), s,
                               !sp ? "is not two tokens separated by a space"
                               : ids[0] < 0 || ids[1] < 0 ? "names a token that is not in the vocabulary"
                               : "makes a token that is not in the vocabulary");
        }
        const uint64_t key = ((uint64_t)(uint32_t)ids[0] << 32 | (uint32_t)ids[1]) + 1;
        size_t i = merge_hash(key) & t->merge_mask;
        while (t->merges[i].key && t->merges[i].key != key) i = (i + 1) & t->merge_mask;
        if (!t->merges[i].key)   /* the first rank of a repeated pair counts */
            t->merges[i] = (struct bp_merge){ key, (int32_t)r, ids[2] };
    }
    free(tmp);
    return BP_OK;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const struct bp_tokenizer *t = ctx;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx = t->text_off[x + 1] - t->text_off[x], ly = t->text_off[y + 1] - t->text_off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}

/* End-of-generation texts llama.cpp also recognises besides EOS. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|end|>",
    "<end_of_turn>", "<EOT>", NULL,
};

static bp_status load(const struct bp_gguf *g, struct bp_tokenizer **out, char *err, size_t cap)
{
    struct bp_tokenizer *t = calloc(1, sizeof *t);
    bp_status st;
    *out = NULL;
    if (!t) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the tokenizer.");
    t->bos = t->eos = t->unk = t->eot = -1;
    const struct bp_gguf_kv *model = bp_gguf_find_kv(g, "tokenizer.ggml.model");
    if (!model || model->type != BP_GGUF_STRING) {
        st = bp_run_fail(err, cap, BP_ERR_NOT_FOUND, "the model carries no tokenizer "
                         "(tokenizer.ggml.model is missing); give token ids instead of text.");
        goto fail;
    }
    const struct bp_gguf_str m = model->v.s;
    if (m.len == 5 && !memcmp(m.ptr, "llama", 5)) t->model = BP_TOK_SPM;
    else if (m.len == 4 && !memcmp(m.ptr, "gpt2", 4)) t->model = BP_TOK_BPE;
    else {
        st = bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the tokenizer model '%.*s' is not "
                         "supported; backplane reads 'llama' (SentencePiece) and 'gpt2' "
                         "(byte-level BPE).", (int)(m.len > 64 ? 64 : m.len), m.ptr);
        goto fail;
    }
    if (t->model == BP_TOK_BPE) {
        const struct bp_gguf_kv *pre = bp_gguf_find_kv(g, "tokenizer.ggml.pre");
        int k = BP_PRE_DEFAULT;
        if (pre && pre->type == BP_GGUF_STRING &&
            (k = bp_pre_kind_from_name(pre->v.s.ptr, (size_t)pre->v.s.len)) < 0) {
            st = bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "tokenizer.ggml.pre '%.*s' names a "
                             "pre-tokenizer backplane does not know; it reads 'default', 'llama3' "
                             "('llama-bpe'), 'qwen2' and 'gpt-2'.",
                             (int)(pre->v.s.len > 64 ? 64 : pre->v.s.len), pre->v.s.ptr);
            goto fail;
        }
        t->pre = (enum bp_pre_kind)k;
        t->ignore_merges = t->add_bos = t->pre == BP_PRE_LLAMA3;
    } else {
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
        t->add_bos = t->add_space_prefix = true;
    }
    if ((st = load_tokens(t, g, err, cap)) || (st = build_map(t, err, cap))) goto fail;
    if (t->model == BP_TOK_SPM) {
        if (t->bos >= t->n) t->bos = -1;
        if (t->eos >= t->n) t->eos = -1;
        if (t->unk >= t->n) t->unk = -1;
    }
    if (t->model == BP_TOK_BPE && (st = load_merges(t, g, err, cap))) goto fail;
    st = BP_OK;
    if (!kv_id(g, "tokenizer.ggml.bos_token_id", t->n, &t->bos, &st, err, cap) ||
        !kv_id(g, "tokenizer.ggml.eos_token_id", t->n, &t->eos, &st, err, cap) ||
        !kv_id(g, "tokenizer.ggml.unknown_token_id", t->n, &t->unk, &st, err, cap) ||
        !kv_id(g, "tokenizer.ggml.eot_token_id", t->n, &t->eot, &st, err, cap))
        goto fail;
    kv_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    kv_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos);
    kv_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)) {
        st = bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "the tokenizer asks for a %s token "
                         "but names none; the file's tokenizer metadata is incomplete.",
                         t->add_bos && t->bos < 0 ? "BOS" : "EOS");
        goto fail;
    }
    for (int32_t i = 0; i < t->n; i++)
        if (t->type[i] == BP_TOK_CONTROL || t->type[i] == BP_TOK_USER_DEFINED || t->type[i] == BP_TOK_UNKNOWN)
            t->n_special++;
    if (t->n_special && !(t->special = malloc(t->n_special * sizeof *t->special))) {
        st = bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory for the tokenizer.");
        goto fail;
    }
    t->n_special = 0;
    for (int32_t i = 0; i < t->n; i++)
        if ((t->type[i] == BP_TOK_CONTROL || t->type[i] == BP_TOK_USER_DEFINED ||
             t->type[i] == BP_TOK_UNKNOWN) && t->text_off[i + 1] > t->text_off[i])
            t->special[t->n_special++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_token[b] = t->model == BP_TOK_SPM ? bp_str_map_find(t, hex, 6) : -1;
        if (t->byte_token[b] < 0 && t->model == BP_TOK_SPM) {
            char c = (char)b;
            t->byte_token[b] = bp_str_map_find(t, &c, 1);
        }
    }
    *out = t;
    return BP_OK;
fail:
    bp_tokenizer_free(t);
    return st;
}

static bp_status load_gguf(struct bp_gguf *g, bp_status st, const char *what,
                           struct bp_tokenizer **out, char *err)
{
    if (st == BP_OK) st = load(g, out, err, ERR_CAP);
    bp_gguf_close(g);
    if (st != BP_OK) return bp__fail(st, "%s: %s", what, err);
    return BP_OK;
}

bp_status bp_tokenizer_load(const char *path, struct bp_tokenizer **out)
{
    char err[ERR_CAP] = "";
    struct bp_gguf *g = NULL;
    if (!out || !path) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_tokenizer_load needs a path and an out pointer.");
    *out = NULL;
    return load_gguf(g, bp_gguf_open(path, &g, err, sizeof err), path, out, err);
}

bp_status bp_tokenizer_load_memory(const void *gguf, size_t size, struct bp_tokenizer **out)
{
    char err[ERR_CAP] = "";
    struct bp_gguf *g = NULL;
    if (!out || !gguf) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_tokenizer_load_memory needs an image and an out pointer.");
    *out = NULL;
    return load_gguf(g, bp_gguf_parse(gguf, size, &g, err, sizeof err), "the GGUF image", out, err);
}

const char *bp_tokenizer_model(const struct bp_tokenizer *t)
{
    return t->model == BP_TOK_SPM ? "llama" : "gpt2";
}

const char *bp_tokenizer_pre(const struct bp_tokenizer *t)
{
    return t->model == BP_TOK_SPM ? "" : bp_pre_kind_name(t->pre);
}

int32_t bp_tokenizer_n_tokens(const struct bp_tokenizer *t) { return t->n; }
int32_t bp_tokenizer_bos(const struct bp_tokenizer *t) { return t->bos; }
int32_t bp_tokenizer_eos(const struct bp_tokenizer *t) { return t->eos; }

bool bp_tokenizer_is_eog(const struct bp_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n) return false;
    if (id == t->eos || id == t->eot) return true;
    if (t->type[id] != BP_TOK_CONTROL) return false;
    size_t len;
    const char *s = bp_tok_text(t, id, &len);
    for (const char *const *e = eog_texts; *e; e++)
        if (strlen(*e) == len && !memcmp(*e, s, len)) return true;
    return false;
}

/* ------------------------------------------------------------ encoding */

/* A run of the text: plain bytes [off, off + len), or one special token. */
struct frag {
    size_t off, len;
    int32_t token;   /* -1 for plain text */
};

struct frags {
    struct frag *v;
    size_t n, cap;
};

static bool frag_push(struct frags *f, struct frag x)
{
    struct frag *v = bp__grow(f->v, sizeof *v, f->n, &f->cap, 16);
    if (!v) return false;
    f->v = v;
    f->v[f->n++] = x;
    return true;
}

/* Splits the plain runs at each occurrence of each special token, longest
 * token first (llama.cpp's tokenizer_st_partition). Control and unknown
 * tokens only when parse_special; user-defined ones always. */
static bool partition(const struct bp_tokenizer *t, const char *text, bool parse_special,
                      struct frags *f)
{
    struct frags next = {0};
    for (size_t k = 0; k < t->n_special; k++) {
        const int32_t id = t->special[k];
        if (!parse_special && t->type[id] != BP_TOK_USER_DEFINED) continue;
        size_t sl;
        const char *s = bp_tok_text(t, id, &sl);
        next.n = 0;
        for (size_t i = 0; i < f->n; i++) {
            struct frag x = f->v[i];
            while (x.token < 0 && x.len >= sl) {
                const char *hit = memmem(text + x.off, x.len, s, sl);
                if (!hit) break;
                const size_t at = (size_t)(hit - text);
                if (at > x.off && !frag_push(&next, (struct frag){ x.off, at - x.off, -1 })) goto oom;
                if (!frag_push(&next, (struct frag){ at, sl, id })) goto oom;
                x.len -= at + sl - x.off;
                x.off = at + sl;
            }
            if ((x.token >= 0 || x.len > 0) && !frag_push(&next, x)) goto oom;
        }
        struct frags tmp = *f;
        *f = next;
        next = tmp;
    }
    free(next.v);
    return true;
oom:
    free(next.v);
    return false;
}

bp_status bp_tokenizer_encode(const struct bp_tokenizer *t, const char *text, size_t len,
                              unsigned flags, int32_t **ids, size_t *n)
{
    struct frags f = {0};
    struct bp_ids out = {0};
    bp_status st = BP_ERR_OUT_OF_MEMORY;
    const bool add = flags & BP_TOKENIZE_ADD_SPECIAL;
    if (!t || !ids || !n || (!text && len))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_tokenizer_encode needs a tokenizer, the "
                        "text and places for the ids and their count.");
    *ids = NULL;
    *n = 0;
    if (len > 0 && (!frag_push(&f, (struct frag){ 0, len, -1 }) ||
                    !partition(t, text, flags & BP_TOKENIZE_PARSE_SPECIAL, &f)))
        goto out;
    if (add && t->add_bos && !bp_ids_push(&out, t->bos)) goto out;
    bool prev_special = true;   /* SentencePiece puts a space before text that starts a run */
    char *buf = NULL;
    size_t buf_cap = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (f.v[i].token >= 0) {
            if (!bp_ids_push(&out, f.v[i].token)) { st = BP_ERR_OUT_OF_MEMORY; goto out_buf; }
            prev_special = true;
            continue;
        }
        if (t->model == BP_TOK_BPE) {
            if ((st = bp_tok_encode_bpe(t, text + f.v[i].off, f.v[i].len, &out)) != BP_OK) goto out_buf;
            continue;
        }
        /* SentencePiece sees spaces as U+2581 (3 bytes each). */
        const size_t need = 3 * (f.v[i].len + 1);
        if (need > buf_cap) {
            free(buf);
            buf_cap = need;
            if (!(buf = malloc(buf_cap))) { st = BP_ERR_OUT_OF_MEMORY; goto out; }
        }
        size_t bl = 0;
        if (t->add_space_prefix && prev_special) { memcpy(buf, "\xE2\x96\x81", 3); bl = 3; }
        for (size_t k = 0; k < f.v[i].len; k++) {
            const char c = text[f.v[i].off + k];
            if (c == ' ') { memcpy(buf + bl, "\xE2\x96\x81", 3); bl += 3; }
            else buf[bl++] = c;
        }
        if ((st = bp_tok_encode_spm(t, buf, bl, &out)) != BP_OK) goto out_buf;
        prev_special = false;
    }
    st = BP_ERR_OUT_OF_MEMORY;
    if (add && t->add_eos && !bp_ids_push(&out, t->eos)) goto out_buf;
    st = BP_OK;
    *ids = out.v;
    *n = out.n;
    out.v = NULL;
out_buf:
    free(buf);
out:
    free(out.v);
    free(f.v);
    if (st != BP_OK) return bp__fail(st, "out of memory tokenizing %zu bytes of text.", len);
    return BP_OK;
}
