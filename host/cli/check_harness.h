/*
 * check_harness.h — the op-equivalence harness behind `backplane check` (and the op
 * matrix of `backplane info`): a table of cases, each building a small graph;
 * a runner that computes a case on one device with guard bytes around every
 * tensor; and the comparison against the CPU reference.
 */
#ifndef BP_CLI_CHECK_H
#define BP_CLI_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

/* How an input leaf is filled before compute. */
enum check_fill {
    CHECK_FILL_UNIFORM,     /* floats in [-1, 1) */
    CHECK_FILL_IDS,         /* I32 in [0, range) */
    CHECK_FILL_IDS_UNIQUE,  /* I32 in [0, range), distinct within each row of ids */
    CHECK_FILL_MASK,        /* floats in [-1, 1), about a quarter -INFINITY (never column 0) */
};

#define CHECK_MAX_INPUTS 8

struct check_input {
    struct bp_tensor *t;
    enum check_fill fill;
    int64_t range;
};

/* What a case builder works with: the context and the inputs it declared. */
struct check_builder {
    struct bp_context *ctx;
    struct check_input inputs[CHECK_MAX_INPUTS];
    int n_inputs;
    bool overflow;
};

/* A new contiguous input leaf of shape ne (missing dims 1), registered for filling. */
struct bp_tensor *check_input(struct check_builder *b, const char *name, enum bp_type type,
                              enum check_fill fill, int64_t range, int64_t ne0, int64_t ne1,
                              int64_t ne2, int64_t ne3);

struct check_case;
typedef struct bp_tensor *(*check_build_fn)(struct check_builder *b, const struct check_case *c);

/* One case: an op on one type combination and one shape. The parameters'
 * meaning belongs to the builder. */
struct check_case {
    enum bp_op op;
    enum bp_type type;   /* the lowest-precision type involved; picks the threshold */
    enum bp_type type2;  /* a second type (mask, x, copy target) where the op has one */
    int64_t a[4];
    int64_t b[4];
    int64_t c[4];
    int variant;         /* builder-specific flag (non-contiguous input, ...) */
    float f0, f1;
    int i0, i1;
    check_build_fn build;
    char desc[96];       /* "w[33,17] x[33,5] permuted" */
};

/* The full case list (built once, static storage). */
size_t check_case_count(void);
const struct check_case *check_case_get(size_t i);

/* Builds case c in a fresh context. On success *ctx_out, *graph_out and
 * *b_out are set and the output tensor returned; NULL with bp_last_error()
 * otherwise (everything freed). */
struct bp_tensor *check_case_build(const struct check_case *c, struct check_builder *b_out,
                                   struct bp_graph **graph_out);
void check_case_release(struct check_builder *b, struct bp_graph *g);

/* The first node of g that dev declines (NULL when it supports all). */
const struct bp_tensor *check_first_unsupported(struct bp_device *dev, struct bp_graph *g);

/* Deterministic input bytes: xorshift64* seeded from seed. */
void check_fill_input(const struct check_input *in, uint64_t seed, void *dst, size_t nbytes);

/* Result of running one case on one device. */
struct check_output {
    float  *values;       /* the output converted to f32, logical order */
    size_t  n;
    char    problem[256]; /* "" or a sentence: compute error, out-of-bounds write, ... */
    bool    unsupported;  /* the device declines a node (problem names it) */
};

/* Computes case c on dev in its own backend and buffer, guard bytes around
 * every tensor. Fills out (values freed by check_output_free). */
void check_run_case(const struct check_case *c, size_t case_index, struct bp_device *dev,
                    struct check_output *out);
void check_output_free(struct check_output *out);

/* Comparison outcome of a tested output against the reference. */
struct check_verdict {
    bool   pass;
    double nmse;
    double threshold;
    double max_abs_err;
    double ref_rms;       /* root mean square of the reference: shows the output is not trivial */
    size_t worst_index;
    char   message[256];  /* why it failed ("" when it passed) */
};
double check_threshold(enum bp_op op, enum bp_type type);
void check_compare(const struct check_case *c, const struct check_output *ref,
                   const struct check_output *dev, struct check_verdict *v);

#define CHECK_GUARD_BYTES 64
#define CHECK_GUARD_PATTERN 0xA5

/* check_sched.c — `check --sched D[,cpu]`: the decoder graphs of builtin:test
 * through the scheduler over D and the cpu, against the cpu alone. Prints
 * (or writes JSON) and returns the CLI exit status. */
int check_sched(const char *spec, bool json);

#endif /* BP_CLI_CHECK_H */
