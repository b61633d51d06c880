/*
 * test_sched_run.c — the runner on the scheduler, over the test plugin
 * `partial` (F32 ADD, MUL, MUL_MAT only):
 *  - builtin:test (f32) on partial0 chooses the cpu's tokens with logits
 *    within 1e-5, and the placement counts exactly the decoder's nodes that
 *    partial0 lacks (counted here from the model's layer count);
 *  - strict mode refuses with a sentence listing those ops;
 *  - meta:cpu,partial0 chooses the cpu's tokens;
 *  - a decode step after the first builds, plans and allocates nothing and
 *    makes exactly the summary's copies;
 *  - on the cpu alone the scheduler makes one run and no copies.
 */
#include <string.h>

#include <backplane/bp_meta.h>

#include "sched_run_util.h"
#include "suite_main.h"

START_TEST(test_partial_device_gives_cpu_tokens_and_counts_fallbacks)
{
    struct bp_run_model *m = sr_model();
    struct bp_run_session *p = sr_session(m, "partial0", NULL), *c = sr_session(m, "cpu", NULL);
    double worst = sr_decode_both(m, p, c);
    ck_assert_msg(worst <= 1e-5, "largest logit difference %g", worst);

    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_run_session_placement(p, &sum), BP_OK);
    /* Per layer: 2 RMS_NORM, 2 ROPE, 2 SET_ROWS, 1 FLASH_ATTN_EXT, 1 SILU;
     * once: GET_ROWS, the final RMS_NORM. */
    const uint32_t L = (uint32_t)m->hp.n_layer;
    const struct { enum bp_op op; uint32_t n; } want[] = {
        { BP_OP_GET_ROWS, 1 }, { BP_OP_RMS_NORM, 2 * L + 1 }, { BP_OP_ROPE, 2 * L },
        { BP_OP_SILU, L }, { BP_OP_SET_ROWS, 2 * L }, { BP_OP_FLASH_ATTN_EXT, L },
    };
    uint32_t total = 0;
    ck_assert_uint_eq(sum.n_fallback_ops, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bool found = false;
        for (size_t j = 0; j < sum.n_fallback_ops; j++)
            if (sum.fallback_ops[j].op == want[i].op) {
                ck_assert_msg(sum.fallback_ops[j].count == want[i].n, "%s x%u, expected %u",
                              bp_op_name(want[i].op), sum.fallback_ops[j].count, want[i].n);
                found = true;
            }
        ck_assert_msg(found, "%s is not among the fallbacks", bp_op_name(want[i].op));
        total += want[i].n;
    }
    ck_assert_uint_eq(sum.n_fallback_nodes, total);
    /* Everything else (7 MUL_MAT + 3 MUL + 2 ADD per layer, the output's
     * MUL_MAT and norm MUL) runs on partial0. */
    ck_assert_str_eq(sum.backends[0].name, "partial0");
    ck_assert_uint_eq(sum.backends[0].n_nodes, 12 * L + 2);
    ck_assert_uint_eq(sum.backends[1].n_nodes, total);
    bp_run_session_free(p);
    bp_run_session_free(c);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_strict_partial_device_refuses_naming_the_missing_ops)
{
    struct bp_run_model *m = sr_model();
    struct bp_run_session *p = sr_session(m, "partial0", &(struct bp_run_session_options){ .strict = true });
    float *lg = malloc((size_t)m->hp.n_vocab * sizeof *lg);
    char err[1024];
    ck_assert_int_eq(bp_run_session_eval(p, sr_prompt, SR_PROMPT, false, lg, err, sizeof err), BP_ERR_UNSUPPORTED);
    const char *need[] = { "strict", "partial0", "GET_ROWS x1", "ROPE x4", "SILU x2", "FLASH_ATTN_EXT x2" };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        ck_assert_msg(strstr(err, need[i]), "'%s' lacks '%s'", err, need[i]);
    free(lg);
    bp_run_session_free(p);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_meta_over_cpu_and_partial_gives_cpu_tokens)
{
    struct bp_device *subs[2] = { bp_device_by_name("cpu"), bp_device_by_name("partial0") }, *meta = NULL;
    ck_assert_ptr_nonnull(subs[1]);
    bp_status st = bp_meta_device_new(subs, 2, NULL, NULL, NULL, &meta);
    if (st == BP_ERR_NOT_FOUND) return;   /* built without the meta plugin */
    ck_assert_msg(st == BP_OK, "%s", bp_last_error());
    struct bp_run_model *m = sr_model();
    char err[1024];
    struct bp_run_session *p = NULL, *c = sr_session(m, "cpu", NULL);
    ck_assert_msg(bp_run_session_new(m, meta, NULL, &p, err, sizeof err) == BP_OK, "%s", err);
    double worst = sr_decode_both(m, p, c);
    ck_assert_msg(worst <= 1e-4, "largest logit difference %g", worst);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_run_session_placement(p, &sum), BP_OK);
    ck_assert_uint_gt(sum.backends[0].n_nodes, 0);
    ck_assert_uint_gt(sum.n_fallback_nodes, 0);
    bp_run_session_free(p);
    bp_run_session_free(c);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_decode_after_first_step_plans_and_allocates_nothing)
{
    struct bp_run_model *m = sr_model();
    struct bp_run_session *p = sr_session(m, "partial0", &(struct bp_run_session_options){ .n_ctx = 32 });
    const int64_t V = m->hp.n_vocab;
    float *lg = malloc((size_t)V * sizeof *lg);
    char err[1024];
    ck_assert_int_eq(bp_run_session_eval(p, sr_prompt, SR_PROMPT, false, lg, err, sizeof err), BP_OK);
    int32_t t = bp_run_argmax(lg, V);
    ck_assert_int_eq(bp_run_session_eval(p, &t, 1, false, lg, err, sizeof err), BP_OK);
    struct bp_run_session_stats a, b;
    bp_run_session_get_stats(p, &a);
    ck_assert_uint_eq(a.sched_plans, 2);   /* the prefill's, the decode plan */
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_run_session_placement(p, &sum), BP_OK);
    ck_assert_uint_gt(sum.n_copies, 0);
    for (int i = 0; i < 10; i++) {
        t = bp_run_argmax(lg, V);
        ck_assert_int_eq(bp_run_session_eval(p, &t, 1, false, lg, err, sizeof err), BP_OK);
    }
    bp_run_session_get_stats(p, &b);
    ck_assert_uint_eq(b.graphs_built, a.graphs_built);
    ck_assert_uint_eq(b.sched_plans, a.sched_plans);
    ck_assert_uint_eq(b.buffers_allocated, a.buffers_allocated);
    ck_assert_uint_eq(b.copies, a.copies + 10 * (uint64_t)sum.n_copies);
    free(lg);
    bp_run_session_free(p);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_cpu_alone_is_one_run_without_copies)
{
    struct bp_run_model *m = sr_model();
    struct bp_run_session *s = sr_session(m, "cpu", NULL);
    struct bp_run_session *d = sr_session(m, "cpu", &(struct bp_run_session_options){ .direct = true });
    double worst = sr_decode_both(m, s, d);
    ck_assert_msg(worst == 0.0, "scheduled and direct cpu logits differ by %g", worst);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_run_session_placement(s, &sum), BP_OK);
    ck_assert_uint_eq(sum.n_backends, 1);
    ck_assert_uint_eq(sum.n_runs, 1);
    ck_assert_uint_eq(sum.n_copies, 0);
    ck_assert_uint_eq(sum.n_fallback_nodes, 0);
    ck_assert_int_eq(bp_run_session_placement(d, &sum), BP_ERR_NOT_FOUND);
    bp_run_session_free(s);
    bp_run_session_free(d);
    bp_run_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched_run");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_partial_device_gives_cpu_tokens_and_counts_fallbacks);
    tcase_add_test(tc, test_strict_partial_device_refuses_naming_the_missing_ops);
    tcase_add_test(tc, test_meta_over_cpu_and_partial_gives_cpu_tokens);
    tcase_add_test(tc, test_decode_after_first_step_plans_and_allocates_nothing);
    tcase_add_test(tc, test_cpu_alone_is_one_run_without_copies);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
