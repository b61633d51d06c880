/*
 * test_cpu_attention.c — FLASH_ATTN_EXT of the cpu variant being tested
 * (BACKPLANE_CPU_VARIANT; a variant this machine cannot run exits 77,
 * "skipped") against a double-precision softmax(q.k^T * scale + mask) . v
 * computed here, at shapes like a decoder's: GQA (H = 8, H_kv = 2), one and
 * seven query rows, 1 / 17 / 300 keys, D != Dv and neither a multiple of
 * the vector width (and Dv = 64, which the SIMD kernels hold in registers), F32 / F16 / BF16 K and V, caches viewed through a
 * permute (heads inner) or a transpose (strided rows), masks with -INFINITY
 * and finite entries, fully masked rows. The SIMD variants accumulate in
 * float, so the bound is 1e-5 of the output's scale; fully masked rows
 * must be exact zeros, and 1 and 3 threads must agree bit for bit.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_util.h"

enum kv_layout { KV_PLAIN, KV_PERMUTED, KV_TRANSPOSED };
enum mask_kind { MASK_NONE, MASK_SOME, MASK_ROW_EMPTY };

struct fa_case {
    enum bp_type tkv;
    enum kv_layout layout;
    enum mask_kind mask;
    int64_t nq, nkv, B;
    int64_t dv;     /* 0: DV_DEFAULT; 64 takes the SIMD kernel's register-held head */
};

enum { H = 8, HKV = 2, D = 68, DV_DEFAULT = 76 };

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
    if (c->mask == MASK_ROW_EMPTY && i == (c->nq > 1 ? 1 : 0))
        return -INFINITY;
    if (j == c->nkv - 1)
        return 0.0;
    return r < -0.5 ? -INFINITY : r;
}

static bool row_empty(const struct fa_case *c, int64_t iq)
{
    return c->mask == MASK_ROW_EMPTY && iq == (c->nq > 1 ? 1 : 0);
}

static void check_case(const struct fa_case *c)
{
    char what[160];
    snprintf(what, sizeof what, "%s kv, layout %d, mask %d, n_q %lld, n_kv %lld, B %lld",
             bp_type_name(c->tkv), (int)c->layout, (int)c->mask, (long long)c->nq,
             (long long)c->nkv, (long long)c->B);
    const int64_t nq = c->nq, nkv = c->nkv, B = c->B, DV = c->dv ? c->dv : DV_DEFAULT;
    struct fx f;
    fx_init(&f);
    const float scale = 1.0f / sqrtf((float)D);
    struct bp_tensor *q = bp_tensor_new_4d(f.ctx, BP_TYPE_F32, D, nq, H, B);
    struct bp_tensor *kb = kv_base(f.ctx, c->tkv, c->layout, D, nkv, B);
    struct bp_tensor *vb = kv_base(f.ctx, c->tkv, c->layout, DV, nkv, B);
    struct bp_tensor *m =
        c->mask != MASK_NONE ? bp_tensor_new_2d(f.ctx, BP_TYPE_F16, nkv, nq + 2) : NULL;
    struct bp_tensor *y = bp_flash_attn_ext(f.ctx, q, kv_view(f.ctx, c->layout, kb),
                                            kv_view(f.ctx, c->layout, vb), m, scale);
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
    ck_assert_int_eq(bp_backend_set_n_threads(f.be, 3), BP_OK);
    /* garbage in y first, so the second run has to write every element */
    const size_t ybytes = bp_nbytes(y);
    unsigned char *junk = malloc(ybytes);
    memset(junk, 0x7f, ybytes);
    ck_assert_int_eq(bp_tensor_set(y, junk, 0, ybytes), BP_OK);
    free(junk);
    ck_assert_msg(fx_compute(&f, y) == BP_OK, "%s: %s", what, bp_last_error());
    double *got3 = fetch(y);

    const int64_t n = DV * H * nq * B;
    double *want = calloc((size_t)n, sizeof *want), *s = malloc((size_t)nkv * sizeof *s);
    double out_scale = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t iq = 0; iq < nq; iq++) {
                const int64_t kh = h / (H / HKV);
                double mx = -INFINITY;
                for (int64_t j = 0; j < nkv; j++) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dot += qv[d + D * (iq + nq * (h + H * b))] *
                               kv[kv_index(c->layout, D, d, j, kh, b, nkv)];
                    s[j] = dot * (double)scale + (mv ? mv[j + nkv * iq] : 0.0);
                    if (s[j] > mx) mx = s[j];
                }
                double *out = want + DV * (h + H * (iq + nq * b));
                if (mx == -INFINITY)
                    continue;
                double sum = 0.0;
                for (int64_t j = 0; j < nkv; j++) sum += exp(s[j] - mx);
                for (int64_t d = 0; d < DV; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < nkv; j++)
                        acc += exp(s[j] - mx) / sum * vv[kv_index(c->layout, DV, d, j, kh, b, nkv)];
                    out[d] = acc;
                    if (fabs(acc) > out_scale) out_scale = fabs(acc);
                }
            }

    const double tol = 1e-5 * out_scale;
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
        printf("%s: max error %.3g of scale %.3g\n", what, worst, out_scale);
    free(qv); free(kv); free(vv); free(mv); free(got1); free(got3); free(want); free(s);
    fx_free(&f);
}

