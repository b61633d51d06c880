/* meta_test_util.c — see meta_test_util.h. */
#include "meta_test_util.h"

#include <check.h>
#include <string.h>

struct bp_meta_split meta_test_split;

static int split_named(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    (void)user;
    if (strncmp(t->name, "split", 5) != 0) return 0;
    *out = meta_test_split;
    return 1;
}

struct bp_device *meta_over_cpu(size_t n, const float *ratios)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    ck_assert_uint_le(n, 8);
    struct bp_device *subs[8];
    for (size_t i = 0; i < n; i++) subs[i] = cpu;
    struct bp_device *m = NULL;
    ck_assert_msg(bp_meta_device_new(subs, n, ratios, split_named, NULL, &m) == BP_OK, "%s",
                  bp_last_error());
    return m;
}
