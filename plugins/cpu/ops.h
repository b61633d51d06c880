/*
 * ops.h — the op table of the CPU plugin and what every kernel shares.
 *
 * A kernel computes one node on thread ith of nth. It writes only its own
 * share of the output (rows [ith*n/nth, (ith+1)*n/nth) of some row order),
 * so results are identical for every thread count: no element is summed in
 * a different order when the pool grows. Kernels never fail and never
 * allocate: everything that can go wrong is found by `prepare` (run once, on
 * one thread, before the parallel region) or by `supports`.
 */
#ifndef BP_CPU_OPS_H
#define BP_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <backplane/bp_abi.h>

struct cpu_plugin;

struct cpu_pool;

struct cpu_compute_params {
    int ith, nth;
    void *wdata;      /* this thread's scratch */
    size_t wsize;     /* bytes of it */
    void *wshared;    /* the node's share of the graph's work buffer, seen by all threads */
    size_t wshared_size;
    struct cpu_pool *pool;           /* for cpu_params_barrier */
    _Atomic int *chunk;              /* the node's work counter (see ops/matmul.c) */
};

/* Wait until every thread of the node has reached this point. */
void cpu_params_barrier(const struct cpu_compute_params *p);

struct cpu_op_entry {
    /* True when compute handles this node's types and layouts; called only
     * for nodes that pass bp_op_shapes_ok (sources present, shapes agree). */
    bool (*supports)(const struct bp_tensor *node);
    void (*compute)(const struct cpu_compute_params *p, struct bp_tensor *node);
    /* Optional: run-time checks on data (ids in range); logs and fails. */
    bp_status (*prepare)(const struct cpu_plugin *pl, const struct bp_tensor *node);
    /* Optional: scratch bytes each thread needs for this node. */
    size_t (*scratch)(const struct bp_tensor *node);
    /* Optional: bytes of the work buffer all threads of the node share. */
    size_t (*work)(const struct bp_tensor *node);
};

/* THE OP TABLE, indexed by enum bp_op; an entry with NULL compute is an op
 * the plugin does not implement. */
extern const struct cpu_op_entry cpu_op_table[BP_OP_COUNT];

/* supports_op of the device: op known, types and shapes handled. */
bool cpu_supports_node(const struct bp_tensor *node);

/* repack_io.c: t is a weight stored in the x8 layout (a whole, packed,
 * repackable tensor in a CPU_REPACK buffer); t or what it views is one. */
bool cpu_tensor_repacked(const struct bp_tensor *t);
bool cpu_tensor_touches_repacked(const struct bp_tensor *t);
const struct bp_tensor *cpu_view_root(const struct bp_tensor *t);

/* ---- per-family entry points (one file each under ops/) ---- */

bool cpu_supports_mul_mat(const struct bp_tensor *t);
void cpu_compute_mul_mat(const struct cpu_compute_params *p, struct bp_tensor *t);
size_t cpu_scratch_mul_mat(const struct bp_tensor *t);
size_t cpu_work_mul_mat(const struct bp_tensor *t);
/* MUL_MAT in steps that any thread may take, with no barrier inside, for
 * nodes where cpu_mul_mat_stepwise is true: cpu_mul_mat_convert as thread
 * ith of nth, then, once every convert share is done, chunks 0 ..
 * cpu_mul_mat_n_chunks(t, nth) - 1 in any order and on any thread (same
 * nth in p). The results equal cpu_compute_mul_mat's with nth threads. */
bool cpu_mul_mat_stepwise(const struct bp_tensor *t);
void cpu_mul_mat_convert(const struct cpu_compute_params *p, struct bp_tensor *t);
int64_t cpu_mul_mat_n_chunks(const struct bp_tensor *t, int nth);
void cpu_mul_mat_chunk(const struct cpu_compute_params *p, struct bp_tensor *t, int64_t c);
/* True when chunk c covers weight rows after chunk c - 1's and every chunk
 * reads its rows once (one block of activation rows, as in decode): then
 * chunks in order are one forward stream through the weight, and a thread
 * that takes a contiguous run of them streams one part of it. */
