/*
 * test_cpu_plan.c — the CPU backend plans a graph once and reuses the plan
 * while the graph is unchanged (plugins/cpu/plan.h, plan_cache.c), seen
 * through the plan counters of BP_CPU_PROC_PLAN_STATS (bp_cpu.h).
 *
 * The graph is a decoder layer's shape in small: three Q8_0 MUL_MATs on one
 * activation x (they join one chunk step), then
 *   out = rms_norm(silu(W1 x) * (W2 x)) + W3 x.
 * A decode step sets new values into x and computes the same graph again:
 * after the first step nothing is planned. Every change the plan depends
 * on — another shape, another tensor, a data address moved in place,
 * another thread count, other op parameters — plans again. Every result is
 * compared bit for bit with a fresh backend's (its first compute plans
 * from scratch), and W1 x with a double dot of the dequantized weight.
 * Last, the runner's own decode steps (builtin:test): one plan per KV
 * capacity bucket, then nothing.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quantize.h>

#include "bp_cpu.h"
#include "cpu_test_util.h"
#include "decoder.h"
#include "model.h"
#include "suite_main.h"

#define K 256
#define N 48
#define M 1     /* decode: one activation row */
#define M2 5    /* another shape */

static struct bp_cpu_plan_stats stats_of(struct bp_backend *be)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_PLAN_STATS);
    ck_assert_msg(p != NULL, "the cpu device has no %s proc", BP_CPU_PROC_PLAN_STATS);
    bp_cpu_plan_stats_fn fn;
    memcpy(&fn, &p, sizeof fn);
    struct bp_cpu_plan_stats s = { .size = sizeof s };
    ck_assert_int_eq(fn(be, &s), BP_OK);
    return s;
}

/* Random Q8_0 weights; the values they hold, dequantized, in *deq. */
static void fill_q8_0(struct bp_tensor *w, unsigned seed, float **deq)
{
    const size_t n = (size_t)bp_nelements(w);
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (float)rnd(&seed);
    void *q = malloc(bp_nbytes(w));
    ck_assert_uint_eq(bp_quantize(BP_TYPE_Q8_0, v, q, w->ne[1], w->ne[0]), bp_nbytes(w));
    ck_assert_int_eq(bp_tensor_set(w, q, 0, bp_nbytes(w)), BP_OK);
    if (deq) ck_assert_int_eq(bp_dequantize(BP_TYPE_Q8_0, q, v, (int64_t)n), BP_OK);
    free(q);
    if (deq) *deq = v;
    else free(v);
}

static float *get_all(const struct bp_tensor *t)
{
    const size_t n = (size_t)bp_nelements(t);
    float *v = malloc(n * sizeof *v);
    ck_assert_int_eq(bp_tensor_get(t, v, 0, n * sizeof *v), BP_OK);
    return v;
}

/* What a backend with no plan yet computes for g with th threads: out's
 * values (malloc'd). */
static float *fresh(struct bp_graph *g, const struct bp_tensor *out, int th)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(cpu_device(), NULL, &be), BP_OK);
    ck_assert_int_eq(bp_backend_set_n_threads(be, th), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s", bp_last_error());
    ck_assert_uint_eq(stats_of(be).made, 1);
    bp_backend_free(be);
    return get_all(out);
}

static void expect_bit_equal(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof *got) == 0,
                      "%s: element %lld is %.9g, a fresh plan gives %.9g", what, (long long)i,
                      (double)got[i], (double)want[i]);
}

/* Compute g on be, then expect out equal to a fresh backend's. */
static void compute_and_check(struct bp_backend *be, struct bp_graph *g, const struct bp_tensor *out,
                              int th, const char *what)
{
    ck_assert_msg(bp_backend_graph_compute(be, g) == BP_OK, "%s: %s", what, bp_last_error());
    float *got = get_all(out), *want = fresh(g, out, th);
    expect_bit_equal(got, want, bp_nelements(out), what);
    free(got);
    free(want);
}

struct layer {
    struct bp_tensor *x, *y1, *y2, *y3, *norm, *out;
};

