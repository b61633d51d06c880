/*
 * test_cuda_quant.c — the CUDA plugin's readers of quantized weights, built
 * for the host (plugins/cuda/tools/quant_host.cu includes the kernels' own
 * headers), checked without a GPU:
 *   - every quantized weight type of enum bp_type is one MUL_MAT and
 *     GET_ROWS take, with a dot unit that fits its blocks;
 *   - GET_ROWS's and the cuBLAS path's dequantization equals bp_quant_ref.h
 *     bit for bit, on random blocks (every bit pattern of quants, scales,
 *     masks and indices, with finite f16 scales) and on bp_quantize's blocks,
 *     and equals ggml's own floats on tests/data/quant/;
 *   - the matrix-vector kernel's dp4a dot of a row with q8_1 activations
 *     equals the reference's dequantized row times the same activations, to
 *     float rounding (a misplaced bit, scale or min costs a hundred times
 *     the limit).
 * What only a GPU shows (launches, strides, cuBLAS) is `backplane check
 * --device cuda0`, run by scripts/gpu-check.sh.
 */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_quant_ref.h>
#include <backplane/bp_quantize.h>

#include "quant_test_util.h"
#include "suite_main.h"
#include "tools/quant_host.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
}

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static float rng_sym(void) /* [-1, 1) */
{
    return (float)((double)(rng_next() >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* A weight type: quantized, and not Q8_K (activations only). */
static bool is_weight_quant(enum bp_type t)
{
    return bp_type_block_size(t) > 1 && t != BP_TYPE_Q8_K;
}

enum { ROW_MAX = 1024, ROW_BYTES_MAX = ROW_MAX * 2 };

/* n elements of random blocks of q: every byte random, then each f16 scale
 * a finite value of either sign from 2^-12 to 1, or now and then zero. */
static void random_row(const struct quant_layout *q, uint8_t *row, int64_t n)
{
    const size_t bytes = bp_row_size(q->type, n), bs = bp_type_size(q->type);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)(rng_next() >> 56);
    for (size_t b = 0; b < bytes / bs; b++)
        for (int f = 0; f < q->n_f16; f++) {
            const uint64_t r = rng_next();
            const float v = (r & 15) == 0 ? 0.0f : ldexpf(1.0f + rng_sym() * 0.5f, -(int)((r >> 8) % 12));
            const uint16_t h = bp_f32_to_f16((r >> 4) & 1 ? -v : v);
            memcpy(row + b * bs + q->f16_at[f], &h, 2);
        }
}

/* n elements of bp_quantize's blocks of smooth random data. */
static void quantized_row(enum bp_type t, uint8_t *row, int64_t n)
{
    float x[ROW_MAX];
    for (int64_t i = 0; i < n; i++) x[i] = rng_sym() * 2.0f + 0.25f * sinf((float)i);
    ck_assert_uint_eq(bp_quantize(t, x, row, 1, n), bp_row_size(t, n));
}

/* Every element of row through the plugin's reader and the reference, bit
 * for bit; what says where names the row. */
static void assert_dequant_matches(const struct quant_layout *q, const uint8_t *row, int64_t n, const char *what)
{
    float want[ROW_MAX];
    q->ref(row, want, n);
    for (int64_t k = 0; k < n; k++) {
        const float got = cuda_host_dequant(q->type, row, k);
        ck_assert_msg(memcmp(&got, &want[k], sizeof got) == 0,
                      "%s %s: element %lld (block %lld, offset %lld) reads %.9g, the reference %.9g",
                      bp_type_name(q->type), what, (long long)k, (long long)(k / bp_type_block_size(q->type)),
                      (long long)(k % bp_type_block_size(q->type)), got, want[k]);
    }
}

/* x as q8_1 blocks of 32: d = amax / 127, quants rounded to nearest, s
 * their sum (what the plugin's k_quantize_q8_1 makes). */
static void to_q8_1(const float *x, struct cuda_block_q8_1 *b, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * i + j]));
        b[i].d = amax / 127.0f;
        b[i].s = 0;
        for (int j = 0; j < 32; j++) {
            b[i].qs[j] = (int8_t)(amax == 0.0f ? 0 : lrintf(x[32 * i + j] / b[i].d));
            b[i].s += b[i].qs[j];
        }
    }
}

/* The plugin's dot of row with a random activation column against the
 * reference's dequantized row times the same q8_1 values, in double. The
 * limit: 1e-5 of the sum of |x| (|w| + max |w|) — float rounding of the
 * per-unit sums is about 1e-6 of it, a wrong quant, scale or min is of the
 * order of the whole sum. */
