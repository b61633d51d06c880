/*
 * cmd_run.c — `backplane run`: load a Llama model (GGUF or built-in), run a
 * prompt and greedy decoding on a device, report speed, and optionally
 * check every logit against a second device.
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

#include "../cli/cli.h"
#include "../cli/json.h"
#include "../cli/bench.h"
#include "decoder.h"
#include "model.h"
#include "split.h"

#define ERR_CAP 1024

static void help(void)
{
    puts("usage: backplane run [--model PATH|builtin:NAME] [--device NAME]\n"
         "                     [--prompt-tokens 1,2,3 | --prompt-len N] [--n-gen N]\n"
         "                     [--threads N] [--compare DEVICE] [--json]\n"
         "                     [--dump-logits FILE] [--weight-type T] [--seed N]\n"
         "                     [--fused-qkv] [--n-ctx N] [--save FILE.gguf] [--bandwidth]\n\n"
         "Runs a Llama-architecture decoder: the prompt in one graph (prefill), then\n"
         "greedy decoding token by token with a KV cache, and prints the generated\n"
         "token ids with prefill and decode tokens per second.\n\n"
         "  --model PATH         a GGUF file of the llama architecture (f32, f16, bf16,\n"
         "                       q4_0, q8_0, q4_K, q6_K weights; mapped, not copied)\n"
         "  --model builtin:NAME built-in model with pseudo-random weights: 'test'\n"
         "                       (1.4 M parameters) or 'tiny' (~100 M; the default)\n"
         "  --weight-type T      storage type of a built-in model's weights (default f16)\n"
         "  --seed N             seed of a built-in model's weights (default 1)\n"
         "  --fused-qkv          store a built-in model's Q, K, V as one attn_qkv tensor\n"
         "  --device NAME        cpu, vulkan0, meta:cpu*2, ... (default: BACKPLANE_DEVICES,\n"
         "                       else the first GPU, else the CPU)\n"
         "  --prompt-tokens LIST comma-separated token ids\n"
         "  --prompt-len N       N pseudo-random prompt tokens (default 8)\n"
         "  --n-gen N            tokens to generate (default 16)\n"
         "  --n-ctx N            KV cache positions (default: prompt + n-gen)\n"
         "  --threads N          threads of a CPU device\n"
         "  --compare DEVICE     run the same tokens on DEVICE too and report the largest\n"
         "                       absolute logit difference and argmax agreement\n"
         "  --dump-logits FILE   raw little-endian f32, n_vocab per evaluated position\n"
         "                       (prompt positions, then one row per decode step)\n"
         "  --save FILE          write the model as a GGUF file (v3) and continue\n"
         "  --bandwidth          measure the read bandwidth (before and after decoding)\n"
         "                       and report the median decode step's weight streaming\n"
         "                       as a fraction of it (implied by --json on a CPU)\n"
         "  --json               machine-readable report on stdout\n"
         "  --plan               print the memory plan (weights in the device's layout,\n"
         "                       KV cache at --n-ctx, step buffers) and stop; a plain run\n"
         "                       refuses before allocating when the plan does not fit\n");
}

struct opts {
    const char *model, *device, *compare, *dump, *save, *prompt_list;
    int64_t prompt_len, n_gen, n_ctx;
    int threads;
    bool json, fused, bandwidth, plan;
    enum bp_type wtype;
    uint64_t seed;
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
    bool tty, shown;
};

static void progress_line(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress_line(struct progress *p, const char *fmt, ...)
{
    double t = now();
    /* On a terminal: always, redrawn in place. Elsewhere: only for work
     * that has already taken a second, and at most once a second. */
    if (!p->tty && (t - p->t0 < 1.0 || t - p->last < 1.0)) return;
    if (p->tty && t - p->last < 0.05) return;
    p->last = t;
    va_list ap;
    va_start(ap, fmt);
    if (p->tty) fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    if (!p->tty) fputc('\n', stderr);
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

