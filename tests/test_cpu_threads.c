/*
 * test_cpu_threads.c — the CPU device and its thread pool: what the device
 * reports, the thread-count knobs, results independent of the thread count,
 * and two backends of the one device computing at the same time.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>

#include "cpu_test_util.h"
#include "suite_main.h"
#include "thread_count.h"

START_TEST(test_cpu_device_reports_type_description_memory_and_features)
{
    struct bp_device *dev = cpu_device();
    ck_assert_str_eq(bp_device_name(dev), "cpu");
    ck_assert_int_eq(bp_device_type(dev), BP_DEVICE_TYPE_CPU);
    ck_assert_ptr_nonnull(bp_device_description(dev));
    ck_assert_int_gt(strlen(bp_device_description(dev)), 0);
    size_t free_b = 0, total_b = 0;
    bp_device_memory(dev, &free_b, &total_b);
    ck_assert_uint_gt(total_b, 0);
    ck_assert_uint_le(free_b, total_b);

    bp_get_features_fn get = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull((void *)get);
    const struct bp_feature *f = get(dev->reg);
    bool variant = false, threads = false;
    for (; f && f->name; f++) {
        /* the variant the loader chose, by the name its file carries */
        if (strcmp(f->name, "variant") == 0)
            variant = dev->reg->variant && strcmp(f->value, dev->reg->variant) == 0;
        if (strcmp(f->name, "threads") == 0) threads = atoi(f->value) >= 1;
    }
    ck_assert_msg(variant && threads, "features lack variant=<loaded variant> or threads=N");
    ck_assert_ptr_nonnull(bp_device_proc_address(dev, BP_PROC_SET_N_THREADS));
    ck_assert_ptr_null(bp_device_proc_address(dev, "bp_no_such_feature"));
}
END_TEST

static const char *cpu_feature(struct bp_device *dev, const char *name)
{
    bp_get_features_fn get = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull((void *)get);
    for (const struct bp_feature *f = get(dev->reg); f && f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f->value;
    return NULL;
}

/* Base address of a fresh CPU buffer of `size` bytes (freed at once: only
 * the address is looked at). */
static uintptr_t buffer_base(struct bp_device *dev, size_t size)
{
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_buffer_alloc(bp_device_buffer_type(dev), size, &buf), BP_OK);
    const uintptr_t base = (uintptr_t)buf->iface->get_base(buf);
    ck_assert_int_eq(bp_buffer_write(buf, size - 1, "x", 1), BP_OK);
    bp_buffer_free(buf);
    return base;
}

/* Buffers of 4 MiB or more start on a 2 MiB boundary with huge pages asked
 * for, unless THP is off or BACKPLANE_CPU_HUGEPAGES=0 (read at plugin
 * init, so the plugins are reloaded around it); `info` says which. */
START_TEST(test_large_buffers_ask_for_huge_pages_unless_told_not_to)
{
    const size_t huge = (size_t)2 << 20;
    struct bp_device *dev = cpu_device();
    const char *hp = cpu_feature(dev, "huge_pages");
    ck_assert_ptr_nonnull(hp);
    if (strncmp(hp, "2 MiB", 5) == 0) {
        for (int i = 0; i < 4; i++) /* not an accident of one allocation */
            ck_assert_uint_eq(buffer_base(dev, ((size_t)4 << 20) + 4096 * (size_t)i) % huge, 0);
    } else {
        ck_assert_msg(strstr(hp, "THP never") || strstr(hp, "THP unknown"),
                      "huge pages not used although THP is available: '%s'", hp);
    }
    ck_assert_uint_eq(buffer_base(dev, 100) % 64, 0);

    bp_unload();
    setenv("BACKPLANE_CPU_HUGEPAGES", "0", 1);
    hp = cpu_feature(cpu_device(), "huge_pages");
    ck_assert_msg(hp && strncmp(hp, "off", 3) == 0, "huge_pages='%s' with the knob at 0",
                  hp ? hp : "(none)");
    ck_assert_uint_eq(buffer_base(cpu_device(), (size_t)4 << 20) % 64, 0);
    bp_unload();
    unsetenv("BACKPLANE_CPU_HUGEPAGES");
}
END_TEST

/* Threads of this process once it settles at `expect` (a joined thread may
 * linger in /proc for a moment). */
