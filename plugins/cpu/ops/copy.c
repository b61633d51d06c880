/*
 * copy.c — CPY and CONT (element order copies with F32/F16/BF16 conversion),
 * GET_ROWS and SET_ROWS (row gathers and scatters by I32 ids).
 *
 * Ids come from the application, so they are checked once before the
 * parallel region (prepare): a bad id fails the graph with a sentence that
 * names the tensor and the id, and no kernel ever reads out of bounds.
 */
#include <inttypes.h>

#include "../ops.h"
#include "../cpu_internal.h"
#include "../kernels/kernels.h"

/* Types CPY and CONT move without conversion. */
static bool plain_type(int32_t type)
{
    return cpu_is_float(type) || type == BP_TYPE_I32;
}

static inline void copy_elem(char *dst, int32_t dt, const char *src, int32_t st)
{
    if (dt == st)
        memcpy(dst, src, bp_type_size((enum bp_type)dt));
    else
        cpu_store(dst, dt, cpu_load(src, st));
}

/* Copy src into dst in row-major element order; shapes may differ, counts
 * match. Each thread writes a share of dst's rows and walks src with a
 * carried 4-d index, so neither side has to be contiguous. */
static void dup(const struct cpu_compute_params *p, const struct bp_tensor *src, struct bp_tensor *dst)
{
    int64_t r0, r1;
    cpu_split(bp_nrows(dst), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(dst, r, &i1, &i2, &i3);
        int64_t flat = r * dst->ne[0];
        int64_t j[4];
        for (int d = 0; d < 4; d++) {
            j[d] = flat % src->ne[d];
            flat /= src->ne[d];
        }
        char *dr = cpu_at(dst, 0, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            copy_elem(dr + (size_t)i0 * dst->nb[0], dst->type, cpu_at(src, j[0], j[1], j[2], j[3]),
                      src->type);
            for (int d = 0; d < 4 && ++j[d] == src->ne[d]; d++)
                j[d] = 0;
        }
    }
}

bool cpu_supports_cpy(const struct bp_tensor *t)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    if (a->type == b->type)
        return plain_type(a->type);
    return cpu_is_float(a->type) && cpu_is_float(b->type);
}

void cpu_compute_cpy(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    dup(p, t->src[0], t); /* t is the view of src[1] that receives the copy */
}

bool cpu_supports_cont(const struct bp_tensor *t)
{
    return plain_type(t->src[0]->type);
}

void cpu_compute_cont(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    dup(p, t->src[0], t);
}

/* ---- GET_ROWS ---- */

bool cpu_supports_get_rows(const struct bp_tensor *t)
{
    const struct bp_tensor *tab = t->src[0];
    /* Quantized tables are expanded a whole row at a time, so their rows
     * must be packed blocks and the output row contiguous. */
    if (bp_type_is_quantized((enum bp_type)tab->type) &&
        (!cpu_kernels_for((enum bp_type)tab->type)->to_float ||
         tab->ne[0] % bp_type_block_size((enum bp_type)tab->type) != 0 ||
         tab->nb[0] != bp_type_size((enum bp_type)tab->type) || t->nb[0] != sizeof(float)))
        return false;
    return bp_type_is_quantized((enum bp_type)tab->type) || cpu_is_float(tab->type);
}

/* First id of ids outside [0, n_rows), scanning in element order; returns
 * false when all are in range. */
static bool find_bad_id(const struct bp_tensor *ids, int64_t n_rows, int32_t *bad, int64_t *where)
{
    int64_t k = 0;
    for (int64_t i2 = 0; i2 < ids->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < ids->ne[1]; i1++)
            for (int64_t i0 = 0; i0 < ids->ne[0]; i0++, k++) {
                int32_t id = cpu_load_i32(cpu_at(ids, i0, i1, i2, 0));
                if (id < 0 || id >= n_rows) {
                    *bad = id;
                    *where = k;
                    return true;
                }
            }
    return false;
}

bp_status cpu_prepare_get_rows(const struct cpu_plugin *pl, const struct bp_tensor *t)
{
    int32_t bad;
    int64_t where;
    if (find_bad_id(t->src[1], t->src[0]->ne[1], &bad, &where)) {
        cpu_log(pl, BP_LOG_ERROR,
                "GET_ROWS '%s': id %" PRId32 " at position %" PRId64 " of ids '%s' is outside "
                "[0, %" PRId64 ") of table '%s'; fix the ids.",
                cpu_name(t), bad, where, cpu_name(t->src[1]), t->src[0]->ne[1], cpu_name(t->src[0]));
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

void cpu_compute_get_rows(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *tab = t->src[0], *ids = t->src[1];
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i, i2, i3;
        cpu_row_index(t, r, &i, &i2, &i3);
        const int32_t id = cpu_load_i32(cpu_at(ids, i, i2, i3, 0));
        const char *sr = cpu_at(tab, 0, id, i2, i3);
        char *dr = cpu_at(t, 0, i, i2, i3);
        if (bp_type_is_quantized((enum bp_type)tab->type)) {
            cpu_kernels_for((enum bp_type)tab->type)->to_float(sr, (float *)(void *)dr, t->ne[0]);
            continue;
        }
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
            copy_elem(dr + (size_t)i0 * t->nb[0], t->type, sr + (size_t)i0 * tab->nb[0], tab->type);
    }
}

/* ---- SET_ROWS ---- */

bool cpu_supports_set_rows(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type) && cpu_is_float(t->src[1]->type);
}

bp_status cpu_prepare_set_rows(const struct cpu_plugin *pl, const struct bp_tensor *t)
{
    int32_t bad;
    int64_t where;
    if (find_bad_id(t->src[2], t->src[0]->ne[1], &bad, &where)) {
        cpu_log(pl, BP_LOG_ERROR,
                "SET_ROWS '%s': id %" PRId32 " at position %" PRId64 " of ids '%s' is outside "
                "[0, %" PRId64 ") of destination '%s'; fix the ids.",
                cpu_name(t), bad, where, cpu_name(t->src[2]), t->src[0]->ne[1], cpu_name(t->src[0]));
        return BP_ERR_INVALID_ARGUMENT;
    }
    return BP_OK;
}

void cpu_compute_set_rows(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *v = t->src[1], *ids = t->src[2];
    /* Threads own ranges of destination rows, and each walks every id in
     * order: with repeated ids the last write wins, exactly as a sequential
     * loop, and no two threads ever write one row. */
    int64_t own0, own1;
    cpu_split(t->ne[1], p, &own0, &own1);
    for (int64_t i3 = 0; i3 < v->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < v->ne[2]; i2++)
            for (int64_t i = 0; i < v->ne[1]; i++) {
                const int32_t id = cpu_load_i32(cpu_at(ids, i, i2 % ids->ne[1], i3 % ids->ne[2], 0));
                if (id < own0 || id >= own1)
                    continue;
                const char *sr = cpu_at(v, 0, i, i2, i3);
                char *dr = cpu_at(t, 0, id, i2, i3);
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    copy_elem(dr + (size_t)i0 * t->nb[0], t->type, sr + (size_t)i0 * v->nb[0], v->type);
            }
}
