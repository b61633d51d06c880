/*
 * test_run_decoder.c — the runner's logits on builtin:test against a forward
 * pass written here in plain loops (double, its own RoPE, attention and
 * SwiGLU, from the weights dequantized with bp_dequantize), for every weight
 * type the cpu device computes; then the same tokens and close logits on
 * other devices (meta over 2 and 3 CPU sub-devices, vulkan0) when present;
 * llama.cpp's q4_K_M mix (q4_K and q6_K tensors in one model) on each.
 * Q4_0 weights read only by MUL_MAT go to the cpu's weight buffer type
 * (bp_device_weight_buffer_type), the rest to the default one.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "bp_cpu.h"
#include "decoder.h"
#include "llama_schema.h"
#include "model.h"
#include "split.h"
#include "device_gate.h"
#include "suite_main.h"

#define N_PROMPT 5
#define N_DECODE 3
#define N_TOK (N_PROMPT + N_DECODE)
static const int32_t tokens[N_TOK] = { 7, 300, 42, 511, 0, 99, 256, 13 };

/* ------------------------------------------------ the reference forward */

static double *deq(const struct bp_run_weight *w)
{
    const int64_t n = w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3];
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(d);
    if (w->type == BP_TYPE_F32) memcpy(f, w->data, (size_t)n * 4);
    else if (w->type == BP_TYPE_F16)
        for (int64_t i = 0; i < n; i++) f[i] = bp_f16_to_f32(((const uint16_t *)w->data)[i]);
    else if (w->type == BP_TYPE_BF16)
        for (int64_t i = 0; i < n; i++) f[i] = bp_bf16_to_f32(((const uint16_t *)w->data)[i]);
    else ck_assert_int_eq(bp_dequantize(w->type, w->data, f, n), BP_OK);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

/* y[N] = W[N rows of K] . x[K] */
static void matvec(const double *W, const double *x, double *y, int64_t K, int64_t N)
{
    for (int64_t n = 0; n < N; n++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += W[n * K + k] * x[k];
        y[n] = s;
    }
}

static void rmsnorm(const double *x, const double *g, double *y, int64_t n, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * g[i];
}

/* Adjacent pairs (GGUF llama's "normal" rope). */
static void rope(double *v, int64_t n_heads, int64_t D, int64_t n_rot, int64_t pos, double base)
{
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < n_rot / 2; i++) {
            const double th = (double)pos * pow(base, -2.0 * (double)i / (double)n_rot);
            double *p = v + h * D + 2 * i;
            const double a = p[0], b = p[1];
            p[0] = a * cos(th) - b * sin(th);
            p[1] = a * sin(th) + b * cos(th);
        }
}

/* Logits [n][n_vocab] of the causal forward pass over toks. */
static double *reference(const struct bp_run_model *m, const int32_t *toks, int64_t n)
{
    const struct bp_run_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    const int64_t Dq = H * D, Dkv = Hkv * D, F = hp->n_ff, V = hp->n_vocab;
    double *x = calloc((size_t)(n * E), sizeof *x), *h = malloc((size_t)E * sizeof *h);
    double *q = malloc((size_t)(n * Dq) * sizeof *q), *k = malloc((size_t)(n * Dkv) * sizeof *k);
    double *v = malloc((size_t)(n * Dkv) * sizeof *v), *a = malloc((size_t)Dq * sizeof *a);
    double *o = malloc((size_t)E * sizeof *o), *g = malloc((size_t)F * sizeof *g);
    double *u = malloc((size_t)F * sizeof *u), *sc = malloc((size_t)n * sizeof *sc);
    double *logits = malloc((size_t)(n * V) * sizeof *logits);

    double *emb = deq(m->tok_embd);
    for (int64_t t = 0; t < n; t++) memcpy(x + t * E, emb + toks[t] * E, (size_t)E * sizeof *x);
    for (int64_t l = 0; l < hp->n_layer; l++) {
        const struct bp_run_layer *L = &m->layers[l];
        double *wn = deq(L->attn_norm), *wo = deq(L->wo), *fn = deq(L->ffn_norm);
        double *wg = deq(L->gate), *wu = deq(L->up), *wd = deq(L->down);
        double *wq, *wk, *wv, *wqkv = NULL;
        if (L->wqkv) {
            wqkv = deq(L->wqkv);
            wq = wqkv; wk = wqkv + Dq * E; wv = wqkv + (Dq + Dkv) * E;
        } else {
            wq = deq(L->wq); wk = deq(L->wk); wv = deq(L->wv);
        }
        for (int64_t t = 0; t < n; t++) {
            rmsnorm(x + t * E, wn, h, E, hp->rms_eps);
            matvec(wq, h, q + t * Dq, E, Dq);
            matvec(wk, h, k + t * Dkv, E, Dkv);
            matvec(wv, h, v + t * Dkv, E, Dkv);
            rope(q + t * Dq, H, D, hp->n_rot, t, hp->rope_base);
            rope(k + t * Dkv, Hkv, D, hp->n_rot, t, hp->rope_base);
        }
        for (int64_t t = 0; t < n; t++) {
            for (int64_t hh = 0; hh < H; hh++) {
                const int64_t kh = hh / (H / Hkv);
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= t; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += q[t * Dq + hh * D + d] * k[j * Dkv + kh * D + d];
                    sc[j] = s / sqrt((double)D);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int64_t j = 0; j <= t; j++) { sc[j] = exp(sc[j] - mx); sum += sc[j]; }
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= t; j++) acc += sc[j] * v[j * Dkv + kh * D + d];
                    a[hh * D + d] = acc / sum;
                }
            }
            matvec(wo, a, o, Dq, E);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[i];
            rmsnorm(x + t * E, fn, h, E, hp->rms_eps);
            matvec(wg, h, g, E, F);
            matvec(wu, h, u, E, F);
            for (int64_t i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            matvec(wd, g, o, F, E);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[i];
        }
        free(wn); free(wo); free(fn); free(wg); free(wu); free(wd);
        if (wqkv) free(wqkv);
        else { free(wq); free(wk); free(wv); }
    }
    double *on = deq(m->out_norm), *wout = m->tied_output ? emb : deq(m->output);
    for (int64_t t = 0; t < n; t++) {
        rmsnorm(x + t * E, on, h, E, hp->rms_eps);
        matvec(wout, h, logits + t * V, E, V);
    }
    if (wout != emb) free(wout);
    free(emb); free(on);
    free(x); free(h); free(q); free(k); free(v); free(a); free(o); free(g); free(u); free(sc);
    return logits;
}

