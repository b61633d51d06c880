/* bench_moe_split.c — `backplane bench moe_split`: the two ways of putting
 * a mixture-of-experts FFN on two sub-devices, timed with the cpu's own
 * MUL_MAT_ID kernels on one layer of a real file (--model, stacked experts
 * ffn_{gate,up,down}_exps, router ffn_gate_inp):
 *
 *   rows    every device a slice of every expert, cut as the runner's split
 *           table cuts it (whole blocks of the down weights' rows: an
 *           expert width of 768 over two devices is 512 + 256);
 *   experts every device whole experts (half of the stack each) and only
 *           the (token, slot) pairs routed to them.
 *
 * The routing is the file's: each token's input is its embedding row
 * (token_embd), RMS-normed and scaled by the layer's ffn_norm, and the
 * router picks the top n_used experts of ffn_gate_inp times it (the
 * attention before the FFN is left out, so this is the layer's router on
 * embeddings, not on a trained residual stream). Each device's work is a
 * graph of gate, up, SiLU x up, down on one thread of the given device, run
 * one device after the other; a step costs the slower device plus the
 * all-reduce of [n_embd, n_tok] (timed as the ADD of two such tensors),
 * which is the same for both layouts. Decode averages --reps steps of one
 * token each; prefill 4 steps of -M tokens. Rounds alternate the layouts.
 * Beside the rows layout as the split table cuts this file, the report
 * gives a row cut into equal halves (half of the two devices' summed time),
 * what an expert width of an even number of blocks gets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_quantize.h>

#include "bench.h"
#include "cli.h"
#include "gguf.h"

#define NDEV 2

struct layer {
    const struct bp_gguf_tensor *gate, *up, *down, *inp, *norm, *embd;
    int64_t n_embd, ff, n_exp, n_used;
};

/* One device's graph for one step of one layout. */
struct part {
    struct bp_context *ctx;
    struct bp_graph *g;
    struct bp_buffer *buf;
    bool empty;   /* no pair routed here: costs nothing */
};

/* One layout's weights on every device. */
struct dev_weights {
    struct bp_context *ctx[3];
    struct bp_buffer *buf[3];
    struct bp_tensor *w[3];   /* gate, up, down */
};

static size_t row_bytes(enum bp_type t, int64_t n)
{
    return (size_t)(n / bp_type_block_size(t)) * bp_type_size(t);
}

static bool find_layer(const struct bp_gguf *g, int L, struct layer *l)
{
    char n[96];
#define T(field, what)                                                      \
    snprintf(n, sizeof n, "blk.%d." what ".weight", L);                    \
    if (!(l->field = bp_gguf_find_tensor(g, n)) || l->field->type < 0) {   \
        fprintf(stderr, "bench moe_split: the file has no usable '%s'; give a mixture-of-experts GGUF.\n", n); \
        return false;                                                       \
    }
    T(gate, "ffn_gate_exps") T(up, "ffn_up_exps") T(down, "ffn_down_exps") T(inp, "ffn_gate_inp")
    T(norm, "ffn_norm")
#undef T
    l->embd = bp_gguf_find_tensor(g, "token_embd.weight");
    const struct bp_gguf_kv *kv = NULL;
    char arch[64] = "";
    if ((kv = bp_gguf_find_kv(g, "general.architecture")) && kv->type == BP_GGUF_STRING &&
        kv->v.s.len < sizeof arch)
        memcpy(arch, kv->v.s.ptr, kv->v.s.len);
    snprintf(n, sizeof n, "%s.expert_used_count", arch);
    uint64_t used = 0;
    if (!l->embd || l->embd->type < 0 || !(kv = bp_gguf_find_kv(g, n)) || !bp_gguf_kv_uint(kv, &used)) {
        fprintf(stderr, "bench moe_split: the file lacks token_embd or %s.\n", n);
        return false;
    }
    l->n_embd = l->gate->ne[0];
    l->ff = l->gate->ne[1];
    l->n_exp = l->gate->ne[2];
    l->n_used = (int64_t)used;
    return l->n_used >= 1 && l->n_used <= l->n_exp && l->n_exp % NDEV == 0;
}

static float *dequant(const struct bp_gguf_tensor *t, int64_t row, int64_t n)
{
    float *f = malloc((size_t)n * sizeof *f);
    const uint8_t *p = (const uint8_t *)t->data + (size_t)row * row_bytes((enum bp_type)t->type, t->ne[0]);
    if (f && bp_dequantize((enum bp_type)t->type, p, f, n) != BP_OK) {
        free(f);
        return NULL;
    }
    return f;
}

