/*
 * llamacpp_batched.c — llama.cpp's batched decode through its prebuilt
 * library, the reference of `backplane bench batch`: N sequences decode
 * together, one llama_decode of N tokens (one per sequence, each with its
 * logits) per step; printed as one JSON object.
 *
 *   llamacpp_batched LIBDIR MODEL.gguf THREADS COUNTS PROMPT_LEN STEPS ROUNDS
 *
 * COUNTS is a comma-separated list of sequence counts (e.g. 1,2,4,8). Per
 * count and round: the memory cleared, every sequence's pseudo-random
 * prompt of PROMPT_LEN tokens prefilled in one llama_decode (untimed), one
 * untimed step, then STEPS timed steps of greedy tokens; aggregate tokens/s
 * = count x STEPS / seconds. Counts alternate within each round; the
 * median and range over ROUNDS are printed per count.
 *
 * LIBDIR holds libllama and the ggml CPU backends (npm
 * @node-llama-cpp/linux-x64, as for llamacpp_bench.c, whose way of driving
 * the library this follows: dlopen, the parameter structs passed back as
 * the library made them, with n_ctx and n_seq_max (the first and fourth
 * uint32_t of llama_context_params) set; llama_batch is built here with
 * llama.h's field order). The context holds COUNTS' largest count of
 * sequences, n_ctx = that count x (PROMPT_LEN + STEPS + 8).
 *
 * Built by scripts/batch-vs-llamacpp.py with `cc -O2 llamacpp_batched.c -ldl`.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct opaque { _Alignas(16) unsigned char b[1024]; };

/* llama.h's struct llama_batch. */
struct llama_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
};

typedef void (*load_all_from_path_fn)(const char *dir);
typedef void (*backend_init_fn)(void);
typedef struct opaque (*default_params_fn)(void);
typedef void *(*model_load_fn)(const char *path, struct opaque params);
typedef void *(*init_from_model_fn)(void *model, struct opaque params);
typedef int32_t (*decode_fn)(void *ctx, struct llama_batch b);
typedef float *(*logits_ith_fn)(void *ctx, int32_t i);
typedef void (*set_threads_fn)(void *ctx, int32_t n, int32_t n_batch);
typedef void *(*get_memory_fn)(void *ctx);
typedef void (*memory_clear_fn)(void *mem, _Bool data);
typedef const void *(*get_vocab_fn)(const void *model);
typedef int32_t (*n_tokens_fn)(const void *vocab);
typedef void (*log_cb)(int level, const char *text, void *user);
typedef void (*log_set_fn)(log_cb cb, void *user);

#define MAX_COUNTS 16
#define MAX_ROUNDS 64