static bool parse_type(const char *s, enum bp_type *out)
{
    for (int t = 0; t < BP_TYPE_COUNT; t++)
        if (!strcasecmp(s, bp_type_name((enum bp_type)t)) && t != BP_TYPE_I32 && t != BP_TYPE_Q8_K) {
            *out = (enum bp_type)t;
            return true;
        }
    return false;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .prompt_len = 8, .n_gen = 16, .wtype = BP_TYPE_F16, .seed = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
#define NEEDV() do { if (!v) return cli_usage_error("run", "%s needs a value.", a); i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return -1; }
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--fused-qkv")) o->fused = true;
        else if (!strcmp(a, "--bandwidth")) o->bandwidth = true;
        else if (!strcmp(a, "--plan")) o->plan = true;
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
        } else if (!strcmp(a, "--n-ctx")) {
            NEEDV();
            if (!parse_i64(v, 1, 1 << 24, &o->n_ctx))
                return cli_usage_error("run", "--n-ctx wants a positive number, not '%s'.", v);
        } else if (!strcmp(a, "--threads")) {
            NEEDV();
            if (!parse_i64(v, 1, 1024, &n))
                return cli_usage_error("run", "--threads wants a number from 1 to 1024, not '%s'.", v);
            o->threads = (int)n;
        } else if (!strcmp(a, "--seed")) {
            NEEDV();
            if (!parse_i64(v, 0, INT64_MAX, &n))
                return cli_usage_error("run", "--seed wants a number >= 0, not '%s'.", v);
            o->seed = (uint64_t)n;
        } else if (!strcmp(a, "--weight-type")) {
            NEEDV();
            if (!parse_type(v, &o->wtype))
                return cli_usage_error("run", "--weight-type wants f32, f16, bf16, q4_0, q8_0, "
                                       "q4_K or q6_K, not '%s'.", v);
        } else
            return cli_usage_error("run", "unknown option '%s'.", a);
#undef NEEDV
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

struct result {
    int32_t *gen;
    int64_t n_gen, n_prompt;
    double t_prefill, t_decode, bandwidth;
    double *step_sec;    /* each decode step's seconds (sorted once decoding is done) */
    double t_step_median;
    size_t output_copy_bytes;  /* a tied output's copy in the device's weight layout */
    bool have_cmp;
    struct cmp cmp;
};

static bool dump_rows(FILE *f, const float *rows, int64_t n, int64_t n_vocab)
{
    /* The dump is little-endian by definition; the hosts we build for are. */
    return !f || fwrite(rows, sizeof(float), (size_t)(n * n_vocab), f) == (size_t)(n * n_vocab);
}

