/*
 * test_cpu_silu.c — SILU of the cpu variant being tested (BACKPLANE_CPU_VARIANT,
 * as test_cpu_attention) over a dense sweep of [-87, 88] against
 * x / (1 + exp(-x)) in double. The SIMD variants compute it with the
 * polynomial exp of plugins/cpu/ops/vec_exp.h; for x < 0 SILU is about
 * x * exp(x), so the sweep measures that exp's error (plus one division)
 * and bounds it in units of the float result's last place. Rows of odd
 * length reach the padded tail; beyond the sweep, large negative inputs
 * must give (nearly) zero and large positive ones x itself.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_test_util.h"
#include "cpu_variant_util.h"
#include "suite_main.h"

/* Bound in ulps of the result: the polynomial exp is within 1.3 ulp (a
 * sweep of 4M points on AVX-512), 1 + e and the division round once each,
 * and the ulp of the result can be half that of the quotient's inputs.
 * Measured: 2.99 (AVX2, AVX-512), 0.5 (scalar); BP_TEST_VERBOSE prints it. */
#define SILU_MAX_ULP 4.0
/* Sweep points; a row of 1021 (not a multiple of any vector width). */
enum { N_SWEEP = 1021 * 256, ROW = 1021 };

static double ulp_of(double v)
{
    const float f = fabsf((float)v);
    return f < FLT_MIN ? (double)FLT_TRUE_MIN : (double)(nextafterf(f, INFINITY) - f);
}

/* SILU of n values through the plugin, as rows of ROW. */
static double *silu_of(const double *x, int64_t n)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *in = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, ROW, n / ROW);
    struct bp_tensor *y = bp_silu(f.ctx, in);
    fx_alloc(&f);
    store_values(in, (double *)x);
    ck_assert_msg(fx_compute(&f, y) == BP_OK, "SILU: %s", bp_last_error());
    double *got = fetch(y);
    fx_free(&f);
    return got;
}

START_TEST(test_silu_within_bound_over_the_exp_range)
{
    double *x = malloc(N_SWEEP * sizeof *x);
    for (int64_t i = 0; i < N_SWEEP; i++)
        x[i] = (double)(float)(-87.0 + 175.0 * (double)i / (N_SWEEP - 1));
    double *got = silu_of(x, N_SWEEP);
    double worst = 0.0, worst_x = 0.0;
    for (int64_t i = 0; i < N_SWEEP; i++) {
        const double want = x[i] / (1.0 + exp(-x[i]));
        const double e = fabs(got[i] - want) / ulp_of(want);
        if (e > worst) {
            worst = e;
            worst_x = x[i];
        }
    }
    if (getenv("BP_TEST_VERBOSE"))
        printf("silu: max error %.3f ulp at x = %.9g\n", worst, worst_x);
    ck_assert_msg(worst <= SILU_MAX_ULP, "SILU error %.3f ulp at x = %.9g exceeds %.1f", worst,
                  worst_x, SILU_MAX_ULP);
    free(x);
    free(got);
}
END_TEST

START_TEST(test_silu_saturates_outside_the_range)
{
    double *x = malloc(ROW * sizeof *x);
    for (int64_t i = 0; i < ROW; i++)
        x[i] = i % 2 ? 88.0 + (double)i : -88.0 - (double)i;
    double *got = silu_of(x, ROW);
    for (int64_t i = 0; i < ROW; i++) {
        if (x[i] > 0)
            ck_assert_msg(got[i] == x[i], "SILU(%g) is %.9g, expected x", x[i], got[i]);
        else
            ck_assert_msg(fabs(got[i]) <= 1e-30 && !isnan(got[i]), "SILU(%g) is %.9g, expected ~0",
                          x[i], got[i]);
    }
    free(x);
    free(got);
}
END_TEST

START_TEST(test_forced_variant_is_the_one_tested)
{
    expect_loaded_variant_is_the_chosen_one();
}
END_TEST

int main(void)
{
    const int gate = variant_gate();
    if (gate) return gate;
    Suite *s = suite_create("cpu_silu");
    TCase *tc = tcase_create("silu");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_forced_variant_is_the_one_tested);
    tcase_add_test(tc, test_silu_within_bound_over_the_exp_range);
    tcase_add_test(tc, test_silu_saturates_outside_the_range);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