static void quiet(int level, const char *text, void *user)
{
    (void)user;
    if (level >= 4) fputs(text, stderr); /* GGML_LOG_LEVEL_ERROR */
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "llamacpp_batched: the library has no %s; use @node-llama-cpp/linux-x64 "
                "3.22.1 or a llama.cpp of that API.\n", name);
        exit(1);
    }
    return p;
}
#define SYM(type, name) type name##_ = NULL; memcpy(&name##_, &(void *){ sym(lib, #name) }, sizeof(void *))

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int32_t argmax(const float *v, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: llamacpp_batched LIBDIR MODEL.gguf THREADS COUNTS PROMPT_LEN STEPS ROUNDS\n");
        return 2;
    }
    const char *dir = argv[1], *path = argv[2];
    const int threads = atoi(argv[3]), n_prompt = atoi(argv[5]), steps = atoi(argv[6]), rounds = atoi(argv[7]);
    int counts[MAX_COUNTS], n_counts = 0, max_n = 0;
    for (char *c = argv[4]; *c && n_counts < MAX_COUNTS;) {
        counts[n_counts] = (int)strtol(c, &c, 10);
        if (counts[n_counts] < 1 || counts[n_counts] > 256) break;
        if (counts[n_counts] > max_n) max_n = counts[n_counts];
        n_counts++;
        if (*c == ',') c++;
    }
    if (threads < 1 || n_prompt < 1 || steps < 1 || rounds < 1 || rounds > MAX_ROUNDS || n_counts < 1) {
        fprintf(stderr, "llamacpp_batched: THREADS, PROMPT_LEN, STEPS >= 1, ROUNDS 1..%d, COUNTS like 1,2,4,8.\n",
                MAX_ROUNDS);
        return 2;
    }
    char lp[4096];
    snprintf(lp, sizeof lp, "%s/libggml.v0.5.0.so", dir);
    void *ggml = dlopen(lp, RTLD_NOW | RTLD_GLOBAL);
    snprintf(lp, sizeof lp, "%s/libllama.v0.5.0.so", dir);
    void *lib = ggml ? dlopen(lp, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!lib) {
        fprintf(stderr, "llamacpp_batched: cannot load llama.cpp from %s: %s\n", dir, dlerror());
        return 1;
    }
    load_all_from_path_fn load_all;
    memcpy(&load_all, &(void *){ sym(ggml, "ggml_backend_load_all_from_path") }, sizeof(void *));
    SYM(backend_init_fn, llama_backend_init);
    SYM(default_params_fn, llama_model_default_params);
    SYM(default_params_fn, llama_context_default_params);
    SYM(model_load_fn, llama_model_load_from_file);
    SYM(init_from_model_fn, llama_init_from_model);
    SYM(decode_fn, llama_decode);
    SYM(logits_ith_fn, llama_get_logits_ith);
    SYM(set_threads_fn, llama_set_n_threads);
    SYM(get_memory_fn, llama_get_memory);
    SYM(memory_clear_fn, llama_memory_clear);
    SYM(get_vocab_fn, llama_model_get_vocab);
    SYM(n_tokens_fn, llama_vocab_n_tokens);
    SYM(log_set_fn, llama_log_set);
    llama_log_set_(quiet, NULL);
    load_all(dir);
    llama_backend_init_();
    void *model = llama_model_load_from_file_(path, llama_model_default_params_());
    if (!model) {
        fprintf(stderr, "llamacpp_batched: llama.cpp could not load %s.\n", path);
        return 1;
    }
    const int32_t n_vocab = llama_vocab_n_tokens_(llama_model_get_vocab_(model));
    struct opaque cp = llama_context_default_params_();
    const uint32_t n_ctx = (uint32_t)(max_n * (n_prompt + steps + 8)), n_seq_max = (uint32_t)max_n;
    memcpy(cp.b, &n_ctx, sizeof n_ctx);
    memcpy(cp.b + 12, &n_seq_max, sizeof n_seq_max);
    void *ctx = llama_init_from_model_(model, cp);
    if (!ctx) {
        fprintf(stderr, "llamacpp_batched: llama.cpp could not make a context of %u sequences.\n", n_seq_max);
        return 1;
    }
    llama_set_n_threads_(ctx, threads, threads);

    const int cap = max_n * n_prompt;
    int32_t *tok = malloc((size_t)cap * sizeof *tok), *pos = malloc((size_t)cap * sizeof *pos);
    int32_t *nsid = malloc((size_t)cap * sizeof *nsid), *sid = malloc((size_t)cap * sizeof *sid);
    int32_t **sids = malloc((size_t)cap * sizeof *sids), *next = malloc((size_t)max_n * sizeof *next);
    int8_t *want = malloc((size_t)cap);
    if (!tok || !pos || !nsid || !sid || !sids || !next || !want) {
        fprintf(stderr, "llamacpp_batched: out of memory.\n");
        return 1;
    }
    for (int i = 0; i < cap; i++) {
        nsid[i] = 1;
        sids[i] = &sid[i];
    }
    static double tps[MAX_COUNTS][MAX_ROUNDS];
    uint64_t x = 88172645463325252ull;
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < n_counts; c++) {
            const int n = counts[c];
            llama_memory_clear_(llama_get_memory_(ctx), 1);
            struct llama_batch b = { .n_tokens = n * n_prompt, .token = tok, .pos = pos, .n_seq_id = nsid,
                                     .seq_id = sids, .logits = want };
            for (int s = 0; s < n; s++)
                for (int i = 0; i < n_prompt; i++) {
                    const int k = s * n_prompt + i;
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    tok[k] = (int32_t)(x % (uint64_t)n_vocab);
                    pos[k] = i;
                    sid[k] = s;
                    want[k] = i == n_prompt - 1;
                }
            if (llama_decode_(ctx, b) != 0) {
                fprintf(stderr, "llamacpp_batched: the prefill of %d sequences failed.\n", n);
                return 1;
            }
            for (int s = 0; s < n; s++) next[s] = argmax(llama_get_logits_ith_(ctx, (s + 1) * n_prompt - 1), n_vocab);
            double t0 = 0;
            for (int k = -1; k < steps; k++) { /* step -1: untimed */
                if (k == 0) t0 = now();
                b.n_tokens = n;
                for (int s = 0; s < n; s++) {
                    tok[s] = next[s];
                    pos[s] = n_prompt + k + 1;
                    sid[s] = s;
                    want[s] = 1;
                }
                if (llama_decode_(ctx, b) != 0) {
                    fprintf(stderr, "llamacpp_batched: a step of %d sequences failed.\n", n);
                    return 1;
                }
                for (int s = 0; s < n; s++) next[s] = argmax(llama_get_logits_ith_(ctx, s), n_vocab);
            }
            tps[c][r] = n * steps / (now() - t0);
        }
    }
    printf("{\"threads\": %d, \"prompt\": %d, \"steps_per_round\": %d, \"rounds\": %d, \"sequences\": [",
           threads, n_prompt, steps, rounds);
    for (int c = 0; c < n_counts; c++) {
        qsort(tps[c], (size_t)rounds, sizeof tps[c][0], cmp_double);
        printf("%s{\"n\": %d, \"tokens_per_s\": %.3f, \"tokens_per_s_min\": %.3f, \"tokens_per_s_max\": %.3f}",
               c ? ", " : "", counts[c], tps[c][rounds / 2], tps[c][0], tps[c][rounds - 1]);
    }
    printf("]}\n");
    return 0;
}
