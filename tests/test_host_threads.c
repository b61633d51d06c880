/*
 * test_host_threads.c — the thread rules stated at the top of backplane.h
 * that no other suite exercises: discovery triggered by many threads at
 * once runs once, the lists are read concurrently, and bp_last_error() is
 * per thread. (Concurrent backends and contexts: test_cpu_threads.c.) In
 * CI it also runs under ThreadSanitizer (tests/tsan.cmake).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "suite_main.h"

#define N_THREADS 8

struct seen {
    pthread_barrier_t *start;
    size_t devices, plugins;
    struct bp_device *cpu;
    const char *cpu_name;
};

static void *first_use(void *arg)
{
    struct seen *s = arg;
    pthread_barrier_wait(s->start);
    s->devices = bp_device_count();
    s->plugins = bp_plugin_count();
    s->cpu = bp_device_by_name("cpu");
    s->cpu_name = s->cpu ? bp_device_name(s->cpu) : NULL;
    return NULL;
}

START_TEST(test_first_use_from_many_threads_loads_once_and_all_see_one_list)
{
    bp_unload(); /* nothing loaded: the threads below race to be first */
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, N_THREADS), 0);
    struct seen s[N_THREADS];
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        s[i] = (struct seen){.start = &start};
        ck_assert_int_eq(pthread_create(&t[i], NULL, first_use, &s[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    /* One discovery: every thread got the same devices, the same cpu
     * object, and the list did not grow after it (a second discovery would
     * have added every plugin again or refused them as duplicates). */
    ck_assert_uint_gt(s[0].devices, 0);
    ck_assert_ptr_nonnull(s[0].cpu);
    for (int i = 1; i < N_THREADS; i++) {
        ck_assert_uint_eq(s[i].devices, s[0].devices);
        ck_assert_uint_eq(s[i].plugins, s[0].plugins);
        ck_assert_ptr_eq(s[i].cpu, s[0].cpu);
        ck_assert_str_eq(s[i].cpu_name, "cpu");
    }
    ck_assert_uint_eq(bp_device_count(), s[0].devices);
    ck_assert_uint_eq(bp_plugin_count(), s[0].plugins);
}
END_TEST

struct errs {
    pthread_barrier_t *step;
    const char *ask;        /* a device name to look up, NULL: none */
    char before[256], after[256];
};

static void *look_up(void *arg)
{
    struct errs *e = arg;
    snprintf(e->before, sizeof e->before, "%s", bp_last_error());
    pthread_barrier_wait(e->step); /* both threads have their "before" */
    if (e->ask) (void)bp_device_by_name(e->ask);
    pthread_barrier_wait(e->step); /* both lookups are done */
    snprintf(e->after, sizeof e->after, "%s", bp_last_error());
    return NULL;
}

START_TEST(test_last_error_belongs_to_the_thread_that_failed)
{
    ck_assert_uint_gt(bp_device_count(), 0); /* loaded before the threads */
    pthread_barrier_t step;
    ck_assert_int_eq(pthread_barrier_init(&step, NULL, 2), 0);
    struct errs e[2] = {{.step = &step, .ask = "no-such-device-a"}, {.step = &step, .ask = NULL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, look_up, &e[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&step);
    ck_assert_str_eq(e[0].before, "");
    ck_assert_ptr_nonnull(strstr(e[0].after, "no-such-device-a"));
    /* The thread that did not fail still sees nothing. */
    ck_assert_str_eq(e[1].after, "");
}
END_TEST

static void *read_lists(void *arg)
{
    size_t *mismatches = arg;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < bp_device_count(); i++) {
            struct bp_device *d = bp_device_get(i);
            if (!d || bp_device_by_name(bp_device_name(d)) != d) (*mismatches)++;
            if (!bp_device_buffer_type(d)) (*mismatches)++;
        }
    }
    return NULL;
}

START_TEST(test_device_lists_are_read_from_many_threads_at_once)
{
    ck_assert_uint_gt(bp_device_count(), 0);
    size_t mismatches[N_THREADS] = {0};
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, read_lists, &mismatches[i]), 0);
    for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N_THREADS; i++) ck_assert_uint_eq(mismatches[i], 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("host_threads");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_first_use_from_many_threads_loads_once_and_all_see_one_list);
    tcase_add_test(tc, test_last_error_belongs_to_the_thread_that_failed);
    tcase_add_test(tc, test_device_lists_are_read_from_many_threads_at_once);
    suite_add_tcase(s, tc);
    const int rc = run_suite(s);
    bp_unload();
    return rc;
}
