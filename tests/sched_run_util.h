/*
 * sched_run_util.h — greedy decoding of builtin:test on two sessions side by
 * side, for the scheduler's run tests: the tokens each chose and the
 * largest logit difference between them.
 */
#ifndef BP_TEST_SCHED_RUN_UTIL_H
#define BP_TEST_SCHED_RUN_UTIL_H

#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "decoder.h"
#include "model.h"

#define SR_PROMPT 6
#define SR_STEPS 8

static const int32_t sr_prompt[SR_PROMPT] = { 7, 300, 42, 511, 0, 99 };

static struct bp_run_model *sr_model(void)
{
    struct bp_run_model *m = NULL;
    char err[512];
    struct bp_run_builtin_options bo = { .weight_type = BP_TYPE_F32, .seed = 1 };
    ck_assert_msg(bp_run_model_builtin("test", &bo, &m, err, sizeof err) == BP_OK, "%s", err);
    return m;
}

static struct bp_run_session *sr_session(const struct bp_run_model *m, const char *dev,
                                         const struct bp_run_session_options *o)
{
    struct bp_device *d = bp_device_by_name(dev);
    ck_assert_msg(d != NULL, "no device %s: %s", dev, bp_last_error());
    struct bp_run_session *s = NULL;
    char err[1024];
    ck_assert_msg(bp_run_session_new(m, d, o, &s, err, sizeof err) == BP_OK, "%s", err);
    return s;
}

/* Prefill the prompt, then SR_STEPS greedy steps on both; the tokens of a
 * must equal b's; returns the largest |logit difference| seen. */
static double sr_decode_both(const struct bp_run_model *m, struct bp_run_session *a, struct bp_run_session *b)
{
    const int64_t V = m->hp.n_vocab;
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    char err[1024];
    double worst = 0;
    int32_t ta = 0, tb = 0;
    for (int step = 0; step <= SR_STEPS; step++) {
        const int32_t *in = step == 0 ? sr_prompt : &ta;
        int64_t n = step == 0 ? SR_PROMPT : 1;
        ck_assert_msg(bp_run_session_eval(a, in, n, false, la, err, sizeof err) == BP_OK, "%s", err);
        ck_assert_msg(bp_run_session_eval(b, step == 0 ? sr_prompt : &tb, n, false, lb, err, sizeof err) == BP_OK,
                      "%s", err);
        for (int64_t i = 0; i < V; i++) {
            double d = fabs((double)la[i] - (double)lb[i]);
            if (!(d <= worst)) worst = d;
        }
        ta = bp_run_argmax(la, V);
        tb = bp_run_argmax(lb, V);
        ck_assert_msg(ta == tb, "step %d: token %d, the reference chose %d", step, ta, tb);
    }
    free(la);
    free(lb);
    return worst;
}

#endif /* BP_TEST_SCHED_RUN_UTIL_H */