/* ------------------------------------------------------- the runner side */

static struct bp_run_model *builtin(enum bp_type t, bool fused)
{
    char err[512] = "";
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options o = { .weight_type = t, .seed = 7, .fused_qkv = fused };
    bp_status s = bp_run_model_builtin("test", &o, &m, err, sizeof err);
    ck_assert_msg(s == BP_OK, "builtin:test in %s: %s", bp_type_name(t), err);
    return m;
}

/* Prefill N_PROMPT tokens (all positions), then decode N_DECODE tokens one
 * by one; logits of all N_TOK positions into out. Every device tested here
 * computes the whole decoder, so a declined node fails the test. */
static bp_status run_on_device(const struct bp_run_model *m, struct bp_device *dev, float *out)
{
    char err[1024] = "";
    struct bp_run_session *s = NULL;
    struct bp_run_session_options so = { .n_ctx = 16 };
    bp_status st = bp_run_session_new(m, dev, &so, &s, err, sizeof err);
    if (st == BP_OK) st = bp_run_session_eval(s, tokens, N_PROMPT, true, out, err, sizeof err);
    for (int i = 0; st == BP_OK && i < N_DECODE; i++)
        st = bp_run_session_eval(s, &tokens[N_PROMPT + i], 1, true,
                                 out + (N_PROMPT + i) * m->hp.n_vocab, err, sizeof err);
    if (st == BP_OK) ck_assert_int_eq(bp_run_session_n_past(s), N_TOK);
    bp_run_session_free(s);
    ck_assert_msg(st == BP_OK, "%s on %s: %s", m->name, bp_device_name(dev), err);
    return st;
}

static bp_status run_on(const struct bp_run_model *m, struct bp_device *dev, float *out)
{
    return run_on_device(m, dev, out);
}

/* Largest |a - b| over n, and the largest |b| (the scale). */
static double max_diff(const float *a, const double *b, int64_t n, double *scale)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(a[i]), "non-finite logit at %lld", (long long)i);
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    *scale = s;
    return d;
}

static int32_t argmax_d(const double *v, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++) if (v[i] > v[b]) b = i;
    return (int32_t)b;
}

/* Tolerance relative to the largest logit: f32 only sees summation order;
 * f16/bf16 weights are exact after dequantization, but devices may round
 * activations; quantized types let devices quantize activations to 8 bits. */
static double tolerance(enum bp_type t)
{
    switch (t) {
    case BP_TYPE_F32: return 1e-4;
    case BP_TYPE_F16: case BP_TYPE_BF16: return 1e-2;
    default: return 3e-2;
    }
}

