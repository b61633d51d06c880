/*
 * tokenizer_reference.c — the throw-away program behind
 * scripts/tokenizer-reference.sh: loads llama.cpp's own libllama (from npm
 * @node-llama-cpp/linux-x64) with dlopen, opens a vocabulary GGUF with
 * vocab_only, and writes the token ids of every case of
 * tests/data/tokenizer/cases.txt and the piece of every id it saw, to stdout.
 * On stderr: llama_tokenize's throughput on the 10 000-character case.
 *
 *   cc -O2 -o /tmp/tokref scripts/tokenizer_reference.c -ldl
 *   /tmp/tokref LIBDIR/libllama.so VOCAB.gguf tests/data/tokenizer/cases.txt
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* llama_model_params by value. Its layout moved between releases: after
 * the pointers come the bools, vocab_only first. Upstream b6xxx: vocab_only
 * at byte 64 and use_mmap (default true) at 65; the node-llama-cpp 3.22
 * build: one more int and pointer, vocab_only at 72, use_mmap (default
 * false) at 73 and use_direct_io (default true) at 74. The defaults are
 * checked before the byte is changed. */
struct params { unsigned char b[256]; };

typedef struct params (*default_params_fn)(void);
typedef void *(*load_fn)(const char *, struct params);
typedef const void *(*get_vocab_fn)(const void *);
typedef int32_t (*tokenize_fn)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool);
typedef int32_t (*piece_fn)(const void *, int32_t, char *, int32_t, int32_t, bool);
typedef void (*log_set_fn)(void (*)(int, const char *, void *), void *);

static void quiet(int level, const char *text, void *user) { (void)level; (void)text; (void)user; }

static size_t unescape(const char *s, char *out)
{
    size_t n = 0;
    for (; *s; s++) {
        if (*s != '\\') { out[n++] = *s; continue; }
        s++;
        if (*s == 'n') out[n++] = '\n';
        else if (*s == 't') out[n++] = '\t';
        else if (*s == 'r') out[n++] = '\r';
        else if (*s == 'x') { unsigned v; sscanf(s + 1, "%2x", &v); out[n++] = (char)v; s += 2; }
        else out[n++] = *s;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: tokref LIBLLAMA VOCAB.gguf CASES\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    default_params_fn defaults = (default_params_fn)dlsym(lib, "llama_model_default_params");
    load_fn load = (load_fn)dlsym(lib, "llama_model_load_from_file");
    get_vocab_fn get_vocab = (get_vocab_fn)dlsym(lib, "llama_model_get_vocab");
    tokenize_fn tokenize = (tokenize_fn)dlsym(lib, "llama_tokenize");
    piece_fn piece = (piece_fn)dlsym(lib, "llama_token_to_piece");
    log_set_fn log_set = (log_set_fn)dlsym(lib, "llama_log_set");
    void (*backend_init)(void) = (void (*)(void))dlsym(lib, "llama_backend_init");
    if (!defaults || !load || !get_vocab || !tokenize || !piece || !backend_init) {
        fprintf(stderr, "libllama lacks a function this program needs\n");
        return 1;
    }
    if (log_set) log_set(quiet, NULL);
    backend_init();
    struct params p;
    memset(&p, 0, sizeof p);
    p = defaults();
    int vocab_only = -1;
    if (p.b[64] == 0 && p.b[65] == 1) vocab_only = 64;
    else if (p.b[72] == 0 && p.b[73] == 0 && p.b[74] == 1) vocab_only = 72;
    if (vocab_only < 0) {
        fprintf(stderr, "llama_model_params has a layout this program does not know\n");
        return 1;
    }
    p.b[vocab_only] = 1;
    void *model = load(argv[2], p);
    if (!model) { fprintf(stderr, "libllama could not open %s\n", argv[2]); return 1; }
    const void *vocab = get_vocab(model);
    FILE *f = fopen(argv[3], "r");
    if (!f) { perror(argv[3]); return 1; }
    static char line[1 << 16], text[1 << 16];
    static int32_t ids[1 << 16];
    static bool seen[1 << 18];
    const char *sep = strrchr(argv[2], '/');
    printf("# llama.cpp's token ids for tests/data/tokenizer/cases.txt with %s\n", sep ? sep + 1 : argv[2]);
    printf("# (scripts/tokenizer-reference.sh: libllama of npm @node-llama-cpp/linux-x64)\n");
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = 0;
        char *name = strtok(line, "\t"), *flags = strtok(NULL, "\t"), *esc = strtok(NULL, "");
        size_t len = unescape(esc ? esc : "", text);
        const bool add = strcmp(flags, "raw") != 0, special = !strcmp(flags, "special");
        int32_t n = tokenize(vocab, text, (int32_t)len, ids, 1 << 16, add, special);
        if (n < 0) { fprintf(stderr, "%s: too many tokens\n", name); return 1; }
        printf("ids\t%s", name);
        for (int32_t i = 0; i < n; i++) {
            printf("%s%d", i ? " " : "\t", ids[i]);
            if (ids[i] >= 0 && ids[i] < (1 << 18)) seen[ids[i]] = true;
        }
        printf("\n");
        if (!strcmp(name, "long_10000_chars")) {
            struct timespec a, b;
            const int reps = 200;
            clock_gettime(CLOCK_MONOTONIC, &a);
            for (int r = 0; r < reps; r++) tokenize(vocab, text, (int32_t)len, ids, 1 << 16, add, special);
            clock_gettime(CLOCK_MONOTONIC, &b);
            double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
            fprintf(stderr, "llama.cpp llama_tokenize: %.1f MB/s on %zu bytes (%s)\n",
                    (double)len * reps / s / 1e6, len, argv[2]);
        }
    }
    for (int32_t id = 0; id < (1 << 18); id++) {
        if (!seen[id]) continue;
        char buf[256];
        int32_t n = piece(vocab, id, buf, sizeof buf, 0, false);
        printf("piece\t%d\t", id);
        for (int32_t i = 0; i < n; i++) printf("%02x", (unsigned char)buf[i]);
        printf("\n");
    }
    fclose(f);
    return 0;
}
