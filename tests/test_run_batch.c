/*
 * test_run_batch.c — the batching engine (host/run/batch.h): several slots
 * fed prompts of different lengths at different steps, each then decoding
 * greedily, give at every step the logits the same slot gives when it is
 * the only one busy: the same bits on the cpu device (batch invariance),
 * within a tolerance of the cpu's on meta:cpu*2 and vulkan0. Beside it:
 * a slot cleared and reused, the n_ctx refusals, and decode steps that
 * build and allocate nothing once their plan exists.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "batch.h"
#include "decoder.h"
#include "device_gate.h"
#include "llama_schema.h"
#include "model.h"
#include "split.h"
#include "suite_main.h"

#define DATA BP_TEST_SOURCE_DIR "/tests/data/arch/"
#define MAX_SLOTS 8
#define MAX_EVENTS 64

/* One request: a prompt fed at step `at` into slot `slot` (after `after`
 * requests of that slot finished, when reused), then `gen` greedy tokens. */
struct request {
    int slot, at, n_prompt, gen;
    uint32_t seed;
};

/* What a request saw: its logits each time its queue emptied. */
struct trace {
    int n;
    float *logits[MAX_EVENTS];
};

static void trace_free(struct trace *t)
{
    for (int i = 0; i < t->n; i++) free(t->logits[i]);
    t->n = 0;
}

static int32_t rnd_token(uint32_t *s, int64_t n_vocab)
{
    *s = *s * 1664525u + 1013904223u;
    return (int32_t)((*s >> 8) % (uint32_t)n_vocab);
}

struct model_case {
    const char *name; /* builtin:... or a file of tests/data/arch */
    enum bp_type type;
    bool q4_k_m;
};

static struct bp_run_model *load(const struct model_case *mc)
{
    struct bp_run_model *m = NULL;
    char err[256];
    bp_status st;
    if (!strncmp(mc->name, "builtin:", 8)) {
        struct bp_run_builtin_options o = { .weight_type = mc->type, .seed = 7,
                                            .mix = mc->q4_k_m ? bp_llama_mix_by_name("q4_K_M") : NULL };
        st = bp_run_model_builtin(mc->name + 8, &o, &m, err, sizeof err);
    } else {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", mc->name);
        st = bp_run_model_load_gguf(path, &m, err, sizeof err);
    }
    ck_assert_msg(st == BP_OK, "%s: %s", mc->name, err);
    return m;
}

static struct bp_device *device(const char *name)
{
    char err[256];
    struct bp_device *d = bp_run_find_device(name, err, sizeof err);
    ck_assert_msg(d != NULL, "%s: %s", name, err);
    return d;
}

/* Which decode row counts the last run_requests stepped with. */
static bool rows_seen[MAX_SLOTS + 1];

/* Runs requests r[0..n) (only those with `only` < 0 or index `only`) on a
 * batch of n_slots, filling tr[i] for each request run. Steps until every
 * request is done. A request starts at its step or, when its slot is still
 * busy, once the slot is free (after a clear). */
static void run_requests(const struct bp_run_model *m, struct bp_device *dev, int n_slots, int64_t chunk,
                         const struct request *r, int n, int only, struct trace *tr)
{
    char err[256];
    struct bp_run_batch *b = NULL;
    const struct bp_run_batch_options o = { .n_slots = n_slots, .n_ctx = 256, .n_threads = 2,
                                            .prefill_chunk = chunk };
    ck_assert_msg(bp_run_batch_new(m, dev, &o, &b, err, sizeof err) == BP_OK, "%s", err);
    const int64_t V = bp_run_batch_n_vocab(b);
    memset(rows_seen, 0, sizeof rows_seen);
    int state[16] = {0};          /* 0 waiting, 1 running, 2 done */
    ck_assert_int_le(n, 16);
    ck_assert_int_le(n_slots, MAX_SLOTS);
    int left[16] = {0};           /* tokens still to generate */
    int owner[MAX_SLOTS];
    for (int s = 0; s < MAX_SLOTS; s++) owner[s] = -1;
    for (int i = 0; i < n; i++)
        if (only >= 0 && i != only) state[i] = 2;
    for (int step = 0; step < 1000; step++) {
        bool busy = false;
        for (int i = 0; i < n; i++) {
            if (state[i] != 0 || step < r[i].at || owner[r[i].slot] >= 0) continue;
            uint32_t seed = r[i].seed;
            int32_t prompt[256];
            for (int k = 0; k < r[i].n_prompt; k++) prompt[k] = rnd_token(&seed, V);
            bp_run_batch_clear(b, r[i].slot);
            ck_assert_msg(bp_run_batch_feed(b, r[i].slot, prompt, r[i].n_prompt, err, sizeof err) == BP_OK, "%s", err);
            owner[r[i].slot] = i;
            state[i] = 1;
            left[i] = r[i].gen;
        }
        for (int i = 0; i < n; i++) busy |= state[i] != 2;
        if (!busy) break;
        ck_assert_msg(bp_run_batch_step(b, err, sizeof err) == BP_OK, "%s", err);
        struct bp_run_batch_step_info info;
        bp_run_batch_last_step(b, &info);
        if (info.decode_rows < MAX_SLOTS + 1) rows_seen[info.decode_rows] = true;
        for (int s = 0; s < n_slots; s++) {
            const float *lg = bp_run_batch_logits(b, s);
            const int i = owner[s];
            if (!lg || i < 0) continue;
            ck_assert_int_lt(tr[i].n, MAX_EVENTS);
            float *copy = malloc((size_t)V * sizeof *copy);
            ck_assert_ptr_nonnull(copy);
            memcpy(copy, lg, (size_t)V * sizeof *copy);
            tr[i].logits[tr[i].n++] = copy;
            if (left[i]-- > 0) {
                const int32_t t = bp_run_argmax(lg, V);
                ck_assert_msg(bp_run_batch_feed(b, s, &t, 1, err, sizeof err) == BP_OK, "%s", err);
            } else {
                state[i] = 2;
                owner[s] = -1;
            }
        }
    }
    for (int i = 0; i < n; i++) ck_assert_msg(state[i] == 2, "request %d did not finish", i);
    bp_run_batch_free(b);
}