static void check_type(enum bp_type t, bool fused)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    struct bp_run_model *m = builtin(t, fused);
    const int64_t V = m->hp.n_vocab;
    float *got = malloc((size_t)(N_TOK * V) * sizeof *got);
    if (run_on(m, cpu, got) == BP_OK) {
        double *want = reference(m, tokens, N_TOK), scale;
        double d = max_diff(got, want, N_TOK * V, &scale);
        ck_assert_msg(d <= tolerance(t) * scale, "%s%s: logits differ by %g (scale %g, tolerance %g)",
                      bp_type_name(t), fused ? " fused" : "", d, scale, tolerance(t) * scale);
        if (t == BP_TYPE_F32)
            for (int i = 0; i < N_TOK; i++)
                ck_assert_int_eq(bp_run_argmax(got + i * V, V), argmax_d(want + i * V, V));
        free(want);
    }
    free(got);
    bp_run_model_free(m);
}

START_TEST(test_run_f32_logits_match_reference_forward_pass)
{ check_type(BP_TYPE_F32, false); }
END_TEST

START_TEST(test_run_fused_qkv_logits_match_reference_forward_pass)
{ check_type(BP_TYPE_F32, true); }
END_TEST

static const enum bp_type other_types[] = { BP_TYPE_F16, BP_TYPE_BF16, BP_TYPE_Q4_0, BP_TYPE_Q8_0,
                                            BP_TYPE_Q4_K, BP_TYPE_Q6_K };

START_TEST(test_run_every_weight_type_matches_reference_within_its_tolerance)
{ check_type(other_types[_i], false); }
END_TEST

/* The buffer type the session put weight `name` in. */
static struct bp_buffer_type *placed(const struct bp_run_session *s, const char *name)
{
    const struct bp_tensor *t = bp_run_session_weight(s, name);
    ck_assert_msg(t && t->buffer, "weight %s has no device tensor", name);
    return t->buffer->buft;
}

/* m in Q4_0: every projection (and an untied output) in the cpu's weight
 * buffer type, embeddings and norms in the default one; logits as the
 * plain-loop forward pass gives them. */
static void check_q4_0_placement_on(struct bp_run_model *m, bool fused, const char *name)
{
    char err[512] = "";
    struct bp_device *cpu = bp_run_find_device(name, err, sizeof err);
    ck_assert_msg(cpu != NULL, "device %s is absent (%s)", name, err);
    struct bp_buffer_type *def = bp_device_buffer_type(cpu);
    struct bp_buffer_type *own = bp_device_weight_buffer_type(cpu, BP_TYPE_Q4_0);
    ck_assert_msg(own != def, "%s offers no weight buffer type for q4_0", name);
    struct bp_run_session *s = NULL;
    ck_assert_msg(bp_run_session_new(m, cpu, &(struct bp_run_session_options){ .n_ctx = 16 }, &s,
                                     err, sizeof err) == BP_OK, "%s", err);
    static const char *const separate[] = { "attn_q", "attn_k", "attn_v", "attn_output",
                                            "ffn_gate", "ffn_up", "ffn_down", NULL };
    static const char *const joint[] = { "attn_qkv", "attn_output", "ffn_gate", "ffn_up",
                                         "ffn_down", NULL };
    for (int l = 0; l < m->hp.n_layer; l++) {
        char nm[64];
        for (const char *const *p = fused ? joint : separate; *p; p++) {
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, *p);
            ck_assert_msg(placed(s, nm) == own, "%s is not in the weight buffer type", nm);
        }
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", l);
        ck_assert_ptr_eq(placed(s, nm), def);
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
        ck_assert_ptr_eq(placed(s, nm), def);
    }
    ck_assert_ptr_eq(placed(s, "token_embd.weight"), def);
    ck_assert_ptr_eq(placed(s, "output_norm.weight"), def);
    if (!m->tied_output) ck_assert_ptr_eq(placed(s, "output.weight"), own);
    bp_run_session_free(s);

    const int64_t V = m->hp.n_vocab;
    float *got = malloc((size_t)(N_TOK * V) * sizeof *got);
    ck_assert_int_eq(run_on_device(m, cpu, got), BP_OK);
    double *want = reference(m, tokens, N_TOK), scale;
    double d = max_diff(got, want, N_TOK * V, &scale);
    ck_assert_msg(d <= tolerance(BP_TYPE_Q4_0) * scale, "q4_0%s%s on %s: logits differ by %g (scale %g)",
                  fused ? " fused" : "", m->tied_output ? " tied" : "", name, d, scale);
    free(want);
    free(got);
}

static void check_q4_0_placement(struct bp_run_model *m, bool fused)
{
    check_q4_0_placement_on(m, fused, "cpu");
}

