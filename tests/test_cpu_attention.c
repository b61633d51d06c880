/*
 * test_cpu_attention.c — FLASH_ATTN_EXT of the cpu variant being tested
 * (BACKPLANE_CPU_VARIANT; a variant this machine cannot run exits 77,
 * "skipped"; one whose .so is missing fails) against a double-precision
 * softmax(q.k^T * scale + mask) . v
 * computed here, at shapes like a decoder's: GQA (H = 8, H_kv = 2), one and
 * seven query rows, 1 / 17 / 300 keys, D != Dv and neither a multiple of
 * the vector width (and Dv = 64, a Llama head), F32 / F16 / BF16 K and V,
 * caches viewed through a permute (heads inner) or a transpose (strided
 * rows), masks with -INFINITY and finite entries, fully masked rows; causal
 * prefill blocks at GQA ratios 1, 4 and 8; decode against a cache whose
 * unwritten tail every row masks, at a Llama head (D = Dv = 64) and cache
 * fills of 1 to 1000 positions. The SIMD variants accumulate in float, so
 * the bound is float rounding's (fa_tolerance); fully masked rows must be
 * exact zeros, and 1, 2 and 3 threads must agree bit for bit.
 * FLASH_ATTN_SOFTCAP goes through the same cases' paths (prefill tiles,
 * decode rows, the lane-wise q.k of AVX-512) with caps that saturate the
 * scores and one that barely bends them.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_util.h"
#include "cpu_variant_util.h"
#include "suite_main.h"

enum kv_layout { KV_PLAIN, KV_PERMUTED, KV_TRANSPOSED };
enum mask_kind { MASK_NONE, MASK_SOME, MASK_ROW_EMPTY, MASK_CAUSAL, MASK_CACHE_TAIL, MASK_WRITTEN };

struct fa_case {
    enum bp_type tkv;
    enum kv_layout layout;
    enum mask_kind mask;
    int64_t nq, nkv, B;
    int64_t dv;     /* 0: DV_DEFAULT */
    int64_t h, hkv; /* 0: H, HKV */
    int64_t d;      /* 0: D_DEFAULT */
    int64_t npos;   /* MASK_WRITTEN: cache positions written, the last query at npos - 1 */
    float cap;      /* > 0: FLASH_ATTN_SOFTCAP with this cap */
};

enum { H_DEFAULT = 8, HKV_DEFAULT = 2, D_DEFAULT = 68, DV_DEFAULT = 76 };

/* KV heads of the case being checked (kv_index and kv_base read it). */
static int64_t HKV = HKV_DEFAULT;

/* Element (d, j, kv head, b) of a cache base tensor of row length n. */
static int64_t kv_index(enum kv_layout l, int64_t n, int64_t d, int64_t j, int64_t kh, int64_t b,
                        int64_t nkv)
{
    switch (l) {
    case KV_PERMUTED: return d + n * (kh + HKV * (j + nkv * b));      /* [n, H_kv, n_kv, B] */
    case KV_TRANSPOSED: return j + nkv * (d + n * (kh + HKV * b));    /* [n_kv, n, H_kv, B] */
    default: return d + n * (j + nkv * (kh + HKV * b));              /* [n, n_kv, H_kv, B] */
    }
}

static struct bp_tensor *kv_base(struct bp_context *ctx, enum bp_type t, enum kv_layout l, int64_t n,
                                 int64_t nkv, int64_t B)
{
    switch (l) {
    case KV_PERMUTED: return bp_tensor_new_4d(ctx, t, n, HKV, nkv, B);
    case KV_TRANSPOSED: return bp_tensor_new_4d(ctx, t, nkv, n, HKV, B);
    default: return bp_tensor_new_4d(ctx, t, n, nkv, HKV, B);
    }
}

static struct bp_tensor *kv_view(struct bp_context *ctx, enum kv_layout l, struct bp_tensor *base)
{
    switch (l) {
    case KV_PERMUTED: return bp_permute(ctx, base, 0, 2, 1, 3);
    case KV_TRANSPOSED: return bp_transpose(ctx, base);
    default: return base;
    }
}

/* Mask entry of query row i, key j: about a quarter -INFINITY, the rest
 * finite in [-2, 0]; with MASK_ROW_EMPTY query row 1 (row 0 when there is
 * only one) sees nothing. The last key stays visible elsewhere, so other
 * rows always have something. */
