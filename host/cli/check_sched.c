/*
 * check_sched.c — `backplane check --sched D[,cpu]`: the decoder-block
 * graphs of builtin:test (prefill, then decode steps) run through the
 * scheduler over D with the cpu as fallback, against the cpu alone, for
 * each weight type a vendor's MUL_MAT may meet (and llama.cpp's q4_K_M
 * mix: q4_K and q6_K in one model). A case passes when every
 * position's argmax agrees and the logits' normalised mean squared error
 * is within 1e-5 (float weights) or 5e-3 (quantized: a device may quantize
 * activations differently from the cpu); each line says where nodes ran.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_harness.h"
#include "cli.h"
#include "decoder.h"
#include "json.h"
#include "llama_schema.h"
#include "model.h"
#include "split.h"

#define SCHED_PROMPT 6
#define SCHED_STEPS 4

struct sched_case {
    enum bp_type wtype;
    bool fused;
    const char *mix;    /* a llama.cpp mix (its base is wtype); NULL: wtype throughout */
};

static const struct sched_case cases[] = {
    { .wtype = BP_TYPE_F32 }, { .wtype = BP_TYPE_F32, .fused = true }, { .wtype = BP_TYPE_F16 },
    { .wtype = BP_TYPE_Q8_0 }, { .wtype = BP_TYPE_Q4_0 }, { .wtype = BP_TYPE_Q4_K },
    { .wtype = BP_TYPE_Q4_K, .mix = "q4_K_M" },
};

struct sched_result {
    bool ok, agree;
    double max_diff, max_ref, err2, ref2;
    char placement[512];
    char err[1024];
};

/* Prefill and SCHED_STEPS greedy steps on both sessions (the reference's
 * tokens feed both), tracking the worst difference. */
static bool decode_pair(const struct bp_run_model *m, struct bp_run_session *s, struct bp_run_session *ref,
                        struct sched_result *r)
{
    static const int32_t prompt[SCHED_PROMPT] = { 7, 300, 42, 511, 0, 99 };
    const int64_t V = m->hp.n_vocab;
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    bool ok = a && b;
    int32_t t = 0;
    r->agree = true;
    for (int step = 0; ok && step <= SCHED_STEPS; step++) {
        const int32_t *in = step ? &t : prompt;
        int64_t n = step ? 1 : SCHED_PROMPT;
        ok = bp_run_session_eval(s, in, n, false, a, r->err, sizeof r->err) == BP_OK &&
             bp_run_session_eval(ref, in, n, false, b, r->err, sizeof r->err) == BP_OK;
        for (int64_t i = 0; ok && i < V; i++) {
            double d = fabs((double)a[i] - (double)b[i]);
            if (!(d <= r->max_diff)) r->max_diff = d;
            if (fabs((double)b[i]) > r->max_ref) r->max_ref = fabs((double)b[i]);
            r->err2 += d * d;
            r->ref2 += (double)b[i] * b[i];
        }
        if (ok && bp_run_argmax(a, V) != bp_run_argmax(b, V)) r->agree = false;
        t = bp_run_argmax(b, V);
    }
    free(a);
    free(b);
    return ok;
}

static void run_case(struct bp_device *dev, struct bp_device *cpu, const struct sched_case *c,
                     struct sched_result *r)
{
    memset(r, 0, sizeof *r);
    struct bp_run_model *m = NULL;
    struct bp_run_session *s = NULL, *ref = NULL;
    struct bp_run_builtin_options bo = { .weight_type = c->wtype, .mix = bp_llama_mix_by_name(c->mix), .seed = 1,
                                         .fused_qkv = c->fused };
    if (bp_run_model_builtin("test", &bo, &m, r->err, sizeof r->err) != BP_OK ||
        bp_run_session_new(m, dev, NULL, &s, r->err, sizeof r->err) != BP_OK ||
        bp_run_session_new(m, cpu, &(struct bp_run_session_options){ .direct = true }, &ref, r->err,
                           sizeof r->err) != BP_OK ||
        !decode_pair(m, s, ref, r))
        goto out;
    struct bp_sched_summary sum = { .size = sizeof sum };
    if (bp_run_session_placement(s, &sum) == BP_OK)
        bp_sched_summary_format(&sum, r->placement, sizeof r->placement);
    double nmse = r->ref2 > 0 ? r->err2 / r->ref2 : r->err2;
    r->ok = r->agree && nmse <= (bp_type_block_size(c->wtype) > 1 ? 5e-3 : 1e-5);
out:
    bp_run_session_free(s);
    bp_run_session_free(ref);
    bp_run_model_free(m);
}

int check_sched(const char *spec, bool json)
{
    char name[256], err[1024];
    snprintf(name, sizeof name, "%s", spec);
    size_t n = strlen(name);
    if (n > 4 && !strcmp(name + n - 4, ",cpu")) name[n - 4] = '\0';   /* the fallback is always the cpu */
    struct bp_device *cpu = bp_device_by_name("cpu");
    if (!cpu) {
        cli_error("check --sched needs the CPU plugin as fallback and reference; run 'backplane devices' to "
                  "see why it is missing.");
        return CLI_EXIT_FAIL;
    }
    struct bp_device *dev = bp_run_find_device(name, err, sizeof err);
    if (!dev) {
        if (!strncmp(name, "meta:", 5)) cli_error("%s", err);
        else cli_find_device(name);
        return CLI_EXIT_FAIL;
    }
    struct json_writer w;
    if (json) {
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "device", bp_device_name(dev));
        json_string(&w, "fallback", "cpu");
        json_array_begin(&w, "cases");
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sched_result r;
        char label[64];
        snprintf(label, sizeof label, "builtin:test %s%s",
                 cases[i].mix ? cases[i].mix : bp_type_name(cases[i].wtype),
                 cases[i].fused ? " fused-qkv" : "");
        run_case(dev, cpu, &cases[i], &r);
        failed += !r.ok;
        if (json) {
            json_object_begin(&w, NULL);
            json_string(&w, "model", label);
            json_bool(&w, "ok", r.ok);
            if (r.err[0]) json_string(&w, "error", r.err);
            json_double(&w, "max_abs_logit_diff", r.max_diff);
            json_bool(&w, "argmax_agrees", r.agree);
            json_string(&w, "placement", r.placement);
            json_object_end(&w);
        } else if (r.err[0]) {
            printf("FAIL  %-26s %s\n", label, r.err);
        } else {
            printf("%s  %-26s max |logit diff| %.3g of %.3g, argmax %s; %s\n", r.ok ? "PASS" : "FAIL", label,
                   r.max_diff, r.max_ref, r.agree ? "agrees" : "DISAGREES", r.placement);
        }
    }
    if (json) {
        json_array_end(&w);
        json_bool(&w, "ok", failed == 0);
        json_object_end(&w);
        json_finish(&w);
    } else {
        printf("\n%s through the scheduler (fallback cpu): %d passed, %d failed\n", bp_device_name(dev),
               (int)(sizeof cases / sizeof cases[0]) - failed, failed);
    }
    return failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