static struct layer layer(struct bp_context *c, struct bp_tensor *x, struct bp_tensor *const w[3])
{
    struct layer l = { .x = x };
    l.y1 = bp_mul_mat(c, w[0], x);
    l.y2 = bp_mul_mat(c, w[1], x);
    l.y3 = bp_mul_mat(c, w[2], x);
    l.norm = bp_rms_norm(c, bp_mul(c, bp_silu(c, l.y1), l.y2), 1e-5f);
    l.out = bp_add(c, l.norm, l.y3);
    return l;
}

static struct bp_graph *graph_of(const struct bp_tensor *out)
{
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(64, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, (struct bp_tensor *)out), BP_OK);
    return g;
}

START_TEST(test_cpu_plan_decode_steps_plan_once)
{
    const int th = _i + 1;
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, th), BP_OK);
    struct bp_tensor *w[3];
    for (int i = 0; i < 3; i++) w[i] = bp_tensor_new_2d(f.ctx, BP_TYPE_Q8_0, K, N);
    const struct layer l = layer(f.ctx, bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, M), w);
    fx_alloc(&f);
    float *w1 = NULL;
    for (int i = 0; i < 3; i++) fill_q8_0(w[i], 11u + (unsigned)i, i == 0 ? &w1 : NULL);
    struct bp_graph *g = graph_of(l.out);
    const int steps = 6;
    for (int s = 0; s < steps; s++) {
        double *x = fill(l.x, 100u + (unsigned)s, 1.0);   /* the step's new input */
        char what[64];
        snprintf(what, sizeof what, "step %d, %d threads", s, th);
        compute_and_check(f.be, g, l.out, th, what);
        const struct bp_cpu_plan_stats st = stats_of(f.be);
        ck_assert_msg(st.made == 1 && st.reused == (uint64_t)s,
                      "%s: %llu plans made and %llu reused, want 1 and %d", what,
                      (unsigned long long)st.made, (unsigned long long)st.reused, s);
        /* The values themselves: W1 x against a double dot (x is rounded
         * to 8 bits a block in the kernel, hence the tolerance). */
        float *y1 = get_all(l.y1);
        for (int r = 0; r < N; r++) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                want += (double)w1[r * K + k] * x[k];
                mag += fabs((double)w1[r * K + k] * x[k]);
            }
            ck_assert_msg(fabs(y1[r] - want) <= 0.01 * mag + 1e-6,
                          "%s: (W1 x)[%d] is %.7g, a double dot gives %.7g", what, r,
                          (double)y1[r], want);
        }
        free(y1);
        free(x);
    }
    const struct bp_cpu_plan_stats st = stats_of(f.be);
    ck_assert_int_eq(st.cached, 1);
    ck_assert_uint_gt(st.make_ns, 0);
    free(w1);
    bp_graph_free(g);
    fx_free(&f);
}
END_TEST

START_TEST(test_cpu_plan_remade_when_the_graph_changes)
{
    const int th = 1;
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, th), BP_OK);
    struct bp_tensor *w[3], *w2b = bp_tensor_new_2d(f.ctx, BP_TYPE_Q8_0, K, N);
    for (int i = 0; i < 3; i++) w[i] = bp_tensor_new_2d(f.ctx, BP_TYPE_Q8_0, K, N);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *x_other = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, M);
    const struct layer a = layer(f.ctx, x, w);
    const struct layer wide = layer(f.ctx, bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, M2), w);
    struct bp_tensor *const wb[3] = { w[0], w2b, w[2] };
    const struct layer b = layer(f.ctx, x, wb);
    fx_alloc(&f);
    for (int i = 0; i < 3; i++) fill_q8_0(w[i], 21u + (unsigned)i, NULL);
    fill_q8_0(w2b, 30, NULL);
    free(fill(x, 1, 1.0));
    free(fill(x_other, 2, 1.0));
    free(fill(wide.x, 3, 1.0));

    struct bp_graph *g = graph_of(a.out);
    uint64_t made = 0, reused = 0;