static int run_tokens(const struct opts *o, const struct bp_run_model *m, struct bp_run_session *s,
                      struct bp_run_session *cs, const int32_t *prompt, int64_t n_prompt,
                      struct progress *pr, struct result *res)
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
    if (o->dump && !(dump = fopen(o->dump, "wb"))) {
        cli_error("cannot write '%s': %s.", o->dump, strerror(errno));
        goto out;
    }
    progress_line(pr, "prefill: %" PRId64 " tokens", n_prompt);
    double t0 = now();
    if (bp_run_session_eval(s, prompt, n_prompt, all, lg, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    res->t_prefill = now() - t0;
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
    if (o->n_gen > 0) res->gen[0] = bp_run_argmax(last, V);
    res->n_gen = o->n_gen > 0 ? 1 : 0;
    t0 = now();
    for (int64_t i = 1; i < o->n_gen; i++) {
        progress_line(pr, "decode: %" PRId64 " of %" PRId64 " tokens", i + 1, o->n_gen);
        double ts = now();
        if (bp_run_session_eval(s, &res->gen[i - 1], 1, true, lg, err, sizeof err) != BP_OK) {
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
        res->gen[i] = bp_run_argmax(lg, V);
        res->n_gen = i + 1;
    }
    (void)t0;
    /* The median step, not the mean: one step that the OS preempted on a
     * shared machine should not decide the streaming figure. */
    if (res->n_gen > 1) res->t_step_median = bench_median(res->step_sec, (int)(res->n_gen - 1));
    progress_done(pr);
    rc = CLI_EXIT_OK;
out:
    progress_done(pr);
    if (dump && fclose(dump) != 0 && rc == CLI_EXIT_OK) {
        cli_error("writing '%s' failed.", o->dump);
        rc = CLI_EXIT_FAIL;
    }
    free(lg);
    free(lg2);
    return rc;
}

static void print_text(const struct opts *o, const struct bp_run_model *m, struct bp_device *dev,
                       struct bp_device *cdev, const int32_t *prompt, const struct result *r)
{
    const struct bp_run_hparams *hp = &m->hp;
    char wb[32], db[32];
    printf("model:   %s, %" PRId64 " parameters, %s of weights%s\n", m->name,
           bp_run_model_param_count(m), bp_format_bytes(bp_run_model_weight_bytes(m), wb, sizeof wb),
           m->tied_output ? ", output tied to the embedding" : "");
    printf("         %" PRId64 " layers, embedding %" PRId64 ", ffn %" PRId64 ", %" PRId64
           " heads (%" PRId64 " kv) of %" PRId64 ", vocabulary %" PRId64 ", weights %s\n",
           hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_vocab,
           bp_type_name(m->layers[0].gate->type));
    if (r->output_copy_bytes)
        printf("         the logits read a copy of the embedding in the device's weight layout "
               "(%s more)\n", bp_format_bytes(r->output_copy_bytes, wb, sizeof wb));
    printf("device:  %s (%s)\n", bp_device_name(dev), bp_device_description(dev));
    if (cdev) printf("compare: %s (%s)\n", bp_device_name(cdev), bp_device_description(cdev));
    printf("prompt:  %" PRId64 " tokens:", r->n_prompt);
    for (int64_t i = 0; i < r->n_prompt && i < 32; i++) printf(" %d", prompt[i]);
    printf("%s\n", r->n_prompt > 32 ? " ..." : "");
    printf("output: ");
    for (int64_t i = 0; i < r->n_gen; i++) printf(" %d", r->gen[i]);
    printf("\n");
    printf("prefill: %.1f tokens/s (%" PRId64 " tokens in %.3f s)\n",
           r->t_prefill > 0 ? (double)r->n_prompt / r->t_prefill : 0.0, r->n_prompt, r->t_prefill);
    if (r->n_gen > 1) {
        double tps = (double)(r->n_gen - 1) / r->t_decode;
        printf("decode:  %.1f tokens/s (%" PRId64 " steps in %.3f s), %s of weights read per "
               "token\n", tps, r->n_gen - 1, r->t_decode,
               bp_format_bytes(bp_run_model_decode_bytes(m), db, sizeof db));
        const double stream = (double)bp_run_model_decode_bytes(m) / r->t_step_median;
        if (r->bandwidth > 0 && r->t_step_median > 0)
            printf("         median step %.3f ms: weight streaming %.2f GB/s = %.0f%% of the "
                   "measured read bandwidth %.2f GB/s\n", r->t_step_median * 1e3, stream / 1e9,
                   100.0 * stream / r->bandwidth, r->bandwidth / 1e9);
    }
    if (r->have_cmp)
        printf("compare: largest |logit difference| %.3g; argmax %s\n", r->cmp.max_diff,
               r->cmp.argmax_agree ? "agrees at every position" : "DISAGREES");
    (void)o;
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
    json_string(&w, "weight_type", bp_type_name(m->layers[0].gate->type));
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
    json_string(&w, "device", bp_device_name(dev));
    json_array_begin(&w, "prompt");
    for (int64_t i = 0; i < r->n_prompt; i++) json_int(&w, NULL, prompt[i]);
    json_array_end(&w);
    json_array_begin(&w, "tokens");
    for (int64_t i = 0; i < r->n_gen; i++) json_int(&w, NULL, r->gen[i]);
    json_array_end(&w);
    json_double(&w, "prefill_seconds", r->t_prefill);
    json_double(&w, "prefill_tokens_per_s", r->t_prefill > 0 ? (double)r->n_prompt / r->t_prefill : 0);
    json_int(&w, "decode_steps", r->n_gen > 0 ? r->n_gen - 1 : 0);
    json_double(&w, "decode_seconds", r->t_decode);
    double tps = r->n_gen > 1 && r->t_decode > 0 ? (double)(r->n_gen - 1) / r->t_decode : 0.0;
    json_double(&w, "decode_tokens_per_s", tps);
    json_uint(&w, "weight_bytes_per_decoded_token", bp_run_model_decode_bytes(m));
    json_double(&w, "decode_step_seconds_median", r->t_step_median);
    const double stream = r->t_step_median > 0
                          ? (double)bp_run_model_decode_bytes(m) / r->t_step_median : 0.0;
    json_double(&w, "decode_weight_bytes_per_s", stream);
    if (r->bandwidth > 0 && stream > 0) {
        json_double(&w, "read_bandwidth_bytes_per_s", r->bandwidth);
        json_double(&w, "decode_bandwidth_fraction", stream / r->bandwidth);
    }
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

static struct bp_run_model *load_model(const struct opts *o, struct progress *pr)
{
    char err[ERR_CAP] = "";
    struct bp_run_model *m = NULL;
    const char *name = o->model ? o->model : "builtin:tiny";
    bp_status s;
    if (!strncmp(name, "builtin:", 8)) {
        struct bp_run_builtin_options bo = { .weight_type = o->wtype, .seed = o->seed,
                                             .fused_qkv = o->fused,
                                             .progress = generate_progress, .progress_user = pr };
        s = bp_run_model_builtin(name + 8, &bo, &m, err, sizeof err);
    } else {
        s = bp_run_model_load_gguf(name, &m, err, sizeof err);
    }
    if (s != BP_OK) {
        if (strncmp(name, "builtin:", 8)) cli_error("%s: %s", name, err);
        else cli_error("%s", err);
        return NULL;
    }
    return m;
}

int cmd_run(int argc, char **argv)
{
    struct opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if (!cli_load()) return CLI_EXIT_FAIL;
    struct progress pr = { .t0 = now(), .tty = isatty(2) };
    struct bp_run_model *m = NULL;
    struct bp_run_session *s = NULL, *cs = NULL;
    int32_t *prompt = NULL;
    struct bench_probe *probe = NULL;
    struct result res = {0};
    char err[ERR_CAP] = "";
    rc = CLI_EXIT_FAIL;

    progress_line(&pr, "loading %s", o.model ? o.model : "builtin:tiny");
    if (!(m = load_model(&o, &pr))) goto out;
    progress_done(&pr);
    if (o.save) {
        bp_status st = bp_run_model_save_gguf(m, o.save, 3, 32);
        if (st != BP_OK) {
            cli_error("writing '%s' failed (%s).", o.save, bp_status_name(st));
            goto out;
        }
    }
    struct bp_device *dev = pick_device(o.device);
    struct bp_device *cdev = o.compare ? pick_device(o.compare) : NULL;
    if (!dev || (o.compare && !cdev)) goto out;
    int64_t n_prompt = 0;
    if (!(prompt = make_prompt(&o, m->hp.n_vocab, &n_prompt))) goto out;
    const int64_t need = n_prompt + (o.n_gen > 0 ? o.n_gen - 1 : 0);
    struct bp_run_session_options so = {
        .n_ctx = o.n_ctx ? o.n_ctx : need, .n_threads = o.threads,
        .progress = upload_progress, .progress_user = &pr,
    };
    if (need > m->hp.n_ctx_train || so.n_ctx < need) {
        cli_error("the prompt and generation need %" PRId64 " positions but the %s holds %" PRId64
                  "; ask for fewer tokens.", need, so.n_ctx < need ? "--n-ctx" : "model",
                  so.n_ctx < need ? so.n_ctx : m->hp.n_ctx_train);
        goto out;
    }
    /* The plan before any allocation: --plan prints it, a run that would
     * not fit stops here with a sentence instead of failing half-loaded. */
    struct bp_run_plan plan;
    struct bp_run_plan_options po = { .n_ctx = so.n_ctx, .n_prompt = n_prompt };
    bool planned = bp_run_plan_make(m, dev, &po, &plan, err, sizeof err) == BP_OK;
    if (o.plan || (planned && !bp_run_plan_fits(&plan, err, sizeof err))) {
        if (o.plan && planned) bp_run_plan_print(&plan, m, o.json);
        else cli_error("%s", err);
        rc = o.plan && planned ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        goto out;
    }
    if (bp_run_session_new(m, dev, &so, &s, err, sizeof err) != BP_OK) {
        progress_done(&pr);
        cli_error("%s", err);
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
    /* The bandwidth reference is measured just before and just after
     * decoding (the CPU issue's probe, 512 MB so no cache holds it), and
     * the two medians averaged: the machine's bandwidth drifts. */
    const int probe_threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    double bw_before = 0;
    if (o.bandwidth || (o.json && bp_device_type(dev) == BP_DEVICE_TYPE_CPU)) {
        progress_line(&pr, "measuring read bandwidth");
        if (!(probe = bench_probe_new((size_t)512 << 20)))
            fprintf(stderr, "backplane: no memory for the 512 MB read-bandwidth probe; "
                    "reporting no bandwidth fraction.\n");
        bw_before = bench_probe_run(probe, probe_threads, 3);
        progress_done(&pr);
    }
    if ((rc = run_tokens(&o, m, s, cs, prompt, n_prompt, &pr, &res)) != CLI_EXIT_OK) goto out;
    if (probe) {
        progress_line(&pr, "measuring read bandwidth");
        const double bw_after = bench_probe_run(probe, probe_threads, 3);
        res.bandwidth = bw_before > 0 && bw_after > 0 ? 0.5 * (bw_before + bw_after) : 0.0;
        progress_done(&pr);
    }
    if (o.json) print_json(&o, m, dev, cdev, prompt, &res);
    else print_text(&o, m, dev, cdev, prompt, &res);
    if (res.have_cmp && !res.cmp.argmax_agree) rc = CLI_EXIT_FAIL;
out:
    bench_probe_free(probe);
    free(res.step_sec);
    free(res.gen);
    free(prompt);
    bp_run_session_free(cs);
    bp_run_session_free(s);
    bp_run_model_free(m);
    return rc;
}