/* x [n_embd, n_tok] (the router's inputs) and ids [n_used, n_tok]. */
static bool route(const struct layer *l, int64_t n_tok, unsigned seed, float *x, int32_t *ids)
{
    float *norm = dequant(l->norm, 0, l->n_embd);
    float *inp = dequant(l->inp, 0, l->n_embd * l->n_exp);
    float *logit = malloc((size_t)l->n_exp * sizeof *logit);
    bool ok = norm && inp && logit;
    for (int64_t t = 0; ok && t < n_tok; t++) {
        seed = seed * 1103515245u + 12345u;
        float *e = dequant(l->embd, (int64_t)((seed >> 4) % (unsigned)l->embd->ne[1]), l->n_embd);
        if (!(ok = e != NULL)) break;
        double ss = 0;
        for (int64_t i = 0; i < l->n_embd; i++) ss += (double)e[i] * e[i];
        const float r = (float)(1.0 / sqrt(ss / (double)l->n_embd + 1e-6));
        for (int64_t i = 0; i < l->n_embd; i++) x[t * l->n_embd + i] = e[i] * r * norm[i];
        free(e);
        for (int64_t k = 0; k < l->n_exp; k++) {
            double s = 0;
            for (int64_t i = 0; i < l->n_embd; i++) s += (double)inp[k * l->n_embd + i] * x[t * l->n_embd + i];
            logit[k] = (float)s;
        }
        for (int64_t u = 0; u < l->n_used; u++) {   /* top n_used, largest first */
            int64_t best = -1;
            for (int64_t k = 0; k < l->n_exp; k++)
                if (logit[k] > -INFINITY && (best < 0 || logit[k] > logit[best])) best = k;
            ids[t * l->n_used + u] = (int32_t)best;
            logit[best] = -INFINITY;
        }
    }
    free(norm);
    free(inp);
    free(logit);
    return ok;
}

/* Device d's share of the expert width in the rows layout: whole blocks of
 * the down weights' rows, the remainder to device 0 (layer 0's rotation). */
static void row_cut(const struct layer *l, int d, int64_t *f0, int64_t *w)
{
    const int64_t bs = bp_type_block_size((enum bp_type)l->down->type);
    const int64_t units = l->ff / bs, base = units / NDEV, rem = units % NDEV;
    int64_t start = 0;
    for (int i = 0; i < d; i++) start += base + (i < rem);
    *f0 = start * bs;
    *w = (base + (d < rem)) * bs;
}

/* Copy a weight into place: experts [e0, e0 + ne) and, per expert, rows
 * [r0, r0 + nr) of columns [c0, c0 + nc) (c0, nc whole blocks). */
static bool put_weight(struct bp_device *dev, const struct bp_gguf_tensor *src, int64_t e0, int64_t ne,
                       int64_t r0, int64_t nr, int64_t c0, int64_t nc, struct dev_weights *dw, int k)
{
    const enum bp_type ty = (enum bp_type)src->type;
    if (bp_context_new(1, &dw->ctx[k]) != BP_OK) return false;
    dw->w[k] = bp_tensor_new_3d(dw->ctx[k], ty, nc, nr, ne);
    struct bp_buffer_type *bt = bp_device_weight_buffer_type(dev, ty);
    if (!dw->w[k] || bp_context_alloc_tensors(dw->ctx[k], bt ? bt : bp_device_buffer_type(dev), NULL,
                                              &dw->buf[k]) != BP_OK)
        return false;
    const size_t src_row = row_bytes(ty, src->ne[0]), dst_row = row_bytes(ty, nc);
    const size_t off = row_bytes(ty, c0);
    uint8_t *tmp = malloc(bp_nbytes(dw->w[k]));
    if (!tmp) return false;
    for (int64_t e = 0; e < ne; e++)
        for (int64_t r = 0; r < nr; r++)
            memcpy(tmp + (size_t)(e * nr + r) * dst_row,
                   (const uint8_t *)src->data + (size_t)((e0 + e) * src->ne[1] + r0 + r) * src_row + off, dst_row);
    bool ok = bp_tensor_set(dw->w[k], tmp, 0, bp_nbytes(dw->w[k])) == BP_OK;
    free(tmp);
    return ok;
}

static void weights_free(struct dev_weights *dw)
{
    for (int k = 0; k < 3; k++) {
        if (dw->buf[k]) bp_buffer_free(dw->buf[k]);
        if (dw->ctx[k]) bp_context_free(dw->ctx[k]);
    }
}