bool cpu_mul_mat_chunks_stream(const struct bp_tensor *t, int nth);
/* True when stepwise MUL_MATs a and b read the same activation tensor and
 * convert it into identical work-buffer rows (vec_dot type, aux data, row
 * size): one cpu_mul_mat_convert then serves the chunks of both. */
bool cpu_mul_mat_same_x(const struct bp_tensor *a, const struct bp_tensor *b);

bool cpu_supports_binary(const struct bp_tensor *t);
void cpu_compute_add(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_mul(const struct cpu_compute_params *p, struct bp_tensor *t);
bool cpu_supports_unary(const struct bp_tensor *t);
void cpu_compute_scale(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_silu(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_gelu(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_sqr(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_tanh(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_div(const struct cpu_compute_params *p, struct bp_tensor *t);
void cpu_compute_clamp(const struct cpu_compute_params *p, struct bp_tensor *t);

/* MUL_MAT_ID (ops/matmul_id.c) through MUL_MAT's kernels: one weight slice
 * w (2-D, x8 where its stack is) times nr1 activation rows converted by
 * cpu_mul_mat_convert_row into xrows, cpu_mul_mat_x_row_size(w) bytes
 * apart, giving nr1 rows of N floats at out; chunks as MUL_MAT's grid for
 * nth threads, any order, any thread (ops/matmul.c). */
bool cpu_mul_mat_rows_ok(const struct bp_tensor *w);
size_t cpu_mul_mat_x_row_size(const struct bp_tensor *w);
void cpu_mul_mat_convert_row(const struct bp_tensor *w, const float *x, void *dst);
int64_t cpu_mul_mat_rows_n_chunks(const struct bp_tensor *w, int64_t nr1, int nth);
void cpu_mul_mat_rows_chunk(const struct bp_tensor *w, const void *xrows, int64_t nr1, float *out,
                            int nth, int64_t c);
bool cpu_supports_mul_mat_id(const struct bp_tensor *t);
void cpu_compute_mul_mat_id(const struct cpu_compute_params *p, struct bp_tensor *t);
/* MUL_MAT_ID in steps that any thread may take, with no barrier inside
 * (plan.c): once the ids pass cpu_prepare_mul_mat_id, cpu_mul_mat_id_route
 * as one task (p->nth the chunk step's thread count); then, unless
 * cpu_mul_mat_id_route_converts, cpu_mul_mat_id_convert as share ith of
 * nth; then chunks 0 .. cpu_mul_mat_id_n_chunks(t, p->wshared) - 1 (a
 * count the route wrote into the work buffer) in any order, on any thread,
 * with the route's nth. The results equal cpu_compute_mul_mat_id's. */
void cpu_mul_mat_id_route(const struct cpu_compute_params *p, struct bp_tensor *t);
bool cpu_mul_mat_id_route_converts(const struct bp_tensor *t);
void cpu_mul_mat_id_convert(const struct cpu_compute_params *p, struct bp_tensor *t);
int64_t cpu_mul_mat_id_n_chunks(const struct bp_tensor *t, const void *wshared);
void cpu_mul_mat_id_chunk(const struct cpu_compute_params *p, struct bp_tensor *t, int64_t c);
/* True when the chunks in order stream every used expert's rows forward,
 * once each (one token), as cpu_mul_mat_chunks_stream says of MUL_MAT. */
bool cpu_mul_mat_id_stream(const struct bp_tensor *t);
bp_status cpu_prepare_mul_mat_id(const struct cpu_plugin *pl, const struct bp_tensor *t);
size_t cpu_scratch_mul_mat_id(const struct bp_tensor *t);
size_t cpu_work_mul_mat_id(const struct bp_tensor *t);

/* TOP_K and SUM_ROWS (ops/routing.c). */
bool cpu_supports_top_k(const struct bp_tensor *t);
void cpu_compute_top_k(const struct cpu_compute_params *p, struct bp_tensor *t);
size_t cpu_scratch_top_k(const struct bp_tensor *t);
bool cpu_supports_sum_rows(const struct bp_tensor *t);
void cpu_compute_sum_rows(const struct cpu_compute_params *p, struct bp_tensor *t);

bool cpu_supports_rms_norm(const struct bp_tensor *t);
void cpu_compute_rms_norm(const struct cpu_compute_params *p, struct bp_tensor *t);

bool cpu_supports_soft_max(const struct bp_tensor *t);
void cpu_compute_soft_max(const struct cpu_compute_params *p, struct bp_tensor *t);

/* ROPE and ROPE_EXT. */
bool cpu_supports_rope(const struct bp_tensor *t);
void cpu_compute_rope(const struct cpu_compute_params *p, struct bp_tensor *t);
size_t cpu_scratch_rope(const struct bp_tensor *t);

bool cpu_supports_cpy(const struct bp_tensor *t);
void cpu_compute_cpy(const struct cpu_compute_params *p, struct bp_tensor *t);
bool cpu_supports_cont(const struct bp_tensor *t);
void cpu_compute_cont(const struct cpu_compute_params *p, struct bp_tensor *t);
bool cpu_supports_get_rows(const struct bp_tensor *t);
void cpu_compute_get_rows(const struct cpu_compute_params *p, struct bp_tensor *t);
bp_status cpu_prepare_get_rows(const struct cpu_plugin *pl, const struct bp_tensor *t);
bool cpu_supports_set_rows(const struct bp_tensor *t);
void cpu_compute_set_rows(const struct cpu_compute_params *p, struct bp_tensor *t);
bp_status cpu_prepare_set_rows(const struct cpu_plugin *pl, const struct bp_tensor *t);

/* FLASH_ATTN_EXT and FLASH_ATTN_SOFTCAP. */
bool cpu_supports_flash_attn(const struct bp_tensor *t);
void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t);
size_t cpu_scratch_flash_attn(const struct bp_tensor *t);

/* ---- helpers shared by the kernels ---- */

/* The float types every kernel reads and writes. */
static inline bool cpu_is_float(int32_t type)
{
    return type == BP_TYPE_F32 || type == BP_TYPE_F16 || type == BP_TYPE_BF16;
}

static inline float cpu_load(const void *p, int32_t type)
{
    switch (type) {
    case BP_TYPE_F32: { float f; memcpy(&f, p, 4); return f; }
    case BP_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return bp_f16_to_f32(h); }
    case BP_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return bp_bf16_to_f32(h); }
    default: return 0.0f;
    }
}

static inline void cpu_store(void *p, int32_t type, float v)
{
    switch (type) {
    case BP_TYPE_F32: memcpy(p, &v, 4); break;
    case BP_TYPE_F16: { uint16_t h = bp_f32_to_f16(v); memcpy(p, &h, 2); break; }
    case BP_TYPE_BF16: { uint16_t h = bp_f32_to_bf16(v); memcpy(p, &h, 2); break; }
    default: break;
    }
}

static inline int32_t cpu_load_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Address of element (i0, i1, i2, i3), by byte strides: views, permuted and
 * transposed tensors all go through here. */
static inline char *cpu_at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                           int64_t i3)
{
    return (char *)t->data + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
           (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
}

/* This thread's share [*r0, *r1) of n items. */
static inline void cpu_split(int64_t n, const struct cpu_compute_params *p, int64_t *r0, int64_t *r1)
{
    *r0 = n * p->ith / p->nth;
    *r1 = n * (p->ith + 1) / p->nth;
}

/* Row r (over dims 1..3) of t as (i1, i2, i3). */
static inline void cpu_row_index(const struct bp_tensor *t, int64_t r, int64_t *i1, int64_t *i2,
                                 int64_t *i3)
{
    *i1 = r % t->ne[1];
    r /= t->ne[1];
    *i2 = r % t->ne[2];
    *i3 = r / t->ne[2];
}

/* A tensor's name for log sentences. */
static inline const char *cpu_name(const struct bp_tensor *t)
{
    return t->name[0] ? t->name : "(unnamed)";
}

/* True when every dim of t is >= 1 (kernels index with ne[] freely). */
static inline bool cpu_shape_ok(const struct bp_tensor *t)
{
    for (int i = 0; i < BP_MAX_DIMS; i++)
        if (t->ne[i] < 1) return false;
    return true;
}

#endif /* BP_CPU_OPS_H */
