/*
 * cpu_test_util.h — shared helpers of the CPU plugin suites: a fixture that
 * owns a context, a backend, a buffer and a graph, and value helpers that
 * fill, read and compare tensors as doubles (after rounding to their type).
 */
#ifndef BP_CPU_TEST_UTIL_H
#define BP_CPU_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <backplane/backplane.h>

struct fx {
    struct bp_context *ctx;
    struct bp_backend *be;
    struct bp_buffer *buf;
    struct bp_graph *g;
};

/* The "cpu" device; fails the test when it is missing. */
struct bp_device *cpu_device(void);
/* New context and backend (the backend's default thread count). */
void fx_init(struct fx *f);
/* Allocate every tensor of the context in one CPU buffer. */
void fx_alloc(struct fx *f);
/* Build a graph ending at out (reusing f->g) and compute it. */
bp_status fx_compute(struct fx *f, struct bp_tensor *out);
void fx_free(struct fx *f);

/* What the score entry of dir/libbackplane-cpu-<variant>.so says about this
 * machine (0: cannot run); -1 when the file does not load, -2 when it has no
 * score entry. */
int variant_file_score(const char *dir, const char *variant);

/* Deterministic pseudo-random value in [-1, 1). */
double rnd(unsigned *seed);
/* v rounded to what a tensor of type t stores. */
double round_to(enum bp_type t, double v);
/* Fill a contiguous tensor with pseudo-random values in [-amp, amp) (whole
 * numbers for I32); returns the stored values (malloc'd, caller frees). */
double *fill(struct bp_tensor *t, unsigned seed, double amp);
/* Store vals (row-major, contiguous t) and round vals to what was stored. */
void store_values(struct bp_tensor *t, double *vals);
/* Every element of t (any strides) in row-major order (malloc'd). */
double *fetch(const struct bp_tensor *t);
/* Fail unless |got - want| <= atol + rtol * |want| everywhere (NaN fails). */
void expect_close(const double *got, const double *want, int64_t n, double atol, double rtol,
                  const char *what);
/* Tolerances for results stored in type t. */
double type_atol(enum bp_type t);
double type_rtol(enum bp_type t);

#endif