static void assert_dot_matches(const struct quant_layout *q, const uint8_t *row, int64_t n, const char *what)
{
    float x[ROW_MAX], w[ROW_MAX];
    struct cuda_block_q8_1 xa[ROW_MAX / 32];
    for (int64_t i = 0; i < n; i++) x[i] = rng_sym();
    to_q8_1(x, xa, n);
    q->ref(row, w, n);
    double want = 0.0, scale = 0.0, wmax = 0.0;
    for (int64_t k = 0; k < n; k++) wmax = fmax(wmax, fabs(w[k]));
    for (int64_t k = 0; k < n; k++) {
        const double a = (double)xa[k / 32].d * xa[k / 32].qs[k % 32];
        want += (double)w[k] * a;
        scale += fabs(a) * (fabs(w[k]) + wmax);
    }
    const double got = cuda_host_dot_row(q->type, row, n, xa);
    ck_assert_msg(fabs(got - want) <= 1e-5 * scale + 1e-30,
                  "%s %s: the dp4a dot is %.9g, the reference's %.9g (difference %.3g, limit %.3g)",
                  bp_type_name(q->type), what, got, want, fabs(got - want), 1e-5 * scale);
}

/* Row lengths: one super-block (or 8 blocks of 32), and several. */
static const int64_t row_lengths[] = {256, 768};

/* ---------------------------------------------------------------- the whitelist */

START_TEST(test_every_quantized_weight_type_is_taken_in_whole_blocks)
{
    for (int t = 0; t < BP_TYPE_COUNT; t++) {
        const int unit = cuda_host_dot_unit_elems(t);
        if (!is_weight_quant((enum bp_type)t)) {
            ck_assert_msg(unit == 0, "%s is not a quantized weight type, yet the dot takes it",
                          bp_type_name((enum bp_type)t));
            continue;
        }
        const int bs = (int)bp_type_block_size((enum bp_type)t);
        ck_assert_msg(unit > 0, "%s is a quantized weight type the CUDA plugin does not take",
                      bp_type_name((enum bp_type)t));
        ck_assert_msg(unit % 32 == 0 && (unit % bs == 0 || bs % unit == 0),
                      "%s: a dot unit of %d elements splits its blocks of %d or its q8_1 blocks of 32",
                      bp_type_name((enum bp_type)t), unit, bs);
        ck_assert_msg(quant_layout_of((enum bp_type)t) != NULL, "%s has no row in quant_test_util.c's table",
                      bp_type_name((enum bp_type)t));
    }
}
END_TEST

/* ---------------------------------------------------------------- dequantization */

START_TEST(test_dequant_of_random_blocks_is_the_reference_to_the_bit)
{
    const struct quant_layout *q = &quant_layouts[_i];
    uint8_t row[ROW_BYTES_MAX];
    rng_seed(1000 + (uint64_t)_i);
    for (int trial = 0; trial < 40; trial++) {
        const int64_t n = row_lengths[trial % 2];
        random_row(q, row, n);
        char what[48];
        snprintf(what, sizeof what, "random row %d", trial);
        assert_dequant_matches(q, row, n, what);
    }
}
END_TEST

START_TEST(test_dequant_of_quantized_rows_is_the_reference_to_the_bit)
{
    const struct quant_layout *q = &quant_layouts[_i];
    uint8_t row[ROW_BYTES_MAX];
    rng_seed(2000 + (uint64_t)_i);
    for (int trial = 0; trial < 10; trial++) {
        const int64_t n = row_lengths[trial % 2];
        quantized_row(q->type, row, n);
        char what[48];
        snprintf(what, sizeof what, "bp_quantize row %d", trial);
        assert_dequant_matches(q, row, n, what);
    }
}
END_TEST

/* tests/data/quant/ggml-<type>.txt: "case NAME ROWS N", then "q" lines of
 * hex bytes (ggml's quantizer) and "y" lines of f32 bit patterns (ggml's
 * dequantizer of those bytes). Each case's floats must be the plugin's. */
static void check_ggml_case(enum bp_type t, const char *name, const uint8_t *q, size_t nq, const float *y,
                            size_t ny)
{
    ck_assert_uint_eq(nq, bp_row_size(t, (int64_t)ny));
    for (size_t k = 0; k < ny; k++) {
        const float got = cuda_host_dequant(t, q, (int64_t)k);
        ck_assert_msg(memcmp(&got, &y[k], sizeof got) == 0, "%s case '%s': element %zu reads %.9g, ggml's %.9g",
                      bp_type_name(t), name, k, got, y[k]);
    }
}

