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
#include <backplane/bp_meta.h>

/* How an input leaf is filled before compute. */
enum check_fill {
    CHECK_FILL_UNIFORM,     /* floats in [-1, 1) */
    CHECK_FILL_IDS,         /* I32 in [0, range) */
    CHECK_FILL_IDS_UNIQUE,  /* I32 in [0, range), distinct within each row of ids */
    CHECK_FILL_MASK,        /* floats in [-1, 1), about a quarter -INFINITY (never column 0) */
    CHECK_FILL_FACTORS,     /* floats in [1, 8): ROPE_EXT's frequency factors */
    CHECK_FILL_IDS_SAME,    /* I32 in [0, range), row 0 drawn and repeated in every row */
    CHECK_FILL_TIES,        /* floats from {-1, -0.5, 0, 0.5, 1}: many equal values */
};

#define CHECK_MAX_INPUTS 8

/* How a case lays out an input of a logical shape (a view of a leaf); the
 * low nibbles of check_case.variant hold it for the first two inputs. */
enum layout {
    LAYOUT_CONTIGUOUS = 0,
    LAYOUT_PERMUTED = 1,      /* dims 0 and 1 swapped: rows not packed */
    LAYOUT_STRIDED_VIEW = 2,  /* rows packed, row stride padded, non-zero offset */
    LAYOUT_ROWS_PERMUTED = 3, /* dims 1 and 2 swapped: rows packed, outer order permuted */
};

#define LAYOUT0(v) ((v) & 0xf)
#define LAYOUT1(v) (((v) >> 4) & 0xf)
#define WITH_MASK 0x100
#define WITH_FACTORS 0x200 /* ROPE_EXT: a frequency-factor input */
#define WITH_IDS_T 0x400   /* MUL_MAT_ID: the ids a transposed (strided) view */

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
    float f2, f3;        /* further float parameters (ROPE_EXT's ext_factor, attn_factor) */
    int i0, i1;
    check_build_fn build;
    char desc[96];       /* "w[33,17] x[33,5] permuted" */
    /* A vendor-defined op (check_custom.c): its description and input set,
     * in the plugin's storage; NULL for the harness's own cases. */
    const struct bp_custom_op_info *custom;
    const struct bp_custom_op_case *custom_case;
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
    /* On a meta device whose output is MIRRORED: every sub-device's own copy
     * (copies[0] is values), so a broken sub-device cannot hide behind
     * sub-device 0. n_copies is 0 otherwise. */
    float  *copies[BP_META_MAX_DEVICES];
    size_t  n_copies;
    bool    split;        /* the case ran with its inputs split (check_split.c) */
};

/* How a case runs on a meta device; other devices ignore it. */
enum check_meta_mode {
    CHECK_MIRRORED, /* every leaf MIRRORED: each sub-device computes the whole graph */
    CHECK_SPLIT,    /* leaves split by check_split_fn: each sub-device computes a slice */
};

/* Computes case c on dev in its own backend and buffer, guard bytes around
 * every tensor. Fills out (values and copies freed by check_output_free). */
void check_run_case(const struct check_case *c, size_t case_index, struct bp_device *dev,
                    enum check_meta_mode mode, struct check_output *out);

/* check_split.c: whether case c has a split that routes work to every
 * sub-device of a meta device, and the split-state callback (user = c)
 * that applies it. */
bool check_case_splits(const struct check_case *c);
int check_split_fn(void *user, const struct bp_tensor *t, struct bp_meta_split *out);
void check_output_free(struct check_output *out);

/* The cases of dev's custom ops (BP_PROC_CUSTOM_OPS of its registry): a heap
 * array in *out (the caller frees it; NULL when none), the count returned.
 * A description the check cannot use is skipped with one sentence on stderr. */
size_t check_custom_cases(struct bp_device *dev, struct check_case **out);
/* The reference side of a custom case: the plugin's reference function on
 * the inputs in host_dev's (host-memory) buffer type, with the same guards. */
void check_run_custom_reference(const struct check_case *c, size_t case_index,
                                struct bp_device *host_dev, struct check_output *out);
/* "MUL_MAT", or a custom op's name. */
const char *check_case_op_label(const struct check_case *c);

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
/* The pass limit of case c: its custom op's own, else check_threshold. */
double check_case_threshold(const struct check_case *c);
void check_compare(const struct check_case *c, const struct check_output *ref,
                   const struct check_output *dev, struct check_verdict *v);

#define CHECK_GUARD_BYTES 64
#define CHECK_GUARD_PATTERN 0xA5

/* check_sched.c — `check --sched D[,cpu]`: the decoder graphs of builtin:test
 * through the scheduler over D and the cpu, against the cpu alone. Prints
 * (or writes JSON) and returns the CLI exit status. */
int check_sched(const char *spec, bool json);

/* check_comm.c — `check --comm DEVICE`: every all-reduce path of a meta
 * device at 4 KB .. 16 MB, timed and verified; exit 1 when a path summed
 * wrong or failed. Prints (or writes JSON) and returns the exit status. */
int check_comm(const char *name, bool json);

#define COMM_ROUNDS 7
#define COMM_MAX_PATHS 8

/* The measured paths of one device, path x size class, for comm_report. */
struct comm_table {
    const char *name, *description;
    const char *members;   /* what n_members counts: "sub-devices", "ranks" */
    const char *on_wrong;  /* what a wrong path means for this device, a clause */
    size_t n_members, n_paths;
    struct bp_meta_allreduce_probe r[BP_META_ALLREDUCE_CLASSES][COMM_MAX_PATHS];
};

/* The verdict on t: exit 1 when any path summed wrong or failed; when
 * print, the table (or JSON) on stdout and one sentence naming the bad
 * paths on stderr. */
int comm_report(const struct comm_table *t, bool json, bool print);

/* check_comm_dist.c — `mpirun -np N backplane check --comm dist:X`: every
 * rank probes the dist device's paths in lock-step, rank 0 prints; every
 * rank returns the same exit status. */
int check_comm_dist(const char *name, bool json);
/* `info`: the path each size class of meta device dev takes (measured now
 * under BACKPLANE_META_ALLREDUCE=auto); false when dev is no meta device. */
bool comm_choices(struct bp_device *dev, char choice[][BP_META_ALLREDUCE_PATH_LEN]);

#endif /* BP_CLI_CHECK_H */