static bool make_weights(struct bp_device *dev, const struct layer *l, bool rows, int d, struct dev_weights *dw)
{
    if (rows) {
        int64_t f0, w;
        row_cut(l, d, &f0, &w);
        return put_weight(dev, l->gate, 0, l->n_exp, f0, w, 0, l->n_embd, dw, 0) &&
               put_weight(dev, l->up, 0, l->n_exp, f0, w, 0, l->n_embd, dw, 1) &&
               put_weight(dev, l->down, 0, l->n_exp, 0, l->n_embd, f0, w, dw, 2);
    }
    const int64_t ne = l->n_exp / NDEV, e0 = d * ne;
    return put_weight(dev, l->gate, e0, ne, 0, l->ff, 0, l->n_embd, dw, 0) &&
           put_weight(dev, l->up, e0, ne, 0, l->ff, 0, l->n_embd, dw, 1) &&
           put_weight(dev, l->down, e0, ne, 0, l->n_embd, 0, l->ff, dw, 2);
}

static void part_free(struct part *p)
{
    if (p->g) bp_graph_free(p->g);
    if (p->buf) bp_buffer_free(p->buf);
    if (p->ctx) bp_context_free(p->ctx);
    memset(p, 0, sizeof *p);
}

/* Device d's graph of one step: rows: every pair, x broadcast over the
 * slots; experts: only the pairs whose expert d holds, one pair per column
 * with its local expert id (the same grouping by expert in the kernel). */
static bool make_part(struct bp_device *dev, const struct layer *l, const struct dev_weights *dw, bool rows,
                      int d, int64_t n_tok, const float *x, const int32_t *ids, struct part *p)
{
    const int64_t ne = l->n_exp / NDEV, E = l->n_embd;
    int64_t n_pairs = 0;
    for (int64_t i = 0; i < n_tok * l->n_used; i++) n_pairs += ids[i] / ne == d;
    if (!rows && n_pairs == 0) return (p->empty = true);
    const int64_t cols = rows ? n_tok : n_pairs, used = rows ? l->n_used : 1;
    if (bp_context_new(16, &p->ctx) != BP_OK) return false;
    struct bp_context *c = p->ctx;
    struct bp_tensor *xt = bp_tensor_new_3d(c, BP_TYPE_F32, E, 1, cols);
    struct bp_tensor *it = bp_tensor_new_2d(c, BP_TYPE_I32, used, cols);
    if (!xt || !it) return false;
    struct bp_tensor *a = bp_mul(c, bp_silu(c, bp_mul_mat_id(c, dw->w[0], xt, it)), bp_mul_mat_id(c, dw->w[1], xt, it));
    struct bp_tensor *out = bp_mul_mat_id(c, dw->w[2], a, it);
    if (!out || bp_graph_new(16, &p->g) != BP_OK || bp_graph_build(p->g, out) != BP_OK ||
        bp_context_alloc_tensors(c, bp_device_buffer_type(dev), NULL, &p->buf) != BP_OK)
        return false;
    float *xs = malloc((size_t)(E * cols) * sizeof *xs);
    int32_t *is = malloc((size_t)(used * cols) * sizeof *is);
    bool ok = xs && is;
    if (ok && rows) {
        memcpy(xs, x, (size_t)(E * cols) * sizeof *xs);
        memcpy(is, ids, (size_t)(used * cols) * sizeof *is);
    } else if (ok) {
        int64_t j = 0;
        for (int64_t i = 0; i < n_tok * l->n_used; i++)
            if (ids[i] / ne == d) {
                memcpy(xs + j * E, x + (i / l->n_used) * E, (size_t)E * sizeof *xs);
                is[j++] = ids[i] - (int32_t)(d * ne);
            }
    }
    ok = ok && bp_tensor_set(xt, xs, 0, bp_nbytes(xt)) == BP_OK && bp_tensor_set(it, is, 0, bp_nbytes(it)) == BP_OK;
    free(xs);
    free(is);
    return ok;
}

static double time_graph(struct bp_backend *be, struct bp_graph *g)
{
    double t0 = bench_now();
    if (bp_backend_graph_compute(be, g) != BP_OK || bp_backend_synchronize(be) != BP_OK) return -1;
    return bench_now() - t0;
}

