/* thread_count.h — how many threads this process has now (Linux: the
 * entries of /proc/self/task), for the tests that check what a thread pool
 * starts. Fails the test when /proc cannot be read. */
#ifndef BP_TEST_THREAD_COUNT_H
#define BP_TEST_THREAD_COUNT_H

#include <check.h>
#include <dirent.h>

static inline int test_threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

#endif
