/*
 * cmd_run.c — `backplane run`: load a model (GGUF or built-in), run a
 * prompt and decoding (greedy or sampled, run_text.c) on a device, report
 * speed, and optionally check every logit against a second device.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "chat_template.h"
#include "cli.h"
#include "json.h"
#include "decoder.h"
#include "dist.h"
#include "llama_schema.h"
#include "model.h"
#include "run_chat.h"
#include "run_text.h"
#include "profile.h"
#include "split.h"
#include "tokenizer_builtin.h"

#define ERR_CAP 1024

static void help(void)
{
    puts("usage: backplane run [--model PATH|builtin:NAME] [--device NAME]\n"
         "                     [--prompt TEXT | --prompt-file F | --prompt-tokens 1,2,3 |\n"
         "                      --prompt-len N] [--n-gen N] [--temp T] [--top-k N] [--top-p P]\n"
         "                     [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed N]\n"
         "                     [--ignore-eos] [--chat [--system TEXT] [--template NAME-OR-TEXT]]\n"
         "                     [--threads N] [--compare DEVICE] [--json]\n"
         "                     [--dump-logits FILE] [--weight-type T] [--weight-seed N]\n"
         "                     [--fused-qkv] [--n-ctx N] [--save FILE.gguf] [--bandwidth]\n"
         "                     [--offload-layers N] [--cpu-moe | --n-cpu-moe N] [--strict]\n"
         "                     [--profile] [--prefill-runs N]\n\n"
         "Runs a decoder-only model (architectures llama, Mixtral-style llama with experts,\n"
         "qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3, mistral3): the prompt in\n"
         "one graph (prefill), then\n"
         "decoding token by token with a KV cache (greedy unless --temp), and prints the\n"
         "generated text or token ids with prefill and decode tokens per second. It\n"
         "stops at the model's end-of-generation token when it has a tokenizer.\n\n"
         "  --model PATH         a GGUF file of one of those architectures (f32, f16,\n"
         "                       bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K,\n"
         "                       q5_K, q6_K, iq4_nl, iq4_xs weights; mapped, not\n"
         "                       copied); a tensor or key it cannot compute is refused\n"
         "                       by name (`backplane info --model PATH` shows the file)\n"
         "  --model builtin:NAME built-in model with pseudo-random weights: 'test'\n"
         "                       (1.4 M parameters), 'tiny' (~100 M; the default),\n"
         "                       '1b' (TinyLlama-1.1B's shape), 'qwen2-1b' and\n"
         "                       'gemma3-1b' (Qwen2.5-1.5B's and Gemma-3-1B's shapes)\n"
         "  --weight-type T      storage type of a built-in model's weights: f32, f16 (the\n"
         "                       default), bf16, any quantized type above, or q4_K_M:\n"
         "                       llama.cpp's mix (q4_K, with q6_K in output and in\n"
         "                       attn_v and ffn_down of some layers)\n"
         "  --weight-seed N      seed of a built-in model's weights (default 1)\n"
         "  --fused-qkv          store a built-in model's Q, K, V as one attn_qkv tensor\n"
         "  --device NAME        cpu, vulkan0, meta:cpu*2, ... (default: BACKPLANE_DEVICES,\n"
         "                       else the first GPU, else the CPU); ops it lacks run on\n"
         "                       the cpu (the placement line says which); dist:DEV under\n"
         "                       mpirun -np N splits the model over the N ranks, each on\n"
         "                       its DEV (cuda0 counts up by node-local rank)\n"
         "  --offload-layers N   only the first N layers' weights and KV cache on the\n"
         "                       device, the rest on the cpu (default: all)\n"
         "  --cpu-moe            a mixture of experts' expert weights (ffn_*_exps) stay on\n"
         "                       the cpu and their products run there; the rest of each\n"
         "                       layer runs on --device (for a GPU too small for the\n"
         "                       experts; --plan shows where they go)\n"
         "  --n-cpu-moe N        the same for the experts of the first N layers only\n"
         "  --strict             fail instead of running any op on the cpu fallback\n"
         "  --prompt-tokens LIST comma-separated token ids\n"
         "  --prompt-len N       N pseudo-random prompt tokens (default 8)\n"
         "  --n-gen N            tokens to generate at most (default 16)\n"
         "  --n-ctx N            KV cache positions (default: prompt + n-gen)\n"
         "  --threads N          threads of a CPU device\n"
         "  --compare DEVICE     run the same tokens on DEVICE too and report the largest\n"
         "                       absolute logit difference and argmax agreement\n"
         "  --dump-logits FILE   raw little-endian f32, n_vocab per evaluated position\n"
         "                       (prompt positions, then one row per decode step)\n"
         "  --save FILE          write the model as a GGUF file (v3) and continue\n"
         "  --bandwidth          measure the read bandwidth before and after decoding and\n"
         "                       between windows of 16 steps, and report the decode's\n"
         "                       weight streaming as a fraction of it: each window's\n"
         "                       median step against the probes at its edges (--json on\n"
         "                       a CPU probes before and after only)\n"
         "  --prefill-runs N     prefill the prompt N times (the cache emptied between)\n"
         "                       and report the first (cold) and the median of the\n"
         "                       others (warm); the prefill is planned at load time\n"
         "  --profile            time per op type of the prefill graph and of the decode\n"
         "                       steps (CPU devices; also BACKPLANE_PROFILE=1), printed\n"
         "                       after the report (on stderr with --json)\n"
         "  --json               machine-readable report on stdout\n"
         "  --plan               print the memory plan (weights in the device's layout,\n"
         "                       KV cache at --n-ctx, step buffers; per sub-device of a\n"
         "                       meta device, per rank of a dist: job) and stop; a plain\n"
         "                       run refuses before allocating when the plan does not fit\n"
         "  --chat               a conversation on the terminal: each line of stdin is a\n"
         "                       user turn (--prompt is the first), the whole conversation\n"
         "                       formatted with the model's chat template as llama.cpp's\n"
         "                       llama_chat_apply_template does; only what is new since the\n"
         "                       last reply is evaluated. A reply ends at end of generation\n"
         "                       (or after --n-gen tokens when given); end of file ends the\n"
         "                       chat. --n-ctx defaults to the model's context, at most 4096\n"
         "  --system TEXT        with --chat: a system message first\n"
         "  --template NAME-OR-TEXT  with --chat: a built-in chat format (chatml, llama3,\n"
         "                       ...: 'backplane chat-template --list') or a template's text\n"
         "                       instead of the model's\n");
    fputs(run_text_help, stdout);
}

struct opts {
    const char *model, *device, *compare, *dump, *save, *prompt_list;
    const char *system, *tmpl;  /* --chat's --system and --template */
    int64_t prompt_len, n_gen, n_ctx, prefill_runs;
    int threads;
    int64_t offload_layers;
    int64_t cpu_moe_layers;     /* --cpu-moe: -1; --n-cpu-moe N: N */
    bool json, fused, bandwidth, strict, profile, plan;
    bool chat, n_gen_given;
    enum bp_type wtype;
    const struct bp_llama_mix *mix;   /* --weight-type named a llama.cpp mix */
    uint64_t seed;
    struct bp_run_dist *dist;   /* dist: devices only */
    bool root;                  /* prints and writes files: not a dist: rank above 0 */
    struct run_text_opts text;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ progress */