START_TEST(test_run_puts_q4_0_mul_mat_weights_in_the_device_weight_buffer_type)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q4_0, _i == 1);
    check_q4_0_placement(m, _i == 1);
    bp_run_model_free(m);
}
END_TEST

/* A meta device over CPUs offers a weight buffer type of its own whose
 * slices go to each CPU's weight buffer type (its x8 layout): weights split
 * by rows (Q, K, V, gate, up) and by columns (output, down) are scattered
 * into it and computed through the x8 kernels, within the same tolerance of
 * the plain-loop forward pass; meta:cpu*3 leaves one device without K and V
 * heads (2 of them over 3 devices), so one of its slices is empty. */
START_TEST(test_run_meta_keeps_q4_0_slices_in_the_cpus_weight_buffer_type)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q4_0, _i == 1);
    check_q4_0_placement_on(m, _i == 1, "meta:cpu*2");
    check_q4_0_placement_on(m, _i == 1, "meta:cpu*3");
    bp_run_model_free(m);
}
END_TEST

/* A tied output is the embedding table, which GET_ROWS reads too: it stays
 * in the default buffer type and the logits still match. */
START_TEST(test_run_keeps_a_tied_q4_0_output_in_the_default_buffer_type)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q4_0, false);
    m->output = m->tok_embd;
    m->tied_output = true;
    check_q4_0_placement(m, false);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_run_fused_and_separate_qkv_give_identical_logits)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct bp_run_model *a = builtin(BP_TYPE_F32, false), *b = builtin(BP_TYPE_F32, true);
    const int64_t V = a->hp.n_vocab;
    float *la = malloc((size_t)(N_TOK * V) * 4), *lb = malloc((size_t)(N_TOK * V) * 4);
    ck_assert_int_eq(run_on(a, cpu, la), BP_OK);
    ck_assert_int_eq(run_on(b, cpu, lb), BP_OK);
    for (int64_t i = 0; i < N_TOK * V; i++)
        ck_assert_msg(fabsf(la[i] - lb[i]) <= 1e-4f * (1.0f + fabsf(la[i])), "logit %lld: %g vs %g",
                      (long long)i, la[i], lb[i]);
    free(la); free(lb);
    bp_run_model_free(a);
    bp_run_model_free(b);
}
END_TEST

START_TEST(test_run_eval_refuses_tokens_outside_vocabulary_and_context)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32, false);
    struct bp_run_session *s;
    char err[512];
    float *lg = malloc((size_t)m->hp.n_vocab * 8 * 4);
    ck_assert_int_eq(bp_run_session_new(m, bp_device_by_name("cpu"),
                                        &(struct bp_run_session_options){ .n_ctx = 4 }, &s, err,
                                        sizeof err), BP_OK);
    const int32_t bad[1] = { 512 };
    ck_assert_int_eq(bp_run_session_eval(s, bad, 1, true, lg, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err, "outside the vocabulary"));
    ck_assert_int_eq(bp_run_session_eval(s, tokens, 5, true, lg, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err, "do not fit"));
    ck_assert_int_eq(bp_run_session_n_past(s), 0);
    free(lg);
    bp_run_session_free(s);
    bp_run_model_free(m);
}
END_TEST

/* ------------------------------------------------------ other devices */

static void check_device_against_cpu(const char *name, bool fused)
{
    char err[512] = "";
    struct bp_device *cpu = bp_device_by_name("cpu"), *dev = bp_run_find_device(name, err, sizeof err);
    ck_assert_msg(dev != NULL, "device %s is absent (%s)", name, err);
    struct bp_run_model *m = builtin(BP_TYPE_F32, fused);
    const int64_t V = m->hp.n_vocab;
    float *a = malloc((size_t)(N_TOK * V) * 4), *b = malloc((size_t)(N_TOK * V) * 4);
    ck_assert_int_eq(run_on(m, cpu, a), BP_OK);
    /* A meta device over CPUs computes whatever the cpu device does (its
     * split rules cover the whole decoder), and vulkan0 has every op. */
    if (run_on_device(m, dev, b) == BP_OK) {
        double d = 0;
        for (int64_t i = 0; i < N_TOK * V; i++) d = fmax(d, fabs((double)a[i] - b[i]));
        ck_assert_msg(d < 1e-3, "%s: logits differ from cpu by %g", name, d);
        for (int i = 0; i < N_TOK; i++)
            ck_assert_msg(bp_run_argmax(a + i * V, V) == bp_run_argmax(b + i * V, V),
                          "%s: argmax differs from cpu at position %d", name, i);
    }
    free(a); free(b);
    bp_run_model_free(m);
}

START_TEST(test_run_meta_over_two_cpus_matches_cpu)
{ check_device_against_cpu("meta:cpu*2", false); }
END_TEST

