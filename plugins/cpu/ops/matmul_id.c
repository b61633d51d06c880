/*
 * matmul_id.c — MUL_MAT_ID: slot u of token t is expert ids[u, t] of the
 * stacked weights times the token's activation for the slot.
 *
 * It runs as ggml's does, through MUL_MAT's own kernels (ops/matmul.c, the
 * cpu_mul_mat_rows_* entry points), so every weight type and layout MUL_MAT
 * has (the x8 CPU_REPACK layout, AMX tiles, the tiled float kernel) serves
 * the experts too, with no table of its own. It runs in three steps of
 * tasks (plan.c), none of which waits for a particular thread:
 *  1. route (one task, after the ids are checked): groups the (slot, token) pairs by
 *     expert, in token order within an expert, lists the used experts in
 *     ascending order and sizes each one's chunk grid (MUL_MAT's grid for
 *     its row count); at decode, where there are few pairs, it also
 *     converts their activation rows;
 *  2. convert (shares, unless the route did it): the pairs' activation rows
 *     into the work buffer, grouped by expert (each expert's rows
 *     contiguous, as the kernels read them);
 *  3. chunks: the chunks of all used experts, one list that the threads
 *     take from, expert after expert (at decode each thread owns a
 *     contiguous run of it, task_claim.h). Each expert is one matrix
 *     product of its weight slice and the rows of the tokens that picked it
 *     (prefill), or a few weight rows of one slot (decode). An expert no
 *     slot names is never read, so a decode step streams the active
 *     experts' bytes only. An expert with one row writes its result row in
 *     place; one with several computes into the work buffer, and the task
 *     that finishes its last chunk copies the rows to their (slot, token).
 * The chunk count is known only once the ids are: the route writes it into
 * the work buffer and the chunk step reads it there (backend.c). Every
 * output element is one dot of MUL_MAT's, with the grid of the node's
 * thread count, so the result does not depend on which thread runs what.
 */
#include <inttypes.h>
#include <stdatomic.h>

#include "../cpu_internal.h"
#include "../ops.h"

#define MMID_ALIGN 64
/* The route converts the activation rows itself when they hold at most
 * this many elements (decode: 8 slots of 2048): a separate share step
 * would cost a step boundary for a few microseconds of work. */
#define MMID_ROUTE_CONVERT_MAX 65536
/* When a thread's next chunk starts another expert, the first bytes of that
 * expert's slice are asked for (into L2) before the current chunk runs: the
 * hardware prefetcher restarts at each slice, one page at a time. Whole
 * decode of the 12-layer Qwen3-MoE-shaped Q4_K_M file, 1 thread, 4
 * alternating rounds at load average 16 on 2 vCPUs: streaming 54-73 %
 * (median 69 %) of the read bandwidth with it, 53-66 % (median 63 %)
 * without; within the noise of that machine, kept as it costs nothing. */
#define MMID_PREFETCH_BYTES 4096

static size_t align_up(size_t n)
{
    return (n + MMID_ALIGN - 1) / MMID_ALIGN * MMID_ALIGN;
}

/* The node's work buffer: a header (used experts, chunks), the used
 * experts' ids (n_expert), per expert pair offsets (n_expert + 1), per used
 * expert chunk prefix sums (n_expert + 1) and chunks left (n_expert), the
 * pairs grouped by expert, the converted rows, the per-expert results. */
struct mmid_layout {
    size_t act, offs, cstart, left, pairs, xrows, out, total;
    size_t row_size;
};

enum { MMID_N_ACT, MMID_N_CHUNKS, MMID_HDR };

static struct mmid_layout layout_of(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *ids = t->src[2];
    const int64_t n_expert = w->ne[2], n_pairs = ids->ne[0] * ids->ne[1];
    struct mmid_layout l = { .row_size = cpu_mul_mat_x_row_size(w) };
    l.act = align_up(MMID_HDR * sizeof(int64_t));
    l.offs = align_up(l.act + (size_t)n_expert * sizeof(int32_t));
    l.cstart = align_up(l.offs + (size_t)(n_expert + 1) * sizeof(int64_t));
    l.left = align_up(l.cstart + (size_t)(n_expert + 1) * sizeof(int64_t));
    l.pairs = align_up(l.left + (size_t)n_expert * sizeof(_Atomic int64_t));
    l.xrows = align_up(l.pairs + (size_t)n_pairs * sizeof(int32_t));
    l.out = align_up(l.xrows + (size_t)n_pairs * l.row_size);
    l.total = l.out + (size_t)n_pairs * (size_t)w->ne[1] * sizeof(float);
    return l;
}

/* The parts of the work buffer, at their offsets. */
struct mmid_work {
    int64_t *hdr;
    int32_t *act;
    int64_t *offs, *cstart;
    _Atomic int64_t *left;
    int32_t *pairs;
    char *xrows;
    float *out;
};

