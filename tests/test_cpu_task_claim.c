/*
 * test_cpu_task_claim.c — the CPU backend's task sharing (plugins/cpu/
 * task_claim.h): every task of a step is run exactly once whatever the
 * thread count and timing; an owner takes its range in order from the
 * front; others take it from the back.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "suite_main.h"
#include "task_claim.h"

START_TEST(test_ranges_cover_the_tasks_once)
{
    for (int64_t n = 1; n <= 70; n++)
        for (int nth = 1; nth <= 9; nth++) {
            int64_t next = 0;
            for (int i = 0; i < nth; i++) {
                int64_t lo, hi;
                cpu_claim_range(n, nth, i, &lo, &hi);
                ck_assert_int_eq(lo, next);
                ck_assert_int_le(lo, hi);
                /* no range more than one task longer than another */
                ck_assert_int_le(hi - lo, n / nth + 1);
                next = hi;
            }
            ck_assert_int_eq(next, n);
        }
}
END_TEST

START_TEST(test_front_and_back_meet_without_overlap)
{
    /* A range of 7 tasks at [10, 17): the owner and a thief alternate. */
    _Atomic uint64_t w;
    atomic_init(&w, 0);
    int64_t t;
    ck_assert(cpu_claim_front(&w, 10, 17, &t));
    ck_assert_int_eq(t, 10);
    ck_assert(cpu_claim_back(&w, 10, 17, &t));
    ck_assert_int_eq(t, 16);
    ck_assert(cpu_claim_back(&w, 10, 17, &t));
    ck_assert_int_eq(t, 15);
    ck_assert(cpu_claim_front(&w, 10, 17, &t));
    ck_assert_int_eq(t, 11);
    ck_assert(cpu_claim_front(&w, 10, 17, &t));
    ck_assert_int_eq(t, 12);
    ck_assert(cpu_claim_back(&w, 10, 17, &t));
    ck_assert_int_eq(t, 14);
    ck_assert(cpu_claim_front(&w, 10, 17, &t));
    ck_assert_int_eq(t, 13);
    /* used up: both ends fail, and stay failed */
    ck_assert(!cpu_claim_front(&w, 10, 17, &t));
    ck_assert(!cpu_claim_back(&w, 10, 17, &t));
    ck_assert(!cpu_claim_back(&w, 10, 17, &t));
    /* an empty range hands out nothing */
    atomic_init(&w, 0);
    ck_assert(!cpu_claim_front(&w, 5, 5, &t));
    ck_assert(!cpu_claim_back(&w, 5, 5, &t));
}
END_TEST

/* The threads run the backend's loop (graph_job in backend.c): their own
 * range from the front, then every other range from the back. */
#define MAX_TASKS 5000
#define MAX_THREADS 8

struct claim_run {
    int64_t n;
    int nth;
    _Atomic uint64_t words[MAX_THREADS];
    _Atomic int runs[MAX_TASKS];
    _Atomic int started;
    int64_t own[MAX_THREADS][MAX_TASKS]; /* each thread's front claims, in order */
    int64_t n_own[MAX_THREADS];
};

struct claim_thread {
    struct claim_run *run;
    int ith;
};

static void do_task(struct claim_run *r, int64_t t)
{
    atomic_fetch_add(&r->runs[t], 1);
    if (t % 7 == 0) /* uneven task lengths, so stealing happens */
        sched_yield();
}

static void *claim_thread_main(void *arg)
{
    struct claim_thread *ct = arg;
    struct claim_run *r = ct->run;
    atomic_fetch_add(&r->started, 1);
    while (atomic_load(&r->started) < r->nth)
        sched_yield();
    int64_t lo, hi, t;
    cpu_claim_range(r->n, r->nth, ct->ith, &lo, &hi);
    while (cpu_claim_front(&r->words[ct->ith], lo, hi, &t)) {
        r->own[ct->ith][r->n_own[ct->ith]++] = t;
        do_task(r, t);
    }
    for (int v = 1; v < r->nth; v++) {
        const int other = (ct->ith + v) % r->nth;
        cpu_claim_range(r->n, r->nth, other, &lo, &hi);
        while (cpu_claim_back(&r->words[other], lo, hi, &t))
            do_task(r, t);
    }
    return NULL;
}

START_TEST(test_every_task_runs_once_under_contention)
{
    static const int64_t sizes[] = { 1, 2, 3, 7, 8, 64, 1000, MAX_TASKS };
    static struct claim_run r;
    for (int nth = 1; nth <= MAX_THREADS; nth++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            memset(&r, 0, sizeof r);
            r.n = sizes[si];
            r.nth = nth;
            for (int i = 0; i < nth; i++) atomic_init(&r.words[i], 0);
            for (int64_t t = 0; t < r.n; t++) atomic_init(&r.runs[t], 0);
            atomic_init(&r.started, 0);
            pthread_t tid[MAX_THREADS];
            struct claim_thread ct[MAX_THREADS];
            for (int i = 0; i < nth; i++) {
                ct[i] = (struct claim_thread){ &r, i };
                ck_assert_int_eq(pthread_create(&tid[i], NULL, claim_thread_main, &ct[i]), 0);
            }
            for (int i = 0; i < nth; i++) pthread_join(tid[i], NULL);
            for (int64_t t = 0; t < r.n; t++)
                ck_assert_msg(atomic_load(&r.runs[t]) == 1, "n=%lld nth=%d: task %lld ran %d times",
                              (long long)r.n, nth, (long long)t, atomic_load(&r.runs[t]));
            /* an owner's claims are its range's first tasks, in order */
            for (int i = 0; i < nth; i++) {
                int64_t lo, hi;
                cpu_claim_range(r.n, nth, i, &lo, &hi);
                ck_assert_int_le(r.n_own[i], hi - lo);
                for (int64_t k = 0; k < r.n_own[i]; k++) ck_assert_int_eq(r.own[i][k], lo + k);
            }
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_task_claim");
    TCase *tc = tcase_create("claim");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ranges_cover_the_tasks_once);
    tcase_add_test(tc, test_front_and_back_meet_without_overlap);
    tcase_add_test(tc, test_every_task_runs_once_under_contention);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