static double mask_value(const struct fa_case *c, unsigned *seed, int64_t i, int64_t j)
{
    const double r = rnd(seed);
    if (c->mask == MASK_CAUSAL) /* query i sits at position nkv - nq + i */
        return j <= c->nkv - c->nq + i ? 0.0 : -INFINITY;
    if (c->mask == MASK_CACHE_TAIL) /* a decoder's cache: the last 5/8 unwritten */
        return j <= c->nkv * 3 / 8 - c->nq + i ? 0.0 : -INFINITY;
    if (c->mask == MASK_WRITTEN) /* npos positions written (0: the row sees nothing) */
        return j <= c->npos - c->nq + i ? 0.0 : -INFINITY;
    if (c->mask == MASK_ROW_EMPTY && i == (c->nq > 1 ? 1 : 0))
        return -INFINITY;
    if (j == c->nkv - 1)
        return 0.0;
    return r < -0.5 ? -INFINITY : r;
}

static bool row_empty(const struct fa_case *c, int64_t iq)
{
    return (c->mask == MASK_ROW_EMPTY && iq == (c->nq > 1 ? 1 : 0)) ||
           (c->mask == MASK_WRITTEN && c->npos - c->nq + iq < 0);
}

static double max_abs(const double *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* What float rounding lets an output element be off by. A score is a
 * float sum of D products: rounded D times, by up to u of its partial sums
 * (at most a = max over rows and keys of |scale| sum_d |q_d k_d|); an
 * absolute score error e scales a weight by ~1 + e. The weights' sum and
 * the weighted sum of n_kv values round n_kv times, by up to u max|v| each.
 * Roundings that are not correlated add like a random walk, sqrt(count)
 * times one; 8 times that leaves room for the polynomial exp (1.3 ulp),
 * the final division and F16 inputs (exact in float). */
static double fa_tolerance(int64_t D, int64_t nkv, double a, double vmax)
{
    const double u = FLT_EPSILON / 2;
    return 8.0 * u * vmax * (sqrt((double)D) * a + sqrt((double)nkv));
}

/* What a cap adds: c tanh(x / c) has at most the error of x (its slope is
 * at most 1), plus tanh's own, a few ulps of the capped score |s| <= c;
 * each weight moves by that relative amount, the output by at most twice
 * vmax times it. */
static double cap_tolerance(double cap, double vmax)
{
    return cap > 0.0 ? 2.0 * vmax * 8.0 * (FLT_EPSILON / 2) * cap : 0.0;
}

static void check_case(const struct fa_case *c)
{
    char what[160];
    snprintf(
        what, sizeof what,
        "%s kv, layout %d, mask %d, n_q %lld, n_kv %lld, B %lld, H %lld/%lld, D %lld, %lld written, cap %g",
        bp_type_name(c->tkv), (int)c->layout, (int)c->mask, (long long)c->nq, (long long)c->nkv,
        (long long)c->B, (long long)(c->h ? c->h : H_DEFAULT),
        (long long)(c->hkv ? c->hkv : HKV_DEFAULT), (long long)(c->d ? c->d : D_DEFAULT),
        (long long)c->npos, (double)c->cap);
    const int64_t nq = c->nq, nkv = c->nkv, B = c->B, DV = c->dv ? c->dv : DV_DEFAULT;
    const int64_t D = c->d ? c->d : D_DEFAULT;
    const int64_t H = c->h ? c->h : H_DEFAULT;
    HKV = c->hkv ? c->hkv : HKV_DEFAULT;
    struct fx f;
    fx_init(&f);
    const float scale = 1.0f / sqrtf((float)D);
    struct bp_tensor *q = bp_tensor_new_4d(f.ctx, BP_TYPE_F32, D, nq, H, B);
    struct bp_tensor *kb = kv_base(f.ctx, c->tkv, c->layout, D, nkv, B);
    struct bp_tensor *vb = kv_base(f.ctx, c->tkv, c->layout, DV, nkv, B);
    struct bp_tensor *m =
        c->mask != MASK_NONE ? bp_tensor_new_2d(f.ctx, BP_TYPE_F16, nkv, nq + 2) : NULL;
    struct bp_tensor *kx = kv_view(f.ctx, c->layout, kb), *vx = kv_view(f.ctx, c->layout, vb);
    struct bp_tensor *y = c->cap > 0.0f ? bp_flash_attn_softcap(f.ctx, q, kx, vx, m, scale, c->cap)
                                        : bp_flash_attn_ext(f.ctx, q, kx, vx, m, scale);
    fx_alloc(&f);
    /* q with amplitude 3: sharper softmax than uniform weights */
    double *qv = fill(q, 11 + (unsigned)nkv, 3.0), *kv = fill(kb, 12 + (unsigned)nq, 1.0);
    double *vv = fill(vb, 13, 1.0), *mv = NULL;
    if (m) {
        mv = malloc((size_t)(nkv * (nq + 2)) * sizeof *mv);
        unsigned seed = 14;
        for (int64_t i = 0; i < nq + 2; i++)
            for (int64_t j = 0; j < nkv; j++)
                mv[j + nkv * i] = mask_value(c, &seed, i, j);
        store_values(m, mv);
    }

    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 1), BP_OK);
    ck_assert_msg(fx_compute(&f, y) == BP_OK, "%s: %s", what, bp_last_error());
    double *got1 = fetch(y);
    /* 2 and 3 threads, with garbage in y first, so each run has to write
     * every element; got3 keeps the last. */
    double *got3 = NULL;
    const size_t ybytes = bp_nbytes(y);
    unsigned char *junk = malloc(ybytes);
    memset(junk, 0x7f, ybytes);
    for (int nth = 2; nth <= 3; nth++) {
        ck_assert_int_eq(bp_backend_set_n_threads(f.be, nth), BP_OK);
        ck_assert_int_eq(bp_tensor_set(y, junk, 0, ybytes), BP_OK);
        ck_assert_msg(fx_compute(&f, y) == BP_OK, "%s: %s", what, bp_last_error());
        free(got3);
        got3 = fetch(y);
        ck_assert_msg(nth == 3 || memcmp(got1, got3, (size_t)bp_nelements(y) * sizeof *got1) == 0,
                      "%s: 2 threads differ from 1", what);
    }
    free(junk);

    const int64_t n = DV * H * nq * B;
    double *want = calloc((size_t)n, sizeof *want), *s = malloc((size_t)nkv * sizeof *s);
    double out_scale = 0.0, a_max = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t iq = 0; iq < nq; iq++) {
                const int64_t kh = h / (H / HKV);
                double mx = -INFINITY;
                for (int64_t j = 0; j < nkv; j++) {
                    double dot = 0.0, dot_abs = 0.0;
                    for (int64_t d = 0; d < D; d++) {
                        const double p = qv[d + D * (iq + nq * (h + H * b))] *
                                         kv[kv_index(c->layout, D, d, j, kh, b, nkv)];
                        dot += p;
                        dot_abs += fabs(p);
                    }
                    if (dot_abs * scale > a_max) a_max = dot_abs * scale;
                    s[j] = dot * (double)scale;
                    if (c->cap > 0.0f) s[j] = c->cap * tanh(s[j] / c->cap);
                    s[j] += mv ? mv[j + nkv * iq] : 0.0;
                    if (s[j] > mx) mx = s[j];
                }
                double *out = want + DV * (h + H * (iq + nq * b));
                if (mx == -INFINITY)
                    continue;
                double sum = 0.0;
                for (int64_t j = 0; j < nkv; j++) sum += exp(s[j] - mx);
                /* s[j] becomes the weight of row j, computed once rather
                 * than per output column (exp dominates under valgrind). */
                for (int64_t j = 0; j < nkv; j++) s[j] = exp(s[j] - mx) / sum;
                for (int64_t d = 0; d < DV; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < nkv; j++)
                        acc += s[j] * vv[kv_index(c->layout, DV, d, j, kh, b, nkv)];
                    out[d] = acc;
                    if (fabs(acc) > out_scale) out_scale = fabs(acc);
                }
            }

    const double vmax = max_abs(vv, bp_nelements(vb));
    const double tol = fa_tolerance(D, nkv, a_max, vmax) + cap_tolerance(c->cap, vmax);
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t iq = (i / (DV * H)) % nq;
        ck_assert_msg(memcmp(&got1[i], &got3[i], sizeof got1[i]) == 0,
                      "%s: element %lld is %.9g with 1 thread, %.9g with 3", what, (long long)i,
                      got1[i], got3[i]);
        if (row_empty(c, iq)) {
            ck_assert_msg(got1[i] == 0.0, "%s: element %lld of a fully masked row is %.9g", what,
                          (long long)i, got1[i]);
            continue;
        }
        const double err = fabs(got1[i] - want[i]);
        ck_assert_msg(err <= tol, "%s: element %lld is %.9g, expected %.9g (error %.3g > %.3g)",
                      what, (long long)i, got1[i], want[i], err, tol);
        if (err > worst) worst = err;
    }
    if (getenv("BP_TEST_VERBOSE"))
        printf("%s: max error %.3g of scale %.3g, bound %.3g\n", what, worst, out_scale, tol);
    free(qv); free(kv); free(vv); free(mv); free(got1); free(got3); free(want); free(s);
    fx_free(&f);
}