static int count_threads(int expect)
{
    int n = test_threads_now();
    for (int i = 0; i < 2000 && n != expect; i++) {
        usleep(1000);
        n = test_threads_now();
    }
    return n;
}

START_TEST(test_backplane_cpu_threads_sets_the_pool_size)
{
    struct bp_device *dev = cpu_device();
    struct bp_backend *be;
    /* A first pool lets sanitizers start their helper threads before counting. */
    ck_assert_int_eq(bp_backend_init(dev, "n_threads=2", &be), BP_OK);
    bp_backend_free(be);
    setenv("BACKPLANE_CPU_THREADS", "3", 1);
    int before = test_threads_now();
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    /* the caller is thread 0 of the pool: 3 threads means 2 workers */
    ck_assert_int_eq(count_threads(before + 2) - before, 2);
    ck_assert_int_eq(bp_backend_set_n_threads(be, 5), BP_OK);
    ck_assert_int_eq(count_threads(before + 4) - before, 4);
    ck_assert_int_eq(bp_backend_set_n_threads(be, 1), BP_OK);
    ck_assert_int_eq(count_threads(before + 0) - before, 0);
    bp_backend_free(be);
    unsetenv("BACKPLANE_CPU_THREADS");
}
END_TEST

START_TEST(test_set_n_threads_refuses_zero)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(cpu_device(), NULL, &be), BP_OK);
    ck_assert_int_ne(bp_backend_set_n_threads(be, 0), BP_OK);
    ck_assert_int_ne(bp_backend_set_n_threads(be, -3), BP_OK);
    bp_backend_free(be);
}
END_TEST

/* A small decoder-like graph touching every kernel family. */
struct block {
    struct bp_tensor *out_mm, *out_attn, *out_rows;
};

static struct block build_block(struct bp_context *ctx)
{
    struct block b;
    struct bp_tensor *w = bp_tensor_new_2d(ctx, BP_TYPE_F16, 33, 19);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, 33, 17);
    struct bp_tensor *g = bp_tensor_new_1d(ctx, BP_TYPE_F32, 19);
    struct bp_tensor *pos = bp_tensor_new_1d(ctx, BP_TYPE_I32, 19);
    struct bp_tensor *y = bp_mul_mat(ctx, w, x);                   /* [19, 17] */
    y = bp_mul(ctx, bp_rms_norm(ctx, y, 1e-6f), g);
    y = bp_gelu(ctx, bp_add(ctx, bp_silu(ctx, y), y));
    y = bp_soft_max(ctx, bp_scale(ctx, y, 2.0f, 0.5f), NULL, 0.3f);
    /* [17, 19] as 19 tokens of one 17-wide head */
    struct bp_tensor *r = bp_reshape(ctx, bp_cont(ctx, bp_transpose(ctx, y)), 3,
                                     (const int64_t[]){ 17, 1, 19 });
    b.out_mm = bp_rope(ctx, r, pos, 16, BP_ROPE_MODE_NEOX, 10000.0f, 1.0f);

    struct bp_tensor *q = bp_tensor_new_4d(ctx, BP_TYPE_F32, 16, 7, 4, 1);
    struct bp_tensor *k = bp_tensor_new_4d(ctx, BP_TYPE_F16, 16, 23, 2, 1);
    struct bp_tensor *v = bp_tensor_new_4d(ctx, BP_TYPE_F16, 16, 23, 2, 1);
    b.out_attn = bp_flash_attn_ext(ctx, q, k, v, NULL, 0.25f);

    struct bp_tensor *tab = bp_tensor_new_2d(ctx, BP_TYPE_BF16, 9, 31);
    struct bp_tensor *ids = bp_tensor_new_1d(ctx, BP_TYPE_I32, 13);
    b.out_rows = bp_get_rows(ctx, tab, ids);
    return b;
}

static void fill_leaves(struct bp_context *ctx)
{
    for (size_t i = 0; i < bp_context_tensor_count(ctx); i++) {
        struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (t->op != BP_OP_NONE)
            continue;
        double *v = fill(t, 1000u + (unsigned)i, t->type == BP_TYPE_I32 ? 0.0 : 1.5);
        if (t->type == BP_TYPE_I32) {
            for (int64_t j = 0; j < bp_nelements(t); j++)
                v[j] = (double)((j * 7) % 17);
            store_values(t, v);
        }
        free(v);
    }
}