/* The all-reduce of two devices' [n_embd, n_tok] partial sums: one ADD. */
static double time_allreduce(struct bp_device *dev, struct bp_backend *be, int64_t E, int64_t n_tok)
{
    struct bp_context *c = NULL;
    struct bp_graph *g = NULL;
    struct bp_buffer *buf = NULL;
    double t = -1;
    if (bp_context_new(4, &c) == BP_OK) {
        struct bp_tensor *s = bp_add(c, bp_tensor_new_2d(c, BP_TYPE_F32, E, n_tok),
                                     bp_tensor_new_2d(c, BP_TYPE_F32, E, n_tok));
        if (s && bp_graph_new(4, &g) == BP_OK && bp_graph_build(g, s) == BP_OK &&
            bp_context_alloc_tensors(c, bp_device_buffer_type(dev), NULL, &buf) == BP_OK &&
            time_graph(be, g) >= 0) {
            double v[9];
            for (int r = 0; r < 9; r++) v[r] = time_graph(be, g);
            t = bench_median(v, 9);
        }
    }
    if (buf) bp_buffer_free(buf);
    if (g) bp_graph_free(g);
    if (c) bp_context_free(c);
    return t;
}

/* Seconds of the slower device's work summed over the steps, or -1. */
static double time_layout(struct bp_backend *be, struct part *parts, int steps, double *busy)
{
    double total = 0;
    for (int s = 0; s < steps; s++) {
        double worst = 0;
        for (int d = 0; d < NDEV; d++) {
            struct part *p = &parts[s * NDEV + d];
            double t = p->empty ? 0 : time_graph(be, p->g);
            if (t < 0) return -1;
            busy[d] += t;
            if (t > worst) worst = t;
        }
        total += worst;
    }
    return total;
}

struct phase {
    const char *name;
    int steps;
    int64_t n_tok;
};

