/*
 * test_run_plan.c — the memory plan (host/run/plan.h) against what a session
 * then really holds (bp_run_session_device_bytes, the sizes of its device
 * buffers) after a prefill and decoding to the end of its context, for
 * every built-in model and weight type (and the q4_K_M mix) on cpu (and builtin:test on vulkan0
 * when present: `test_run_plan vulkan`), on meta:cpu*2 and meta:cpu,vulkan0
 * per sub-device (meta:cpu*2 with builtin:test in the default run, `meta-tiny`, `meta-vulkan`); the refusal of a run
 * that does not fit, through the CLI, before anything is allocated; --strict.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "cli_util.h"
#include "decoder.h"
#include "llama_schema.h"
#include "model.h"
#include "plan.h"
#include "suite_main.h"

#define N_PROMPT 8

/* Each type throughout, then llama.cpp's q4_K_M mix (q4_K and q6_K weights
 * in one model, so in two weight buffer types). */
static const struct {
    enum bp_type type;
    const char *mix;
} types[] = {
    { .type = BP_TYPE_F32 }, { .type = BP_TYPE_F16 }, { .type = BP_TYPE_BF16 }, { .type = BP_TYPE_Q4_0 },
    { .type = BP_TYPE_Q8_0 }, { .type = BP_TYPE_Q4_K }, { .type = BP_TYPE_Q6_K },
    { .type = BP_TYPE_Q4_K, .mix = "q4_K_M" },
};

static const char *type_label(int c)
{
    return types[c].mix ? types[c].mix : bp_type_name(types[c].type);
}
static const char *device_name = "cpu";
static int64_t offload_layers;   /* --offload-layers of the session and the plan */
/* builtin:tiny's context: one decode capacity on the CPU; on lavapipe, which
 * computes 100 M parameters slowly, the prompt and one decode step. */
static int64_t tiny_ctx = 32;

/* A device by name, or a meta spec made into a device. */
static struct bp_device *named_device(const char *name)
{
    struct bp_device *dev = NULL;
    if (!strncmp(name, "meta:", 5)) bp_meta_device_from_spec(name, &dev);
    else dev = bp_device_by_name(name);
    return dev;
}

static bool within_2_percent(double planned, double real)
{
    return planned == real || (real > 0 && planned >= 0.98 * real && planned <= 1.02 * real);
}

/* A meta session: each sub-device's row against the bytes the meta plugin
 * reports for the session's meta buffers and all-reduce scratch there. */
static void check_sub_devices(const struct bp_run_plan *plan, const struct bp_run_session *s, const char *model,
                              const char *t, const char *device_name)
{
    size_t real[BP_META_MAX_DEVICES];
    ck_assert_int_eq(bp_run_session_sub_device_bytes(s, real), BP_OK);
    ck_assert_uint_eq(plan->n_subs, 2);
    size_t weights = 0, kv = 0, decode = 0, prefill = 0, peak = 0;
    for (size_t k = 0; k < plan->n_subs; k++) {
        const struct bp_run_plan_device *r = &plan->sub[k];
        const size_t planned = r->weights + r->kv_cache + r->decode + r->prefill + r->allreduce;
        ck_assert_msg(within_2_percent((double)planned, (double)real[k]),
                      "%s %s on %s: planned %zu bytes on sub-device %zu (%s), it holds %zu", model,
                      t, device_name, planned, k, bp_device_name(r->dev), real[k]);
        ck_assert_uint_eq(r->peak, planned);
        ck_assert_uint_gt(r->weights, 0);
        ck_assert_uint_gt(r->kv_cache, 0);
        ck_assert_uint_gt(r->decode, 0);
        ck_assert_uint_gt(r->allreduce, 0); /* cpu and vulkan offer no comm path: the butterfly's */
        weights += r->weights, kv += r->kv_cache, decode += r->decode, prefill += r->prefill, peak += r->peak;
    }
    /* The meta row is the sum of its sub-devices'. */
    ck_assert_uint_eq(plan->d[0].weights, weights);
    ck_assert_uint_eq(plan->d[0].kv_cache, kv);
    ck_assert_uint_eq(plan->d[0].decode, decode);
    ck_assert_uint_eq(plan->d[0].prefill, prefill);
    ck_assert_uint_eq(plan->d[0].peak, peak);
}

/* Plan, then run a session to its last position, and compare per device
 * (the device and, when it is not a CPU, the cpu fallback). */