/* 2 kv heads over 3 devices: one device holds no heads at all. */
START_TEST(test_run_meta_over_three_cpus_with_a_zero_slice_matches_cpu)
{
    check_device_against_cpu("meta:cpu*3", false);
    check_device_against_cpu("meta:cpu*3", true);
}
END_TEST

START_TEST(test_run_vulkan0_matches_cpu)
{ check_device_against_cpu("vulkan0", false); }
END_TEST

/* builtin:test in llama.cpp's q4_K_M (q4_K, with q6_K in output and in
 * layer 1's attn_v and ffn_down) on name: its logits within the quantized
 * tolerance of the plain-loop forward pass over the same weights, and of
 * the cpu's. */
static void check_mix_on(const char *name, bool fused)
{
    char err[512] = "";
    struct bp_device *cpu = bp_device_by_name("cpu"), *dev = bp_run_find_device(name, err, sizeof err);
    ck_assert_msg(dev != NULL, "device %s is absent (%s)", name, err);
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options o = { .mix = bp_llama_mix_by_name("q4_K_M"), .seed = 7, .fused_qkv = fused };
    ck_assert_msg(bp_run_model_builtin("test", &o, &m, err, sizeof err) == BP_OK, "%s", err);
    ck_assert_int_eq(m->output->type, BP_TYPE_Q6_K);
    ck_assert_int_eq(m->layers[1].down->type, BP_TYPE_Q6_K);
    ck_assert_int_eq(m->layers[0].down->type, BP_TYPE_Q4_K);
    const int64_t V = m->hp.n_vocab;
    float *a = malloc((size_t)(N_TOK * V) * 4), *b = malloc((size_t)(N_TOK * V) * 4);
    ck_assert_int_eq(run_on(m, cpu, a), BP_OK);
    if (run_on_device(m, dev, b) == BP_OK) {
        double *want = reference(m, tokens, N_TOK), scale, d_cpu = 0;
        double d = max_diff(b, want, N_TOK * V, &scale);
        for (int64_t i = 0; i < N_TOK * V; i++) d_cpu = fmax(d_cpu, fabs((double)a[i] - b[i]));
        const double tol = tolerance(BP_TYPE_Q4_K) * scale;
        ck_assert_msg(d <= tol, "q4_K_M%s on %s: logits differ from the reference by %g (tolerance %g)",
                      fused ? " fused" : "", name, d, tol);
        ck_assert_msg(d_cpu <= tol, "q4_K_M%s on %s: logits differ from cpu by %g (tolerance %g)",
                      fused ? " fused" : "", name, d_cpu, tol);
        free(want);
    }
    free(a); free(b);
    bp_run_model_free(m);
}

START_TEST(test_run_q4_K_M_mix_on_cpu_and_meta_matches_reference)
{
    check_mix_on("cpu", _i == 1);
    check_mix_on("meta:cpu*2", _i == 1);
}
END_TEST

START_TEST(test_run_q4_K_M_mix_on_vulkan0_matches_reference_and_cpu)
{ check_mix_on("vulkan0", false); }
END_TEST

static struct bp_meta_split split_of(const struct bp_run_split_table *t, const char *name)
{
    struct bp_meta_split sp;
    if (!bp_meta_rules_match(&t->table, name, &sp)) sp.state = BP_META_SPLIT_MIRRORED;
    return sp;
}