struct progress {
    double t0, last;
    bool tty, shown, mute;
};

static void progress_line(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress_line(struct progress *p, const char *fmt, ...)
{
    double t = now();
    if (p->mute) return;
    /* Only on a terminal, once the work has taken a second, one line
     * redrawn in place at most 20 times a second. */
    if (!p->tty || t - p->t0 < 1.0 || t - p->last < 0.05) return;
    p->last = t;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    p->shown = true;
}

static void progress_done(struct progress *p)
{
    if (p->tty && p->shown) fputs("\r\033[K", stderr);
    p->shown = false;
}

static void upload_progress(void *user, size_t done, size_t total)
{
    char a[32], b[32];
    progress_line(user, "uploading weights: %s of %s", bp_format_bytes(done, a, sizeof a),
                  bp_format_bytes(total, b, sizeof b));
}

static void generate_progress(void *user, size_t done, size_t total)
{
    progress_line(user, "generating weights: %.0f%%", 100.0 * (double)done / (double)total);
}

/* ------------------------------------------------------------- parsing */

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* A llama.cpp mix by name, else one type for every matrix. */
static bool parse_type(const char *s, enum bp_type *out, const struct bp_llama_mix **mix)
{
    *mix = bp_llama_mix_by_name(s);
    if (*mix) {
        *out = (*mix)->base;
        return true;
    }
    for (int t = 0; t < BP_TYPE_COUNT; t++)
        if (!strcasecmp(s, bp_type_name((enum bp_type)t)) && t != BP_TYPE_I32 && t != BP_TYPE_Q8_K) {
            *out = (enum bp_type)t;
            return true;
        }
    return false;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .prompt_len = 8, .n_gen = 16, .wtype = BP_TYPE_F16, .seed = 1, .root = true,
                        .prefill_runs = 1 };
    run_text_defaults(&o->text);
    const char *prof = getenv("BACKPLANE_PROFILE");
    o->profile = prof && *prof && strcmp(prof, "0") != 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        int used;
#define NEEDV() do { if (!v) return cli_usage_error("run", "%s needs a value.", a); i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return -1; }
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--fused-qkv")) o->fused = true;
        else if (!strcmp(a, "--bandwidth")) o->bandwidth = true;
        else if (!strcmp(a, "--plan")) o->plan = true;
        else if (!strcmp(a, "--strict")) o->strict = true;
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--system")) { NEEDV(); o->system = v; }
        else if (!strcmp(a, "--template")) { NEEDV(); o->tmpl = v; }
        else if (!strcmp(a, "--offload-layers")) {
            NEEDV();
            if (!parse_i64(v, 1, 1 << 20, &o->offload_layers))
                return cli_usage_error("run", "--offload-layers wants a number of layers >= 1, not '%s' "
                                       "(for none, run on --device cpu).", v);
        }
        else if (!strcmp(a, "--cpu-moe")) o->cpu_moe_layers = -1;
        else if (!strcmp(a, "--n-cpu-moe")) {
            NEEDV();
            if (!parse_i64(v, 0, 1 << 20, &o->cpu_moe_layers))
                return cli_usage_error("run", "--n-cpu-moe wants a number of layers >= 0, not '%s' "
                                       "(--cpu-moe: all of them).", v);
        }
        else if (!strcmp(a, "--profile")) o->profile = true;
        else if (!strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "--device")) { NEEDV(); o->device = v; }
        else if (!strcmp(a, "--compare")) { NEEDV(); o->compare = v; }
        else if (!strcmp(a, "--dump-logits")) { NEEDV(); o->dump = v; }
        else if (!strcmp(a, "--save")) { NEEDV(); o->save = v; }
        else if (!strcmp(a, "--prompt-tokens")) { NEEDV(); o->prompt_list = v; }
        else if (!strcmp(a, "--prompt-len")) {
            NEEDV();
            if (!parse_i64(v, 1, 1 << 20, &o->prompt_len))
                return cli_usage_error("run", "--prompt-len wants a positive number, not '%s'.", v);
        } else if (!strcmp(a, "--n-gen")) {
            NEEDV();
            if (!parse_i64(v, 0, 1 << 20, &o->n_gen))
                return cli_usage_error("run", "--n-gen wants a number >= 0, not '%s'.", v);
            o->n_gen_given = true;
        } else if (!strcmp(a, "--prefill-runs")) {
            NEEDV();
            if (!parse_i64(v, 1, 1000, &o->prefill_runs))
                return cli_usage_error("run", "--prefill-runs wants a number from 1 to 1000, not '%s'.", v);
        } else if (!strcmp(a, "--n-ctx")) {
            NEEDV();
            if (!parse_i64(v, 1, 1 << 24, &o->n_ctx))
                return cli_usage_error("run", "--n-ctx wants a positive number, not '%s'.", v);
        } else if (!strcmp(a, "--threads")) {
            NEEDV();
            if (!parse_i64(v, 1, 1024, &n))
                return cli_usage_error("run", "--threads wants a number from 1 to 1024, not '%s'.", v);
            o->threads = (int)n;
        } else if (!strcmp(a, "--weight-seed")) {
            NEEDV();
            if (!parse_i64(v, 0, INT64_MAX, &n))
                return cli_usage_error("run", "--weight-seed wants a number >= 0, not '%s'.", v);
            o->seed = (uint64_t)n;
        } else if (!strcmp(a, "--weight-type")) {
            NEEDV();
            if (!parse_type(v, &o->wtype, &o->mix))
                return cli_usage_error("run", "--weight-type wants f32, f16, bf16, a quantized "
                                       "type (q4_0 ... iq4_xs) or q4_K_M, not '%s'.", v);
        } else if ((used = run_text_option(&o->text, a, v)) != 0) {
            if (used < 0) return CLI_EXIT_USAGE;
            i += used - 1;
        } else
            return cli_usage_error("run", "unknown option '%s'.", a);