#define EXPECT_PLANS(what, m, r)                                                                  \
    do {                                                                                         \
        made += (m);                                                                             \
        reused += (r);                                                                           \
        const struct bp_cpu_plan_stats st_ = stats_of(f.be);                                     \
        ck_assert_msg(st_.made == made && st_.reused == reused,                                 \
                      "%s: %llu plans made and %llu reused, want %llu and %llu", what,          \
                      (unsigned long long)st_.made, (unsigned long long)st_.reused,             \
                      (unsigned long long)made, (unsigned long long)reused);                    \
    } while (0)
    compute_and_check(f.be, g, a.out, th, "first");
    EXPECT_PLANS("first", 1, 0);
    compute_and_check(f.be, g, a.out, th, "again");
    EXPECT_PLANS("again", 0, 1);

    /* Another shape: a graph of its own. */
    struct bp_graph *g_wide = graph_of(wide.out);
    compute_and_check(f.be, g_wide, wide.out, th, "another shape");
    EXPECT_PLANS("another shape", 1, 0);
    bp_graph_free(g_wide);

    /* Another tensor in the same graph object (rebuilt, as fx_compute does). */
    ck_assert_int_eq(bp_graph_build(g, b.out), BP_OK);
    compute_and_check(f.be, g, b.out, th, "another weight");
    EXPECT_PLANS("another weight", 1, 0);
    ck_assert_int_eq(bp_graph_build(g, a.out), BP_OK);
    compute_and_check(f.be, g, a.out, th, "the first graph again");
    EXPECT_PLANS("the first graph again", 0, 1);

    /* The activation moved in place (an allocator placing it elsewhere):
     * the same tensors, another data address. */
    void *keep = x->data;
    x->data = x_other->data;
    compute_and_check(f.be, g, a.out, th, "x moved");
    EXPECT_PLANS("x moved", 1, 0);
    x->data = keep;

    /* Another thread count, then back: the first count's plan is still cached. */
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 2), BP_OK);
    compute_and_check(f.be, g, a.out, 2, "two threads");
    EXPECT_PLANS("two threads", 1, 0);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, th), BP_OK);
    compute_and_check(f.be, g, a.out, th, "one thread again");
    EXPECT_PLANS("one thread again", 0, 1);

    /* Other op parameters: rms_norm's epsilon. */
    const float eps = 0.5f;
    memcpy(&a.norm->op_params[0], &eps, sizeof eps);
    compute_and_check(f.be, g, a.out, th, "another epsilon");
    EXPECT_PLANS("another epsilon", 1, 0);
#undef EXPECT_PLANS
    bp_graph_free(g);
    fx_free(&f);
}
END_TEST

/* Plans of many graphs: at most CPU_PLAN_CACHE (8) are kept, the least
 * recently used goes, and all are freed with the backend (valgrind). */
START_TEST(test_cpu_plan_cache_is_bounded)
{
    enum { GRAPHS = 12 };
    struct fx f;
    fx_init(&f);
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 1), BP_OK);
    struct bp_tensor *w = bp_tensor_new_2d(f.ctx, BP_TYPE_Q8_0, K, N), *y[GRAPHS];
    for (int i = 0; i < GRAPHS; i++)
        y[i] = bp_mul_mat(f.ctx, w, bp_tensor_new_2d(f.ctx, BP_TYPE_F32, K, i + 1));
    fx_alloc(&f);
    fill_q8_0(w, 5, NULL);
    struct bp_graph *g[GRAPHS];
    for (int i = 0; i < GRAPHS; i++) {
        free(fill(y[i]->src[1], 40u + (unsigned)i, 1.0));
        g[i] = graph_of(y[i]);
        ck_assert_int_eq(bp_backend_graph_compute(f.be, g[i]), BP_OK);
        const struct bp_cpu_plan_stats st = stats_of(f.be);
        ck_assert_int_eq(st.cached, i + 1 < 8 ? i + 1 : 8);
        ck_assert_uint_eq(st.made, (uint64_t)i + 1);
    }
    /* The last 8 are cached, the first 4 were evicted. */
    compute_and_check(f.be, g[GRAPHS - 1], y[GRAPHS - 1], 1, "the last graph");
    ck_assert_uint_eq(stats_of(f.be).reused, 1);
    compute_and_check(f.be, g[0], y[0], 1, "the first graph");
    ck_assert_uint_eq(stats_of(f.be).made, GRAPHS + 1);
    for (int i = 0; i < GRAPHS; i++) bp_graph_free(g[i]);
    fx_free(&f);
}
END_TEST

