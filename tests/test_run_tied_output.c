/*
 * test_run_tied_output.c — a tied output (the embedding table projects to
 * the logits) gets its own copy in the device's weight buffer type, so the
 * logits' MUL_MAT runs on the device's layout (the CPU's x8) while GET_ROWS
 * keeps reading the embedding in the default buffer type.
 *
 * The check that needs no tolerance: a tied model and the same model untied
 * with output.weight holding the embedding's bytes run the same kernels on
 * the same bytes, so their logits are bit-equal. Devices without a weight
 * buffer type of their own (meta over CPUs, vulkan) make no copy and must
 * still match the cpu device within rounding.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"
#include "model.h"
#include "split.h"
#include "device_gate.h"
#include "suite_main.h"

#define N_PROMPT 5
#define N_DECODE 3
#define N_TOK (N_PROMPT + N_DECODE)
static const int32_t tokens[N_TOK] = { 3, 141, 59, 265, 358, 97, 93, 238 };

static struct bp_run_model *builtin(enum bp_type t)
{
    char err[512] = "";
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options o = { .weight_type = t, .seed = 11 };
    ck_assert_msg(bp_run_model_builtin("test", &o, &m, err, sizeof err) == BP_OK, "%s", err);
    ck_assert_msg(!m->tied_output, "builtin:test is expected to have an output.weight");
    return m;
}

/* The model's weight of that name, writable (the test rewires the model). */
static struct bp_run_weight *weight(struct bp_run_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, name)) return &m->weights[i];
    ck_abort_msg("no weight %s", name);
    return NULL;
}

/* m tied: the output projection is the embedding, and output.weight (the
 * last weight builtin:test makes) is gone, as in a GGUF file without it. */
static void tie(struct bp_run_model *m)
{
    ck_assert_str_eq(m->weights[m->n_weights - 1].name, "output.weight");
    m->n_weights--;
    m->output = m->tok_embd;
    m->tied_output = true;
}

/* m untied, with output.weight holding the embedding's bytes. */
static void untie_with_embedding_bytes(struct bp_run_model *m)
{
    struct bp_run_weight *out = weight(m, "output.weight"), *emb = weight(m, "token_embd.weight");
    ck_assert_int_eq(out->type, emb->type);
    ck_assert_int_eq(out->size, emb->size);
    out->data = emb->data;
    m->output = out;
    m->tied_output = false;
}

/* Prefill, then decode one by one: logits of every position into out. Every
 * device here computes the whole decoder: a declined node fails the test. */
static bp_status run(const struct bp_run_model *m, struct bp_device *dev, float *out,
                     struct bp_run_session **keep)
{
    char err[1024] = "";
    struct bp_run_session *s = NULL;
    struct bp_run_session_options so = { .n_ctx = 16 };
    bp_status st = bp_run_session_new(m, dev, &so, &s, err, sizeof err);
    if (st == BP_OK) st = bp_run_session_eval(s, tokens, N_PROMPT, true, out, err, sizeof err);
    for (int i = 0; st == BP_OK && i < N_DECODE; i++)
        st = bp_run_session_eval(s, &tokens[N_PROMPT + i], 1, true,
                                 out + (N_PROMPT + i) * m->hp.n_vocab, err, sizeof err);
    ck_assert_msg(st == BP_OK, "%s on %s: %s", m->name, bp_device_name(dev), err);
    if (keep) *keep = s;
    else bp_run_session_free(s);
    return st;
}

static const enum bp_type copied_types[] = { BP_TYPE_Q4_K, BP_TYPE_Q4_0, BP_TYPE_Q8_0 };