/* Four slots, five requests: prompts of 5 to 70 tokens (chunks of 16; the
 * longest crosses the 32 and 64 position capacities), fed at steps 0 to 9,
 * and slot 2 reused by a later request after its first one ends. */
static const struct request scenario[] = {
    { .slot = 0, .at = 0, .n_prompt = 5, .gen = 12, .seed = 1 },
    { .slot = 1, .at = 0, .n_prompt = 40, .gen = 8, .seed = 2 },
    { .slot = 2, .at = 4, .n_prompt = 3, .gen = 5, .seed = 3 },
    { .slot = 3, .at = 2, .n_prompt = 70, .gen = 6, .seed = 4 },
    { .slot = 2, .at = 9, .n_prompt = 17, .gen = 7, .seed = 5 },
};
#define N_SCENARIO (int)(sizeof scenario / sizeof scenario[0])

/* Seven slots, nine requests: the decode steps take 1 to 7 rows (the x8
 * kernels' wide calls: 5, 6 and 7 rows in one call, odd counts included),
 * as requests start and end at different steps. */
struct scenario_set {
    const struct request *r;
    int n, n_slots;
    bool every_count; /* the busy run must step with each row count 1..n_slots */
};
static const struct scenario_set four_slots = { scenario, N_SCENARIO, 4, false };
static const struct request wide[] = {
    { .slot = 0, .at = 0, .n_prompt = 4, .gen = 14, .seed = 11 },
    { .slot = 1, .at = 0, .n_prompt = 9, .gen = 12, .seed = 12 },
    { .slot = 2, .at = 1, .n_prompt = 3, .gen = 11, .seed = 13 },
    { .slot = 3, .at = 1, .n_prompt = 20, .gen = 9, .seed = 14 },
    { .slot = 4, .at = 2, .n_prompt = 5, .gen = 10, .seed = 15 },
    { .slot = 5, .at = 2, .n_prompt = 2, .gen = 8, .seed = 16 },
    { .slot = 6, .at = 3, .n_prompt = 6, .gen = 7, .seed = 17 },
    { .slot = 1, .at = 14, .n_prompt = 3, .gen = 4, .seed = 18 },
    { .slot = 5, .at = 12, .n_prompt = 2, .gen = 6, .seed = 19 },
};
static const struct scenario_set seven_slots = { wide, (int)(sizeof wide / sizeof wide[0]), 7, true };

