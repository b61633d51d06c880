/*
 * meta_test_util.h — what the meta suites share: a meta device over n
 * references to the cpu device whose split callback gives every tensor
 * named "split..." the split in meta_test_split.
 */
#ifndef BP_META_TEST_UTIL_H
#define BP_META_TEST_UTIL_H

#include <stddef.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

/* The split of tensors whose name starts with "split"; others stay mirrored. */
extern struct bp_meta_split meta_test_split;

/* A meta device over n (<= 8) cpu sub-devices with the given ratios (NULL:
 * even); fails the running test when it cannot be made. */
struct bp_device *meta_over_cpu(size_t n, const float *ratios);

#endif