static const int64_t kv_lengths[] = { 1, 17, 300 };

/* _i: kv length x {n_q = 1, n_q = 7} */
START_TEST(test_flash_attn_matches_double_reference_with_f32_kv)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    for (int mask = MASK_NONE; mask <= MASK_SOME; mask++)
        check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, (enum mask_kind)mask, nq, nkv, 2, 0, 0,
                                      0, 0, 0, 0 });
}
END_TEST

START_TEST(test_flash_attn_matches_double_reference_with_f16_kv)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    for (int mask = MASK_NONE; mask <= MASK_SOME; mask++)
        check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, (enum mask_kind)mask, nq, nkv, 2, 0, 0,
                                      0, 0, 0, 0 });
}
END_TEST

START_TEST(test_flash_attn_gives_zeros_for_fully_masked_rows)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    check_case(
        &(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_ROW_EMPTY, nq, nkv, 1, 0, 0, 0, 0, 0, 0 });
    check_case(
        &(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_ROW_EMPTY, nq, nkv, 2, 0, 0, 0, 0, 0, 0 });
}
END_TEST

START_TEST(test_flash_attn_reads_permuted_and_transposed_caches)
{
    const enum bp_type types[] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 };
    for (int t = 0; t < 3; t++) {
        check_case(&(struct fa_case){ types[t], KV_PERMUTED, MASK_SOME, 7, 17, 2, 0, 0, 0, 0, 0, 0 });
        check_case(
            &(struct fa_case){ types[t], KV_TRANSPOSED, MASK_SOME, 1, 17, 1, 0, 0, 0, 0, 0, 0 });
    }
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_SOME, 1, 300, 1, 0, 0, 0, 0, 0, 0 });
    /* Dv = 64, a Llama head: the value rows accumulated in registers. */
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PERMUTED, MASK_SOME, 7, 300, 1, 64, 0, 0, 0, 0, 0 });
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_SOME, 7, 17, 2, 64, 0, 0, 0, 0, 0 });
    check_case(
        &(struct fa_case){ BP_TYPE_F32, KV_TRANSPOSED, MASK_SOME, 1, 17, 1, 64, 0, 0, 0, 0, 0 });
}
END_TEST