#undef NEEDV
    }
    if (!!o->prompt_list + !!o->text.prompt + !!o->text.prompt_file > 1)
        return cli_usage_error("run", "give one of --prompt, --prompt-file and --prompt-tokens.");
    if (!o->chat && (o->system || o->tmpl))
        return cli_usage_error("run", "%s goes with --chat.", o->system ? "--system" : "--template");
    if (o->chat) {
        /* what a conversation on one process has no use for */
        const struct { bool set; const char *name; } off[] = {
            { o->prompt_list != NULL, "--prompt-tokens" }, { o->text.prompt_file != NULL, "--prompt-file" },
            { o->compare != NULL, "--compare" }, { o->dump != NULL, "--dump-logits" },
            { o->json, "--json" }, { o->plan, "--plan" }, { o->bandwidth, "--bandwidth" },
            { o->prefill_runs > 1, "--prefill-runs" }, { o->profile, "--profile" },
            { o->n_gen_given && o->n_gen == 0, "--n-gen 0" },
            { bp_run_dist_wanted(o->device), "a dist: device" },
        };
        for (size_t k = 0; k < sizeof off / sizeof off[0]; k++)
            if (off[k].set) return cli_usage_error("run", "--chat does not take %s.", off[k].name);
    }
    return 0;
}

/* Prompt token ids: the list given, or prompt_len pseudo-random ids. */
static int32_t *make_prompt(const struct opts *o, int64_t n_vocab, int64_t *n_out)
{
    if (!o->prompt_list) {
        int32_t *p = malloc((size_t)o->prompt_len * sizeof *p);
        if (!p) return NULL;
        uint64_t x = 88172645463325252ull;
        for (int64_t i = 0; i < o->prompt_len; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            p[i] = (int32_t)(x % (uint64_t)n_vocab);
        }
        *n_out = o->prompt_len;
        return p;
    }
    int64_t cap = 1;
    for (const char *c = o->prompt_list; *c; c++) cap += *c == ',';
    int32_t *p = malloc((size_t)cap * sizeof *p);
    if (!p) return NULL;
    int64_t n = 0;
    const char *c = o->prompt_list;
    while (*c) {
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno || v < 0 || v >= n_vocab || (*end && *end != ',')) {
            cli_error("--prompt-tokens has '%.*s', which is not a token id in [0, %" PRId64 ").",
                      (int)strcspn(c, ","), c, n_vocab);
            free(p);
            return NULL;
        }
        p[n++] = (int32_t)v;
        c = *end ? end + 1 : end;
    }
    if (n == 0) {
        cli_error("--prompt-tokens is empty; give at least one token id.");
        free(p);
        return NULL;
    }
    *n_out = n;
    return p;
}

/* ---------------------------------------------------------------- run */

struct cmp {
    double max_diff;
    bool argmax_agree;
    int64_t first_disagree;   /* evaluated position, -1 when none */
};

static void compare_rows(struct cmp *c, const float *a, const float *b, int64_t rows, int64_t n_vocab,
                         int64_t first_pos)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = a + r * n_vocab, *y = b + r * n_vocab;
        for (int64_t i = 0; i < n_vocab; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (d > c->max_diff || isnan(d)) c->max_diff = isnan(d) ? INFINITY : d;
        }
        if (bp_run_argmax(x, n_vocab) != bp_run_argmax(y, n_vocab) && c->argmax_agree) {
            c->argmax_agree = false;
            c->first_disagree = first_pos + r;
        }
    }
}

/* With --bandwidth the decode is cut into windows of BW_WINDOW steps with a
 * probe pass between them, and each window's streaming is held against the
 * probe passes on either side: on a shared VM the read bandwidth drifts by
 * 10-30 % within a minute, which one probe before and one after the whole
 * decode cannot follow. */
#define BW_WINDOW 16
#define BW_MAX_EDGES 64

struct result {
    int32_t *gen;
    int64_t n_gen, n_prompt;
    double t_prefill, t_decode, bandwidth;
    double t_prefill_warm;    /* median of the prefills after the first (--prefill-runs) */
    double *step_sec;    /* each decode step's seconds, in step order */
    double t_step_median;
    size_t output_copy_bytes;  /* a tied output's copy in the device's weight layout */
    const char *text;          /* the generated text, when the model has a tokenizer */
    bool have_cmp;
    struct cmp cmp;
    bool have_place;
    struct bp_sched_summary place;   /* the decode graph's placement */
    uint64_t copies;                 /* the scheduler's copies over the whole run */
    uint64_t rank_weight_bytes[BP_META_MAX_DEVICES];  /* dist: devices */
    uint64_t dist_reductions, dist_bytes;             /* over the decode steps */
    bool profiled;
    struct bp_run_profile prof_prefill, prof_decode;
    /* The read-bandwidth reference (--bandwidth; --json on a cpu device):
     * probe passes at the window edges, bw[k] after decode step edge[k]. */
    struct bench_probe *probe;
    int probe_threads, window;   /* window: decode steps between probes (0: one window) */
    double bw[BW_MAX_EDGES];
    int64_t edge[BW_MAX_EDGES];
    int n_edges;
    double frac, frac_lo, frac_hi; /* streaming / read bandwidth: median window, range */
    int n_windows;
};

static bool dump_rows(FILE *f, const float *rows, int64_t n, int64_t n_vocab)
{
    /* The dump is little-endian by definition; the hosts we build for are. */
    return !f || fwrite(rows, sizeof(float), (size_t)(n * n_vocab), f) == (size_t)(n * n_vocab);
}

/* Whether this step went well on every rank (alone: on this one). In a
 * dist: job a failure on any rank stops all, and rank 0 says which rank
 * failed and why: one sentence for the job. */
static bool dist_gate(const struct opts *o, bool ok, char *err)
{
    if (!o->dist) {
        if (!ok) cli_error("%s", err);
        return ok;
    }
    if (bp_run_dist_agree(o->dist, ok, err, ERR_CAP)) return true;
    if (o->root) cli_error("%s", err);
    return false;
}

/* An eval of the session under test; on a dist: device, step `step` of the
 * job, and the logits (this rank's slices, zeros elsewhere) summed whole. */
static bp_status eval_main(const struct opts *o, struct bp_run_session *s, int64_t step,
                           const int32_t *tokens, int64_t n, bool all, float *lg, int64_t V,
                           char *err, size_t cap)
{
    bp_run_dist_step(o->dist, step);
    bp_status st = bp_run_session_eval(s, tokens, n, all, lg, err, cap);
    if (st == BP_OK && o->dist && (st = bp_run_dist_gather(o->dist, lg, (size_t)((all ? n : 1) * V))) != BP_OK)
        snprintf(err, cap, "gathering the logits across ranks failed.");
    return st;
}

