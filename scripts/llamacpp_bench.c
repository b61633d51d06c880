/*
 * llamacpp_bench.c — time llama.cpp's prebuilt library on the run that
 * `backplane run` makes: the same pseudo-random prompt ids, one prefill,
 * greedy decoding; printed as one JSON object.
 *
 *   llamacpp_bench LIBDIR MODEL.gguf THREADS PROMPT_LEN N_GEN PREFILL_RUNS [LOGITS.f32]
 *   llamacpp_bench --quantize LIBDIR IN.gguf OUT.gguf FTYPE
 *
 * --quantize writes OUT with llama.cpp's own llama_model_quantize at
 * FTYPE, a llama_ftype number (2 Q4_0, 7 Q8_0, 15 Q4_K_M): the files a
 * llama.cpp user has, with its per-tensor mixes (Q6_K for output.weight,
 * and in Q4_K_M for attn_v / ffn_down of some layers). Only the first two
 * fields of the library's default parameters are set (nthread, ftype:
 * first in llama_model_quantize_params since its introduction).
 *
 * LOGITS.f32 receives n_vocab floats for the last prompt position, then one
 * row per decode step (the rows of `backplane run --dump-logits` from the
 * last prompt position on).
 * LIBDIR holds libllama and the ggml CPU backends (npm
 * @node-llama-cpp/linux-x64, installed by scripts/bench-llamacpp.sh at
 * benchmark set-up; never part of the build or the tests). The library is
 * dlopen()ed and driven through the few functions of llama.h that take and
 * return pointers and scalars; the two parameter structs are only passed
 * back as the library made them (as opaque bytes: on x86-64 a struct this
 * large travels through memory, so the callee reads it at the same place
 * whatever size the caller declares). Threads are set with
 * llama_set_n_threads, the context size is the struct's first field
 * (uint32_t n_ctx, first in llama_context_params since its introduction).
 *
 * LLAMACPP_CPU_BACKEND=NAME loads libggml-cpu-NAME.so alone instead of
 * the build ggml would pick for this CPU.
 *
 * Built by the harness with `cc -O2 llamacpp_bench.c -ldl`.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct opaque { _Alignas(16) unsigned char b[1024]; };
struct batch { _Alignas(16) unsigned char b[256]; };

typedef void (*backend_init_fn)(void);
typedef void (*load_all_from_path_fn)(const char *dir);
typedef void *(*backend_load_fn)(const char *path);
typedef struct opaque (*default_params_fn)(void);
typedef void *(*model_load_fn)(const char *path, struct opaque params);
typedef void *(*init_from_model_fn)(void *model, struct opaque params);
typedef struct batch (*batch_get_one_fn)(int32_t *tokens, int32_t n);
typedef int32_t (*decode_fn)(void *ctx, struct batch b);
typedef float *(*logits_ith_fn)(void *ctx, int32_t i);
typedef void (*set_threads_fn)(void *ctx, int32_t n, int32_t n_batch);
typedef void (*synchronize_fn)(void *ctx);
typedef void *(*get_memory_fn)(void *ctx);
typedef void (*memory_clear_fn)(void *mem, _Bool data);
typedef const void *(*get_vocab_fn)(const void *model);
typedef int32_t (*n_tokens_fn)(const void *vocab);
typedef void (*log_cb)(int level, const char *text, void *user);
typedef void (*log_set_fn)(log_cb cb, void *user);

/* llama.cpp logs every graph it reserves; on stderr that is slower than
 * the steps being timed. */