static void plan_vs_session(const char *model, int c, int64_t n_ctx, const char *device_name)
{
    const char *t = type_label(c);
    char err[512] = "";
    struct bp_device *dev = named_device(device_name);
    ck_assert_msg(dev != NULL, "no %s: %s", device_name, bp_last_error());
    const bool meta = bp_device_type(dev) == BP_DEVICE_TYPE_META;
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options bo = { .weight_type = types[c].type, .mix = bp_llama_mix_by_name(types[c].mix),
                                         .seed = 3 };
    ck_assert_msg(bp_run_model_builtin(model, &bo, &m, err, sizeof err) == BP_OK, "%s", err);
    struct bp_run_plan plan;
    struct bp_run_plan_options po = { .n_ctx = n_ctx, .n_prompt = N_PROMPT, .offload_layers = offload_layers };
    ck_assert_msg(bp_run_plan_make(m, dev, &po, &plan, err, sizeof err) == BP_OK, "%s", err);
    const bool cpu = bp_device_type(dev) == BP_DEVICE_TYPE_CPU;
    ck_assert_uint_eq(plan.n_devices, cpu ? 1 : 2);
    ck_assert_int_eq(plan.n_ctx, n_ctx);
    ck_assert_int_eq(plan.offload_layers, offload_layers && !cpu ? offload_layers : m->hp.n_layer);

    struct bp_run_session *s = NULL;
    struct bp_run_session_options so = { .n_ctx = n_ctx, .offload_layers = offload_layers };
    ck_assert_msg(bp_run_session_new(m, dev, &so, &s, err, sizeof err) == BP_OK, "%s", err);
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = (int32_t)((i * 37 + 5) % m->hp.n_vocab);
    ck_assert_msg(bp_run_session_eval(s, tok, N_PROMPT, false, logits, err, sizeof err) == BP_OK, "%s", err);
    while (bp_run_session_n_past(s) < n_ctx) {
        int32_t next = bp_run_argmax(logits, m->hp.n_vocab);
        ck_assert_msg(bp_run_session_eval(s, &next, 1, false, logits, err, sizeof err) == BP_OK, "%s", err);
    }
    /* Held now on each device: weights, KV cache, every decode capacity and
     * the prefill's plan (kept for the next prompt of the same shape). */
    size_t weights = 0, kv_total = 0, prefill = 0;
    if (meta) check_sub_devices(&plan, s, model, t, device_name);
    else ck_assert_uint_eq(plan.n_subs, 0);
    for (size_t i = 0; i < plan.n_devices; i++) {
        const struct bp_run_plan_device *d = &plan.d[i];
        double planned = (double)(d->weights + d->kv_cache + d->decode + d->prefill + d->allreduce);
        ck_assert_uint_eq(d->peak, (size_t)planned);
        weights += d->weights;
        kv_total += d->kv_cache;
        prefill += d->prefill;
        if (meta && i == 0) continue; /* a meta buffer's own size is an address space: see the sub-devices */
        double real = (double)bp_run_session_total_device_bytes(s, d->dev);
        ck_assert_msg(within_2_percent(planned, real),
                      "%s %s on %s (offload %d): planned %.0f bytes on %s, the session holds %.0f", model,
                      t, device_name, (int)offload_layers, planned, bp_device_name(d->dev), real);
    }
    /* The plan's parts are each non-trivial and the KV cache is exactly
     * 2 x layers x head_dim x n_ctx x kv_heads floats, the first
     * plan.offload_layers layers' share on the device. */
    const struct bp_run_hparams *hp = &m->hp;
    size_t kv_layer = 2 * (size_t)hp->head_dim * (size_t)n_ctx * (size_t)hp->n_head_kv * 4;
    size_t kv = kv_layer * (size_t)hp->n_layer, kv0 = kv_layer * (size_t)plan.offload_layers;
    /* partial0 declines SET_ROWS, so choose_homes keeps every cache on the cpu. */
    if (!strcmp(device_name, "partial0")) kv0 = 0;
    ck_assert_msg(kv_total >= kv && kv_total <= kv + 4096 * (size_t)hp->n_layer, "KV %zu, expected %zu", kv_total, kv);
    ck_assert_msg(plan.d[0].kv_cache >= kv0 && plan.d[0].kv_cache <= kv0 + (kv0 ? 4096 * (size_t)hp->n_layer : 0),
                  "KV on %s %zu, expected %zu", device_name, plan.d[0].kv_cache, kv0);
    ck_assert_uint_ge(weights, bp_run_model_weight_bytes(m));
    if (offload_layers && !cpu) /* the embedding, output and layers past the first on the cpu */
        ck_assert_uint_gt(plan.d[1].weights, plan.d[0].weights);
    ck_assert_uint_gt(prefill, 0);
    free(logits);
    bp_run_session_free(s);
    bp_run_model_free(m);
}

