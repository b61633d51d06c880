/*
 * test_run_builtin.c — builtin:1b, the TinyLlama-1.1B-shaped model: its
 * hyper-parameters and tensor shapes as TinyLlama publishes them, sample
 * rows of several weights against a generator written out here (splitmix64
 * from an FNV-1a seed of the weight's name, then bp_quantize row by row), a
 * checksum of all its bytes, and the same bytes from one thread as from two.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "model.h"
#include "suite_main.h"

static struct bp_run_model *make_1b(enum bp_type t, int n_threads)
{
    char err[512] = "";
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options o = { .weight_type = t, .seed = 1, .n_threads = n_threads };
    bp_status s = bp_run_model_builtin("1b", &o, &m, err, sizeof err);
    ck_assert_msg(s == BP_OK, "builtin:1b in %s on %d threads: %s", bp_type_name(t), n_threads, err);
    return m;
}

static const struct bp_run_weight *find(const struct bp_run_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, name)) return &m->weights[i];
    ck_abort_msg("builtin:1b has no weight '%s'", name);
    return NULL;
}

/* The generator as the builtin documents it: value i of a weight's stream
 * is center + amp * (2u - 1), u the top 53 bits of the (i+1)-th splitmix64
 * output from the FNV-1a hash of the name (offset basis xor seed). */
static void reference_row(uint64_t seed, const char *name, int64_t row, int64_t ne0, float center,
                          float amp, float *dst)
{
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    for (int64_t i = 0; i < ne0; i++) {
        uint64_t z = h + (uint64_t)(row * ne0 + i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const double u = (double)(z >> 11) * (1.0 / 9007199254740992.0);
        dst[i] = center + amp * (float)(2.0 * u - 1.0);
    }
}

static void assert_row(const struct bp_run_model *m, const char *name, int64_t row, float center,
                       float amp)
{
    const struct bp_run_weight *w = find(m, name);
    const int64_t ne0 = w->ne[0];
    float *f = malloc((size_t)ne0 * sizeof *f);
    const size_t rs = bp_row_size(w->type, ne0);
    uint8_t *q = malloc(rs);
    ck_assert(f && q);
    reference_row(1, name, row, ne0, center, amp, f);
    ck_assert_uint_eq(bp_quantize(w->type, f, q, 1, ne0), rs);
    ck_assert_msg(!memcmp(q, (const uint8_t *)w->data + (size_t)row * rs, rs),
                  "row %lld of %s differs from the reference generator", (long long)row, name);
    free(f);
    free(q);
}

static uint64_t fnv_bytes(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

START_TEST(test_builtin_1b_has_tinyllama_shape_and_reference_weights)
{
    struct bp_run_model *m = make_1b(BP_TYPE_Q4_0, 2);
    const struct bp_run_hparams *hp = &m->hp;
    ck_assert_int_eq(hp->n_embd, 2048);
    ck_assert_int_eq(hp->n_layer, 22);
    ck_assert_int_eq(hp->n_head, 32);
    ck_assert_int_eq(hp->n_head_kv, 4);
    ck_assert_int_eq(hp->head_dim, 64);
    ck_assert_int_eq(hp->n_ff, 5632);
    ck_assert_int_eq(hp->n_vocab, 32000);
    ck_assert(!m->tied_output);
    ck_assert_ptr_ne(m->output, m->tok_embd);
    /* TinyLlama-1.1B's published count: 1,100,048,384 parameters. */
    ck_assert_int_eq(bp_run_model_param_count(m), 1100048384);
    ck_assert_uint_eq(m->n_weights, 1 + 22 * 9 + 2);
    ck_assert_int_eq(find(m, "blk.21.attn_k.weight")->ne[1], 256);
    ck_assert_int_eq(find(m, "blk.0.ffn_down.weight")->ne[0], 5632);
    ck_assert_int_eq(find(m, "output.weight")->type, BP_TYPE_Q4_0);
    ck_assert_int_eq(find(m, "blk.3.ffn_norm.weight")->type, BP_TYPE_F32);

    /* Rows at the start, inside and at the end of weights, so that every
     * job boundary a thread count could draw is crossed somewhere. */
    const float a2048 = 1.7f / sqrtf(2048.0f), a5632 = 1.7f / sqrtf(5632.0f);
    assert_row(m, "token_embd.weight", 0, 0.0f, 0.5f);
    assert_row(m, "token_embd.weight", 31999, 0.0f, 0.5f);
    assert_row(m, "blk.10.ffn_down.weight", 1027, 0.0f, a5632);
    assert_row(m, "blk.21.attn_v.weight", 255, 0.0f, a2048);
    assert_row(m, "output.weight", 12345, 0.0f, a2048);
    assert_row(m, "output_norm.weight", 0, 1.0f, 0.1f);

    /* The whole model's bytes, so that a change to any weight shows: the
     * value is what this generator makes, and the figures taken on
     * builtin:1b hold for these bytes only. */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < m->n_weights; i++)
        h = fnv_bytes(h, m->weights[i].data, m->weights[i].size);
    ck_assert_msg(h == 0x572a5c21ecac86a2ull, "builtin:1b q4_0 seed 1 checksum is %016llx",
                  (unsigned long long)h);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_builtin_1b_same_bytes_from_one_thread_and_two)
{
    struct bp_run_model *a = make_1b(BP_TYPE_Q4_0, 1), *b = make_1b(BP_TYPE_Q4_0, 2);
    ck_assert_uint_eq(a->n_weights, b->n_weights);
    for (size_t i = 0; i < a->n_weights; i++) {
        ck_assert_uint_eq(a->weights[i].size, b->weights[i].size);
        ck_assert_msg(!memcmp(a->weights[i].data, b->weights[i].data, a->weights[i].size),
                      "%s differs between one and two threads", a->weights[i].name);
    }
    bp_run_model_free(a);
    bp_run_model_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_builtin");
    TCase *tc = tcase_create("1b");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_builtin_1b_has_tinyllama_shape_and_reference_weights);
    tcase_add_test(tc, test_builtin_1b_same_bytes_from_one_thread_and_two);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