START_TEST(test_dequant_gives_ggml_floats_on_its_vectors)
{
    static const enum bp_type with_vectors[] = {BP_TYPE_Q4_1, BP_TYPE_Q5_0, BP_TYPE_Q5_1,   BP_TYPE_Q2_K,
                                                BP_TYPE_Q3_K, BP_TYPE_Q5_K, BP_TYPE_IQ4_NL, BP_TYPE_IQ4_XS};
    const enum bp_type t = with_vectors[_i];
    char path[1024], line[1024], name[32] = "";
    snprintf(path, sizeof path, "%s/tests/data/quant/ggml-%s.txt", BP_TEST_SOURCE_DIR, bp_type_name(t));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static uint8_t q[4 * ROW_MAX];
    static float y[4 * ROW_MAX];
    size_t nq = 0, ny = 0;
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "case ", 5)) {
            if (name[0]) {
                check_ggml_case(t, name, q, nq, y, ny);
                cases++;
            }
            ck_assert_int_eq(sscanf(line + 5, "%31s", name), 1);
            nq = ny = 0;
        } else if (line[0] == 'q' && line[1] == ' ') {
            unsigned v;
            int used;
            for (const char *p = line + 2; sscanf(p, "%2x%n", &v, &used) == 1; p += used) {
                ck_assert_uint_lt(nq, sizeof q);
                q[nq++] = (uint8_t)v;
            }
        } else if (line[0] == 'y' && line[1] == ' ') {
            char *p = line + 2, *end;
            for (unsigned long u = strtoul(p, &end, 16); end != p; u = strtoul(p, &end, 16)) {
                ck_assert_uint_lt(ny, sizeof y / sizeof y[0]);
                const uint32_t bits = (uint32_t)u;
                memcpy(&y[ny++], &bits, 4);
                p = end;
            }
        }
    }
    fclose(f);
    if (name[0]) {
        check_ggml_case(t, name, q, nq, y, ny);
        cases++;
    }
    ck_assert_int_ge(cases, 8);
}
END_TEST

/* ---------------------------------------------------------------- the dp4a dot */

START_TEST(test_dot_of_random_blocks_matches_the_dequantized_dot)
{
    const struct quant_layout *q = &quant_layouts[_i];
    uint8_t row[ROW_BYTES_MAX];
    rng_seed(3000 + (uint64_t)_i);
    for (int trial = 0; trial < 60; trial++) {
        const int64_t n = row_lengths[trial % 2];
        random_row(q, row, n);
        char what[48];
        snprintf(what, sizeof what, "random row %d", trial);
        assert_dot_matches(q, row, n, what);
    }
}
END_TEST

START_TEST(test_dot_of_quantized_rows_matches_the_dequantized_dot)
{
    const struct quant_layout *q = &quant_layouts[_i];
    uint8_t row[ROW_BYTES_MAX];
    rng_seed(4000 + (uint64_t)_i);
    for (int trial = 0; trial < 20; trial++) {
        const int64_t n = row_lengths[trial % 2];
        quantized_row(q->type, row, n);
        char what[48];
        snprintf(what, sizeof what, "bp_quantize row %d", trial);
        assert_dot_matches(q, row, n, what);
    }
}
END_TEST

static Suite *cuda_quant_suite(void)
{
    Suite *s = suite_create("cuda_quant");
    TCase *tc = tcase_create("types");
    tcase_add_test(tc, test_every_quantized_weight_type_is_taken_in_whole_blocks);
    suite_add_tcase(s, tc);
    tc = tcase_create("dequant");
    tcase_add_loop_test(tc, test_dequant_of_random_blocks_is_the_reference_to_the_bit, 0, n_quant_layouts);
    tcase_add_loop_test(tc, test_dequant_of_quantized_rows_is_the_reference_to_the_bit, 0, n_quant_layouts);
    tcase_add_loop_test(tc, test_dequant_gives_ggml_floats_on_its_vectors, 0, 8);
    suite_add_tcase(s, tc);
    tc = tcase_create("dot");
    tcase_add_loop_test(tc, test_dot_of_random_blocks_matches_the_dequantized_dot, 0, n_quant_layouts);
    tcase_add_loop_test(tc, test_dot_of_quantized_rows_matches_the_dequantized_dot, 0, n_quant_layouts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(cuda_quant_suite());
}