/* Each window's weight streaming (its median step) against the mean of the
 * probe passes at its two edges; their median and range, and the median
 * probe, go to res. */
static void bw_windows(const struct bp_run_model *m, struct result *res)
{
    const int64_t steps = res->n_gen - 1;
    double frac[BW_MAX_EDGES];
    int n = 0;
    for (int k = 0; k + 1 < res->n_edges; k++) {
        /* steps edge[k]+1 .. edge[k+1], at step_sec[edge[k]] .. [edge[k+1]-1] */
        const int64_t a = res->edge[k], b = res->edge[k + 1] < steps ? res->edge[k + 1] : steps;
        const double step = b > a ? bench_median_of(res->step_sec + a, (int)(b - a)) : 0.0;
        if (step > 0 && res->bw[k] > 0 && res->bw[k + 1] > 0)
            frac[n++] = (double)bp_run_model_decode_bytes(m) / step / (0.5 * (res->bw[k] + res->bw[k + 1]));
    }
    if (n == 0) return;
    res->frac = bench_median(frac, n); /* sorts frac */
    res->frac_lo = frac[0], res->frac_hi = frac[n - 1];
    res->n_windows = n;
    double bw[BW_MAX_EDGES];
    int nb = 0;
    for (int k = 0; k < res->n_edges; k++)
        if (res->bw[k] > 0) bw[nb++] = res->bw[k];
    res->bandwidth = bench_median_of(bw, nb);
}

