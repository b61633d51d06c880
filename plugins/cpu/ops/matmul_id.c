/*
 * matmul_id.c — MUL_MAT_ID: slot u of token t is expert ids[u, t] of the
 * stacked weights times the token's activation for the slot.
 *
 * It runs as ggml's does, through MUL_MAT's own kernels (ops/matmul.c, the
 * cpu_mul_mat_rows_* entry points), so every weight type and layout MUL_MAT
 * has (the x8 CPU_REPACK layout, AMX tiles, the tiled float kernel) serves
 * the experts too, with no table of its own:
 *  1. one thread groups the (slot, token) pairs by expert, in token order
 *     within an expert, and sizes each used expert's chunk grid;
 *  2. every thread converts a share of the pairs' activation rows into the
 *     work buffer, grouped by expert (each expert's rows contiguous, as
 *     the kernels read them);
 *  3. the chunks of all used experts are one list the threads take from:
 *     each expert is one matrix product of its weight slice and the rows of
 *     the tokens that picked it (prefill), or a few weight rows of one
 *     slot (decode). An expert no slot names is never read, so a decode
 *     step streams the active experts' bytes only;
 *  4. the results, computed into the work buffer per expert, are copied to
 *     their (slot, token) rows.
 * A barrier separates the steps (the node runs as one CPU_STEP_ALL step).
 * Every output element is one dot of MUL_MAT's, so the result does not
 * depend on the thread count.
 */
#include <inttypes.h>
#include <stdatomic.h>

#include "../cpu_internal.h"
#include "../ops.h"

#define MMID_ALIGN 64

static size_t align_up(size_t n)
{
    return (n + MMID_ALIGN - 1) / MMID_ALIGN * MMID_ALIGN;
}

/* The node's work buffer: per expert offsets (n_expert + 1) and chunk
 * prefix sums (n_expert + 1), the pairs grouped by expert, the converted
 * rows, the per-expert results. */
struct mmid_layout {
    size_t offs, chunks, pairs, xrows, out, total;
    size_t row_size;
};

static struct mmid_layout layout_of(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *ids = t->src[2];
    const int64_t n_expert = w->ne[2], n_pairs = ids->ne[0] * ids->ne[1];
    struct mmid_layout l = { .row_size = cpu_mul_mat_x_row_size(w) };
    l.offs = 0;
    l.chunks = align_up(l.offs + (size_t)(n_expert + 1) * sizeof(int64_t));
    l.pairs = align_up(l.chunks + (size_t)(n_expert + 1) * sizeof(int64_t));
    l.xrows = align_up(l.pairs + (size_t)n_pairs * sizeof(int32_t));
    l.out = align_up(l.xrows + (size_t)n_pairs * l.row_size);
    l.total = l.out + (size_t)n_pairs * (size_t)w->ne[1] * sizeof(float);
    return l;
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

/* Step 1 (one thread): group the pairs, size the chunk lists. */
static void group_pairs(const struct bp_tensor *t, const struct mmid_layout *l, char *work, int nth)
{
    const struct bp_tensor *w = t->src[0], *ids = t->src[2];
    const int64_t n_expert = w->ne[2], n_used = ids->ne[0], n_tok = ids->ne[1];
    int64_t *offs = (int64_t *)(void *)(work + l->offs);
    int64_t *chunks = (int64_t *)(void *)(work + l->chunks);
    int32_t *pairs = (int32_t *)(void *)(work + l->pairs);
    for (int64_t e = 0; e <= n_expert; e++) offs[e] = 0;
    for (int64_t j = 0; j < n_tok; j++)
        for (int64_t i = 0; i < n_used; i++)
            offs[cpu_load_i32(cpu_at(ids, i, j, 0, 0)) + 1]++;
    for (int64_t e = 0; e < n_expert; e++) offs[e + 1] += offs[e];
    /* chunks[] holds each expert's fill position while the pairs go in. */
    for (int64_t e = 0; e < n_expert; e++) chunks[e] = offs[e];
    for (int64_t j = 0; j < n_tok; j++)
        for (int64_t i = 0; i < n_used; i++) {
            const int32_t e = cpu_load_i32(cpu_at(ids, i, j, 0, 0));
            pairs[chunks[e]++] = (int32_t)(i + n_used * j);
        }
    chunks[0] = 0;
    for (int64_t e = 0; e < n_expert; e++) {
        const int64_t rows = offs[e + 1] - offs[e];
        int64_t n = 0;
        if (rows > 0) {
            const struct bp_tensor s = expert_slice(w, e);
            n = cpu_mul_mat_rows_n_chunks(&s, rows, nth);
        }
        chunks[e + 1] = chunks[e] + n;
    }
}

void cpu_compute_mul_mat_id(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1], *ids = t->src[2];
    const int64_t n_expert = w->ne[2], n_used = ids->ne[0], K = w->ne[0], N = w->ne[1];
    const int64_t n_pairs = n_used * ids->ne[1];
    const struct mmid_layout l = layout_of(t);
    char *work = p->wshared;
    const int64_t *offs = (const int64_t *)(const void *)(work + l.offs);
    const int64_t *chunks = (const int64_t *)(const void *)(work + l.chunks);
    const int32_t *pairs = (const int32_t *)(const void *)(work + l.pairs);
    char *xrows = work + l.xrows;
    float *out = (float *)(void *)(work + l.out);

    if (p->ith == 0) {
        group_pairs(t, &l, work, p->nth);
        atomic_store_explicit(p->chunk, p->nth, memory_order_relaxed);
    }
    cpu_params_barrier(p);

    /* Step 2: the activation rows, in the experts' order. */
    int64_t r0, r1;
    cpu_split(n_pairs, p, &r0, &r1);
    float *stage = p->wdata;
    for (int64_t g = r0; g < r1; g++) {
        const int64_t u = pairs[g] % n_used, tok = pairs[g] / n_used;
        const char *src = cpu_at(x, 0, u % x->ne[1], tok, 0);
        if (x->nb[0] != sizeof(float)) {
            for (int64_t i = 0; i < K; i++) stage[i] = cpu_load(src + (size_t)i * x->nb[0], x->type);
            src = (const char *)stage;
        }
        cpu_mul_mat_convert_row(w, (const float *)(const void *)src, xrows + (size_t)g * l.row_size);
    }
    cpu_params_barrier(p);

    /* Step 3: every used expert's chunks, from one counter. */
    const int64_t total = chunks[n_expert];
    int64_t e = 0;
    for (int64_t c = p->ith; c < total;
         c = atomic_fetch_add_explicit(p->chunk, 1, memory_order_relaxed)) {
        if (c < chunks[e]) e = 0;
        while (chunks[e + 1] <= c) e++;
        const struct bp_tensor s = expert_slice(w, e);
        cpu_mul_mat_rows_chunk(&s, xrows + (size_t)offs[e] * l.row_size, offs[e + 1] - offs[e],
                               out + (size_t)offs[e] * (size_t)N, p->nth, c - chunks[e]);
    }
    cpu_params_barrier(p);

    /* Step 4: each result row to its (slot, token). */
    for (int64_t g = r0; g < r1; g++) {
        const int64_t u = pairs[g] % n_used, tok = pairs[g] / n_used;
        memcpy(cpu_at(t, 0, u, tok, 0), out + (size_t)g * (size_t)N, (size_t)N * sizeof(float));
    }
}