static void quiet(int level, const char *text, void *user)
{
    (void)text;
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
        fprintf(stderr, "llamacpp_bench: the library has no %s; use @node-llama-cpp/linux-x64 "
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

/* libggml and libllama of the build in dir: the CPU build's names, else
 * the Vulkan build's (libggml.vulkan.v0.5.0.so, libllama.vulkan...). */
static void *open_llama(const char *dir, void **ggml_out)
{
    static const char *const flavour[] = { "", ".vulkan" };
    char lp[4096];
    for (size_t i = 0; i < sizeof flavour / sizeof flavour[0]; i++) {
        snprintf(lp, sizeof lp, "%s/libggml%s.v0.5.0.so", dir, flavour[i]);
        void *ggml = dlopen(lp, RTLD_NOW | RTLD_GLOBAL);
        if (!ggml) continue;
        snprintf(lp, sizeof lp, "%s/libllama%s.v0.5.0.so", dir, flavour[i]);
        void *lib = dlopen(lp, RTLD_NOW | RTLD_GLOBAL);
        if (lib) {
            *ggml_out = ggml;
            return lib;
        }
    }
    return NULL;
}

typedef uint32_t (*quantize_fn)(const char *in, const char *out, const void *params);

static int quantize(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: llamacpp_bench --quantize LIBDIR IN.gguf OUT.gguf FTYPE\n");
        return 2;
    }
    void *ggml = NULL;
    void *lib = open_llama(argv[2], &ggml);
    if (!lib) {
        fprintf(stderr, "llamacpp_bench: cannot load llama.cpp from %s: %s\n", argv[2], dlerror());
        return 1;
    }
    load_all_from_path_fn load_all;
    memcpy(&load_all, &(void *){ sym(ggml, "ggml_backend_load_all_from_path") }, sizeof(void *));
    load_all(argv[2]);
    SYM(backend_init_fn, llama_backend_init);
    SYM(default_params_fn, llama_model_quantize_default_params);
    SYM(quantize_fn, llama_model_quantize);
    SYM(log_set_fn, llama_log_set);
    llama_log_set_(quiet, NULL);
    llama_backend_init_();
    struct opaque qp = llama_model_quantize_default_params_();
    const int32_t nthread = 0, ftype = atoi(argv[5]);
    memcpy(qp.b, &nthread, 4);
    memcpy(qp.b + 4, &ftype, 4);
    if (llama_model_quantize_(argv[3], argv[4], qp.b) != 0) {
        fprintf(stderr, "llamacpp_bench: llama.cpp could not quantize %s to ftype %d.\n", argv[3], ftype);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--quantize"))
        return quantize(argc, argv);
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: llamacpp_bench LIBDIR MODEL.gguf THREADS PROMPT_LEN N_GEN "
                "PREFILL_RUNS [LOGITS.f32]\n");
        return 2;
    }
    const char *dir = argv[1], *path = argv[2];
    const int threads = atoi(argv[3]), n_prompt = atoi(argv[4]), n_gen = atoi(argv[5]);
    const int runs = atoi(argv[6]);
    if (threads < 1 || n_prompt < 1 || n_gen < 1 || runs < 1 || runs > 100) {
        fprintf(stderr, "llamacpp_bench: THREADS, PROMPT_LEN, N_GEN >= 1 and PREFILL_RUNS 1..100.\n");
        return 2;
    }
    char lp[4096];
    void *ggml = NULL;
    void *lib = open_llama(dir, &ggml);
    if (!lib) {
        fprintf(stderr, "llamacpp_bench: cannot load llama.cpp from %s: %s\n", dir, dlerror());
        return 1;
    }
    load_all_from_path_fn load_all;
    memcpy(&load_all, &(void *){ sym(ggml, "ggml_backend_load_all_from_path") }, sizeof(void *));
    SYM(backend_init_fn, llama_backend_init);
    SYM(default_params_fn, llama_model_default_params);
    SYM(default_params_fn, llama_context_default_params);
    SYM(model_load_fn, llama_model_load_from_file);
    SYM(init_from_model_fn, llama_init_from_model);
    SYM(batch_get_one_fn, llama_batch_get_one);
    SYM(decode_fn, llama_decode);
    SYM(logits_ith_fn, llama_get_logits_ith);
    SYM(set_threads_fn, llama_set_n_threads);
    SYM(synchronize_fn, llama_synchronize);
    SYM(get_memory_fn, llama_get_memory);
    SYM(memory_clear_fn, llama_memory_clear);
    SYM(get_vocab_fn, llama_model_get_vocab);
    SYM(n_tokens_fn, llama_vocab_n_tokens);
    SYM(log_set_fn, llama_log_set);
    llama_log_set_(quiet, NULL);
    FILE *dump = argc == 8 ? fopen(argv[7], "wb") : NULL;
    if (argc == 8 && !dump) {
        fprintf(stderr, "llamacpp_bench: cannot write %s.\n", argv[7]);
        return 1;
    }

    /* LLAMACPP_CPU_BACKEND=icelake (say) loads that ggml CPU build alone;
     * unset, ggml picks the best for this CPU, as a user's program does. */
    const char *variant = getenv("LLAMACPP_CPU_BACKEND");
    if (variant && *variant) {
        backend_load_fn load_one;
        memcpy(&load_one, &(void *){ sym(ggml, "ggml_backend_load") }, sizeof(void *));
        snprintf(lp, sizeof lp, "%s/libggml-cpu-%s.so", dir, variant);
        if (!load_one(lp)) {
            fprintf(stderr, "llamacpp_bench: cannot load %s.\n", lp);
            return 1;
        }
    } else {
        load_all(dir);
    }
    llama_backend_init_();
    void *model = llama_model_load_from_file_(path, llama_model_default_params_());
    if (!model) {
        fprintf(stderr, "llamacpp_bench: llama.cpp could not load %s.\n", path);
        return 1;
    }
    const int32_t n_vocab = llama_vocab_n_tokens_(llama_model_get_vocab_(model));
    struct opaque cp = llama_context_default_params_();
    const uint32_t n_ctx = (uint32_t)(n_prompt + n_gen + 16);
    memcpy(cp.b, &n_ctx, sizeof n_ctx);
    void *ctx = llama_init_from_model_(model, cp);
    if (!ctx) {
        fprintf(stderr, "llamacpp_bench: llama.cpp could not make a context.\n");
        return 1;
    }
    llama_set_n_threads_(ctx, threads, threads);

    /* backplane run's prompt: xorshift64 from the same seed, mod n_vocab. */
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < n_prompt; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)n_vocab);
    }
    double t_first = 0, warm[100];
    for (int r = 0; r < runs; r++) {
        llama_memory_clear_(llama_get_memory_(ctx), 1);
        const double t0 = now();
        if (llama_decode_(ctx, llama_batch_get_one_(prompt, n_prompt)) != 0) {
            fprintf(stderr, "llamacpp_bench: the prefill failed.\n");
            return 1;
        }
        /* llama_decode may return with the graph still running on a GPU
         * backend (ggml's Vulkan one does); the prefill ends when its
         * results are there, as backplane's does. */
        llama_synchronize_(ctx);
        const double t = now() - t0;
        if (r == 0) t_first = t;
        else warm[r - 1] = t;
    }
    int32_t tok = argmax(llama_get_logits_ith_(ctx, -1), n_vocab);
    if (dump) fwrite(llama_get_logits_ith_(ctx, -1), sizeof(float), (size_t)n_vocab, dump);
    printf("{\"prefill_tokens_per_s\": %.3f", n_prompt / t_first);
    if (runs > 1) {
        qsort(warm, (size_t)(runs - 1), sizeof *warm, cmp_double);
        printf(", \"prefill_warm_tokens_per_s\": %.3f", n_prompt / warm[(runs - 1) / 2]);
    }
    printf(", \"tokens\": [%d", tok);
    double t_dec = 0;
    for (int i = 1; i < n_gen; i++) {
        const double t0 = now();
        if (llama_decode_(ctx, llama_batch_get_one_(&tok, 1)) != 0) {
            fprintf(stderr, "llamacpp_bench: decode step %d failed.\n", i);
            return 1;
        }
        tok = argmax(llama_get_logits_ith_(ctx, -1), n_vocab);
        t_dec += now() - t0;
        if (dump) fwrite(llama_get_logits_ith_(ctx, -1), sizeof(float), (size_t)n_vocab, dump);
        printf(", %d", tok);
    }
    printf("], \"decode_tokens_per_s\": %.3f}\n", n_gen > 1 ? (n_gen - 1) / t_dec : 0.0);
    free(prompt);
    if (dump && fclose(dump) != 0) {
        fprintf(stderr, "llamacpp_bench: writing %s failed.\n", argv[7]);
        return 1;
    }
    return 0;
}
