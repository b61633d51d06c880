/* test_meta_comm.c — the meta device's registry all-reduce path: a meta
 * device over commtest0..3 (tests/meta_plugins/commtest.c: CPU devices whose
 * registry offers comm_init / comm_allreduce_tensor and declines every second
 * call) hands each reduction to the registry once, falls back to the
 * butterfly for declined calls only, and gives the single device's result. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "suite_main.h"

typedef void (*commtest_counts_fn)(unsigned long long *init, unsigned long long *calls,
                                   unsigned long long *declined, unsigned long long *summed,
                                   unsigned long long *freed);

static int split_rows(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    (void)user;
    if (strncmp(t->name, "split", 5) != 0) return 0;
    *out = (struct bp_meta_split){.state = BP_META_SPLIT_AXIS_0};
    return 1;
}

enum { K = 64, N = 6, M = 3 };

/* y = w x on dev, computed `runs` times; returns the last result. */
static void matmul_on(struct bp_device *dev, int runs, float *yv, struct bp_meta_stats *stats)
{
    struct bp_context *c;
    ck_assert_int_eq(bp_context_new(8, &c), BP_OK);
    struct bp_tensor *w = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, N), "split_w");
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(c, BP_TYPE_F32, K, M), "split_x");
    struct bp_tensor *y = bp_mul_mat(c, w, x);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(c, bp_device_buffer_type(dev), NULL, &buf), BP_OK);
    float wv[K * N], xv[K * M];
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 37) % 11) - 5;
    for (int i = 0; i < K * M; i++) xv[i] = (float)((i * 13) % 7) - 3;
    ck_assert_int_eq(bp_tensor_set(w, wv, 0, sizeof wv), BP_OK);
    ck_assert_int_eq(bp_tensor_set(x, xv, 0, sizeof xv), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, "n_threads=1", &be), BP_OK);
    for (int r = 0; r < runs; r++) {
        memset(yv, 0, N * M * sizeof *yv);
        ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
        ck_assert_int_eq(bp_tensor_get(y, yv, 0, N * M * sizeof *yv), BP_OK);
        for (int mm = 0; mm < M; mm++)
            for (int nn = 0; nn < N; nn++) {
                float want = 0; /* small integers: exact in any order */
                for (int k = 0; k < K; k++) want += wv[nn * K + k] * xv[mm * K + k];
                ck_assert_msg(yv[mm * N + nn] == want, "%s run %d: y[%d,%d] = %g, want %g", bp_device_name(dev),
                              r, nn, mm, (double)yv[mm * N + nn], (double)want);
            }
    }
    if (stats) ck_assert_int_eq(bp_meta_backend_stats(be, stats), BP_OK);
    bp_backend_free(be);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_context_free(c);
}

START_TEST(test_meta_uses_registry_allreduce_and_falls_back_per_call)
{
    struct bp_device *subs[4];
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "commtest%d", i);
        subs[i] = bp_device_by_name(name);
        ck_assert_msg(subs[i] != NULL, "%s is missing: the commtest plugin did not load (%s)", name, bp_last_error());
    }
    commtest_counts_fn counts = (commtest_counts_fn)bp_device_proc_address(subs[0], "commtest_counts");
    ck_assert_ptr_nonnull(counts);
    struct bp_device *meta = NULL;
    ck_assert_msg(bp_meta_device_new(subs, 4, NULL, split_rows, NULL, &meta) == BP_OK, "%s", bp_last_error());

    float ref[N * M], got[N * M];
    matmul_on(bp_device_by_name("cpu"), 1, ref, NULL);
    struct bp_meta_stats st = {.size = sizeof st};
    matmul_on(meta, 3, got, &st);
    ck_assert_int_eq(memcmp(ref, got, sizeof ref), 0);

    unsigned long long init, calls, declined, summed, freed;
    counts(&init, &calls, &declined, &summed, &freed);
    ck_assert_uint_eq(init, 1);          /* one communicator per backend */
    ck_assert_uint_eq(calls, 3);         /* one call per reduction */
    ck_assert_uint_eq(declined, 1);      /* the second call fell back to the butterfly */
    ck_assert_uint_eq(summed, 2);
    ck_assert_uint_eq(freed, 1);         /* freed with the backend */
    ck_assert_uint_eq(st.reductions, 3);
    ck_assert_uint_eq(st.comm_calls, 3);
    ck_assert_uint_eq(st.comm_declined, 1);
}
END_TEST

START_TEST(test_meta_over_mixed_registries_uses_the_butterfly)
{
    /* commtest0 + cpu: two registries, so no comm call may be made */
    struct bp_device *subs[2] = {bp_device_by_name("commtest0"), bp_device_by_name("cpu")};
    ck_assert_ptr_nonnull(subs[0]);
    commtest_counts_fn counts = (commtest_counts_fn)bp_device_proc_address(subs[0], "commtest_counts");
    unsigned long long init0, calls0, d0, s0, f0, init1, calls1, d1, s1, f1;
    counts(&init0, &calls0, &d0, &s0, &f0);
    struct bp_device *meta = NULL;
    ck_assert_int_eq(bp_meta_device_new(subs, 2, NULL, split_rows, NULL, &meta), BP_OK);
    float got[N * M];
    struct bp_meta_stats st = {.size = sizeof st};
    matmul_on(meta, 2, got, &st);
    counts(&init1, &calls1, &d1, &s1, &f1);
    ck_assert_uint_eq(init1, init0);
    ck_assert_uint_eq(calls1, calls0);
    ck_assert_uint_eq(st.comm_calls, 0);
    ck_assert_uint_eq(st.reductions, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta_comm");
    TCase *tc = tcase_create("comm");
    tcase_add_test(tc, test_meta_uses_registry_allreduce_and_falls_back_per_call);
    tcase_add_test(tc, test_meta_over_mixed_registries_uses_the_butterfly);
    suite_add_tcase(s, tc);
    setenv("CK_FORK", "no", 1); /* counters are per process: keep the order */
    return run_suite(s);
}