START_TEST(test_run_split_table_keeps_gqa_groups_and_blocks_together)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q8_0, false);
    struct bp_run_split_table t;
    bp_run_split_table_init(&t, m);
    struct bp_meta_split r = split_of(&t, "blk.1.attn_q.weight");
    ck_assert_int_eq(r.state, BP_META_SPLIT_AXIS_1);
    ck_assert_int_eq(r.granularity, 128);   /* a GQA group: 2 heads of 64 */
    ck_assert_int_eq(r.rotation, 1);
    r = split_of(&t, "blk.1.attn_k.weight");
    ck_assert_int_eq(r.granularity, 64);    /* its one kv head */
    r = split_of(&t, "blk.0.attn_output.weight");
    ck_assert_int_eq(r.state, BP_META_SPLIT_AXIS_0);
    r = split_of(&t, "blk.0.ffn_down.weight");
    ck_assert_int_eq(r.state, BP_META_SPLIT_AXIS_0);
    ck_assert_int_eq(r.granularity, 32);    /* whole q8_0 blocks */
    r = split_of(&t, "blk.1.cache_v");
    ck_assert_int_eq(r.state, BP_META_SPLIT_AXIS_2);
    ck_assert_int_eq(r.granularity, 1);     /* whole kv heads */
    ck_assert_int_eq(r.rotation, 1);
    ck_assert_int_eq(split_of(&t, "output.weight").state, BP_META_SPLIT_AXIS_1);
    ck_assert_int_eq(split_of(&t, "token_embd.weight").state, BP_META_SPLIT_MIRRORED);
    ck_assert_int_eq(split_of(&t, "blk.0.attn_norm.weight").state, BP_META_SPLIT_MIRRORED);
    ck_assert_int_eq(split_of(&t, "mask").state, BP_META_SPLIT_MIRRORED);
    bp_run_model_free(m);

    /* Fused QKV: Q in GQA groups, then K and V (one segment repeated twice)
     * in their kv heads, so every device gets matching slices of all three. */
    m = builtin(BP_TYPE_F32, true);
    bp_run_split_table_init(&t, m);
    r = split_of(&t, "blk.0.attn_qkv.weight");
    ck_assert_int_eq(r.state, BP_META_SPLIT_AXIS_1);
    ck_assert_int_eq(r.n_segments, 2);
    ck_assert_int_eq(r.seg[0].ne, 256);
    ck_assert_int_eq(r.seg[0].granularity, 128);
    ck_assert_int_eq(r.seg[1].ne, 128);
    ck_assert_int_eq(r.seg[1].repeat, 2);
    ck_assert_int_eq(r.seg[1].granularity, 64);
    bp_run_model_free(m);
}
END_TEST

/* A decode step builds and allocates nothing once its capacity's plan
 * exists: 20 steps from position 5 stay within the first capacity (32). */
START_TEST(test_run_decode_steps_reuse_one_plan_without_allocating)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32, false);
    struct bp_run_session *s;
    char err[512];
    const int64_t V = m->hp.n_vocab;
    float *lg = malloc((size_t)(N_PROMPT * V) * sizeof *lg);
    ck_assert_int_eq(bp_run_session_new(m, bp_device_by_name("cpu"),
                                        &(struct bp_run_session_options){ .n_ctx = 64 }, &s, err,
                                        sizeof err), BP_OK);
    struct bp_run_session_stats a, b;
    bp_run_session_get_stats(s, &a);
    ck_assert_uint_eq(a.buffers_allocated, 2);  /* weights, caches */
    ck_assert_int_eq(bp_run_session_eval(s, tokens, N_PROMPT, false, lg, err, sizeof err), BP_OK);
    int32_t t = bp_run_argmax(lg, V);
    ck_assert_int_eq(bp_run_session_eval(s, &t, 1, true, lg, err, sizeof err), BP_OK);
    bp_run_session_get_stats(s, &a);
    ck_assert_uint_eq(a.graphs_built, 2);       /* the prefill's and the decode plan */
    for (int i = 0; i < 20; i++) {
        t = bp_run_argmax(lg, V);
        ck_assert_int_eq(bp_run_session_eval(s, &t, 1, true, lg, err, sizeof err), BP_OK);
    }
    bp_run_session_get_stats(s, &b);
    ck_assert_uint_eq(b.evals, a.evals + 20);
    ck_assert_uint_eq(b.graphs_built, a.graphs_built);
    ck_assert_uint_eq(b.buffers_allocated, a.buffers_allocated);
    /* Past 32 positions: one more plan (capacity 64), then reuse again. */
    for (int i = 0; i < 10; i++) {
        t = bp_run_argmax(lg, V);
        ck_assert_int_eq(bp_run_session_eval(s, &t, 1, true, lg, err, sizeof err), BP_OK);
    }
    ck_assert_int_eq(bp_run_session_n_past(s), N_PROMPT + 31);
    bp_run_session_get_stats(s, &b);
    ck_assert_uint_eq(b.graphs_built, a.graphs_built + 1);
    ck_assert_uint_eq(b.buffers_allocated, a.buffers_allocated + 1);
    free(lg);
    bp_run_session_free(s);
    bp_run_model_free(m);
}
END_TEST

static struct bp_cpu_plan_stats cpu_plan_stats(const struct bp_run_session *s)
{
    void *p = bp_device_proc_address(bp_device_by_name("cpu"), BP_CPU_PROC_PLAN_STATS);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_PLAN_STATS);
    bp_cpu_plan_stats_fn fn;
    memcpy(&fn, &p, sizeof fn);
    struct bp_cpu_plan_stats st = { .size = sizeof st };
    ck_assert_int_eq(fn(bp_run_session_backend(s), &st), BP_OK);
    return st;
}

/* The decoder's graphs keep a layer's Q, K and V outputs (and gate's and
 * up's) apart, so the cpu backend computes K and V in Q's chunk step and up
 * in gate's: 3 joined MUL_MATs a layer in every plan, prefill and decode,
 * at 2 threads (1 with a fused QKV weight: up). Walked from the logits
 * alone, the graph gave K the bytes of Q's output after Q's RoPE and nothing
 * joined at decode. */
