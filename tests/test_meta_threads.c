/* test_meta_threads.c — the meta plugin's shared state under threads (run
 * under ThreadSanitizer in the tsan stage): one spec asked for by several
 * threads at once is one device, and the registry's feature table read
 * while other threads add devices is always a complete, terminated table. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "suite_main.h"
#include "thread_count.h"

#define N_THREADS 4

static pthread_barrier_t start;

static void *make_from_spec(void *spec)
{
    pthread_barrier_wait(&start);
    struct bp_device *d = NULL;
    return bp_meta_device_from_spec(spec, &d) == BP_OK ? d : NULL;
}

static void *make_by_name(void *spec)
{
    pthread_barrier_wait(&start);
    return bp_device_by_name(spec);
}

/* Every thread's device for spec, started together; all must be one. */
static void race_for_one_spec(void *(*fn)(void *), const char *spec)
{
    pthread_t th[N_THREADS];
    void *got[N_THREADS];
    pthread_barrier_init(&start, NULL, N_THREADS);
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, fn, (void *)spec), 0);
    for (int i = 0; i < N_THREADS; i++) ck_assert_int_eq(pthread_join(th[i], &got[i]), 0);
    pthread_barrier_destroy(&start);
    ck_assert_msg(got[0] != NULL, "'%s' made no device: %s", spec, bp_last_error());
    for (int i = 1; i < N_THREADS; i++)
        ck_assert_msg(got[i] == got[0], "thread %d got another device for '%s'", i, spec);
}

START_TEST(test_meta_threads_one_spec_is_one_device)
{
    race_for_one_spec(make_from_spec, "meta:cpu*2");
    race_for_one_spec(make_by_name, "meta:cpu*3");
    /* The device made by name is the one the spec names afterwards. */
    struct bp_device *again = NULL;
    ck_assert_int_eq(bp_meta_device_from_spec("meta:cpu*3", &again), BP_OK);
    ck_assert_ptr_eq(again, bp_device_by_name("meta:cpu*3"));
}
END_TEST

/* Threads a backend of spec with params starts (its pools' workers and the
 * meta device's own workers), counted while it lives. */
static int threads_of_backend(const char *spec, const char *params)
{
    struct bp_device *d = NULL;
    ck_assert_int_eq(bp_meta_device_from_spec(spec, &d), BP_OK);
    struct bp_backend *be = NULL;
    const int before = test_threads_now();
    ck_assert_int_eq(bp_backend_init(d, params, &be), BP_OK);
    const int n = test_threads_now() - before;
    bp_backend_free(be);
    return n;
}

/* Two CPU sub-devices are two backends on one machine's CPUs: without a
 * thread count each takes half of them (at least one), so together they do
 * not oversubscribe it; a thread count the caller gives is each one's. */
START_TEST(test_meta_cpu_sub_devices_split_the_cpus)
{
    unsetenv("BACKPLANE_CPU_THREADS");
    (void)threads_of_backend("meta:cpu*2", NULL); /* sanitizers start their helpers first */
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const int share = ncpu / 2 > 1 ? (int)(ncpu / 2) : 1;
    /* each sub-backend's pool has share - 1 workers; the meta backend runs
     * sub-device 1 on a worker of its own */
    ck_assert_int_eq(threads_of_backend("meta:cpu*2", NULL), 2 * (share - 1) + 1);
    ck_assert_int_eq(threads_of_backend("meta:cpu*2", "n_threads=3"), 2 * (3 - 1) + 1);
    setenv("BACKPLANE_CPU_THREADS", "2", 1);
    ck_assert_int_eq(threads_of_backend("meta:cpu*2", NULL), 2 * (2 - 1) + 1);
    unsetenv("BACKPLANE_CPU_THREADS");
}
END_TEST

static bp_get_features_fn features_fn(void)
{
    struct bp_registry *r = bp_registry_by_name("meta");
    ck_assert_ptr_nonnull(r);
    bp_get_features_fn fn = (bp_get_features_fn)r->iface->get_proc_address(r, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull(fn);
    return fn;
}

/* Count the entries of a table, checking each one names a meta device. */
static size_t check_table(const struct bp_feature *f)
{
    size_t k = 0;
    for (; f[k].name; k++) {
        if (strncmp(f[k].name, "meta", 4) != 0 || !f[k].value) return (size_t)-1;
    }
    return k;
}

static bp_get_features_fn get_features;

static void *read_features(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < 200; i++)
        if (check_table(get_features(NULL)) % 3 != 0) return (void *)1;
    return NULL;
}

static void *add_devices(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct bp_device *subs[2] = {cpu, cpu};
    for (int i = 0; i < 4; i++) {
        struct bp_device *m = NULL;
        if (bp_meta_device_new(subs, 2, NULL, NULL, NULL, &m) != BP_OK) return (void *)1;
    }
    return NULL;
}

START_TEST(test_meta_threads_features_stay_whole_while_devices_are_added)
{
    get_features = features_fn();
    size_t before = check_table(get_features(NULL));
    pthread_t th[N_THREADS];
    pthread_barrier_init(&start, NULL, N_THREADS);
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, i % 2 ? add_devices : read_features, NULL), 0);
    for (int i = 0; i < N_THREADS; i++) {
        void *r = NULL;
        ck_assert_int_eq(pthread_join(th[i], &r), 0);
        ck_assert_msg(r == NULL, "thread %d saw a broken feature table or could not add a device", i);
    }
    pthread_barrier_destroy(&start);
    /* Two adders, four devices each, three lines per device. */
    const struct bp_feature *f = get_features(NULL);
    ck_assert_uint_eq(check_table(f), before + 2 * 4 * 3);
    ck_assert_str_eq(f[before + 0].value, "cpu,cpu");
    ck_assert_str_eq(f[before + 1].value, "1,1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta_threads");
    TCase *tc = tcase_create("meta_threads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_meta_threads_one_spec_is_one_device);
    tcase_add_test(tc, test_meta_threads_features_stay_whole_while_devices_are_added);
    tcase_add_test(tc, test_meta_cpu_sub_devices_split_the_cpus);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