START_TEST(test_plan_matches_the_session_on_builtin_test)
{
    plan_vs_session("test", _i, 64, device_name);
}
END_TEST

/* The same per sub-device of meta:cpu*2 (in every mode's default run, so
 * valgrind and the sanitizers see the meta plugin's measuring too). */
START_TEST(test_plan_matches_the_session_on_meta_cpu2)
{
    plan_vs_session("test", _i, 64, "meta:cpu*2");
}
END_TEST

/* builtin:tiny to tiny_ctx positions (one decode capacity): 100 M parameters. */
START_TEST(test_plan_matches_the_session_on_builtin_tiny)
{
    plan_vs_session("tiny", _i, tiny_ctx, device_name);
}
END_TEST

/* --strict: an op the device declines fails the plan as it fails the
 * session (partial0 declines SET_ROWS), with the scheduler's sentence. */
START_TEST(test_plan_honours_strict)
{
    char err[512] = "", err2[512] = "";
    struct bp_device *dev = bp_device_by_name("partial0");
    ck_assert_ptr_nonnull(dev);
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options bo = { .weight_type = BP_TYPE_F32, .seed = 3 };
    ck_assert(bp_run_model_builtin("test", &bo, &m, err, sizeof err) == BP_OK);
    struct bp_run_plan plan;
    struct bp_run_plan_options po = { .n_ctx = 64, .n_prompt = N_PROMPT, .strict = true };
    bp_status st = bp_run_plan_make(m, dev, &po, &plan, err, sizeof err);
    ck_assert_int_ne(st, BP_OK);
    ck_assert_msg(strstr(err, "SET_ROWS") != NULL, "%s", err);
    struct bp_run_session *s = NULL;
    struct bp_run_session_options so = { .n_ctx = 64, .n_prefill = N_PROMPT, .strict = true };
    ck_assert_int_eq(bp_run_session_new(m, dev, &so, &s, err2, sizeof err2), st);
    ck_assert_msg(strstr(err2, "SET_ROWS") != NULL, "%s", err2);
    /* Without --strict the same plan is made. */
    po.strict = false;
    ck_assert_msg(bp_run_plan_make(m, dev, &po, &plan, err, sizeof err) == BP_OK, "%s", err);
    bp_run_model_free(m);
}
END_TEST

/* The fault plugin's device reports 1000 bytes free: the run stops before
 * the session with the sentence, and --plan --json says it does not fit. */
START_TEST(test_run_refuses_before_allocating_when_the_plan_does_not_fit)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "BACKPLANE_PLUGIN_PATH=%s/safe/libbackplane-fakegood.so "
             "BACKPLANE_BACKENDS=fakegood,cpu " CLI " run --model builtin:test --device fakegood0 "
             "--n-gen 2", BP_TEST_FAULT_DIR);
    int st = cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out);
    ck_assert_msg(st == 1, "exit %d: %s", st, out);
    ck_assert_msg(strstr(out, "fakegood0 needs") && strstr(out, "1000 B free") &&
                  strstr(out, "--device meta:fakegood0,cpu"), "no refusal sentence: %s", out);
    ck_assert_msg(!strstr(out, "uploading"), "it allocated before refusing: %s", out);
    snprintf(cmd, sizeof cmd, "BACKPLANE_PLUGIN_PATH=%s/safe/libbackplane-fakegood.so "
             "BACKPLANE_BACKENDS=fakegood,cpu " CLI " run --model builtin:test --device fakegood0 "
             "--plan --json", BP_TEST_FAULT_DIR);
    st = cli_run(cmd, CLI_OUT_ONLY, out, sizeof out);
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_msg(strstr(out, "\"fits\": false") && strstr(out, "\"memory_free\": 1000"), "%s", out);
}
END_TEST

static int run_cli(const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "BACKPLANE_PLUGIN_PATH=%s/safe/libbackplane-fakegood.so "
             "BACKPLANE_BACKENDS=fakegood,cpu,meta " CLI " run --model builtin:test %s", BP_TEST_FAULT_DIR, args);
    const int st = cli_run(cmd, CLI_OUT_AND_ERR, out, cap);
    ck_assert_msg(st >= 0, "%s: %s", cmd, out);
    return st;
}