START_TEST(test_run_graphs_let_the_cpu_join_a_layers_mul_mats)
{
    for (int fused = 0; fused <= 1; fused++) {
        struct bp_run_model *m = builtin(BP_TYPE_Q4_0, fused);
        struct bp_run_session *s;
        char err[512];
        float *lg = malloc((size_t)(N_PROMPT * m->hp.n_vocab) * sizeof *lg);
        ck_assert_msg(bp_run_session_new(m, bp_device_by_name("cpu"),
                                         &(struct bp_run_session_options){ .n_ctx = 16, .n_threads = 2 },
                                         &s, err, sizeof err) == BP_OK, "%s", err);
        const struct bp_cpu_plan_stats a = cpu_plan_stats(s);
        ck_assert_int_eq(bp_run_session_eval(s, tokens, N_PROMPT, false, lg, err, sizeof err), BP_OK);
        ck_assert_int_eq(bp_run_session_eval(s, &tokens[N_PROMPT], 1, false, lg, err, sizeof err),
                         BP_OK);
        const struct bp_cpu_plan_stats b = cpu_plan_stats(s);
        const uint64_t made = b.made - a.made, joined = b.mul_mats_joined - a.mul_mats_joined;
        ck_assert_uint_eq(made, 2);
        ck_assert_msg(joined == made * (fused ? 1 : 3) * (uint64_t)m->hp.n_layer,
                      "%s QKV: %llu MUL_MATs joined in %llu plans of %lld layers", fused ? "fused"
                      : "separate", (unsigned long long)joined, (unsigned long long)made,
                      (long long)m->hp.n_layer);
        free(lg);
        bp_run_session_free(s);
        bp_run_model_free(m);
    }
}
END_TEST

/* A prefill planned at load time (n_prefill) is the one the first prompt
 * runs, and a second prompt of the same shape after a reset reuses it: no
 * graph built and nothing allocated after the session is made, and the
 * logits of a session without the hint, to the bit. */
START_TEST(test_run_prefill_planned_at_load_is_reused_and_computes_the_same)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q8_0, false);
    struct bp_run_session *s, *plain;
    char err[512];
    const int64_t V = m->hp.n_vocab;
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_int_eq(bp_run_session_new(m, cpu, &(struct bp_run_session_options){
                                            .n_ctx = 32, .n_prefill = N_PROMPT }, &s, err, sizeof err),
                     BP_OK);
    ck_assert_int_eq(bp_run_session_new(m, cpu, &(struct bp_run_session_options){ .n_ctx = 32 },
                                        &plain, err, sizeof err), BP_OK);
    struct bp_run_session_stats st0, st1, sp;
    bp_run_session_get_stats(s, &st0);
    bp_run_session_get_stats(plain, &sp);
    ck_assert_uint_eq(st0.graphs_built, 1);
    ck_assert_uint_eq(sp.graphs_built, 0);
    ck_assert_uint_eq(st0.buffers_allocated, sp.buffers_allocated + 1);  /* the prefill's */
    for (int round = 0; round < 2; round++) {
        bp_run_session_reset(s);
        ck_assert_int_eq(bp_run_session_eval(s, tokens, N_PROMPT, false, a, err, sizeof err), BP_OK);
        bp_run_session_reset(plain);
        ck_assert_int_eq(bp_run_session_eval(plain, tokens, N_PROMPT, false, b, err, sizeof err), BP_OK);
        ck_assert_msg(!memcmp(a, b, (size_t)V * sizeof *a), "round %d: the planned prefill's "
                      "logits differ", round);
    }
    bp_run_session_get_stats(s, &st1);
    ck_assert_uint_eq(st1.graphs_built, st0.graphs_built);
    ck_assert_uint_eq(st1.buffers_allocated, st0.buffers_allocated);
    /* Another shape (all positions) plans anew. */
    bp_run_session_reset(s);
    float *all = malloc((size_t)(N_PROMPT * V) * sizeof *all);
    ck_assert_int_eq(bp_run_session_eval(s, tokens, N_PROMPT, true, all, err, sizeof err), BP_OK);
    bp_run_session_get_stats(s, &st1);
    ck_assert_uint_eq(st1.graphs_built, st0.graphs_built + 1);
    ck_assert_msg(!memcmp(all + (N_PROMPT - 1) * V, b, (size_t)V * sizeof *b),
                  "the last position of an all-positions prefill differs from a last-only one");
    free(all);
    free(a);
    free(b);
    bp_run_session_free(s);
    bp_run_session_free(plain);
    bp_run_model_free(m);
}
END_TEST