/* Decode against a cache whose tail is not written yet (the mask hides the
 * same trailing keys from every row, ending inside a 32-key tile or on its
 * edge), at the decoder's GQA ratio 8 and Dv = 64; the tail keys are
 * neither read nor summed. */
START_TEST(test_flash_attn_skips_the_unwritten_cache_tail)
{
    static const int64_t nkvs[] = { 128, 256, 1024 }; /* 48, 96 and 384 keys visible */
    for (int s = 0; s < 3; s++) {
        check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_CACHE_TAIL, 1, nkvs[s], 1, 64,
                                      32, 4, 0, 0, 0 });
        check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_CACHE_TAIL, 3, nkvs[s] - 5, 2, 0,
                                      8, 2, 0, 0, 0 });
    }
}
END_TEST

/* One query token (a decode step) against F16 caches at a Llama head
 * (D = Dv = 64, GQA 8:1) with 1, 31, 33, 192 and 1000 positions written and
 * the rest of the capacity masked: inside the first 32-key tile, around
 * its edge, a decoder's usual fill and a long context; plus a cache of
 * which no position is visible yet (zeros). Plain and permuted caches, 1
 * and 2 batches; F32 caches and a head of 128; GQA 4:1 and 32:1. */
START_TEST(test_flash_attn_decode_one_token_against_written_positions)
{
    static const int64_t written[][2] = {
        { 1, 64 }, { 31, 64 }, { 33, 64 }, { 192, 256 }, { 1000, 1100 }, { 0, 40 }
    }; /* written, capacity */
    const int64_t npos = written[_i][0], nkv = written[_i][1];
    check_case(
        &(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_WRITTEN, 1, nkv, 1, 64, 32, 4, 64, npos, 0 });
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_WRITTEN, 1, nkv, 2, 64, 16, 2, 64,
                                  npos, 0 });
    check_case(
        &(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_WRITTEN, 1, nkv, 1, 128, 8, 1, 128, npos, 0 });
    /* GQA 4:1 (rows short of a register block) and 32:1 (more rows than
     * share one pass over the keys) */
    check_case(
        &(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_WRITTEN, 1, nkv, 1, 64, 8, 2, 64, npos, 0 });
    check_case(
        &(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_WRITTEN, 1, nkv, 1, 64, 32, 1, 64, npos, 0 });
}
END_TEST

