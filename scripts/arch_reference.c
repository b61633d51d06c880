/*
 * arch_reference.c — llama.cpp's own logits for a GGUF file, the reference
 * data of tests/data/arch (scripts/arch-reference.sh runs it).
 *
 *   arch_reference LIBDIR MODEL.gguf N_CTX TOKENS.txt OUT.logits [--kv f16] [--fa]
 *   arch_reference --quantize LIBDIR IN.gguf OUT.gguf FTYPE [NTHREAD]
 *
 * The first form loads MODEL with llama.cpp's prebuilt libllama (npm
 * @node-llama-cpp/linux-x64 3.22.1, in LIBDIR), makes a context of N_CTX
 * cells with n_batch = n_ubatch = N_CTX, one thread, flash attention off
 * and an F32 KV cache, evaluates the token ids of TOKENS.txt (whitespace
 * separated) in one batch at positions 0.. with logits for every
 * position, and writes them to OUT.logits: n_tokens rows of n_vocab
 * little-endian f32, row i the logits after token i. --kv f16 and --fa
 * switch to llama.cpp's defaults (F16 cache, flash attention on) for
 * checking that the settings take effect.
 *
 * llama.cpp rounds a context size up to a multiple of 256; N_CTX must be
 * one already, so that the size recorded with the logits is the size
 * llama.cpp used (it picks longrope factors by it).
 *
 * Exit status: 0 written; 1 llama.cpp refused the file (its error lines
 * are printed, prefixed "refused: "); 2 usage; 3 anything else. An
 * assertion inside llama.cpp aborts the process (SIGABRT): run files that
 * may be bad in a child.
 *
 * The --quantize form writes OUT with llama_model_quantize at FTYPE, a
 * llama_ftype number (2 Q4_0, 7 Q8_0, 15 Q4_K_M), as
 * scripts/llamacpp_bench.c does, on NTHREAD threads (default 1).
 * scripts/quantize-reference.sh runs it for every preset.
 *
 * The parameter structs are handled as bytes the library made. Fields set
 * in llama_context_params, by byte offset (llama.h of that release):
 * n_ctx 0, n_batch 4, n_ubatch 8, n_threads 28, n_threads_batch 32,
 * flash_attn_type 52, type_k 104, type_v 108. Before writing, the
 * library's defaults at those offsets and at their neighbours are checked
 * (512, 2048, 512, n_seq_max 1, flash_attn_type -1 = auto, yarn_ext_factor
 * -1.0f at 64, type_k = type_v = 1 = F16, offload_kqv true at 129); after
 * making the context, llama_n_ctx_seq, llama_n_batch, llama_n_ubatch and
 * llama_n_threads(_batch) must report what was set, and llama.cpp's own
 * log must say "flash_attn = disabled" and "K (f32)" / "V (f32)" (or
 * f16 / enabled with the switches). A library of another layout is
 * refused with a sentence.
 *
 * Built with `cc -O2 -o arch_reference scripts/arch_reference.c -ldl -lm`.
 */
#define _GNU_SOURCE /* memmem */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opaque { _Alignas(16) unsigned char b[1024]; };

/* llama_batch, as declared in llama.h (unchanged since its introduction). */
struct llama_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
};

enum {
    OFF_N_CTX = 0, OFF_N_BATCH = 4, OFF_N_UBATCH = 8, OFF_N_SEQ_MAX = 12,
    OFF_N_THREADS = 28, OFF_N_THREADS_BATCH = 32, OFF_FLASH_ATTN_TYPE = 52,
    OFF_YARN_EXT_FACTOR = 64, OFF_TYPE_K = 104, OFF_TYPE_V = 108, OFF_OFFLOAD_KQV = 129,
};
enum { GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1 };
enum { FLASH_ATTN_AUTO = -1, FLASH_ATTN_DISABLED = 0, FLASH_ATTN_ENABLED = 1 };
enum { MAX_TOKENS = 4096 };