/* A meta device's plan has a row per sub-device, and a run refuses naming
 * the sub-device that does not fit (fakegood0: 1000 bytes free). */
START_TEST(test_meta_plan_rows_and_refusal)
{
    char out[16384] = "";
    int rc = run_cli("--device meta:cpu*2 --plan --json", out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "\"sub_devices\"") && strstr(out, "\"allreduce_scratch\"") &&
                  strstr(out, "\"fits\": true"), "%d: %s", rc, out);
    rc = run_cli("--device meta:fakegood0,cpu --n-gen 2", out, sizeof out);
    ck_assert_msg(rc == 1 && strstr(out, "fakegood0 (sub-device 0 of meta") && strstr(out, "1000 B free") &&
                  strstr(out, "BACKPLANE_META_SPLIT"), "%d: %s", rc, out);
    ck_assert_msg(!strstr(out, "uploading"), "it allocated before refusing: %s", out);
}
END_TEST

/* Modes: none (cpu and meta:cpu*2, builtin:test), "tiny", "vulkan" (vulkan0,
 * cpu fallback), "partial" (the scheduler test plugin's partial0: a device
 * with a cpu fallback on any machine; and --strict), "partial-offload" /
 * "vulkan-offload" (the same with --offload-layers 1), "meta-tiny"
 * (builtin:tiny on meta:cpu*2), "meta-vulkan" (builtin:test on
 * meta:cpu,vulkan0); "vulkan-tiny" and "meta-vulkan-tiny": builtin:tiny
 * there, to the prompt and one decode step. */
int main(int argc, char **argv)
{
    const int n_types = (int)(sizeof types / sizeof types[0]);
    const char *mode = argc > 1 ? argv[1] : "";
    const bool tiny = strstr(mode, "tiny") != NULL;
    if (strstr(mode, "-offload")) offload_layers = 1;
    if (strstr(mode, "vulkan")) tiny_ctx = N_PROMPT + 1;
    if (!strncmp(mode, "meta-", 5)) {
        device_name = strstr(mode, "vulkan") ? "meta:cpu,vulkan0" : "meta:cpu*2";
        if (strstr(device_name, "vulkan0") && (!bp_device_count() || !bp_device_by_name("vulkan0"))) {
            fprintf(stderr, "SKIP: no vulkan0 on this machine.\n");
            return 77;
        }
        if (!named_device(device_name)) {
            fprintf(stderr, "no %s: %s\n", device_name, bp_last_error());
            return 1;
        }
        setenv("CK_FORK", "no", 1);
    }
    if (!strncmp(mode, "vulkan", 6) || !strncmp(mode, "partial", 7)) {
        device_name = mode[0] == 'v' ? "vulkan0" : "partial0";
        struct bp_device *v = bp_device_count() ? bp_device_by_name(device_name) : NULL;
        if (!v) {
            fprintf(stderr, "SKIP: no %s on this machine.\n", device_name);
            return 77;
        }
        /* Every plugin (Vulkan too) is up in this process already: no fork. */
        setenv("CK_FORK", "no", 1);
    }
    Suite *s = suite_create("run_plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    /* "tiny" alone: 100 M parameters per type is a minute on the CPU (and
     * minutes per type on lavapipe, or under valgrind), so it is a test of
     * its own. */
    if (tiny && !strcmp(device_name, "cpu")) {
        tcase_add_loop_test(tc, test_plan_matches_the_session_on_builtin_tiny, 0, n_types);
    } else if (tiny) {
        /* Elsewhere builtin:tiny adds the larger shapes to what builtin:test
         * checks per type: F16, Q4_0 and the q4_K_M mix (two weight buffer
         * types) stand for the rest. */
        for (int c = 0; c < n_types; c++)
            if (types[c].mix || types[c].type == BP_TYPE_F16 || types[c].type == BP_TYPE_Q4_0)
                tcase_add_loop_test(tc, test_plan_matches_the_session_on_builtin_tiny, c, c + 1);
    } else {
        tcase_add_loop_test_thinned(tc, test_plan_matches_the_session_on_builtin_test, 0, n_types);
    }
    if (!*mode) {
        tcase_add_loop_test_thinned(tc, test_plan_matches_the_session_on_meta_cpu2, 0, n_types);
        tcase_add_test(tc, test_run_refuses_before_allocating_when_the_plan_does_not_fit);
        tcase_add_test(tc, test_meta_plan_rows_and_refusal);
    }
    if (!strcmp(mode, "partial")) tcase_add_test(tc, test_plan_honours_strict);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