int bench_moe_split(const struct bench_opts *o)
{
    if (o->n_models != 1) {
        fprintf(stderr, "bench moe_split: give one --model FILE.gguf with stacked experts.\n");
        return CLI_EXIT_FAIL;
    }
    const int rounds = o->rounds ? o->rounds : 5;
    const int64_t prefill = o->M > 1 ? o->M : 64;
    const int decode_steps = o->reps ? o->reps : 32;
    struct bp_device *dev = bp_device_by_name(o->device);
    char err[256] = "";
    struct bp_gguf *g = NULL;
    if (!dev || bp_gguf_open(o->models[0], &g, err, sizeof err) != BP_OK) {
        fprintf(stderr, "bench moe_split: %s\n", dev ? err : "no such --device; see `backplane devices`.");
        return CLI_EXIT_FAIL;
    }
    struct layer l;
    struct bp_backend *be = NULL;
    struct dev_weights dw[2][NDEV];
    memset(dw, 0, sizeof dw);
    const struct phase phases[2] = {{"decode", decode_steps, 1}, {"prefill", 4, prefill}};
    struct part *parts[2][2] = {{NULL}};
    double *ratio[2] = {calloc((size_t)rounds, sizeof(double)), calloc((size_t)rounds, sizeof(double))};
    double *even[2] = {calloc((size_t)rounds, sizeof(double)), calloc((size_t)rounds, sizeof(double))};
    double *ms[2][2];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) ms[p][k] = calloc((size_t)rounds, sizeof(double));
    double share[2][2][NDEV] = {{{0}}}, t_ar[2] = {0, 0};
    int64_t pairs[2][NDEV] = {{0}};
    int rc = CLI_EXIT_FAIL;
    if (!find_layer(g, 0, &l) || bp_backend_init(dev, "n_threads=1", &be) != BP_OK) goto out;
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < NDEV; d++)
            if (!make_weights(dev, &l, k == 0, d, &dw[k][d])) {
                fprintf(stderr, "bench moe_split: could not place the weights: %s\n", bp_last_error());
                goto out;
            }
    for (int p = 0; p < 2; p++) {
        const int64_t nt = phases[p].n_tok;
        float *x = malloc((size_t)(l.n_embd * nt) * sizeof *x);
        int32_t *ids = malloc((size_t)(l.n_used * nt) * sizeof *ids);
        for (int k = 0; k < 2; k++) parts[p][k] = calloc((size_t)(phases[p].steps * NDEV), sizeof(struct part));
        bool ok = x && ids && parts[p][0] && parts[p][1];
        for (int s = 0; ok && s < phases[p].steps; s++) {
            ok = route(&l, nt, 777u + (unsigned)(s * 131 + p * 7), x, ids);
            for (int64_t i = 0; ok && i < nt * l.n_used; i++) pairs[p][ids[i] / (l.n_exp / NDEV)]++;
            for (int k = 0; ok && k < 2; k++)
                for (int d = 0; ok && d < NDEV; d++)
                    ok = make_part(dev, &l, &dw[k][d], k == 0, d, nt, x, ids, &parts[p][k][s * NDEV + d]);
        }
        free(x);
        free(ids);
        double warm[NDEV] = {0};
        for (int k = 0; ok && k < 2; k++) ok = time_layout(be, parts[p][k], phases[p].steps, warm) >= 0;
        if (ok) ok = (t_ar[p] = time_allreduce(dev, be, l.n_embd, nt)) > 0;
        if (!ok) {
            fprintf(stderr, "bench moe_split: could not build or run a %s graph: %s\n", phases[p].name,
                    bp_last_error());
            goto out;
        }
    }
    for (int r = 0; r < rounds; r++)
        for (int p = 0; p < 2; p++) {
            double t[2], busy_rows[NDEV] = {0};
            for (int i = 0; i < 2; i++) {
                const int k = (r + i) % 2;   /* the layout that goes first alternates */
                double busy[NDEV] = {0};
                t[k] = time_layout(be, parts[p][k], phases[p].steps, busy);
                for (int d = 0; d < NDEV; d++) {
                    share[p][k][d] += busy[d];
                    if (k == 0) busy_rows[d] = busy[d];
                }
                if (t[k] < 0) goto out;
                t[k] = t[k] / phases[p].steps + t_ar[p];
                ms[p][k][r] = t[k] * 1e3;
            }
            ratio[p][r] = t[1] / t[0];
            /* a row cut into equal halves (a width of an even number of
             * blocks): each device half of the rows layout's work */
            even[p][r] = t[1] / ((busy_rows[0] + busy_rows[1]) / NDEV / phases[p].steps + t_ar[p]);
        }
    printf("%s layer 0: %lld experts (%lld used) of width %lld, n_embd %lld; gate/up %s, down %s; "
           "2 devices, 1 thread of %s each\n", o->models[0], (long long)l.n_exp, (long long)l.n_used,
           (long long)l.ff, (long long)l.n_embd, bp_type_name((enum bp_type)l.gate->type),
           bp_type_name((enum bp_type)l.down->type), o->device);
    for (int p = 0; p < 2; p++) {
        double lo = ratio[p][0], hi = ratio[p][0];
        for (int r = 1; r < rounds; r++) {
            lo = ratio[p][r] < lo ? ratio[p][r] : lo;
            hi = ratio[p][r] > hi ? ratio[p][r] : hi;
        }
        const double busier[2] = {
            fmax(share[p][0][0], share[p][0][1]) / (share[p][0][0] + share[p][0][1]),
            fmax(share[p][1][0], share[p][1][1]) / (share[p][1][0] + share[p][1][1])};
        if (o->json)
            printf("{\"mode\":\"moe_split\",\"phase\":\"%s\",\"tokens\":%lld,\"steps\":%d,\"rows_ms\":%.4f,"
                   "\"experts_ms\":%.4f,\"allreduce_ms\":%.4f,\"experts_over_rows\":%.4f,\"min\":%.4f,"
                   "\"max\":%.4f,\"experts_over_even_rows\":%.4f,"
                   "\"rows_busier_share\":%.3f,\"experts_busier_share\":%.3f,\"pairs\":[%lld,%lld]}\n",
                   phases[p].name, (long long)phases[p].n_tok, phases[p].steps, bench_median_of(ms[p][0], rounds),
                   bench_median_of(ms[p][1], rounds), t_ar[p] * 1e3, bench_median_of(ratio[p], rounds), lo, hi,
                   bench_median_of(even[p], rounds), busier[0], busier[1], (long long)pairs[p][0],
                   (long long)pairs[p][1]);
        else
            printf("  %-7s %3lld token(s) x %2d steps: rows %8.3f ms  experts %8.3f ms  (all-reduce %.3f ms)  "
                   "experts / rows %.3f (%.3f-%.3f), / rows cut evenly %.3f; "
                   "busier device's share of the time: rows %.2f, experts %.2f; "
                   "pairs routed to each half of the experts %lld / %lld\n",
                   phases[p].name, (long long)phases[p].n_tok, phases[p].steps, bench_median_of(ms[p][0], rounds),
                   bench_median_of(ms[p][1], rounds), t_ar[p] * 1e3, bench_median_of(ratio[p], rounds), lo, hi,
                   bench_median_of(even[p], rounds), busier[0], busier[1], (long long)pairs[p][0],
                   (long long)pairs[p][1]);
    }
    rc = CLI_EXIT_OK;
out:
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            for (int i = 0; parts[p][k] && i < phases[p].steps * NDEV; i++) part_free(&parts[p][k][i]);
            free(parts[p][k]);
            free(ms[p][k]);
        }
    for (int p = 0; p < 2; p++) {
        free(ratio[p]);
        free(even[p]);
    }
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < NDEV; d++) weights_free(&dw[k][d]);
    if (be) bp_backend_free(be);
    bp_gguf_close(g);
    return rc;
}
