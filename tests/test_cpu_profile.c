/*
 * test_cpu_profile.c — the CPU backend's per-op profile
 * (BP_CPU_PROC_SET_PROFILE, plugins/cpu/bp_cpu.h).
 *
 * One graph whose node count per op is known:
 *   y1 = W1 x, y2 = W2 x      two MUL_MATs on one activation (one chunk step)
 *   p  = silu(y1) * y2
 *   a  = rms_norm(p) + y1
 * Computed three times with the profile on, with 1 and 2 threads: each op
 * must count its nodes three times and no other op anything; the steps'
 * times must not add up to more than the calls took (they tile the time
 * the threads ran, which lies inside the call); the activation conversion
 * is part of MUL_MAT's time. Set to NULL, the profile stops growing. No
 * assertion on how long anything took: the machine is shared.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"
#include "suite_main.h"

#define K 256
#define N 64
#define M 8

static bp_cpu_set_profile_fn set_profile_proc(void)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_SET_PROFILE);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_SET_PROFILE);
    bp_cpu_set_profile_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

static void fill_q8_0(struct bp_tensor *w, unsigned seed)
{
    float v[K * N];
    for (int i = 0; i < K * N; i++) v[i] = (float)rnd(&seed);
    void *q = malloc(bp_nbytes(w));
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, v, q, N, K), bp_nbytes(w));
    ck_assert_int_eq(bp_tensor_set(w, q, 0, bp_nbytes(w)), BP_OK);
    free(q);
}

static struct bp_tensor *build(struct fx *f)
{
    struct bp_tensor *w1 = bp_tensor_new_2d(f->ctx, BP_TYPE_Q8_0, K, N);
    struct bp_tensor *w2 = bp_tensor_new_2d(f->ctx, BP_TYPE_Q8_0, K, N);
    struct bp_tensor *x = bp_tensor_new_2d(f->ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *y1 = bp_mul_mat(f->ctx, w1, x), *y2 = bp_mul_mat(f->ctx, w2, x);
    struct bp_tensor *p = bp_mul(f->ctx, bp_silu(f->ctx, y1), y2);
    struct bp_tensor *a = bp_add(f->ctx, bp_rms_norm(f->ctx, p, 1e-5f), y1);
    ck_assert_ptr_nonnull(a);
    fx_alloc(f);
    fill_q8_0(w1, 1);
    fill_q8_0(w2, 2);
    free(fill(x, 3, 1.0));
    return a;
}

START_TEST(test_cpu_profile_counts_each_op_and_fits_in_the_call)
{
    const int threads = _i + 1;
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, threads), BP_OK);
    struct bp_tensor *out = build(&f);
    bp_cpu_set_profile_fn set_profile = set_profile_proc();
    struct bp_cpu_op_time ops[BP_OP_COUNT];
    struct bp_cpu_profile pr = { .n_ops = BP_OP_COUNT, .ops = ops };
    memset(ops, 0, sizeof ops);
    ck_assert_int_eq(set_profile(f.be, &pr), BP_OK);
    for (int r = 0; r < 3; r++) ck_assert_msg(fx_compute(&f, out) == BP_OK, "%s", bp_last_error());
    ck_assert_uint_eq(pr.graphs, 3);
    uint64_t want[BP_OP_COUNT] = {0}, in_ops = 0;
    want[BP_OP_MUL_MAT] = 2;
    want[BP_OP_SILU] = want[BP_OP_MUL] = want[BP_OP_RMS_NORM] = want[BP_OP_ADD] = 1;
    for (int o = 0; o < BP_OP_COUNT; o++) {
        ck_assert_msg(ops[o].count == 3 * want[o], "%s: %llu nodes profiled, want %llu",
                      bp_op_name((enum bp_op)o), (unsigned long long)ops[o].count,
                      (unsigned long long)(3 * want[o]));
        if (!want[o]) ck_assert_uint_eq(ops[o].ns, 0);
        in_ops += ops[o].ns;
    }
    ck_assert_msg(in_ops <= pr.graph_ns, "the ops took %llu ns of calls that took %llu ns",
                  (unsigned long long)in_ops, (unsigned long long)pr.graph_ns);
    ck_assert_uint_le(pr.convert_ns, ops[BP_OP_MUL_MAT].ns);

    /* Off again: nothing more is added. */
    const struct bp_cpu_profile before = pr;
    ck_assert_int_eq(set_profile(f.be, NULL), BP_OK);
    ck_assert_int_eq(fx_compute(&f, out), BP_OK);
    ck_assert_uint_eq(pr.graphs, before.graphs);
    ck_assert_uint_eq(pr.graph_ns, before.graph_ns);
    ck_assert_uint_eq(ops[BP_OP_MUL_MAT].count, 6);
    fx_free(&f);
}
END_TEST

START_TEST(test_cpu_profile_ignores_ops_beyond_n_ops_and_refuses_no_array)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *out = build(&f);
    bp_cpu_set_profile_fn set_profile = set_profile_proc();
    /* Only ops below MUL_MAT are counted: the rest must not be written. */
    struct bp_cpu_op_time ops[BP_OP_MUL_MAT + 1];
    memset(ops, 0, sizeof ops);
    struct bp_cpu_profile pr = { .n_ops = BP_OP_MUL_MAT, .ops = ops };
    ck_assert_int_eq(set_profile(f.be, &pr), BP_OK);
    ck_assert_int_eq(fx_compute(&f, out), BP_OK);
    ck_assert_uint_eq(pr.graphs, 1);
    ck_assert_uint_eq(ops[BP_OP_MUL_MAT].count, 0);
    ck_assert_uint_eq(ops[BP_OP_MUL_MAT].ns, 0);
    struct bp_cpu_profile bad = { .n_ops = 4, .ops = NULL };
    ck_assert_int_eq(set_profile(f.be, &bad), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(set_profile(f.be, NULL), BP_OK);
    fx_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_profile");
    TCase *tc = tcase_create("profile");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_cpu_profile_counts_each_op_and_fits_in_the_call, 0, 2);
    tcase_add_test(tc, test_cpu_profile_ignores_ops_beyond_n_ops_and_refuses_no_array);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