static int run_tokens(const struct opts *o, const struct bp_run_model *m, struct bp_run_session *s,
                      struct bp_run_session *cs, const int32_t *prompt, int64_t n_prompt,
                      struct progress *pr, struct run_gen *g, struct result *res)
{
    char err[ERR_CAP] = "";
    const int64_t V = m->hp.n_vocab;
    const bool all = o->dump || cs;
    FILE *dump = NULL;
    float *lg = malloc((size_t)(n_prompt * V) * sizeof *lg);
    float *lg2 = cs ? malloc((size_t)(n_prompt * V) * sizeof *lg2) : NULL;
    res->gen = calloc((size_t)(o->n_gen ? o->n_gen : 1), sizeof *res->gen);
    res->step_sec = calloc((size_t)(o->n_gen ? o->n_gen : 1), sizeof *res->step_sec);
    res->n_prompt = n_prompt;
    res->cmp = (struct cmp){ .argmax_agree = true, .first_disagree = -1 };
    res->have_cmp = cs != NULL;
    int rc = CLI_EXIT_FAIL;
    if (!lg || (cs && !lg2) || !res->gen || !res->step_sec) { cli_error("out of memory for the logits."); goto out; }
    if (o->dump && o->root && !(dump = fopen(o->dump, "wb")))
        snprintf(err, sizeof err, "cannot write '%s': %s.", o->dump, strerror(errno));
    if (!dist_gate(o, !o->dump || !o->root || dump, err)) goto out;
    progress_line(pr, "prefill: %" PRId64 " tokens", n_prompt);
    if (o->profile) {
        res->profiled = bp_run_profile_attach(s, &res->prof_prefill) == BP_OK;
        if (!res->profiled)
            fprintf(stderr, "backplane: %s offers no per-op profile (the cpu device does); "
                    "running without one.\n", bp_device_name(bp_run_session_device(s)));
    }
    double t0 = now();
    if (eval_main(o, s, 0, prompt, n_prompt, all, lg, V, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    res->t_prefill = now() - t0;
    if (o->prefill_runs > 1) {
        double warm[1000];
        for (int64_t r = 1; r < o->prefill_runs; r++) {
            bp_run_session_reset(s);
            t0 = now();
            if (bp_run_session_eval(s, prompt, n_prompt, all, lg, err, sizeof err) != BP_OK) {
                cli_error("%s", err);
                goto out;
            }
            warm[r - 1] = now() - t0;
        }
        res->t_prefill_warm = bench_median(warm, (int)(o->prefill_runs - 1));
    }
    const int64_t rows = all ? n_prompt : 1;
    const float *last = lg + (rows - 1) * V;
    if (cs) {
        if (bp_run_session_eval(cs, prompt, n_prompt, true, lg2, err, sizeof err) != BP_OK) {
            cli_error("on the compare device: %s", err);
            goto out;
        }
        compare_rows(&res->cmp, lg, lg2, n_prompt, V, 0);
    }
    if (!dump_rows(dump, lg, rows, V)) { cli_error("writing '%s' failed.", o->dump); goto out; }
    if (o->n_gen > 0) res->gen[0] = run_gen_next(g, last);
    res->n_gen = o->n_gen > 0 ? 1 : 0;
    bool stop = res->n_gen == 0 || run_gen_emit(g, res->gen[0]);
    if (res->profiled) bp_run_profile_attach(s, &res->prof_decode);
    t0 = now();
    uint64_t red0 = 0, bytes0 = 0, red1, bytes1;
    if (o->dist) bp_run_dist_counters(o->dist, &red0, &bytes0);
    for (int64_t i = 1; i < o->n_gen && !stop; i++) {
        progress_line(pr, "decode: %" PRId64 " of %" PRId64 " tokens", i + 1, o->n_gen);
        double ts = now();
        if (eval_main(o, s, i, &res->gen[i - 1], 1, true, lg, V, err, sizeof err) != BP_OK) {
            cli_error("%s", err);
            goto out;
        }
        double te = now();
        res->t_decode += te - ts;
        res->step_sec[i - 1] = te - ts;
        if (cs) {
            if (bp_run_session_eval(cs, &res->gen[i - 1], 1, true, lg2, err, sizeof err) != BP_OK) {
                cli_error("on the compare device: %s", err);
                goto out;
            }
            compare_rows(&res->cmp, lg, lg2, 1, V, n_prompt + i - 1);
        }
        if (!dump_rows(dump, lg, 1, V)) { cli_error("writing '%s' failed.", o->dump); goto out; }
        res->gen[i] = run_gen_next(g, lg);
        res->n_gen = i + 1;
        stop = run_gen_emit(g, res->gen[i]);
        if (res->probe && res->window > 0 && i % res->window == 0 && i + 1 < o->n_gen && !stop &&
            res->n_edges + 1 < BW_MAX_EDGES) {
            /* one pass of each read loop: short, between two steps */
            res->edge[res->n_edges] = i;
            res->bw[res->n_edges++] = bench_probe_run(res->probe, res->probe_threads, 1);
        }
    }
    (void)t0;
    if (o->dist) {
        bp_run_dist_counters(o->dist, &red1, &bytes1);
        res->dist_reductions = red1 - red0, res->dist_bytes = bytes1 - bytes0;
    }
    /* The median step, not the mean: one step that the OS preempted on a
     * shared machine should not decide the streaming figure. */
    if (res->n_gen > 1) res->t_step_median = bench_median_of(res->step_sec, (int)(res->n_gen - 1));
    progress_done(pr);
    rc = CLI_EXIT_OK;
out:
    progress_done(pr);
    if (res->profiled) bp_run_profile_attach(s, NULL);
    if (dump && fclose(dump) != 0 && rc == CLI_EXIT_OK) {
        cli_error("writing '%s' failed.", o->dump);
        rc = CLI_EXIT_FAIL;
    }
    free(lg);
    free(lg2);
    return rc;
}

/* The matrices' types: "q4_K" for one, "135 q4_K + 21 q6_K (llama.cpp's
 * q4_K_M mix)" for a built-in mix. */
static const char *matrix_types(const struct bp_run_model *m, char *buf, size_t cap)
{
    enum bp_type t[BP_TYPE_COUNT];
    size_t c[BP_TYPE_COUNT], n = bp_run_model_matrix_types(m, t, c, BP_TYPE_COUNT), at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && at < cap; i++)
        at += (size_t)(n == 1 ? snprintf(buf, cap, "%s", bp_type_name(t[i]))
                              : snprintf(buf + at, cap - at, "%s%zu %s", i ? " + " : "", c[i],
                                         bp_type_name(t[i])));
    if (m->mix && at < cap) snprintf(buf + at, cap - at, " (llama.cpp's %s mix)", m->mix->name);
    return buf;
}

static void print_text(const struct opts *o, const struct bp_run_model *m, struct bp_device *dev,
                       struct bp_device *cdev, const int32_t *prompt, const struct result *r)
{
    const struct bp_run_hparams *hp = &m->hp;
    char wb[32], db[32], types[128];
    printf("model:   %s, %" PRId64 " parameters, %s of weights%s\n", m->name,
           bp_run_model_param_count(m), bp_format_bytes(bp_run_model_weight_bytes(m), wb, sizeof wb),
           m->tied_output ? ", output tied to the embedding" : "");
    printf("         %" PRId64 " layers, embedding %" PRId64 ", ffn %" PRId64 ", %" PRId64
           " heads (%" PRId64 " kv) of %" PRId64 ", vocabulary %" PRId64 ", weights %s\n",
           hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_vocab,
           matrix_types(m, types, sizeof types));
    if (r->output_copy_bytes)
        printf("         the logits read a copy of the embedding in the device's weight layout "
               "(%s more)\n", bp_format_bytes(r->output_copy_bytes, wb, sizeof wb));
    printf("device:  %s (%s)\n", o->dist ? o->device : bp_device_name(dev), bp_device_description(dev));
    if (o->dist) {
        const int32_t n = bp_run_dist_info(o->dist)->nranks;
        printf("ranks:   %d, reducing through %s; weights per rank:", (int)n,
               bp_run_dist_comm_path(o->dist) ? bp_run_dist_comm_path(o->dist) : "nothing");
        for (int32_t i = 0; i < n; i++) printf(" %s", bp_format_bytes(r->rank_weight_bytes[i], wb, sizeof wb));
        if (r->n_gen > 1)
            printf("\n         %.1f reductions of %s in all per decoded token",
                   (double)r->dist_reductions / (double)(r->n_gen - 1),
                   bp_format_bytes(r->dist_bytes / (uint64_t)(r->n_gen - 1), wb, sizeof wb));
        printf("\n");
    }
    if (cdev) printf("compare: %s (%s)\n", bp_device_name(cdev), bp_device_description(cdev));
    printf("prompt:  %" PRId64 " tokens:", r->n_prompt);
    for (int64_t i = 0; i < r->n_prompt && i < 32; i++) printf(" %d", prompt[i]);
    printf("%s\n", r->n_prompt > 32 ? " ..." : "");
    printf("output: ");
    for (int64_t i = 0; i < r->n_gen; i++) printf(" %d", r->gen[i]);
    printf("\n");
    printf("prefill: %.1f tokens/s (%" PRId64 " tokens in %.3f s)\n",
           r->t_prefill > 0 ? (double)r->n_prompt / r->t_prefill : 0.0, r->n_prompt, r->t_prefill);
    if (r->t_prefill_warm > 0)
        printf("         warm: %.1f tokens/s (median of the %" PRId64 " prefills after the first)\n",
               (double)r->n_prompt / r->t_prefill_warm, o->prefill_runs - 1);
    if (r->n_gen > 1) {
        double tps = (double)(r->n_gen - 1) / r->t_decode;
        printf("decode:  %.1f tokens/s (%" PRId64 " steps in %.3f s), %s of weights read per "
               "token\n", tps, r->n_gen - 1, r->t_decode,
               bp_format_bytes(bp_run_model_decode_bytes(m), db, sizeof db));
        const double stream = (double)bp_run_model_decode_bytes(m) / r->t_step_median;
        if (r->n_windows > 0 && r->t_step_median > 0)
            printf("         median step %.3f ms: weight streaming %.2f GB/s = %.0f%% of the "
                   "measured read bandwidth %.2f GB/s\n", r->t_step_median * 1e3, stream / 1e9,
                   100.0 * r->frac, r->bandwidth / 1e9);
        if (r->n_windows > 1)
            printf("         (the median of %d windows of up to %d steps, each against the probe "
                   "passes at its edges, from %.0f%% to %.0f%%; the bandwidth is the median of "
                   "%d probes)\n", r->n_windows, BW_WINDOW, 100.0 * r->frac_lo, 100.0 * r->frac_hi,
                   r->n_edges);
    }
    if (r->have_place) {
        char line[1024];
        printf("placement: %s%s\n", bp_sched_summary_format(&r->place, line, sizeof line),
               r->place.n_fallback_nodes ? " (ops the device lacks ran on the cpu; --strict forbids it)" : "");
    }
    if (r->have_cmp)
        printf("compare: largest |logit difference| %.3g; argmax %s\n", r->cmp.max_diff,
               r->cmp.argmax_agree ? "agrees at every position" : "DISAGREES");
}

static void print_json_placement(struct json_writer *w, const struct bp_sched_summary *p, uint64_t copies)
{
    json_object_begin(w, "placement");
    json_array_begin(w, "backends");
    for (size_t i = 0; i < p->n_backends; i++) {
        json_object_begin(w, NULL);
        json_string(w, "device", p->backends[i].name);
        json_uint(w, "nodes", p->backends[i].n_nodes);
        json_uint(w, "runs", p->backends[i].n_runs);
        json_uint(w, "copies_in", p->backends[i].n_copies_in);
        json_uint(w, "bytes_in", p->backends[i].bytes_in);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_begin(w, "fallback_ops");
    for (size_t i = 0; i < p->n_fallback_ops; i++)
        json_uint(w, bp_op_name(p->fallback_ops[i].op), p->fallback_ops[i].count);
    json_object_end(w);
    json_uint(w, "fallback_nodes", p->n_fallback_nodes);
    json_uint(w, "copies_per_decode_step", p->n_copies);
    json_uint(w, "bytes_copied_per_decode_step", p->bytes_copied);
    json_uint(w, "copies_total", copies);
    json_object_end(w);
}

static void print_json(const struct opts *o, const struct bp_run_model *m, struct bp_device *dev,
                       struct bp_device *cdev, const int32_t *prompt, const struct result *r)
{
    const struct bp_run_hparams *hp = &m->hp;
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_object_begin(&w, "model");
    json_string(&w, "name", m->name);
    enum bp_type types[BP_TYPE_COUNT];
    size_t counts[BP_TYPE_COUNT], n_types = bp_run_model_matrix_types(m, types, counts, BP_TYPE_COUNT);
    json_string(&w, "weight_type", n_types ? bp_type_name(types[0]) : "none");  /* the most common */
    if (m->mix) json_string(&w, "weight_mix", m->mix->name);
    json_object_begin(&w, "weight_types");   /* matrices per type */
    for (size_t i = 0; i < n_types; i++) json_uint(&w, bp_type_name(types[i]), counts[i]);
    json_object_end(&w);
    json_int(&w, "parameters", bp_run_model_param_count(m));
    json_uint(&w, "weight_bytes", bp_run_model_weight_bytes(m));
    json_int(&w, "n_layer", hp->n_layer);
    json_int(&w, "n_embd", hp->n_embd);
    json_int(&w, "n_ff", hp->n_ff);
    json_int(&w, "n_head", hp->n_head);
    json_int(&w, "n_head_kv", hp->n_head_kv);
    json_int(&w, "n_vocab", hp->n_vocab);
    json_bool(&w, "tied_output", m->tied_output);
    json_uint(&w, "output_copy_bytes", r->output_copy_bytes);
    json_object_end(&w);
    json_string(&w, "device", o->dist ? o->device : bp_device_name(dev));
    if (o->dist) {
        json_object_begin(&w, "dist");
        json_int(&w, "ranks", bp_run_dist_info(o->dist)->nranks);
        json_string(&w, "comm", bp_run_dist_comm_path(o->dist) ? bp_run_dist_comm_path(o->dist) : "none");
        json_array_begin(&w, "weight_bytes_per_rank");
        for (int32_t i = 0; i < bp_run_dist_info(o->dist)->nranks; i++) json_uint(&w, NULL, r->rank_weight_bytes[i]);
        json_array_end(&w);
        const double steps = r->n_gen > 1 ? (double)(r->n_gen - 1) : 1.0;
        json_double(&w, "reductions_per_token", (double)r->dist_reductions / steps);
        json_double(&w, "bytes_reduced_per_token", (double)r->dist_bytes / steps);
        json_object_end(&w);
    }
    json_array_begin(&w, "prompt");
    for (int64_t i = 0; i < r->n_prompt; i++) json_int(&w, NULL, prompt[i]);
    json_array_end(&w);
    json_array_begin(&w, "tokens");
    for (int64_t i = 0; i < r->n_gen; i++) json_int(&w, NULL, r->gen[i]);
    json_array_end(&w);
    if (r->text) json_string(&w, "text", r->text);
    json_double(&w, "prefill_seconds", r->t_prefill);
    json_double(&w, "prefill_tokens_per_s", r->t_prefill > 0 ? (double)r->n_prompt / r->t_prefill : 0);
    if (r->t_prefill_warm > 0) {
        json_double(&w, "prefill_warm_seconds_median", r->t_prefill_warm);
        json_double(&w, "prefill_warm_tokens_per_s", (double)r->n_prompt / r->t_prefill_warm);
    }
    json_int(&w, "decode_steps", r->n_gen > 0 ? r->n_gen - 1 : 0);
    json_double(&w, "decode_seconds", r->t_decode);
    double tps = r->n_gen > 1 && r->t_decode > 0 ? (double)(r->n_gen - 1) / r->t_decode : 0.0;
    json_double(&w, "decode_tokens_per_s", tps);
    json_uint(&w, "weight_bytes_per_decoded_token", bp_run_model_decode_bytes(m));
    json_double(&w, "decode_step_seconds_median", r->t_step_median);
    const double stream = r->t_step_median > 0
                          ? (double)bp_run_model_decode_bytes(m) / r->t_step_median : 0.0;
    json_double(&w, "decode_weight_bytes_per_s", stream);
    if (r->n_windows > 0 && stream > 0) {
        json_double(&w, "read_bandwidth_bytes_per_s", r->bandwidth);
        json_double(&w, "decode_bandwidth_fraction", r->frac);
        json_double(&w, "decode_bandwidth_fraction_min", r->frac_lo);
        json_double(&w, "decode_bandwidth_fraction_max", r->frac_hi);
        json_int(&w, "decode_bandwidth_windows", r->n_windows);
    }
    if (r->have_place) print_json_placement(&w, &r->place, r->copies);
    if (r->have_cmp) {
        json_object_begin(&w, "compare");
        json_string(&w, "device", bp_device_name(cdev));
        json_double(&w, "max_abs_logit_diff", r->cmp.max_diff);
        json_bool(&w, "argmax_agrees", r->cmp.argmax_agree);
        if (!r->cmp.argmax_agree) json_int(&w, "first_disagreeing_position", r->cmp.first_disagree);
        json_object_end(&w);
    }
    json_object_end(&w);
    json_finish(&w);
    (void)o;
}

static struct bp_device *pick_device(const char *name)
{
    char err[ERR_CAP];
    if (name) {
        struct bp_device *d = bp_run_find_device(name, err, sizeof err);
        if (!d && strncmp(name, "meta:", 5) == 0) cli_error("%s", err);
        else if (!d) return cli_find_device(name);
        return d;
    }
    struct bp_device *d = NULL;
    size_t n = 0;
    if (bp_default_devices(&d, 1, &n) != BP_OK || n == 0) {
        cli_error("no default device: %s; run 'backplane devices'.", bp_last_error());
        return NULL;
    }
    return d;
}

static struct bp_run_model *load_model(const struct opts *o, struct progress *pr, char *err)
{
    struct bp_run_model *m = NULL;
    const char *name = o->model ? o->model : "builtin:tiny";
    bp_status s;
    if (!strncmp(name, "builtin:", 8)) {
        struct bp_run_builtin_options bo = { .weight_type = o->wtype, .mix = o->mix, .seed = o->seed,
                                             .fused_qkv = o->fused,
                                             .progress = generate_progress, .progress_user = pr };
        s = bp_run_model_builtin(name + 8, &bo, &m, err, ERR_CAP);
    } else {
        s = bp_run_model_load_gguf(name, &m, err, ERR_CAP);
    }
    if (s != BP_OK) {
        if (strncmp(name, "builtin:", 8)) {
            char e[ERR_CAP];
            snprintf(e, sizeof e, "%s", err);
            snprintf(err, ERR_CAP, "%.200s: %.800s", name, e);
        }
        return NULL;
    }
    return m;
}

/* --chat: the tokenizer, the chat template and a session sized for a
 * conversation, then run_chat.c's loop on stdin. */
static int chat(const struct opts *o, const struct bp_run_model *m, struct bp_device *dev, struct progress *pr)
{
    const char *name = o->model ? o->model : "builtin:tiny";
    char err[ERR_CAP], *from_model = NULL;
    struct bp_tokenizer *tok = NULL;
    struct bp_run_session *s = NULL;
    int rc = CLI_EXIT_FAIL;
    if (bp_run_tokenizer_for(name, &tok, err, sizeof err) != BP_OK) {
        cli_error("--chat needs the model's tokenizer, but %s", err);
        goto out;
    }
    if (bp_tokenizer_n_tokens(tok) > m->hp.n_vocab) {
        cli_error("the tokenizer has %d tokens but the model's vocabulary only %" PRId64 "; the "
                  "file is inconsistent.", bp_tokenizer_n_tokens(tok), m->hp.n_vocab);
        goto out;
    }
    if (!o->tmpl && bp_chat_template_of_model(name, &from_model, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    const struct run_chat_opts c = { .tmpl = o->tmpl ? o->tmpl : from_model, .system = o->system,
                                     .first = o->text.prompt, .max_reply = o->n_gen_given ? o->n_gen : 0 };
    if (bp_chat_template_detect(c.tmpl) == BP_CHAT_TEMPLATE_UNKNOWN) {
        bp_chat_template_unknown(c.tmpl, err, sizeof err);
        const size_t l = strlen(err);
        if (l && err[l - 1] == '.') err[l - 1] = '\0';   /* the sentence goes on below */
        cli_error("%s; choose a format with --template NAME ('backplane chat-template --list').", err);
        goto out;
    }
    const int64_t n_ctx = o->n_ctx ? o->n_ctx : m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (n_ctx > m->hp.n_ctx_train) {
        cli_error("--n-ctx %" PRId64 " is more than the model's context of %" PRId64 " positions.", n_ctx,
                  m->hp.n_ctx_train);
        goto out;
    }
    /* Planned for a prefill of the whole cache: a conversation read again
     * from the start can be that long. */
    struct bp_run_plan plan;
    struct bp_run_plan_options po = { .n_ctx = n_ctx, .n_prompt = n_ctx, .offload_layers = o->offload_layers,
                                      .cpu_moe_layers = o->cpu_moe_layers, .strict = o->strict };
    if (bp_run_plan_make(m, dev, &po, &plan, err, sizeof err) == BP_OK && !bp_run_plan_fits(&plan, err, sizeof err)) {
        cli_error("%s", err);
        goto out;
    }
    struct bp_run_session_options so = { .n_ctx = n_ctx, .n_threads = o->threads, .progress = upload_progress,
                                         .progress_user = pr, .offload_layers = o->offload_layers,
                                         .cpu_moe_layers = o->cpu_moe_layers, .strict = o->strict };
    const bool made = bp_run_session_new(m, dev, &so, &s, err, sizeof err) == BP_OK;
    progress_done(pr);
    pr->tty = false;   /* the conversation has the terminal now */
    if (!made) {
        cli_error("%s", err);
        goto out;
    }
    rc = run_chat(&c, &o->text, s, tok, m->hp.n_vocab, stdin);
out:
    bp_run_session_free(s);
    bp_tokenizer_free(tok);
    free(from_model);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    struct opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if (!cli_load()) return CLI_EXIT_FAIL;
    struct progress pr = { .t0 = now(), .tty = isatty(1) && isatty(2) && !o.json };
    struct bp_run_model *m = NULL;
    struct bp_run_session *s = NULL, *cs = NULL;
    int32_t *prompt = NULL;
    struct bp_tokenizer *tok = NULL;
    struct run_gen gen = {0};
    struct bench_probe *probe = NULL;
    struct result res = {0};
    char err[ERR_CAP] = "";
    rc = CLI_EXIT_FAIL;

    if (bp_run_dist_wanted(o.device)) {
        if (bp_run_dist_open(&o.dist, err, sizeof err) != BP_OK) { cli_error("%s", err); goto out; }
        o.root = bp_run_dist_info(o.dist)->rank == 0;
        pr.mute = !o.root;
    }
    progress_line(&pr, "loading %s", o.model ? o.model : "builtin:tiny");
    m = load_model(&o, &pr, err);
    if (!dist_gate(&o, m != NULL, err)) goto out;
    if (o.dist && !bp_run_dist_check_model(o.dist, m, err, sizeof err)) {
        if (o.root) cli_error("%s", err);
        goto out;
    }
    progress_done(&pr);
    if (o.save && o.root) {
        bp_status st = bp_run_model_save_gguf(m, o.save, 3, 32);
        if (st != BP_OK) {
            cli_error("writing '%s' failed (%s).", o.save, bp_status_name(st));
            goto out;
        }
    }
    struct bp_device *dev = NULL;
    if (o.dist && !dist_gate(&o, bp_run_dist_device(o.dist, o.device, o.threads, &dev, err,
                                                     sizeof err) == BP_OK, err))
        goto out;
    if (!o.dist) dev = pick_device(o.device);
    struct bp_device *cdev = o.compare ? pick_device(o.compare) : NULL;
    if (!dev || (o.compare && !cdev)) goto out;
    if (o.chat) {
        rc = chat(&o, m, dev, &pr);
        goto out;
    }
    int64_t n_prompt = 0;
    const bool text_prompt = o.text.prompt || o.text.prompt_file;
    tok = run_text_tokenizer(&o.text, o.model ? o.model : "builtin:tiny");
    if (text_prompt && !tok) goto out;
    if (tok && bp_tokenizer_n_tokens(tok) > m->hp.n_vocab) {   /* fewer: padded embedding */
        cli_error("the tokenizer has %d tokens but the model's vocabulary only %" PRId64 "; the "
                  "file is inconsistent.", bp_tokenizer_n_tokens(tok), m->hp.n_vocab);
        goto out;
    }
    if (!(prompt = text_prompt ? run_text_prompt(&o.text, tok, &n_prompt)
                               : make_prompt(&o, m->hp.n_vocab, &n_prompt)))
        goto out;
    const int64_t need = n_prompt + (o.n_gen > 0 ? o.n_gen - 1 : 0);
    struct bp_run_session_options so = {
        .n_ctx = o.n_ctx ? o.n_ctx : need, .n_threads = o.dist ? 0 : o.threads,
        .n_prefill = n_prompt, .prefill_all = o.dump || o.compare,
        .progress = upload_progress, .progress_user = &pr,
        .offload_layers = o.offload_layers, .cpu_moe_layers = o.cpu_moe_layers, .strict = o.strict,
    };
    if (need > m->hp.n_ctx_train || so.n_ctx < need) {
        cli_error("the prompt and generation need %" PRId64 " positions but the %s holds %" PRId64
                  "; ask for fewer tokens.", need, so.n_ctx < need ? "--n-ctx" : "model",
                  so.n_ctx < need ? so.n_ctx : m->hp.n_ctx_train);
        goto out;
    }
    /* The plan before any allocation: --plan prints it, a run that would
     * not fit stops here with a sentence instead of failing half-loaded. A
     * dist: job plans on every rank (the same rows everywhere, row r rank
     * r's share, with rank r's free memory gathered); rank 0 prints it, and
     * a rank that would not fit stops all. */
    struct bp_run_plan plan;
    struct bp_run_plan_options po = { .n_ctx = so.n_ctx, .n_prompt = n_prompt,
                                      .offload_layers = o.offload_layers, .cpu_moe_layers = o.cpu_moe_layers,
                                      .prefill_all = so.prefill_all, .strict = o.strict };
    bool planned = bp_run_plan_make(m, dev, &po, &plan, err, sizeof err) == BP_OK;
    if (o.dist) {
        if (!dist_gate(&o, planned, err)) goto out;
        const bool gathered = bp_run_dist_plan_memory(o.dist, &plan) == BP_OK;
        if (!gathered) snprintf(err, sizeof err, "gathering the ranks' free memory for the plan failed.");
        if (!dist_gate(&o, gathered, err)) goto out;
        if (o.plan) {
            if (o.root) bp_run_plan_print(&plan, m, o.json);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if (!dist_gate(&o, bp_run_plan_fits(&plan, err, sizeof err), err)) goto out;
    }
    if (o.plan || (planned && !bp_run_plan_fits(&plan, err, sizeof err))) {
        if (o.plan && planned) bp_run_plan_print(&plan, m, o.json);
        else cli_error("%s", err);
        rc = o.plan && planned ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        goto out;
    }
    const bool made = bp_run_session_new(m, dev, &so, &s, err, sizeof err) == BP_OK;
    progress_done(&pr);
    if (!dist_gate(&o, made, err)) goto out;
    if (o.dist && bp_run_dist_weight_bytes(o.dist, s, m, res.rank_weight_bytes) != BP_OK) {
        cli_error("rank %d: gathering the ranks' weight bytes failed.", (int)bp_run_dist_info(o.dist)->rank);
        goto out;
    }
    if (cdev && bp_run_session_new(m, cdev, &so, &cs, err, sizeof err) != BP_OK) {
        progress_done(&pr);
        cli_error("on the compare device: %s", err);
        goto out;
    }
    progress_done(&pr);
    if (m->tied_output) {
        const struct bp_tensor *out = bp_run_session_weight(s, "output.weight");
        if (out && out != bp_run_session_weight(s, "token_embd.weight"))
            res.output_copy_bytes = bp_nbytes(out);
    }
    /* The bandwidth reference (bench's read probe, 512 MB so no cache
     * holds it) is measured just before and just after decoding, and with
     * --bandwidth between windows of BW_WINDOW steps too (see BW_WINDOW). */
    if (o.bandwidth || (o.json && bp_device_type(dev) == BP_DEVICE_TYPE_CPU)) {
        progress_line(&pr, "measuring read bandwidth");
        if (!(probe = bench_probe_new((size_t)512 << 20)))
            fprintf(stderr, "backplane: no memory for the 512 MB read-bandwidth probe; "
                    "reporting no bandwidth fraction.\n");
        res.probe = probe;
        res.probe_threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        res.window = o.bandwidth ? BW_WINDOW : 0;
        res.edge[0] = 0;
        res.bw[0] = bench_probe_run(probe, res.probe_threads, 3);
        res.n_edges = 1;
        progress_done(&pr);
    }
    /* A dist: job streams its text from rank 0 alone. */
    if (!run_gen_begin(&gen, &o.text, tok, m->hp.n_vocab, prompt, n_prompt,
                       text_prompt && !o.json && o.root))
        goto out;
    if (text_prompt) pr.tty = false;   /* the text streams to the terminal now */
    rc = run_tokens(&o, m, s, cs, prompt, n_prompt, &pr, &gen, &res);
    run_gen_end(&gen);
    res.text = gen.text;
    if (rc != CLI_EXIT_OK) goto out;
    res.place.size = sizeof res.place;
    res.have_place = bp_run_session_placement(s, &res.place) == BP_OK;
    struct bp_run_session_stats rs;
    bp_run_session_get_stats(s, &rs);
    res.copies = rs.copies;
    if (probe) {
        progress_line(&pr, "measuring read bandwidth");
        res.edge[res.n_edges] = res.n_gen - 1;
        res.bw[res.n_edges++] = bench_probe_run(probe, res.probe_threads, 3);
        bw_windows(m, &res);
        progress_done(&pr);
    }
    if (o.json && o.root) print_json(&o, m, dev, cdev, prompt, &res);
    else if (o.root) print_text(&o, m, dev, cdev, prompt, &res);
    if (res.profiled && o.root) {
        char what[64];
        snprintf(what, sizeof what, "prefill of %" PRId64 " tokens", res.n_prompt);
        bp_run_profile_print(o.json ? stderr : stdout, what, &res.prof_prefill);
        bp_run_profile_print(o.json ? stderr : stdout, "decode steps", &res.prof_decode);
    }
    if (res.have_cmp && !res.cmp.argmax_agree) rc = CLI_EXIT_FAIL;
out:
    bench_probe_free(probe);
    free(res.step_sec);
    free(res.gen);
    free(prompt);
    free(gen.text);
    bp_tokenizer_free(tok);
    bp_run_session_free(cs);
    bp_run_session_free(s);
    bp_run_model_free(m);
    bp_run_dist_free(o.dist);
    return rc;
}