/* Prefill shapes under a causal mask (whole key tiles hidden from a query
 * block, partial tiles, tails of the 32-key tile and of the query block)
 * at GQA ratios 1, 4 and 8, F16 K/V as the decoder's cache stores them. */
START_TEST(test_flash_attn_causal_prefill_at_gqa_ratios)
{
    static const int64_t heads[][2] = { { 4, 4 }, { 8, 2 }, { 16, 2 } };
    static const int64_t shapes[][2] = { { 37, 37 }, { 70, 101 }, { 5, 64 } }; /* n_q, n_kv */
    for (int s = 0; s < 3; s++)
        check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_CAUSAL, shapes[s][0],
                                      shapes[s][1], 1, 64, heads[_i][0], heads[_i][1], 0, 0, 0 });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_CAUSAL, 33, 40, 2, 0, heads[_i][0],
                                  heads[_i][1], 0, 0, 0 });
}
END_TEST

/* FLASH_ATTN_SOFTCAP in every path of the kernels: prefill items (causal,
 * GQA 4), a decode step at a Llama head (GQA 8, F16 cache written to 33
 * and 192 positions), F32 and permuted caches, no mask, a fully masked
 * row. Caps 0.5 and 2 saturate the scores (q has amplitude 3, so scores
 * reach about 6); 50, Gemma 2's, barely bends them. */
START_TEST(test_flash_attn_softcap_caps_scores_in_every_path)
{
    static const float caps[] = { 0.5f, 2.0f, 50.0f };
    const float cap = caps[_i];
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_CAUSAL, 37, 37, 1, 64, 16, 4, 0, 0,
                                  cap });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_SOME, 7, 300, 2, 0, 0, 0, 0, 0, cap });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_NONE, 1, 17, 1, 0, 0, 0, 0, 0, cap });
    check_case(&(struct fa_case){ BP_TYPE_BF16, KV_TRANSPOSED, MASK_ROW_EMPTY, 7, 17, 1, 0, 0, 0, 0, 0,
                                  cap });
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_WRITTEN, 1, 64, 1, 64, 32, 4, 64, 33,
                                  cap });
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_WRITTEN, 1, 256, 2, 64, 16, 2, 64,
                                  192, cap });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_WRITTEN, 1, 100, 1, 128, 8, 1, 128, 70,
                                  cap });
}
END_TEST

START_TEST(test_forced_variant_is_the_one_tested)
{
    expect_loaded_variant_is_the_chosen_one();
}
END_TEST

int main(void)
{
    const int gate = variant_gate();
    if (gate) return gate;
    Suite *s = suite_create("cpu_attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_forced_variant_is_the_one_tested);
    tcase_add_loop_test_thinned(tc, test_flash_attn_matches_double_reference_with_f32_kv, 0, 6);
    tcase_add_loop_test_thinned(tc, test_flash_attn_matches_double_reference_with_f16_kv, 0, 6);
    tcase_add_loop_test_thinned(tc, test_flash_attn_gives_zeros_for_fully_masked_rows, 0, 6);
    tcase_add_test(tc, test_flash_attn_reads_permuted_and_transposed_caches);
    tcase_add_loop_test_thinned(tc, test_flash_attn_causal_prefill_at_gqa_ratios, 0, 3);
    tcase_add_test(tc, test_flash_attn_skips_the_unwritten_cache_tail);
    tcase_add_loop_test_thinned(tc, test_flash_attn_decode_one_token_against_written_positions, 0, 6);
    tcase_add_loop_test_thinned(tc, test_flash_attn_softcap_caps_scores_in_every_path, 0, 3);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
