/* check_build.c — turning a case into a graph, and deterministic input data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_quantize.h>

#include "check_harness.h"

/* Cases are small: a few leaves, views and one or two ops. */
#define CHECK_CTX_TENSORS 64
#define CHECK_GRAPH_NODES 64

struct bp_tensor *check_input(struct check_builder *b, const char *name, enum bp_type type,
                              enum check_fill fill, int64_t range, int64_t ne0, int64_t ne1,
                              int64_t ne2, int64_t ne3)
{
    if (b->n_inputs >= CHECK_MAX_INPUTS) {
        b->overflow = true;
        return NULL;
    }
    struct bp_tensor *t = bp_tensor_new_4d(b->ctx, type, ne0, ne1, ne2, ne3);
    if (!t) return NULL;
    bp_tensor_set_name(t, name);
    t->flags |= BP_TENSOR_FLAG_INPUT;
    b->inputs[b->n_inputs++] = (struct check_input){.t = t, .fill = fill, .range = range};
    return t;
}

struct bp_tensor *check_case_build(const struct check_case *c, struct check_builder *b,
                                   struct bp_graph **graph_out)
{
    memset(b, 0, sizeof *b);
    *graph_out = NULL;
    if (bp_context_new(CHECK_CTX_TENSORS, &b->ctx) != BP_OK) return NULL;
    struct bp_tensor *out = c->build(b, c);
    if (!out || b->overflow || bp_context_status(b->ctx) != BP_OK) goto fail;
    bp_tensor_set_name(out, "out");
    out->flags |= BP_TENSOR_FLAG_OUTPUT;
    if (bp_graph_new(CHECK_GRAPH_NODES, graph_out) != BP_OK) goto fail;
    if (bp_graph_build(*graph_out, out) != BP_OK) goto fail;
    return out;
fail:
    check_case_release(b, *graph_out);
    *graph_out = NULL;
    return NULL;
}

void check_case_release(struct check_builder *b, struct bp_graph *g)
{
    if (g) bp_graph_free(g);
    if (b->ctx) bp_context_free(b->ctx);
    b->ctx = NULL;
}

const struct bp_tensor *check_first_unsupported(struct bp_device *dev, struct bp_graph *g)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *n = g->nodes[i];
        /* Views are no-ops every device handles; asking about them only
         * exercises a plugin's idea of what NONE means. */
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        if (!bp_device_supports_op(dev, n)) return n;
    }
    return NULL;
}

/* ---- deterministic pseudo-random data ---- */

static uint64_t xorshift64s(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [-1, 1). */
static float rand_unit(uint64_t *s)
{
    return (float)((double)(xorshift64s(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static void store_float(enum bp_type type, void *dst, size_t i, float v)
{
    switch (type) {
    case BP_TYPE_F16: ((uint16_t *)dst)[i] = bp_f32_to_f16(v); break;
    case BP_TYPE_BF16: ((uint16_t *)dst)[i] = bp_f32_to_bf16(v); break;
    default: ((float *)dst)[i] = v; break;
    }
}

static void fill_ids(const struct check_input *in, uint64_t *s, int32_t *ids, size_t n, bool unique)
{
    int64_t row = in->t->ne[0];
    int64_t range = in->range > 0 ? in->range : 1;
    for (size_t r0 = 0; r0 < n; r0 += (size_t)row) {
        for (int64_t j = 0; j < row && r0 + (size_t)j < n; j++) {
            int32_t v;
            bool again;
            int tries = 0;
            do {
                v = (int32_t)(xorshift64s(s) % (uint64_t)range);
                again = false;
                /* Distinct ids within a row keep SET_ROWS order-independent. */
                for (int64_t k = 0; unique && k < j; k++)
                    if (ids[r0 + (size_t)k] == v) again = true;
            } while (again && ++tries < 1000);
            ids[r0 + (size_t)j] = v;
        }
    }
}

/* A quantized input holds bp_quantize of seeded uniform floats, so that
 * every device starts from the same bytes and the llama.cpp layout is what
 * is tested. Rows are dim 0 (a whole number of blocks, as the type demands). */
static void fill_quantized(const struct check_input *in, uint64_t *s, void *dst, size_t nbytes)
{
    enum bp_type type = (enum bp_type)in->t->type;
    int64_t row = in->t->ne[0];
    size_t row_bytes = bp_row_size(type, row);
    if (row_bytes == 0) return;
    size_t nrows = nbytes / row_bytes;
    float *x = malloc((size_t)row * sizeof *x);
    if (!x) return; /* left zero: the comparison still runs, on zeros */
    for (size_t r = 0; r < nrows; r++) {
        for (int64_t i = 0; i < row; i++) x[i] = rand_unit(s);
        bp_quantize(type, x, (char *)dst + r * row_bytes, 1, row);
    }
    free(x);
}

void check_fill_input(const struct check_input *in, uint64_t seed, void *dst, size_t nbytes)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    if (s == 0) s = 1;
    enum bp_type type = (enum bp_type)in->t->type;
    if (bp_type_is_quantized(type)) {
        memset(dst, 0, nbytes);
        fill_quantized(in, &s, dst, nbytes);
        return;
    }
    size_t esz = bp_type_size(type);
    size_t n = esz ? nbytes / esz : 0;
    memset(dst, 0, nbytes);
    switch (in->fill) {
    case CHECK_FILL_IDS:
    case CHECK_FILL_IDS_UNIQUE:
        if (type == BP_TYPE_I32) fill_ids(in, &s, dst, n, in->fill == CHECK_FILL_IDS_UNIQUE);
        break;
    case CHECK_FILL_MASK: {
        int64_t row = in->t->ne[0];
        for (size_t i = 0; i < n; i++) {
            float v = rand_unit(&s);
            bool masked = (xorshift64s(&s) & 3) == 0 && (int64_t)i % row != 0;
            store_float(type, dst, i, masked ? -INFINITY : v);
        }
        break;
    }
    case CHECK_FILL_FACTORS:
        for (size_t i = 0; i < n; i++) store_float(type, dst, i, 4.5f + 3.5f * rand_unit(&s));
        break;
    case CHECK_FILL_IDS_SAME:
        if (type == BP_TYPE_I32) {
            size_t row = (size_t)in->t->ne[0];
            fill_ids(in, &s, dst, n < row ? n : row, false);
            for (size_t i = row; i < n; i++) ((int32_t *)dst)[i] = ((int32_t *)dst)[i % row];
        }
        break;
    case CHECK_FILL_TIES:
        for (size_t i = 0; i < n; i++)
            store_float(type, dst, i, (float)(int)(xorshift64s(&s) % 5) * 0.5f - 1.0f);
        break;
    case CHECK_FILL_UNIFORM:
    default:
        for (size_t i = 0; i < n; i++) store_float(type, dst, i, rand_unit(&s));
        break;
    }
}