START_TEST(test_run_tied_output_is_copied_to_the_weight_buffer_type_and_matches_untied)
{
    const enum bp_type t = copied_types[_i];
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    struct bp_buffer_type *def = bp_device_buffer_type(cpu), *own = bp_device_weight_buffer_type(cpu, t);
    ck_assert_ptr_ne(own, def);
    struct bp_run_model *tied = builtin(t), *untied = builtin(t);
    tie(tied);
    untie_with_embedding_bytes(untied);
    const int64_t V = tied->hp.n_vocab;
    float *a = malloc((size_t)(N_TOK * V) * sizeof *a), *b = malloc((size_t)(N_TOK * V) * sizeof *b);
    struct bp_run_session *s = NULL;
    ck_assert_int_eq(run(tied, cpu, a, &s), BP_OK);
    const struct bp_tensor *copy = bp_run_session_weight(s, "output.weight");
    const struct bp_tensor *emb = bp_run_session_weight(s, "token_embd.weight");
    ck_assert_msg(copy && copy->buffer && copy->buffer->buft == own,
                  "%s: the tied output has no copy in the weight buffer type", bp_type_name(t));
    ck_assert_ptr_ne(copy, emb);
    ck_assert_ptr_eq(emb->buffer->buft, def);
    ck_assert_uint_eq(bp_nbytes(copy), bp_nbytes(emb));
    bp_run_session_free(s);
    ck_assert_int_eq(run(untied, cpu, b, NULL), BP_OK);
    for (int64_t i = 0; i < N_TOK * V; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof a[i]) == 0 && isfinite(a[i]),
                      "%s: logit %lld is %.9g tied, %.9g untied", bp_type_name(t), (long long)i,
                      (double)a[i], (double)b[i]);
    free(a);
    free(b);
    bp_run_model_free(tied);
    bp_run_model_free(untied);
}
END_TEST

/* F32 has no layout of its own on the cpu: no copy, nothing extra. */
START_TEST(test_run_tied_f32_output_is_not_copied)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct bp_run_model *m = builtin(BP_TYPE_F32);
    tie(m);
    float *a = malloc((size_t)(N_TOK * m->hp.n_vocab) * sizeof *a);
    struct bp_run_session *s = NULL;
    ck_assert_int_eq(run(m, cpu, a, &s), BP_OK);
    ck_assert_ptr_null(bp_run_session_weight(s, "output.weight"));
    bp_run_session_free(s);
    free(a);
    bp_run_model_free(m);
}
END_TEST

/* Other devices make no copy (no weight buffer type of their own) and must
 * agree with the cpu, which does. */
static const char *const other_devices[] = { "meta:cpu*2", "meta:cpu*3", "vulkan0" };
enum { N_OTHER_CPU_DEVICES = 2 }; /* the meta ones; vulkan0 runs in its own case */

START_TEST(test_run_tied_q4_k_output_on_other_devices_matches_cpu)
{
    const char *name = other_devices[_i];
    char err[512] = "";
    struct bp_device *cpu = bp_device_by_name("cpu"), *dev = bp_run_find_device(name, err, sizeof err);
    ck_assert_msg(dev != NULL, "device %s is absent (%s)", name, err);
    struct bp_run_model *m = builtin(BP_TYPE_Q4_K);
    tie(m);
    const int64_t V = m->hp.n_vocab;
    float *a = malloc((size_t)(N_TOK * V) * sizeof *a), *b = malloc((size_t)(N_TOK * V) * sizeof *b);
    ck_assert_int_eq(run(m, cpu, a, NULL), BP_OK);
    ck_assert_int_eq(run(m, dev, b, NULL), BP_OK);
    double d = 0, scale = 0;
    for (int64_t i = 0; i < N_TOK * V; i++) {
        ck_assert_msg(isfinite(b[i]), "%s: logit %lld is not finite", name, (long long)i);
        d = fmax(d, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)a[i]));
    }
    /* Same Q8_K activations, other summation order (and Vulkan's own
     * quantization): a small fraction of the largest logit. */
    ck_assert_msg(d <= 2e-2 * scale, "%s: logits differ from cpu by %g (scale %g)", name, d,
                  scale);
    free(a);
    free(b);
    bp_run_model_free(m);
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("run_tied_output");
    TCase *tc = tcase_create("tied");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_run_tied_output_is_copied_to_the_weight_buffer_type_and_matches_untied,
                        0, (int)(sizeof copied_types / sizeof copied_types[0]));
    tcase_add_test(tc, test_run_tied_f32_output_is_not_copied);
    tcase_add_loop_test(tc, test_run_tied_q4_k_output_on_other_devices_matches_cpu, 0,
                        N_OTHER_CPU_DEVICES);
    suite_add_tcase(s, tc);
    TCase *vk = tcase_create("vulkan0");
    tcase_set_tags(vk, "vulkan0");
    tcase_set_timeout(vk, 300);
    tcase_add_loop_test(vk, test_run_tied_q4_k_output_on_other_devices_matches_cpu,
                        N_OTHER_CPU_DEVICES, (int)(sizeof other_devices / sizeof other_devices[0]));
    suite_add_tcase(s, vk);
    return run_suite(s);
}