/* max |a - b| over V, relative to max |b|. */
static double rel_diff(const float *a, const float *b, int64_t V)
{
    double d = 0, mx = 0;
    for (int64_t i = 0; i < V; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return mx > 0 ? d / mx : d;
}

/* Every request's trace in the busy batch on dev equals (cpu: bit for bit;
 * else within tol of) the request alone on ref_dev. */
static void check_invariance_of(const struct model_case *mc, const char *dev_name, const char *ref_name,
                                double tol, const struct scenario_set *sc)
{
    struct bp_run_model *m = load(mc);
    struct trace busy[16] = {0}, alone[16] = {0};
    run_requests(m, device(dev_name), sc->n_slots, 16, sc->r, sc->n, -1, busy);
    for (int k = 1; sc->every_count && k <= sc->n_slots; k++)
        ck_assert_msg(rows_seen[k], "no decode step with %d rows of %d slots", k, sc->n_slots);
    for (int i = 0; i < sc->n; i++)
        run_requests(m, device(ref_name), sc->n_slots, 16, sc->r, sc->n, i, alone);
    const int64_t V = m->hp.n_vocab;
    for (int i = 0; i < sc->n; i++) {
        ck_assert_int_eq(busy[i].n, sc->r[i].gen + 1);
        ck_assert_int_eq(busy[i].n, alone[i].n);
        for (int k = 0; k < busy[i].n; k++) {
            if (tol == 0) {
                ck_assert_msg(!memcmp(busy[i].logits[k], alone[i].logits[k], (size_t)V * sizeof(float)),
                              "%s on %s: request %d's logits %d differ beside others (max rel %.3g)",
                              mc->name, dev_name, i, k, rel_diff(busy[i].logits[k], alone[i].logits[k], V));
            } else {
                const double d = rel_diff(busy[i].logits[k], alone[i].logits[k], V);
                ck_assert_msg(d <= tol, "%s on %s: request %d's logits %d are %.3g from %s's", mc->name,
                              dev_name, i, k, d, ref_name);
            }
        }
        trace_free(&busy[i]);
        trace_free(&alone[i]);
    }
    bp_run_model_free(m);
}

static void check_invariance(const struct model_case *mc, const char *dev_name, const char *ref_name, double tol)
{
    check_invariance_of(mc, dev_name, ref_name, tol, &four_slots);
}

static const struct model_case cpu_models[] = {
    { "builtin:test", BP_TYPE_F32, false },
    { "builtin:test", BP_TYPE_Q4_0, false },
    { "builtin:test", BP_TYPE_Q8_0, false },
    { "builtin:test", BP_TYPE_F16, false },
    { "builtin:test", BP_TYPE_COUNT, true }, /* q4_K_M: q4_K and q6_K */
    { "gemma2.gguf", BP_TYPE_COUNT, false },  /* sliding window, softcaps, GELU */
    { "mistral3.gguf", BP_TYPE_COUNT, false }, /* attention temperature */
    { "qwen2-256-q4_k_m.gguf", BP_TYPE_COUNT, false },
    { "llama-qkv.gguf", BP_TYPE_COUNT, false },
};
#define N_CPU_MODELS (int)(sizeof cpu_models / sizeof cpu_models[0])

START_TEST(test_batch_logits_equal_alone_on_cpu)
{
    /* Under valgrind (tests/valgrind.cmake) every other model: each takes
     * minutes there, and ASan's stage runs them all. */
    if (getenv("BP_UNDER_VALGRIND") && _i % 2 == 1) return;
    check_invariance(&cpu_models[_i], "cpu", "cpu", 0);
}
END_TEST

/* Up to 7 decode rows a step: the wide x8 calls (Q4_0, Q8_0) and the
 * 4-column ones twice (q4_K_M) give each row the bits it has alone. */
START_TEST(test_batch_wide_logits_equal_alone_on_cpu)
{
    static const struct model_case mcs[] = {
        { "builtin:test", BP_TYPE_Q4_0, false },
        { "builtin:test", BP_TYPE_Q8_0, false },
        { "builtin:test", BP_TYPE_COUNT, true },
    };
    /* Under valgrind (no AVX-512 there: 4-column kernels) Q4_0 alone. */
    if (getenv("BP_UNDER_VALGRIND") && _i > 0) return;
    check_invariance_of(&mcs[_i], "cpu", "cpu", 0, &seven_slots);
}
END_TEST

START_TEST(test_batch_on_meta_close_to_cpu)
{
    static const struct model_case mcs[] = {
        { "builtin:test", BP_TYPE_Q4_0, false },
        { "gemma2.gguf", BP_TYPE_COUNT, false },
    };
    check_invariance(&mcs[_i], "meta:cpu*2", "cpu", 2e-3);
}
END_TEST

START_TEST(test_batch_on_vulkan_close_to_cpu)
{
    static const struct model_case mcs[] = {
        { "builtin:test", BP_TYPE_F32, false },
        { "gemma2.gguf", BP_TYPE_COUNT, false },
    };
    check_invariance(&mcs[_i], "vulkan0", "cpu", 2e-3);
}
END_TEST

START_TEST(test_batch_refuses_past_n_ctx)
{
    const struct model_case mc = { "builtin:test", BP_TYPE_Q4_0, false };
    struct bp_run_model *m = load(&mc);
    char err[256];
    struct bp_run_batch *b = NULL;
    const struct bp_run_batch_options o = { .n_slots = 2, .n_ctx = 40, .prefill_chunk = 16 };
    ck_assert_int_eq(bp_run_batch_new(m, device("cpu"), &o, &b, err, sizeof err), BP_OK);
    ck_assert_int_eq(bp_run_batch_n_ctx(b), 40);
    int32_t toks[41] = {0};
    ck_assert_int_eq(bp_run_batch_feed(b, 0, toks, 41, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err, "do not fit") != NULL, "%s", err);
    ck_assert_int_eq(bp_run_batch_n_queued(b, 0), 0);
    ck_assert_int_eq(bp_run_batch_feed(b, 0, toks, 39, err, sizeof err), BP_OK);
    ck_assert_int_eq(bp_run_batch_feed(b, 0, toks, 1, err, sizeof err), BP_OK);
    ck_assert_int_eq(bp_run_batch_feed(b, 0, toks, 1, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(bp_run_batch_step(b, err, sizeof err), BP_OK);
    ck_assert_int_eq(bp_run_batch_n_past(b, 0), 40);
    ck_assert_ptr_nonnull(bp_run_batch_logits(b, 0));
    ck_assert_int_eq(bp_run_batch_feed(b, 0, toks, 1, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    /* the other slot still has its whole region; bad slots and tokens are refused */
    ck_assert_int_eq(bp_run_batch_feed(b, 1, toks, 40, err, sizeof err), BP_OK);
    ck_assert_int_eq(bp_run_batch_feed(b, 2, toks, 1, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    int32_t bad = 512;
    bp_run_batch_clear(b, 0);
    ck_assert_int_eq(bp_run_batch_feed(b, 0, &bad, 1, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_run_batch_n_past(b, 0), 0);
    bp_run_batch_free(b);
    bp_run_model_free(m);
}
END_TEST

/* Three slots decoding in one capacity: after the first step the steps
 * build no graph and allocate no buffer; every step has 3 decode rows. */
START_TEST(test_batch_decode_steps_allocate_nothing)
{
    const struct model_case mc = { "builtin:test", BP_TYPE_Q4_0, false };
    struct bp_run_model *m = load(&mc);
    char err[256];
    struct bp_run_batch *b = NULL;
    const struct bp_run_batch_options o = { .n_slots = 4, .n_ctx = 64, .prefill_chunk = 16 };
    ck_assert_int_eq(bp_run_batch_new(m, device("cpu"), &o, &b, err, sizeof err), BP_OK);
    const int32_t prompt[4] = { 1, 2, 3, 4 };
    for (int s = 0; s < 3; s++) ck_assert_int_eq(bp_run_batch_feed(b, s, prompt, 4, err, sizeof err), BP_OK);
    struct bp_run_batch_step_info info;
    ck_assert_int_eq(bp_run_batch_step(b, err, sizeof err), BP_OK); /* the three prompts: 12 <= 16 tokens */
    bp_run_batch_last_step(b, &info);
    ck_assert_int_eq(info.prefill_tokens, 12);
    struct bp_run_session_stats before, after;
    for (int k = 0; k < 6; k++) {
        for (int s = 0; s < 3; s++) {
            const float *lg = bp_run_batch_logits(b, s);
            ck_assert_ptr_nonnull(lg);
            const int32_t t = bp_run_argmax(lg, bp_run_batch_n_vocab(b));
            ck_assert_int_eq(bp_run_batch_feed(b, s, &t, 1, err, sizeof err), BP_OK);
        }
        ck_assert_int_eq(bp_run_batch_step(b, err, sizeof err), BP_OK);
        bp_run_batch_last_step(b, &info);
        ck_assert_int_eq(info.decode_rows, 3);
        ck_assert_int_eq(info.prefill_tokens, 0);
        if (k == 0) bp_run_session_get_stats(bp_run_batch_session(b), &before);
    }
    bp_run_session_get_stats(bp_run_batch_session(b), &after);
    ck_assert_uint_eq(after.graphs_built, before.graphs_built);
    ck_assert_uint_eq(after.buffers_allocated, before.buffers_allocated);
    bp_run_batch_free(b);
    bp_run_model_free(m);
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("run_batch");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_batch_logits_equal_alone_on_cpu, 0, N_CPU_MODELS);
    tcase_add_loop_test(tc, test_batch_wide_logits_equal_alone_on_cpu, 0, 3);
    tcase_add_test(tc, test_batch_refuses_past_n_ctx);
    tcase_add_test(tc, test_batch_decode_steps_allocate_nothing);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("meta");
    tcase_set_timeout(tm, 600);
    tcase_add_loop_test(tm, test_batch_on_meta_close_to_cpu, 0, 2);
    suite_add_tcase(s, tm);
    TCase *tv = tcase_create("vulkan0");
    tcase_set_tags(tv, "vulkan0");
    tcase_set_timeout(tv, 600);
    tcase_add_loop_test(tv, test_batch_on_vulkan_close_to_cpu, 0, 2);
    suite_add_tcase(s, tv);
    return run_suite(s);
}