typedef void (*backend_init_fn)(void);
typedef void (*load_all_from_path_fn)(const char *dir);
typedef struct opaque (*default_params_fn)(void);
typedef void *(*model_load_fn)(const char *path, struct opaque params);
typedef void (*model_free_fn)(void *model);
typedef void *(*init_from_model_fn)(void *model, struct opaque params);
typedef void (*free_fn)(void *ctx);
typedef struct llama_batch (*batch_init_fn)(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
typedef void (*batch_free_fn)(struct llama_batch b);
typedef int32_t (*decode_fn)(void *ctx, struct llama_batch b);
typedef float *(*logits_ith_fn)(void *ctx, int32_t i);
typedef void (*set_threads_fn)(void *ctx, int32_t n, int32_t n_batch);
typedef uint32_t (*ctx_u32_fn)(const void *ctx);
typedef int32_t (*ctx_i32_fn)(void *ctx);
typedef const void *(*get_vocab_fn)(const void *model);
typedef int32_t (*n_tokens_fn)(const void *vocab);
typedef void (*log_cb)(int level, const char *text, void *user);
typedef void (*log_set_fn)(log_cb cb, void *user);
typedef uint32_t (*quantize_fn)(const char *in, const char *out, const void *params);

/* Everything llama.cpp logs, kept for the checks and the refusal lines. */
static char *log_text;
static size_t log_len, log_cap;

static void keep_log(int level, const char *text, void *user)
{
    (void)level;
    (void)user;
    const size_t n = strlen(text);
    if (log_len + n + 1 > log_cap) {
        size_t cap = log_cap ? log_cap * 2 : 65536;
        while (cap < log_len + n + 1) cap *= 2;
        char *p = realloc(log_text, cap);
        if (!p) return;
        log_text = p;
        log_cap = cap;
    }
    memcpy(log_text + log_len, text, n + 1);
    log_len += n;
}

/* Print llama.cpp's error lines ("error" anywhere in the line). */
static void print_errors(const char *what)
{
    int any = 0;
    for (const char *line = log_text; line && *line;) {
        const char *end = strchr(line, '\n');
        const size_t n = end ? (size_t)(end - line) : strlen(line);
        if (memmem(line, n, "error", 5) || memmem(line, n, "failed", 6)) {
            printf("refused: %.*s\n", (int)n, line);
            any = 1;
        }
        line += n + (end != NULL);
    }
    if (!any) printf("refused: %s (llama.cpp logged no error line)\n", what);
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "arch_reference: the library has no %s; use @node-llama-cpp/linux-x64 3.22.1.\n",
                name);
        exit(3);
    }
    return p;
}
#define SYM(type, name) type name##_ = NULL; memcpy(&name##_, &(void *){ sym(lib, #name) }, sizeof(void *))

static void *open_llama(const char *dir, void **ggml_out)
{
    char lp[4096];
    snprintf(lp, sizeof lp, "%s/libggml.v0.5.0.so", dir);
    void *ggml = dlopen(lp, RTLD_NOW | RTLD_GLOBAL);
    snprintf(lp, sizeof lp, "%s/libllama.v0.5.0.so", dir);
    void *lib = ggml ? dlopen(lp, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!lib) {
        fprintf(stderr, "arch_reference: cannot load llama.cpp from %s: %s\n", dir, dlerror());
        exit(3);
    }
    load_all_from_path_fn load_all;
    memcpy(&load_all, &(void *){ sym(ggml, "ggml_backend_load_all_from_path") }, sizeof(void *));
    load_all(dir);
    *ggml_out = ggml;
    return lib;
}

static int32_t get_i32(const struct opaque *p, int off)
{
    int32_t v;
    memcpy(&v, p->b + off, 4);
    return v;
}

static float get_f32(const struct opaque *p, int off)
{
    float v;
    memcpy(&v, p->b + off, 4);
    return v;
}

static void set_i32(struct opaque *p, int off, int32_t v)
{
    memcpy(p->b + off, &v, 4);
}

static int quantize(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: arch_reference --quantize LIBDIR IN.gguf OUT.gguf FTYPE [NTHREAD]\n");
        return 2;
    }
    void *ggml;
    void *lib = open_llama(argv[2], &ggml);
    SYM(backend_init_fn, llama_backend_init);
    SYM(default_params_fn, llama_model_quantize_default_params);
    SYM(quantize_fn, llama_model_quantize);
    SYM(log_set_fn, llama_log_set);
    llama_log_set_(keep_log, NULL);
    llama_backend_init_();
    struct opaque qp = llama_model_quantize_default_params_();
    /* nthread and ftype: the first two fields since the function exists */
    set_i32(&qp, 0, argc == 7 ? atoi(argv[6]) : 1);
    set_i32(&qp, 4, atoi(argv[5]));
    if (llama_model_quantize_(argv[3], argv[4], qp.b) != 0) {
        print_errors("llama_model_quantize failed");
        return 1;
    }
    return 0;
}

