/* bandwidth.h — a streaming-read probe: the machine's read bandwidth as the
 * reference for the runner's decode weight streaming. */
#ifndef BP_RUN_BANDWIDTH_H
#define BP_RUN_BANDWIDTH_H

#include <stddef.h>

/* Best of `reps` passes of n_threads threads summing a bytes-sized buffer
 * (larger than the caches); bytes per second, or 0 when memory or threads
 * could not be had. */
double bp_run_read_bandwidth(int n_threads, size_t bytes, int reps);

#endif