static struct mmid_work work_of(const struct mmid_layout *l, void *wshared)
{
    char *w = wshared;
    return (struct mmid_work){
        .hdr = (int64_t *)(void *)w, .act = (int32_t *)(void *)(w + l->act),
        .offs = (int64_t *)(void *)(w + l->offs), .cstart = (int64_t *)(void *)(w + l->cstart),
        .left = (_Atomic int64_t *)(void *)(w + l->left), .pairs = (int32_t *)(void *)(w + l->pairs),
        .xrows = w + l->xrows, .out = (float *)(void *)(w + l->out),
    };
}

bool cpu_supports_mul_mat_id(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0];
    return t->nb[0] == sizeof(float) && (cpu_is_float(w->type) ||
                                         bp_type_is_quantized((enum bp_type)w->type)) &&
           cpu_mul_mat_rows_ok(w);
}

size_t cpu_work_mul_mat_id(const struct bp_tensor *t)
{
    return layout_of(t).total;
}

size_t cpu_scratch_mul_mat_id(const struct bp_tensor *t)
{
    return (size_t)t->src[0]->ne[0] * sizeof(float); /* one activation row staged as F32 */
}

bp_status cpu_prepare_mul_mat_id(const struct cpu_plugin *pl, const struct bp_tensor *t)
{
    const struct bp_tensor *ids = t->src[2];
    const int64_t n_expert = t->src[0]->ne[2];
    for (int64_t j = 0; j < ids->ne[1]; j++)
        for (int64_t i = 0; i < ids->ne[0]; i++) {
            const int32_t id = cpu_load_i32(cpu_at(ids, i, j, 0, 0));
            if (id < 0 || id >= n_expert) {
                cpu_log(pl, BP_LOG_ERROR,
                        "MUL_MAT_ID '%s': expert id %" PRId32 " at slot %" PRId64 " of token %"
                        PRId64 " of ids '%s' is outside [0, %" PRId64 ") of '%s'; fix the ids.",
                        cpu_name(t), id, i, j, cpu_name(ids), n_expert, cpu_name(t->src[0]));
                return BP_ERR_INVALID_ARGUMENT;
            }
        }
    return BP_OK;
}

bool cpu_mul_mat_id_route_converts(const struct bp_tensor *t)
{
    const struct bp_tensor *ids = t->src[2];
    return ids->ne[0] * ids->ne[1] * t->src[0]->ne[0] <= MMID_ROUTE_CONVERT_MAX;
}

bool cpu_mul_mat_id_stream(const struct bp_tensor *t)
{
    /* One token: every used expert has one row, and its chunks run forward
     * through its weight rows, once each. */
    return t->src[2]->ne[1] == 1;
}

/* Expert e's weight slice as a 2-D tensor of its own (same buffer, so a
 * CPU_REPACK stack gives x8 slices: the layout is per 2-D slice). */
static struct bp_tensor expert_slice(const struct bp_tensor *w, int64_t e)
{
    struct bp_tensor s = *w;
    s.view_src = NULL;
    s.view_offs = 0;
    s.data = (char *)w->data + (size_t)e * w->nb[2];
    s.ne[2] = 1;
    s.nb[3] = s.nb[2];
    return s;
}

/* Pair g's activation row, converted to row g of the work buffer's rows. */
static void convert_pair(const struct bp_tensor *t, const struct mmid_layout *l,
                         const struct mmid_work *wk, float *stage, int64_t g)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const int64_t n_used = t->src[2]->ne[0];
    const int64_t u = wk->pairs[g] % n_used, tok = wk->pairs[g] / n_used;
    const char *src = cpu_at(x, 0, u % x->ne[1], tok, 0);
    if (x->nb[0] != sizeof(float)) {
        for (int64_t i = 0; i < w->ne[0]; i++) stage[i] = cpu_load(src + (size_t)i * x->nb[0], x->type);
        src = (const char *)stage;
    }
    cpu_mul_mat_convert_row(w, (const float *)(const void *)src, wk->xrows + (size_t)g * l->row_size);
}