/* Decoding past a capacity boundary (32) and across a reset gives the
 * logits of a plain forward pass over the same tokens. */
START_TEST(test_run_decode_across_plan_capacities_and_reset_matches_reference)
{
    enum { N = 36 };
    struct bp_run_model *m = builtin(BP_TYPE_F32, false);
    const int64_t V = m->hp.n_vocab;
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 131 + 7) % V);
    struct bp_run_session *s;
    char err[512];
    ck_assert_int_eq(bp_run_session_new(m, bp_device_by_name("cpu"),
                                        &(struct bp_run_session_options){ .n_ctx = 40 }, &s, err,
                                        sizeof err), BP_OK);
    float *got = malloc((size_t)(N * V) * sizeof *got);
    for (int pass = 0; pass < 2; pass++) {
        /* The first pass fills the caches with another sequence. */
        if (pass) bp_run_session_reset(s);
        ck_assert_int_eq(bp_run_session_eval(s, toks, 2, true, got, err, sizeof err), BP_OK);
        for (int i = 2; i < N; i++) {
            const int32_t t = pass ? toks[i] : (int32_t)((toks[i] + 1) % V);
            ck_assert_int_eq(bp_run_session_eval(s, &t, 1, true, got + i * V, err, sizeof err), BP_OK);
        }
    }
    double *want = reference(m, toks, N), scale;
    double d = max_diff(got, want, N * V, &scale);
    ck_assert_msg(d <= 1e-4 * scale, "logits differ by %g (scale %g)", d, scale);
    free(want);
    free(got);
    bp_run_session_free(s);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_run_find_device_refuses_bad_meta_specs_with_a_sentence)
{
    char err[512];
    ck_assert_ptr_null(bp_run_find_device("meta:cpu*0", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "count from 1 to"));
    ck_assert_ptr_null(bp_run_find_device("meta:cpu*x", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "count from 1 to"));
    ck_assert_ptr_null(bp_run_find_device("meta:nosuchdevice,cpu", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "nosuchdevice"));
    ck_assert_ptr_null(bp_run_find_device("meta:", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "names no sub-device"));
    ck_assert_ptr_null(bp_run_find_device("nosuchdevice", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "nosuchdevice"));
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("run_decoder");
    TCase *tc = tcase_create("decoder");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_run_f32_logits_match_reference_forward_pass);
    tcase_add_test(tc, test_run_fused_qkv_logits_match_reference_forward_pass);
    tcase_add_loop_test_thinned(tc, test_run_every_weight_type_matches_reference_within_its_tolerance, 0,
                                (int)(sizeof other_types / sizeof other_types[0]));
    tcase_add_test(tc, test_run_fused_and_separate_qkv_give_identical_logits);
    tcase_add_loop_test(tc, test_run_puts_q4_0_mul_mat_weights_in_the_device_weight_buffer_type, 0, 2);
    tcase_add_test(tc, test_run_keeps_a_tied_q4_0_output_in_the_default_buffer_type);
    tcase_add_test(tc, test_run_eval_refuses_tokens_outside_vocabulary_and_context);
    tcase_add_test(tc, test_run_split_table_keeps_gqa_groups_and_blocks_together);
    tcase_add_test(tc, test_run_decode_steps_reuse_one_plan_without_allocating);
    tcase_add_test(tc, test_run_graphs_let_the_cpu_join_a_layers_mul_mats);
    tcase_add_test(tc, test_run_decode_across_plan_capacities_and_reset_matches_reference);
    tcase_add_test(tc, test_run_prefill_planned_at_load_is_reused_and_computes_the_same);
    tcase_add_test(tc, test_run_find_device_refuses_bad_meta_specs_with_a_sentence);
    tcase_add_test(tc, test_run_meta_over_two_cpus_matches_cpu);
    tcase_add_loop_test(tc, test_run_meta_keeps_q4_0_slices_in_the_cpus_weight_buffer_type, 0, 2);
    tcase_add_test(tc, test_run_meta_over_three_cpus_with_a_zero_slice_matches_cpu);
    tcase_add_loop_test(tc, test_run_q4_K_M_mix_on_cpu_and_meta_matches_reference, 0, 2);
    suite_add_tcase(s, tc);
    TCase *vk = tcase_create("vulkan0");
    tcase_set_tags(vk, "vulkan0");
    tcase_set_timeout(vk, 600);
    tcase_add_test(vk, test_run_vulkan0_matches_cpu);
    tcase_add_test(vk, test_run_q4_K_M_mix_on_vulkan0_matches_reference_and_cpu);
    suite_add_tcase(s, vk);
    return run_suite(s);
}