static void *snapshot(const struct bp_tensor *t)
{
    void *p = malloc(bp_nbytes(t));
    ck_assert_int_eq(bp_tensor_get(t, p, 0, bp_nbytes(t)), BP_OK);
    return p;
}

/* f with the block of build_block allocated, filled and in one graph of
 * its three outputs; the backend made by fx_init (after any environment
 * the caller set). */
static struct block block_graph(struct fx *f)
{
    fx_init(f);
    struct block b = build_block(f->ctx);
    fx_alloc(f);
    fill_leaves(f->ctx);
    ck_assert_int_eq(bp_graph_new(256, &f->g), BP_OK);
    ck_assert_int_eq(bp_graph_build(f->g, b.out_mm), BP_OK);
    ck_assert_int_eq(bp_graph_build(f->g, b.out_attn), BP_OK);
    ck_assert_int_eq(bp_graph_build(f->g, b.out_rows), BP_OK);
    return b;
}

START_TEST(test_results_are_identical_for_every_thread_count)
{
    struct fx f;
    struct block b = block_graph(&f);

    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 1), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(f.be, f.g), BP_OK);
    void *mm1 = snapshot(b.out_mm), *at1 = snapshot(b.out_attn), *gr1 = snapshot(b.out_rows);
    const int counts[] = { 2, 3, 4, 7, 64 };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, counts[i]), BP_OK);
        ck_assert_int_eq(bp_buffer_clear(f.buf, 0), BP_OK);
        fill_leaves(f.ctx);
        ck_assert_int_eq(bp_backend_graph_compute(f.be, f.g), BP_OK);
        void *mm = snapshot(b.out_mm), *at = snapshot(b.out_attn), *gr = snapshot(b.out_rows);
        ck_assert_msg(memcmp(mm, mm1, bp_nbytes(b.out_mm)) == 0, "%d threads: block differs", counts[i]);
        ck_assert_msg(memcmp(at, at1, bp_nbytes(b.out_attn)) == 0, "%d threads: attention differs", counts[i]);
        ck_assert_msg(memcmp(gr, gr1, bp_nbytes(b.out_rows)) == 0, "%d threads: get_rows differs", counts[i]);
        free(mm); free(at); free(gr);
    }
    /* the output is not trivially constant */
    const float *o = mm1;
    ck_assert_msg(isfinite(o[0]) && o[0] != o[1], "block output looks degenerate");
    free(mm1); free(at1); free(gr1);
    fx_free(&f);
}
END_TEST

/* Threads that sleep at once (BACKPLANE_CPU_POLL=0) or after 3 us, so
 * that every kick and barrier goes through the sleep and wake-up path,
 * still compute what one thread does, graph after graph; so do threads
 * with the default spin, twice as many as CPUs, adaptive (they see
 * themselves descheduled and sleep for a while) and fixed. */
START_TEST(test_threads_that_sleep_while_waiting_give_the_same_results)
{
    const char *polls[] = { "0", "3", "1000", "1000" };
    const char *adapt[] = { "1", "1", "1", "0" };
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const bool valgrind = getenv("BP_UNDER_VALGRIND") != NULL;
    for (size_t p = 0; p < sizeof polls / sizeof polls[0]; p++) {
        const int nth = p < 2 ? 3 : (int)(cpus > 0 && cpus < 8 ? 2 * cpus : 16);
        if (p >= 2 && valgrind)
            break; /* valgrind runs one thread at a time: every spin is spent in full */
        setenv("BACKPLANE_CPU_POLL", polls[p], 1);
        setenv("BACKPLANE_CPU_POLL_ADAPT", adapt[p], 1);
        struct fx f;
        struct block b = block_graph(&f); /* its pool reads the budget */
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, 1), BP_OK);
        ck_assert_int_eq(bp_backend_graph_compute(f.be, f.g), BP_OK);
        void *mm1 = snapshot(b.out_mm), *at1 = snapshot(b.out_attn);
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, nth), BP_OK);
        for (int it = 0; it < 20; it++) {
            if (it % 4 == 0)
                usleep(200); /* long enough for every worker to fall asleep */
            ck_assert_int_eq(bp_backend_graph_compute(f.be, f.g), BP_OK);
            void *mm = snapshot(b.out_mm), *at = snapshot(b.out_attn);
            ck_assert_msg(memcmp(mm, mm1, bp_nbytes(b.out_mm)) == 0, "poll %s, graph %d: block differs",
                          polls[p], it);
            ck_assert_msg(memcmp(at, at1, bp_nbytes(b.out_attn)) == 0,
                          "poll %s, graph %d: attention differs", polls[p], it);
            free(mm); free(at);
        }
        free(mm1); free(at1);
        fx_free(&f);
        unsetenv("BACKPLANE_CPU_POLL");
        unsetenv("BACKPLANE_CPU_POLL_ADAPT");
    }
}
END_TEST

