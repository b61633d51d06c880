/*
 * test_sampling.c — the host sampler: a seed fixes the tokens (checked
 * against the generator and the softmax computed here from their
 * definitions), top-k = 1 is greedy, the draws follow the softmax within
 * statistical bounds, the filters never let a token through that they
 * exclude, and the repetition penalty moves greedy off a recent token.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling.h"
#include "suite_main.h"

/* splitmix64 seeding xoshiro256** (Blackman and Vigna's reference code). */
struct ref_rng { uint64_t s[4]; };

static uint64_t ref_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double ref_next(struct ref_rng *r)
{
#define ROTL(x, k) (((x) << (k)) | ((x) >> (64 - (k))))
    uint64_t *s = r->s;
    const uint64_t result = ROTL(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = ROTL(s[3], 45);
    return (double)(result >> 11) / 9007199254740992.0;
#undef ROTL
}

static const float logits5[5] = { 1.0f, 2.0f, 0.5f, 0.0f, -1.0f };

START_TEST(test_sampling_seed_fixes_tokens)
{
    struct bp_sampling_params p = BP_SAMPLING_DEFAULTS;
    p.temp = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 1234;
    struct bp_sampler *a = bp_sampler_new(&p, 5), *b = bp_sampler_new(&p, 5);
    p.seed = 1235;
    struct bp_sampler *c = bp_sampler_new(&p, 5);
    /* Sorted by logit: ids 1, 0, 2, 3, 4; the softmax computed here. */
    const int order[5] = { 1, 0, 2, 3, 4 };
    double prob[5], sum = 0;
    for (int i = 0; i < 5; i++) sum += prob[i] = exp((double)logits5[order[i]] - 2.0);
    struct ref_rng r;
    uint64_t x = 1234;
    for (int i = 0; i < 4; i++) r.s[i] = ref_splitmix(&x);
    int differ = 0;
    for (int k = 0; k < 500; k++) {
        double u = ref_next(&r), cum = 0;
        int want = order[4];
        for (int i = 0; i < 5; i++) {
            cum += prob[i] / sum;
            if (u < cum) { want = order[i]; break; }
        }
        int32_t ta = bp_sampler_sample(a, logits5), tb = bp_sampler_sample(b, logits5);
        ck_assert_int_eq(ta, want);
        ck_assert_int_eq(tb, ta);
        differ += bp_sampler_sample(c, logits5) != ta;
    }
    ck_assert_int_gt(differ, 100);
    bp_sampler_free(a); bp_sampler_free(b); bp_sampler_free(c);
}
END_TEST

START_TEST(test_sampling_top_k_1_is_greedy)
{
    enum { V = 1000 };
    static float lg[V];
    uint64_t x = 7;
    struct bp_sampling_params p = BP_SAMPLING_DEFAULTS;
    p.temp = 0.7f; p.top_k = 1; p.seed = 99;
    struct bp_sampler *s = bp_sampler_new(&p, V);
    p.temp = 0.0f;
    struct bp_sampler *g = bp_sampler_new(&p, V);
    for (int round = 0; round < 50; round++) {
        int best = 0;
        for (int i = 0; i < V; i++) {
            lg[i] = (float)(ref_splitmix(&x) >> 40) / 16777216.0f * 10.0f - 5.0f;
            if (lg[i] > lg[best]) best = i;
        }
        ck_assert_int_eq(bp_sampler_sample(s, lg), best);
        ck_assert_int_eq(bp_sampler_sample(g, lg), best);
    }
    bp_sampler_free(s); bp_sampler_free(g);
}
END_TEST

/* Counts of n draws from a sampler of p over logits5. */
static void draw(struct bp_sampling_params p, int n, int counts[5])
{
    struct bp_sampler *s = bp_sampler_new(&p, 5);
    memset(counts, 0, 5 * sizeof *counts);
    for (int i = 0; i < n; i++) counts[bp_sampler_sample(s, logits5)]++;
    bp_sampler_free(s);
}

/* Each count within 5 standard deviations of n * want (binomial). */
static void expect_freq(const int counts[5], int n, const double want[5])
{
    for (int i = 0; i < 5; i++) {
        const double mean = n * want[i], sd = sqrt(n * want[i] * (1 - want[i]));
        if (want[i] == 0) ck_assert_int_eq(counts[i], 0);
        else ck_assert_msg(fabs(counts[i] - mean) <= 5 * sd + 1, "token %d drawn %d times, expected "
                           "%.0f +- %.0f", i, counts[i], mean, 5 * sd);
    }
}

START_TEST(test_sampling_follows_softmax)
{
    const int n = 200000;
    int counts[5];
    for (int t = 0; t < 2; t++) {
        const double temp = t ? 0.5 : 1.0;
        double want[5], sum = 0;
        for (int i = 0; i < 5; i++) sum += want[i] = exp(logits5[i] / temp);
        for (int i = 0; i < 5; i++) want[i] /= sum;
        struct bp_sampling_params p = BP_SAMPLING_DEFAULTS;
        p.temp = (float)temp; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 42 + (uint64_t)t;
        draw(p, n, counts);
        expect_freq(counts, n, want);
    }
}
END_TEST

START_TEST(test_sampling_filters_exclude)
{
    const int n = 100000;
    int counts[5];
    double e[5], sum = 0;
    for (int i = 0; i < 5; i++) e[i] = exp(logits5[i]);
    /* top-k 2: ids 1 and 0, renormalised. */
    struct bp_sampling_params p = BP_SAMPLING_DEFAULTS;
    p.temp = 1.0f; p.top_k = 2; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 5;
    draw(p, n, counts);
    sum = e[0] + e[1];
    expect_freq(counts, n, (double[]){ e[0] / sum, e[1] / sum, 0, 0, 0 });
    /* min-p 0.3: p >= 0.3 p_max keeps ids 1 (1), 0 (e^-1 = 0.37), not 2 (e^-1.5 = 0.22). */
    p.top_k = 0; p.min_p = 0.3f;
    draw(p, n, counts);
    expect_freq(counts, n, (double[]){ e[0] / sum, e[1] / sum, 0, 0, 0 });
    /* top-p 0.8: sorted probabilities 0.563, 0.207, 0.126, ...: the first
     * two sum to 0.770 < 0.8, so three are kept. */
    p.min_p = 0.0f; p.top_p = 0.8f;
    draw(p, n, counts);
    sum = e[0] + e[1] + e[2];
    expect_freq(counts, n, (double[]){ e[0] / sum, e[1] / sum, e[2] / sum, 0, 0 });
}
END_TEST

START_TEST(test_sampling_repeat_penalty_moves_greedy)
{
    struct bp_sampling_params p = BP_SAMPLING_DEFAULTS;
    p.repeat_penalty = 2.5f; p.repeat_last_n = 2;
    struct bp_sampler *s = bp_sampler_new(&p, 5);
    ck_assert_int_eq(bp_sampler_sample(s, logits5), 1);
    bp_sampler_accept(s, 1);       /* 2.0 / 2.5 = 0.8 < 1.0: id 0 wins */
    ck_assert_int_eq(bp_sampler_sample(s, logits5), 0);
    bp_sampler_accept(s, 0);       /* 1.0 / 2.5 = 0.4: 0.8 (id 1) wins again */
    ck_assert_int_eq(bp_sampler_sample(s, logits5), 1);
    bp_sampler_accept(s, 3);
    bp_sampler_accept(s, 4);       /* the window (2) forgot 0 and 1 */
    ck_assert_int_eq(bp_sampler_sample(s, logits5), 1);
    bp_sampler_free(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sampling");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, test_sampling_seed_fixes_tokens);
    tcase_add_test(tc, test_sampling_top_k_1_is_greedy);
    tcase_add_test(tc, test_sampling_follows_softmax);
    tcase_add_test(tc, test_sampling_filters_exclude);
    tcase_add_test(tc, test_sampling_repeat_penalty_moves_greedy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
