/*
 * cmd_quantize.c — `backplane quantize IN OUT PRESET`: a GGUF model
 * converted to one of llama.cpp's quantization presets, tensor types and
 * bytes as llama.cpp's llama_model_quantize makes them
 * (host/run/quantize_model.c, host/run/quant_presets.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "quantize_model.h"

static void help(void)
{
    puts("usage: backplane quantize IN.gguf OUT.gguf PRESET [--threads N] [--json]\n\n"
         "Converts a GGUF model with F32, F16 or BF16 weights to one of llama.cpp's\n"
         "quantization presets. Every tensor gets the type llama.cpp's llama-quantize\n"
         "gives it without an importance matrix (output and embedding, attn_v and\n"
         "ffn_down by layer, fallbacks for rows the blocks do not divide), and the\n"
         "file is written as llama.cpp writes it: the same tensor order, the input's\n"
         "metadata with general.file_type and general.quantization_version set, and\n"
         "ggml's encodings, so both tools make the same bytes from the same input.\n"
         "Norms, biases and other 1-D tensors keep their type.\n\n"
         "  --threads N   convert each tensor on N threads (default: every CPU); the\n"
         "                output does not depend on N\n"
         "  --json        print a summary (types chosen per tensor, sizes, time) as JSON\n\n"
         "On a terminal a progress line shows the tensor being converted.\n\n"
         "PRESET (case-insensitive; Q3_K, Q4_K and Q5_K mean the _M presets):");
    for (size_t i = 0; i < bp_quant_preset_count; i++)
        printf("  %-7s %s\n", bp_quant_presets[i].name, bp_quant_presets[i].about);
    puts("\nEvery quantized preset but Q8_0 stores output.weight (or a tied token_embd)\n"
         "as Q6_K (Q8_0 when its rows are not a multiple of 256). IQ4_NL and IQ4_XS\n"
         "give attn_v Q5_K when there are 4 or more query heads per kv head. Rows the\n"
         "chosen type's blocks do not divide fall back as llama.cpp's do (Q4_K to Q5_0,\n"
         "Q5_K to Q5_1, Q6_K to Q8_0, Q2_K and Q3_K to Q4_0, IQ4_XS to IQ4_NL; the\n"
         "32-value types, and rows 32 does not divide, to F16).");
}

struct progress {
    size_t n;
    bool tty;
};

static void show_progress(void *user, size_t i, const struct bp_quant_item *it)
{
    const struct progress *p = user;
    if (!p->tty) return;
    printf("\r\033[K[%4zu/%4zu] %-40s %s", i + 1, p->n, it->in->name, bp_type_name(it->type));
    fflush(stdout);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_json(const struct bp_quant_job *job, const char *in, const char *out, int threads,
                       double seconds)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_string(&w, "input", in);
    json_string(&w, "output", out);
    json_string(&w, "preset", job->preset->name);
    json_uint(&w, "file_type", job->preset->ftype);
    json_int(&w, "threads", threads);
    json_uint(&w, "bytes_in", job->in->size);
    json_uint(&w, "bytes_out", job->out_size);
    json_double(&w, "seconds", seconds);
    json_object_begin(&w, "types");
    for (int t = 0; t < BP_TYPE_COUNT; t++) {
        uint64_t k = 0;
        for (size_t i = 0; i < job->n; i++) k += job->items[i].type == (enum bp_type)t;
        if (k) json_uint(&w, bp_type_name((enum bp_type)t), k);
    }
    json_object_end(&w);
    json_array_begin(&w, "tensors");
    for (size_t i = 0; i < job->n; i++) {
        const struct bp_quant_item *it = &job->items[i];
        json_object_begin(&w, NULL);
        json_string(&w, "name", it->in->name);
        json_array_begin(&w, "shape");
        for (int d = 0; d < it->n_dims; d++) json_int(&w, NULL, it->in->ne[d]);
        json_array_end(&w);
        json_string(&w, "from", bp_type_name(it->from));
        json_string(&w, "type", bp_type_name(it->type));
        json_object_end(&w);
    }
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0};
    int n_pos = 0, threads = 0;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--threads")) {
            char *end;
            errno = 0;
            const long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || end == argv[i + 1] || errno || v < 1 || v > 1024)
                return cli_usage_error("quantize", "--threads needs a count from 1 to 1024.");
            threads = (int)v;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("quantize", "unknown option '%s'.", a);
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            return cli_usage_error("quantize", "unexpected argument '%s' (give IN.gguf OUT.gguf PRESET).", a);
        }
    }
    if (n_pos != 3)
        return cli_usage_error("quantize", "give the input file, the output file and a preset.");
    const struct bp_quant_preset *preset = bp_quant_preset_by_name(pos[2]);
    if (!preset)
        return cli_usage_error("quantize", "unknown preset '%s'; the presets are listed by "
                               "'backplane quantize --help' (Q4_K_M, Q8_0, ...).", pos[2]);
    if (!threads) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
    }

    char err[1024];
    struct bp_gguf *in = NULL;
    struct bp_quant_job *job = NULL;
    int rc = CLI_EXIT_FAIL;
    if (bp_gguf_open(pos[0], &in, err, sizeof err) != BP_OK ||
        bp_quant_plan(in, preset, &job, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    struct progress pr = { .n = job->n, .tty = isatty(fileno(stdout)) && !json };
    const double t0 = now();
    const bp_status s = bp_quant_write(job, pos[1], threads, show_progress, &pr, err, sizeof err);
    if (pr.tty) fputs("\r\033[K", stdout);
    if (s != BP_OK) {
        fflush(stdout);
        cli_error("%s", err);
        goto out;
    }
    const double secs = now() - t0;
    if (json) {
        print_json(job, pos[0], pos[1], threads, secs);
    } else if (pr.tty) {
        char a[32], b[32];
        printf("%s: %s, %zu tensors, %s -> %s in %.1f s\n", pos[1], preset->name, job->n,
               bp_format_bytes(in->size, a, sizeof a), bp_format_bytes((size_t)job->out_size, b, sizeof b),
               secs);
    }
    rc = CLI_EXIT_OK;
out:
    bp_quant_job_free(job);
    bp_gguf_close(in);
    return rc;
}
