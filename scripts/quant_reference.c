/*
 * quant_reference.c — the throw-away program behind
 * scripts/quant-reference.sh: loads ggml's own libggml-base (from npm
 * @node-llama-cpp/linux-x64) with dlopen and writes, for fixed inputs, the
 * bytes ggml_quantize_chunk makes of them (no importance matrix: what
 * llama-quantize writes without one) and the floats the type's to_float
 * makes of those bytes. tests/test_quant.c holds bp_quantize and
 * bp_dequantize to them bit for bit.
 *
 *   cc -O2 -o /tmp/quantref scripts/quant_reference.c -ldl -lm
 *   /tmp/quantref LIBDIR/libggml-base.so tests/data/quant
 *
 * Output: OUTDIR/inputs.txt (every case's floats as f32 bit patterns) and
 * OUTDIR/ggml-<type>.txt per type (a "q" line per 64 bytes of blocks, a "y"
 * line per 8 floats), each case introduced by "case NAME ROWS N_PER_ROW".
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct type_traits { /* ggml's struct ggml_type_traits */
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float_ref)(const float *x, void *y, int64_t k);
};

typedef const struct type_traits *(*traits_fn)(int type);
typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start,
                                    int64_t nrows, int64_t n_per_row, const float *imatrix);

/* ggml's type numbers, the bp_type name, block size and bytes expected. */
static const struct { int ggml; const char *name; int64_t blck; size_t bytes; } types[] = {
    {3, "q4_1", 32, 20},  {6, "q5_0", 32, 22},  {7, "q5_1", 32, 24},     {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110}, {13, "q5_K", 256, 176}, {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136},
};

#define N_PER_ROW 256
#define MAX_ROWS 2

struct input { const char *name; int rows; float x[MAX_ROWS * N_PER_ROW]; };

static uint64_t rng_state;
static double unit(void) /* (0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit())); }

/* The cases: ordinary data, the degenerate blocks where a quantizer takes
 * another branch (equal values, zero groups, all positive, scales that
 * underflow f16), and ranges that stress the scale quantization. */
static int make_inputs(struct input *in)
{
    int n = 0;
    struct input *c;
    rng_state = 0x9E3779B97F4A7C15ull;

    c = &in[n++]; c->name = "gauss"; c->rows = 2;
    for (int i = 0; i < 2 * N_PER_ROW; i++) c->x[i] = gauss();

    c = &in[n++]; c->name = "uniform"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = (float)(2 * unit() - 1);

    /* one row of a single value; one of two values, one per half */
    c = &in[n++]; c->name = "equal"; c->rows = 2;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = 0.7f;
    for (int i = 0; i < N_PER_ROW; i++) c->x[N_PER_ROW + i] = i < 128 ? -1.3f : 2.5e-3f;

    /* an all-zero row; then every third value zero, a zero block of 32 and a
     * zero group of 16 */
    c = &in[n++]; c->name = "zeros"; c->rows = 2;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = 0.0f;
    for (int i = 0; i < N_PER_ROW; i++) {
        float v = gauss();
        if (i % 3 == 0 || i < 32 || (i >= 64 && i < 80)) v = 0.0f;
        c->x[N_PER_ROW + i] = v;
    }

    c = &in[n++]; c->name = "outliers"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = unit() < 0.03 ? 30.0f * gauss() : gauss();
    c->x[77] = -100.0f;

    /* scales that are f16 subnormals, then ones that round to zero in f16 */
    c = &in[n++]; c->name = "tiny"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = gauss() * (i < 128 ? 1e-5f : 1e-8f);

    /* every value above zero: the min is clamped to 0 in the K-quant fits */
    c = &in[n++]; c->name = "positive"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = 0.5f + fabsf(gauss());

    /* group g of 16 at magnitude 2^(g - 10), every other group all negative */
    c = &in[n++]; c->name = "scales"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) {
        const int g = i / 16;
        const float v = ldexpf(gauss(), g - 10);
        c->x[i] = g % 2 ? -fabsf(v) : v;
    }

    c = &in[n++]; c->name = "large"; c->rows = 1;
    for (int i = 0; i < N_PER_ROW; i++) c->x[i] = 2000.0f * gauss();
    return n;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void write_floats(FILE *f, const char *tag, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%08x%s", i % 8 == 0 ? tag : "", bits(x[i]), i % 8 == 7 || i == n - 1 ? "\n" : " ");
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: quantref LIBGGML_BASE OUTDIR\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    traits_fn traits = (traits_fn)dlsym(lib, "ggml_get_type_traits");
    quantize_chunk_fn quantize = (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk");
    if (!traits || !quantize) {
        fprintf(stderr, "libggml-base lacks ggml_get_type_traits or ggml_quantize_chunk\n");
        return 1;
    }

    static struct input in[16];
    const int n_in = make_inputs(in);
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs.txt", argv[2]);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return 1; }
    fprintf(f, "# Inputs of tests/data/quant/ggml-*.txt (scripts/quant-reference.sh): f32 bit patterns.\n");
    for (int c = 0; c < n_in; c++) {
        fprintf(f, "case %s %d %d\n", in[c].name, in[c].rows, N_PER_ROW);
        write_floats(f, "x ", in[c].x, (int64_t)in[c].rows * N_PER_ROW);
    }
    fclose(f);

    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const struct type_traits *tr = traits(types[t].ggml);
        /* the struct's layout is checked through what it says of the type */
        if (!tr || !tr->type_name || strcmp(tr->type_name, types[t].name) != 0 ||
            tr->blck_size != types[t].blck || tr->type_size != types[t].bytes || !tr->to_float) {
            fprintf(stderr, "ggml type %d is not %s of %lld elements in %zu bytes here\n",
                    types[t].ggml, types[t].name, (long long)types[t].blck, types[t].bytes);
            return 1;
        }
        snprintf(path, sizeof path, "%s/ggml-%s.txt", argv[2], types[t].name);
        f = fopen(path, "w");
        if (!f) { perror(path); return 1; }
        fprintf(f, "# ggml %s of inputs.txt: q = ggml_quantize_chunk bytes (no imatrix), "
                   "y = its to_float of them (f32 bit patterns).\n", types[t].name);
        for (int c = 0; c < n_in; c++) {
            const int64_t n = (int64_t)in[c].rows * N_PER_ROW;
            const size_t bytes = (size_t)(n / types[t].blck) * types[t].bytes;
            unsigned char *q = malloc(bytes);
            float *y = malloc((size_t)n * sizeof *y);
            if (quantize(types[t].ggml, in[c].x, q, 0, in[c].rows, N_PER_ROW, NULL) != bytes) {
                fprintf(stderr, "ggml_quantize_chunk(%s) wrote an unexpected size\n", types[t].name);
                return 1;
            }
            tr->to_float(q, y, n);
            fprintf(f, "case %s %d %d\n", in[c].name, in[c].rows, N_PER_ROW);
            for (size_t i = 0; i < bytes; i++)
                fprintf(f, "%s%02x%s", i % 64 == 0 ? "q " : "", q[i], i % 64 == 63 || i == bytes - 1 ? "\n" : "");
            write_floats(f, "y ", y, n);
            free(q);
            free(y);
        }
        fclose(f);
    }
    return 0;
}
