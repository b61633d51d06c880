/* cmd_bench.c — `backplane bench MODE [options]`: option parsing and the
 * mode table. Figures are reported as ratios against references measured
 * in the same run (machines are noisy; absolute numbers are not
 * comparable across runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "cli.h"

static const struct bench_mode bench_modes[] = {
    { "mul_mat", "one MUL_MAT, weights of --type times an F32 activation", bench_mul_mat },
    { "block", "decode a token through -N decoder blocks: meta(2 x dev) vs dev", bench_block },
    { "sched", "builtin:tiny: scheduler overhead on the cpu, half the layers offloaded", bench_sched },
    { "allreduce", "under mpirun: a dist: device's all-reduce vs MPI_Allreduce", bench_allreduce },
    { "tokenize", "tokenizer MB/s of each --model (GGUF or builtin:NAME) vs a UTF-8 scan",
      bench_tokenize },
    { "batch", "aggregate decode tokens/s of --model at 1, 2, 4, 8 sequences (one batch)",
      bench_batch },
    { "moe_split", "one MoE layer of --model on 2 devices: experts cut by rows vs whole experts each",
      bench_moe_split },
};
#define N_MODES (sizeof bench_modes / sizeof bench_modes[0])

static void help(void)
{
    puts("usage: backplane bench MODE [--device NAME] [--model M] [--type T] [-K N] [-N N] [-M N]\n"
         "                            [--threads N] [--reps N] [--footprint-mb F]\n"
         "                            [--rounds R] [--scaling] [--vs-scalar] [--vs-noamx]\n"
         "                            [--json]\n\nmodes:");
    for (size_t i = 0; i < N_MODES; i++)
        printf("  %-9s %s\n", bench_modes[i].name, bench_modes[i].summary);
    puts("\nmul_mat computes dst[N, M] = W[K, N]^T X[K, M] on the device (default cpu,\n"
         "type q4_0, K=N=4096, M=1) and prints the median time, GFLOP/s, weight bytes\n"
         "per second and ratios against references timed in the same run: the\n"
         "machine's streaming read bandwidth over the same footprint (1 and N\n"
         "threads), OpenBLAS cblas_sgemm for f32 when libopenblas is installed, and\n"
         "with --vs-scalar the cpu plugin's scalar variant; --vs-noamx times the cpu\n"
         "without its AMX tile kernels in every round (AMX on / off).\n"
         "--footprint-mb cycles\n"
         "through enough distinct weight matrices to exceed the caches (default:\n"
         "512 for M=1, else one matrix).\n\n"
         "The machine's bandwidth moves while it is shared, so the measurement and\n"
         "its references alternate: --rounds R (default 5 for M=1, else 3) rounds of\n"
         "--reps calls followed by the bandwidth probe (median of 3 passes); each ratio is\n"
         "taken within a round and the median round is reported with the range.\n"
         "--scaling also times 1 thread in every round and reports N threads / 1,\n"
         "and N one-thread copies of the problem run at once: N threads / their\n"
         "summed speed is what the code makes of the N CPUs the machine gives it now.\n\n"
         "tokenize encodes --file F (default: 1 MB of mixed prose) with the tokenizer\n"
         "of each --model (repeatable; default builtin:tiny) and reports MB/s against\n"
         "a UTF-8 validation scan of the same bytes timed in the same rounds.\n\n"
         "batch runs the batching engine (the one under a server) on --model\n"
         "(GGUF or builtin:NAME, default builtin:1b in --type, also spelt\n"
         "--weight-type) on --device: 1, 2, 4\n"
         "and 8 sequences (powers of two up to -M) decode together after 34-token\n"
         "prompts; --reps steps (default 28) per count and round, --rounds R\n"
         "(default 3) with the counts alternating; prints aggregate tokens/s\n"
         "(median and range) and the speed-up over one sequence.\n"
         "scripts/batch-vs-llamacpp.py alternates it with llama.cpp's batched decode.\n\n"
         "moe_split takes layer 0 of a mixture-of-experts --model and times the two\n"
         "ways of putting its experts on two devices with --device's MUL_MAT_ID on\n"
         "one thread: every expert cut by rows (as meta's split table does) against\n"
         "each device holding half the experts whole and computing only the pairs\n"
         "routed to it (the file's router on embeddings); a step is the slower\n"
         "device plus the all-reduce. Decode: --reps steps of one token (default\n"
         "32); prefill: 4 steps of -M tokens (default 64); --rounds R (default 5)\n"
         "alternating the layouts.");
}

static bool parse_i64(const char *s, int64_t lo, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo)
        return false;
    *out = v;
    return true;
}

static bool parse_type(const char *s, enum bp_type *t)
{
    for (int i = 0; i < BP_TYPE_COUNT; i++)
        if (!strcasecmp(s, bp_type_name((enum bp_type)i))) {
            *t = (enum bp_type)i;
            return true;
        }
    return false;
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    const struct bench_mode *mode = NULL;
    for (size_t i = 0; i < N_MODES; i++)
        if (!strcmp(argv[1], bench_modes[i].name)) mode = &bench_modes[i];
    if (!mode)
        return cli_usage_error("bench", "unknown bench mode '%s'", argv[1]);

    struct bench_opts o = { .device = "cpu", .type = BP_TYPE_Q4_0, .K = 4096, .N = 4096, .M = 1,
                            .reps = 0, .footprint_mb = -1 };
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        if (!strcmp(a, "--json")) { o.json = true; continue; }
        if (!strcmp(a, "--vs-scalar")) { o.vs_scalar = true; continue; }
        if (!strcmp(a, "--vs-noamx")) { o.vs_noamx = true; continue; }
        if (!strcmp(a, "--scaling")) { o.scaling = true; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return CLI_EXIT_OK; }
        if (!v)
            return cli_usage_error("bench", "option %s needs a value", a);
        i++;
        if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "--model") && o.n_models < 8) o.models[o.n_models++] = v;
        else if (!strcmp(a, "--file")) o.text_file = v;
        else if (!strcmp(a, "--type") || !strcmp(a, "--weight-type")) { /* the latter as `run` says it */
            if (!parse_type(v, &o.type))
                return cli_usage_error("bench", "--type %s is not a type name (f32, f16, bf16, "
                                       "q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, "
                                       "q6_K, iq4_nl, iq4_xs)", v);
        } else if (!strcasecmp(a, "-K") && parse_i64(v, 1, &n)) o.K = n;
        else if (!strcasecmp(a, "-N") && parse_i64(v, 1, &n)) o.N = n;
        else if (!strcasecmp(a, "-M") && parse_i64(v, 1, &n)) o.M = n;
        else if (!strcmp(a, "--threads") && parse_i64(v, 1, &n) && n <= 4096) o.threads = (int)n;
        else if (!strcmp(a, "--reps") && parse_i64(v, 1, &n) && n <= 100000) o.reps = (int)n;
        else if (!strcmp(a, "--rounds") && parse_i64(v, 1, &n) && n <= BENCH_MAX_ROUNDS)
            o.rounds = (int)n;
        else if (!strcmp(a, "--footprint-mb") && parse_i64(v, 0, &n)) o.footprint_mb = n;
        else
            return cli_usage_error("bench", "option %s %s is unknown or out of range", a, v);
    }
    if (mode->run != bench_tokenize && !cli_load())   /* the tokenizer needs no device */
        return CLI_EXIT_FAIL;
    return mode->run(&o);
}