/* Each thread: its own context and backend, a mul_mat checked against loops. */
struct worker {
    unsigned seed;
    int iterations;
    int failures;
    bp_status status;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const int64_t K = 64, N = 48, M = 40;
    struct bp_context *ctx;
    struct bp_backend *be;
    struct bp_buffer *buf;
    struct bp_graph *g;
    if (bp_context_new(16, &ctx) != BP_OK || bp_backend_init(cpu_device(), NULL, &be) != BP_OK) {
        w->status = BP_ERR_INTERNAL;
        return NULL;
    }
    bp_backend_set_n_threads(be, 2);
    struct bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, N);
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, K, M);
    struct bp_tensor *y = bp_mul_mat(ctx, a, x);
    bp_context_alloc_tensors(ctx, bp_device_buffer_type(cpu_device()), NULL, &buf);
    bp_graph_new(8, &g);
    bp_graph_build(g, y);
    float *av = malloc(sizeof(float) * K * N), *xv = malloc(sizeof(float) * K * M);
    float *yv = malloc(sizeof(float) * N * M);
    for (int it = 0; it < w->iterations; it++) {
        for (int64_t i = 0; i < K * N; i++) av[i] = (float)rnd(&w->seed);
        for (int64_t i = 0; i < K * M; i++) xv[i] = (float)rnd(&w->seed);
        bp_tensor_set(a, av, 0, sizeof(float) * K * N);
        bp_tensor_set(x, xv, 0, sizeof(float) * K * M);
        bp_status st = bp_backend_graph_compute(be, g);
        if (st != BP_OK) {
            w->status = st;
            break;
        }
        bp_tensor_get(y, yv, 0, sizeof(float) * N * M);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0.0;
                for (int64_t k = 0; k < K; k++) s += (double)av[k + K * n] * xv[k + K * m];
                if (fabs(yv[n + N * m] - s) > 1e-5 + 1e-6 * fabs(s)) w->failures++;
            }
    }
    free(av); free(xv); free(yv);
    bp_graph_free(g);
    bp_buffer_free(buf);
    bp_backend_free(be);
    bp_context_free(ctx);
    return NULL;
}

START_TEST(test_two_backends_compute_concurrently_from_two_threads)
{
    cpu_device(); /* load plugins before the threads race to */
    struct worker w[2] = { { .seed = 1, .iterations = 20 }, { .seed = 2, .iterations = 20 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(w[i].status, BP_OK);
        ck_assert_int_eq(w[i].failures, 0);
    }
}
END_TEST

START_TEST(test_compute_of_a_graph_with_only_views_succeeds)
{
    struct fx f;
    fx_init(&f);
    struct bp_tensor *x = bp_tensor_new_2d(f.ctx, BP_TYPE_F32, 4, 3);
    struct bp_tensor *t = bp_transpose(f.ctx, x);
    fx_alloc(&f);
    ck_assert_int_eq(fx_compute(&f, t), BP_OK);
    fx_free(&f);
}
END_TEST

Suite *cpu_threads_suite(void)
{
    Suite *s = suite_create("cpu_threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cpu_device_reports_type_description_memory_and_features);
    tcase_add_test(tc, test_backplane_cpu_threads_sets_the_pool_size);
    tcase_add_test(tc, test_set_n_threads_refuses_zero);
    tcase_add_test(tc, test_large_buffers_ask_for_huge_pages_unless_told_not_to);
    tcase_add_test(tc, test_results_are_identical_for_every_thread_count);
    tcase_add_test(tc, test_threads_that_sleep_while_waiting_give_the_same_results);
    tcase_add_test(tc, test_two_backends_compute_concurrently_from_two_threads);
    tcase_add_test(tc, test_compute_of_a_graph_with_only_views_succeeds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = run_suite(cpu_threads_suite());
    bp_unload();
    return rc;
}