static const int64_t kv_lengths[] = { 1, 17, 300 };

/* _i: kv length x {n_q = 1, n_q = 7} */
START_TEST(test_flash_attn_matches_double_reference_with_f32_kv)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    for (int mask = MASK_NONE; mask <= MASK_SOME; mask++)
        check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, (enum mask_kind)mask, nq, nkv, 2, 0 });
}
END_TEST

START_TEST(test_flash_attn_matches_double_reference_with_f16_kv)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    for (int mask = MASK_NONE; mask <= MASK_SOME; mask++)
        check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, (enum mask_kind)mask, nq, nkv, 2, 0 });
}
END_TEST

START_TEST(test_flash_attn_gives_zeros_for_fully_masked_rows)
{
    const int64_t nkv = kv_lengths[_i % 3], nq = _i < 3 ? 1 : 7;
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_ROW_EMPTY, nq, nkv, 1, 0 });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PLAIN, MASK_ROW_EMPTY, nq, nkv, 2, 0 });
}
END_TEST

START_TEST(test_flash_attn_reads_permuted_and_transposed_caches)
{
    const enum bp_type types[] = { BP_TYPE_F32, BP_TYPE_F16, BP_TYPE_BF16 };
    for (int t = 0; t < 3; t++) {
        check_case(&(struct fa_case){ types[t], KV_PERMUTED, MASK_SOME, 7, 17, 2, 0 });
        check_case(&(struct fa_case){ types[t], KV_TRANSPOSED, MASK_SOME, 1, 17, 1, 0 });
    }
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PERMUTED, MASK_SOME, 1, 300, 1, 0 });
    /* Dv = 64, a Llama head: the value rows accumulated in registers. */
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_PERMUTED, MASK_SOME, 7, 300, 1, 64 });
    check_case(&(struct fa_case){ BP_TYPE_F16, KV_PLAIN, MASK_SOME, 7, 17, 2, 64 });
    check_case(&(struct fa_case){ BP_TYPE_F32, KV_TRANSPOSED, MASK_SOME, 1, 17, 1, 64 });
}
END_TEST

/* What the variant's own score entry says about this machine. */
static int variant_score(const char *variant)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libbackplane-cpu-%s.so", BP_TEST_PLUGIN_DIR, variant);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    bp_plugin_score_fn score;
    void *p = dlsym(h, BP_PLUGIN_SCORE_SYMBOL);
    memcpy(&score, &p, sizeof p);
    int s = score ? score() : -2;
    dlclose(h);
    return s;
}

START_TEST(test_forced_variant_is_the_one_tested)
{
    const char *want = getenv("BP_TEST_EXPECT_VARIANT");
    if (!want) return;
    ck_assert_ptr_nonnull(cpu_device()->reg->variant);
    ck_assert_str_eq(cpu_device()->reg->variant, want);
}
END_TEST

int main(void)
{
    const char *want = getenv("BP_TEST_EXPECT_VARIANT");
    if (want && variant_score(want) <= 0) {
        printf("SKIP: the %s variant cannot run on this machine (its score entry says 0).\n", want);
        return 77;
    }
    Suite *s = suite_create("cpu_attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_forced_variant_is_the_one_tested);
    tcase_add_loop_test(tc, test_flash_attn_matches_double_reference_with_f32_kv, 0, 6);
    tcase_add_loop_test(tc, test_flash_attn_matches_double_reference_with_f16_kv, 0, 6);
    tcase_add_loop_test(tc, test_flash_attn_gives_zeros_for_fully_masked_rows, 0, 6);
    tcase_add_test(tc, test_flash_attn_reads_permuted_and_transposed_caches);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