START_TEST(test_cpu_plan_stats_refuse_bad_arguments)
{
    void *p = bp_device_proc_address(cpu_device(), BP_CPU_PROC_PLAN_STATS);
    ck_assert_ptr_nonnull(p);
    bp_cpu_plan_stats_fn fn;
    memcpy(&fn, &p, sizeof fn);
    struct fx f;
    fx_init(&f);
    struct bp_cpu_plan_stats s = { .size = 0 };
    ck_assert_int_eq(fn(f.be, &s), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(fn(f.be, NULL), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(fn(NULL, &s), BP_ERR_INVALID_ARGUMENT);
    /* A caller built when the struct was shorter gets only what it has room for. */
    struct { struct bp_cpu_plan_stats s; unsigned char guard[8]; } shorter;
    memset(&shorter, 0xa5, sizeof shorter);
    shorter.s.size = offsetof(struct bp_cpu_plan_stats, reused);
    ck_assert_int_eq(fn(f.be, &shorter.s), BP_OK);
    ck_assert_uint_eq(shorter.s.made, 0);
    const unsigned char *rest = (const unsigned char *)&shorter.s.reused;
    for (size_t i = 0; i < sizeof shorter - offsetof(struct bp_cpu_plan_stats, reused); i++)
        ck_assert_uint_eq(rest[i], 0xa5);
    fx_free(&f);
}
END_TEST

/* A session's decode graphs keep one KV capacity (32, 64, ... positions)
 * until it is outgrown: its steps plan once per capacity and once for the
 * prefill, whether through the scheduler or directly. */
START_TEST(test_cpu_plan_runner_decode_plans_once_per_capacity)
{
    const bool direct = _i == 1;
    char err[256] = "";
    struct bp_run_model *m;
    const struct bp_run_builtin_options mo = { .weight_type = BP_TYPE_Q8_0, .seed = 3 };
    ck_assert_msg(bp_run_model_builtin("test", &mo, &m, err, sizeof err) == BP_OK, "%s", err);
    const struct bp_run_session_options so = { .n_ctx = 64, .n_threads = 2, .direct = direct };
    struct bp_run_session *s;
    ck_assert_msg(bp_run_session_new(m, cpu_device(), &so, &s, err, sizeof err) == BP_OK, "%s", err);
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    const int32_t prompt[5] = { 1, 7, 42, 9, 100 };
    ck_assert_msg(bp_run_session_eval(s, prompt, 5, false, logits, err, sizeof err) == BP_OK, "%s", err);
    /* Positions 5 .. 44: steps with 6 .. 32 positions, then 33 .. 45. */
    const int steps = 40;
    for (int i = 0; i < steps; i++) {
        const int32_t tok = bp_run_argmax(logits, m->hp.n_vocab);
        ck_assert_msg(bp_run_session_eval(s, &tok, 1, false, logits, err, sizeof err) == BP_OK,
                      "step %d: %s", i, err);
    }
    const struct bp_cpu_plan_stats st = stats_of(bp_run_session_backend(s));
    ck_assert_msg(st.made == 3 && st.reused == (uint64_t)(steps - 2),
                  "%s: %llu plans made and %llu reused over a prefill and %d decode steps in two "
                  "capacities, want 3 and %d", direct ? "direct" : "scheduled",
                  (unsigned long long)st.made, (unsigned long long)st.reused, steps, steps - 2);
    free(logits);
    bp_run_session_free(s);
    bp_run_model_free(m);
}
END_TEST

/* The profile proc has a generic name; the CPU plugin's 1.0 name answers
 * the same function, so code built against that name keeps working. */
START_TEST(test_cpu_profile_old_name_is_the_generic_proc)
{
    void *generic = bp_device_proc_address(cpu_device(), BP_PROC_SET_PROFILE);
    void *old = bp_device_proc_address(cpu_device(), BP_CPU_PROC_SET_PROFILE);
    ck_assert_ptr_nonnull(generic);
    ck_assert_ptr_eq(generic, old);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_cpu_plan_decode_steps_plan_once, 0, 3);
    tcase_add_test(tc, test_cpu_plan_remade_when_the_graph_changes);
    tcase_add_test(tc, test_cpu_plan_cache_is_bounded);
    tcase_add_test(tc, test_cpu_plan_stats_refuse_bad_arguments);
    tcase_add_loop_test(tc, test_cpu_plan_runner_decode_plans_once_per_capacity, 0, 2);
    tcase_add_test(tc, test_cpu_profile_old_name_is_the_generic_proc);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