static int read_tokens(const char *path, int32_t *ids, int n_vocab)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "arch_reference: cannot read %s.\n", path);
        return -1;
    }
    int n = 0;
    long v;
    while (n < MAX_TOKENS && fscanf(f, "%ld", &v) == 1) {
        if (v < 0 || v >= n_vocab) {
            fprintf(stderr, "arch_reference: token %ld of %s is outside the vocabulary (%d).\n",
                    v, path, n_vocab);
            fclose(f);
            return -1;
        }
        ids[n++] = (int32_t)v;
    }
    fclose(f);
    if (n == 0) fprintf(stderr, "arch_reference: %s holds no token ids.\n", path);
    return n ? n : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--quantize"))
        return quantize(argc, argv);
    int kv_f16 = 0, fa = 0, nargs = 0;
    const char *arg[5];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kv") && i + 1 < argc && !strcmp(argv[i + 1], "f16")) {
            kv_f16 = 1;
            i++;
        } else if (!strcmp(argv[i], "--fa")) {
            fa = 1;
        } else if (nargs < 5) {
            arg[nargs++] = argv[i];
        } else {
            nargs = 6;
        }
    }
    if (nargs != 5) {
        fprintf(stderr, "usage: arch_reference LIBDIR MODEL.gguf N_CTX TOKENS.txt OUT.logits "
                "[--kv f16] [--fa]\n       arch_reference --quantize LIBDIR IN.gguf OUT.gguf FTYPE "
                "[NTHREAD]\n");
        return 2;
    }
    const char *dir = arg[0], *path = arg[1], *tok_path = arg[3], *out_path = arg[4];
    const long n_ctx = strtol(arg[2], NULL, 10);
    if (n_ctx < 256 || n_ctx > 65536 || n_ctx % 256 != 0) {
        fprintf(stderr, "arch_reference: N_CTX must be a multiple of 256 (llama.cpp rounds up to "
                "one), not %s.\n", arg[2]);
        return 2;
    }
    void *ggml;
    void *lib = open_llama(dir, &ggml);
    SYM(backend_init_fn, llama_backend_init);
    SYM(default_params_fn, llama_model_default_params);
    SYM(default_params_fn, llama_context_default_params);
    SYM(model_load_fn, llama_model_load_from_file);
    SYM(model_free_fn, llama_model_free);
    SYM(init_from_model_fn, llama_init_from_model);
    SYM(free_fn, llama_free);
    SYM(batch_init_fn, llama_batch_init);
    SYM(batch_free_fn, llama_batch_free);
    SYM(decode_fn, llama_decode);
    SYM(logits_ith_fn, llama_get_logits_ith);
    SYM(set_threads_fn, llama_set_n_threads);
    SYM(ctx_u32_fn, llama_n_ctx_seq);
    SYM(ctx_u32_fn, llama_n_batch);
    SYM(ctx_u32_fn, llama_n_ubatch);
    SYM(ctx_i32_fn, llama_n_threads);
    SYM(ctx_i32_fn, llama_n_threads_batch);
    SYM(get_vocab_fn, llama_model_get_vocab);
    SYM(n_tokens_fn, llama_vocab_n_tokens);
    SYM(log_set_fn, llama_log_set);
    llama_log_set_(keep_log, NULL);
    llama_backend_init_();

    struct opaque cp = llama_context_default_params_();
    if (get_i32(&cp, OFF_N_CTX) != 512 || get_i32(&cp, OFF_N_BATCH) != 2048 ||
        get_i32(&cp, OFF_N_UBATCH) != 512 || get_i32(&cp, OFF_N_SEQ_MAX) != 1 ||
        get_i32(&cp, OFF_FLASH_ATTN_TYPE) != FLASH_ATTN_AUTO ||
        get_f32(&cp, OFF_YARN_EXT_FACTOR) != -1.0f || get_i32(&cp, OFF_TYPE_K) != GGML_TYPE_F16 ||
        get_i32(&cp, OFF_TYPE_V) != GGML_TYPE_F16 || cp.b[OFF_OFFLOAD_KQV] != 1) {
        fprintf(stderr, "arch_reference: llama_context_params of this library does not have the "
                "layout of node-llama-cpp 3.22.1's llama.h (defaults not where expected).\n");
        return 3;
    }

    void *model = llama_model_load_from_file_(path, llama_model_default_params_());
    if (!model) {
        print_errors("llama_model_load_from_file returned NULL");
        return 1;
    }
    const int32_t n_vocab = llama_vocab_n_tokens_(llama_model_get_vocab_(model));
    static int32_t ids[MAX_TOKENS];
    const int n = read_tokens(tok_path, ids, n_vocab);
    if (n < 0) return 3;
    if (n > n_ctx) {
        fprintf(stderr, "arch_reference: %d tokens do not fit N_CTX %ld.\n", n, n_ctx);
        return 2;
    }

    set_i32(&cp, OFF_N_CTX, (int32_t)n_ctx);
    set_i32(&cp, OFF_N_BATCH, (int32_t)n_ctx);
    set_i32(&cp, OFF_N_UBATCH, (int32_t)n_ctx);
    set_i32(&cp, OFF_N_THREADS, 1);
    set_i32(&cp, OFF_N_THREADS_BATCH, 1);
    set_i32(&cp, OFF_FLASH_ATTN_TYPE, fa ? FLASH_ATTN_ENABLED : FLASH_ATTN_DISABLED);
    set_i32(&cp, OFF_TYPE_K, kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32);
    set_i32(&cp, OFF_TYPE_V, kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32);
    log_len = 0;
    if (log_text) log_text[0] = 0;
    void *ctx = llama_init_from_model_(model, cp);
    if (!ctx) {
        print_errors("llama_init_from_model returned NULL");
        return 1;
    }
    llama_set_n_threads_(ctx, 1, 1);
    const char *want_fa = fa ? "flash_attn            = enabled" : "flash_attn            = disabled";
    const char *want_k = kv_f16 ? "K (f16)" : "K (f32)", *want_v = kv_f16 ? "V (f16)" : "V (f32)";
    if (llama_n_ctx_seq_(ctx) != (uint32_t)n_ctx || llama_n_batch_(ctx) != (uint32_t)n_ctx ||
        llama_n_ubatch_(ctx) != (uint32_t)n_ctx || llama_n_threads_(ctx) != 1 ||
        llama_n_threads_batch_(ctx) != 1) {
        fprintf(stderr, "arch_reference: the context does not have the sizes set (n_ctx_seq %u, "
                "n_batch %u, n_ubatch %u, threads %d/%d).\n", llama_n_ctx_seq_(ctx),
                llama_n_batch_(ctx), llama_n_ubatch_(ctx), llama_n_threads_(ctx),
                llama_n_threads_batch_(ctx));
        return 3;
    }
    if (!log_text || !strstr(log_text, want_fa) || !strstr(log_text, want_k) ||
        !strstr(log_text, want_v)) {
        fprintf(stderr, "arch_reference: llama.cpp's log does not confirm \"%s\", \"%s\" and \"%s\".\n",
                want_fa, want_k, want_v);
        return 3;
    }

    struct llama_batch b = llama_batch_init_(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    log_len = 0;
    if (log_text) log_text[0] = 0;
    const int32_t rc = llama_decode_(ctx, b);
    if (rc != 0) {
        fprintf(stderr, "arch_reference: llama_decode returned %d.\n", rc);
        print_errors("llama_decode failed");
        return 1;
    }
    FILE *out = fopen(out_path, "wb");
    if (!out) {
        fprintf(stderr, "arch_reference: cannot write %s.\n", out_path);
        return 3;
    }
    float max_abs = 0;
    for (int i = 0; i < n; i++) {
        const float *row = llama_get_logits_ith_(ctx, i);
        if (!row) {
            fprintf(stderr, "arch_reference: llama.cpp has no logits for position %d.\n", i);
            return 3;
        }
        for (int j = 0; j < n_vocab; j++) {
            if (!isfinite(row[j])) {
                fprintf(stderr, "arch_reference: logit %d of position %d is not finite.\n", j, i);
                return 3;
            }
            const float a = fabsf(row[j]);
            if (a > max_abs) max_abs = a;
        }
        if (fwrite(row, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) {
            fprintf(stderr, "arch_reference: writing %s failed.\n", out_path);
            return 3;
        }
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "arch_reference: writing %s failed.\n", out_path);
        return 3;
    }
    printf("%d tokens x %d logits, max |logit| %.4f\n", n, n_vocab, max_abs);
    llama_batch_free_(b);
    llama_free_(ctx);
    llama_model_free_(model);
    return 0;
}