void cpu_mul_mat_id_route(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *ids = t->src[2];
    const int64_t n_expert = w->ne[2], n_used = ids->ne[0], n_tok = ids->ne[1];
    const struct mmid_layout l = layout_of(t);
    const struct mmid_work wk = work_of(&l, p->wshared);
    int64_t *offs = wk.offs, *fill = wk.cstart; /* cstart is the fill position meanwhile */
    for (int64_t e = 0; e <= n_expert; e++) offs[e] = 0;
    for (int64_t j = 0; j < n_tok; j++)
        for (int64_t i = 0; i < n_used; i++)
            offs[cpu_load_i32(cpu_at(ids, i, j, 0, 0)) + 1]++;
    for (int64_t e = 0; e < n_expert; e++) offs[e + 1] += offs[e];
    for (int64_t e = 0; e < n_expert; e++) fill[e] = offs[e];
    for (int64_t j = 0; j < n_tok; j++)
        for (int64_t i = 0; i < n_used; i++) {
            const int32_t e = cpu_load_i32(cpu_at(ids, i, j, 0, 0));
            wk.pairs[fill[e]++] = (int32_t)(i + n_used * j);
        }
    int64_t n_act = 0;
    for (int64_t e = 0; e < n_expert; e++)
        if (offs[e + 1] > offs[e]) wk.act[n_act++] = (int32_t)e;
    wk.cstart[0] = 0;
    for (int64_t a = 0; a < n_act; a++) {
        const int64_t e = wk.act[a];
        const struct bp_tensor s = expert_slice(w, e);
        const int64_t n = cpu_mul_mat_rows_n_chunks(&s, offs[e + 1] - offs[e], p->nth);
        wk.cstart[a + 1] = wk.cstart[a] + n;
        atomic_store_explicit(&wk.left[a], n, memory_order_relaxed);
    }
    wk.hdr[MMID_N_ACT] = n_act;
    wk.hdr[MMID_N_CHUNKS] = wk.cstart[n_act];
    if (cpu_mul_mat_id_route_converts(t))
        for (int64_t g = 0; g < n_used * n_tok; g++) convert_pair(t, &l, &wk, p->wdata, g);
}

void cpu_mul_mat_id_convert(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct mmid_layout l = layout_of(t);
    const struct mmid_work wk = work_of(&l, p->wshared);
    int64_t r0, r1;
    cpu_split(t->src[2]->ne[0] * t->src[2]->ne[1], p, &r0, &r1);
    for (int64_t g = r0; g < r1; g++) convert_pair(t, &l, &wk, p->wdata, g);
}

int64_t cpu_mul_mat_id_n_chunks(const struct bp_tensor *t, const void *wshared)
{
    (void)t;
    return ((const int64_t *)wshared)[MMID_N_CHUNKS];
}

void cpu_mul_mat_id_chunk(const struct cpu_compute_params *p, struct bp_tensor *t, int64_t c)
{
    const struct bp_tensor *w = t->src[0];
    const int64_t n_used = t->src[2]->ne[0], N = w->ne[1];
    const struct mmid_layout l = layout_of(t);
    const struct mmid_work wk = work_of(&l, p->wshared);
    if (c >= wk.hdr[MMID_N_CHUNKS])
        return;
    /* the used expert whose chunks hold c: cstart[a] <= c < cstart[a + 1] */
    int64_t lo = 0, hi = wk.hdr[MMID_N_ACT] - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (wk.cstart[mid] <= c) lo = mid; else hi = mid - 1;
    }
    const int64_t a = lo, e = wk.act[a];
    if (c + 1 == wk.cstart[a + 1] && a + 1 < wk.hdr[MMID_N_ACT]) {
        const char *next = (const char *)w->data + (size_t)wk.act[a + 1] * w->nb[2];
        for (size_t o = 0; o < MMID_PREFETCH_BYTES; o += 64) __builtin_prefetch(next + o, 0, 2);
    }
    const int64_t g0 = wk.offs[e], rows = wk.offs[e + 1] - g0;
    const struct bp_tensor s = expert_slice(w, e);
    float *out = rows == 1 ? (float *)(void *)cpu_at(t, 0, wk.pairs[g0] % n_used, wk.pairs[g0] / n_used, 0)
                           : wk.out + (size_t)g0 * (size_t)N;
    cpu_mul_mat_rows_chunk(&s, wk.xrows + (size_t)g0 * l.row_size, rows, out, p->nth,
                           c - wk.cstart[a]);
    if (rows == 1 || atomic_fetch_sub_explicit(&wk.left[a], 1, memory_order_acq_rel) != 1)
        return;
    /* The expert's last chunk: its rows to their (slot, token). */
    for (int64_t g = g0; g < g0 + rows; g++)
        memcpy(cpu_at(t, 0, wk.pairs[g] % n_used, wk.pairs[g] / n_used, 0), wk.out + (size_t)g * (size_t)N,
               (size_t)N * sizeof(float));
}

void cpu_compute_mul_mat_id(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    /* The three steps on the node's threads together, a barrier after each
     * of the first two. */
    if (p->ith == 0) {
        cpu_mul_mat_id_route(p, t);
        atomic_store_explicit(p->chunk, p->nth, memory_order_relaxed);
    }
    cpu_params_barrier(p);
    if (!cpu_mul_mat_id_route_converts(t))
        cpu_mul_mat_id_convert(p, t);
    cpu_params_barrier(p);
    const int64_t total = cpu_mul_mat_id_n_chunks(t, p->wshared);
    for (int64_t c = p->ith; c < total; c = atomic_fetch_add_explicit(p->chunk, 1, memory_order_relaxed))
        cpu_mul_mat_id_chunk(p, t, c);
}
