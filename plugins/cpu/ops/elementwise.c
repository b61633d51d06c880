/*
 * elementwise.c — ADD and MUL (b repeats over a), SCALE, SILU, GELU, SQR,
 * TANH.
 *
 * Each thread takes a share of the output rows; sources are read through
 * their byte strides, so permuted and transposed views need no copy.
 * Arithmetic is done in double and rounded once on store.
 *
 * Dense F32 rows (the decoder's residual adds and norm-weight products)
 * take a loop without the per-element type switch and modulo: for ADD and
 * MUL of two floats, the double result rounded to float is the correctly
 * rounded float result, so that loop gives the same bits. SILU there runs
 * in float in the SIMD variants, a vector at a time with vec_exp.h's
 * polynomial exp (libm's expf one lane at a time was most of SILU's time in
 * a prefill); the scalar variant stays the double reference.
 *
 * GELU is computed as ggml's CPU backend computes it, not as the exact tanh
 * formula: between -10 and 10, x is rounded to F16 and looked up in a table
 * of F16 results, 0.5 h (1 + tanh(0.79788456 h (1 + 0.044715 h^2))) worked
 * out in float for every F16 value h; x <= -10 gives 0 and x >= 10 gives x.
 * The table's F16 rounding moves a result by up to 2^-11 of itself, and
 * llama.cpp's Gemma logits carry that rounding: computing the exact formula
 * put them 14 times further from llama.cpp's than the table does. Every
 * variant reads the same table, so they agree bit for bit.
 */
#include <math.h>
#include <pthread.h>

#include "../ops.h"
#include "vec_exp.h"

bool cpu_supports_binary(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type) && cpu_is_float(t->src[1]->type);
}

static bool dense_f32(const struct bp_tensor *t)
{
    return t->type == BP_TYPE_F32 && t->nb[0] == sizeof(float);
}

static void add_row(float *restrict d, const float *restrict a, const float *restrict b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

static void mul_row(float *restrict d, const float *restrict a, const float *restrict b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = a[i] * b[i];
}

enum binary_kind { BINARY_ADD, BINARY_MUL, BINARY_DIV };

/* In place (d == a) is allowed: each element is read before it is written. */
static void binary_row(float *d, const float *a, const float *b, int64_t n, enum binary_kind kind)
{
    if (kind == BINARY_DIV) {
        for (int64_t i = 0; i < n; i++) d[i] = a[i] / b[i];
    } else if (d == a || d == b) {
        for (int64_t i = 0; i < n; i++) d[i] = kind == BINARY_MUL ? a[i] * b[i] : a[i] + b[i];
    } else if (kind == BINARY_MUL) {
        mul_row(d, a, b, n);
    } else {
        add_row(d, a, b, n);
    }
}

/* The double result rounded to float is the correctly rounded float one
 * for +, * and / alike (53 >= 2 * 24 + 2 bits). */
static double binary_op(double x, double y, enum binary_kind kind)
{
    return kind == BINARY_MUL ? x * y : kind == BINARY_DIV ? x / y : x + y;
}

/* One float of b against a whole row (a mixture's expert weights over the
 * expert outputs): float arithmetic gives binary_op's bits, see above. */
static void scalar_row(float *d, const float *a, const float y, int64_t n, enum binary_kind kind)
{
    if (kind == BINARY_MUL) {
        for (int64_t i = 0; i < n; i++) d[i] = a[i] * y;
    } else if (kind == BINARY_DIV) {
        for (int64_t i = 0; i < n; i++) d[i] = a[i] / y;
    } else {
        for (int64_t i = 0; i < n; i++) d[i] = a[i] + y;
    }
}

static void binary(const struct cpu_compute_params *p, struct bp_tensor *t, enum binary_kind is_mul)
{
    const struct bp_tensor *a = t->src[0], *b = t->src[1];
    const bool dense_ab = dense_f32(t) && dense_f32(a) && dense_f32(b);
    const bool dense = dense_ab && b->ne[0] == a->ne[0];
    const bool scalar = dense_ab && b->ne[0] == 1;
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *ar = cpu_at(a, 0, i1, i2, i3);
        const char *br = cpu_at(b, 0, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        char *dr = cpu_at(t, 0, i1, i2, i3);
        if (dense) {
            binary_row((float *)(void *)dr, (const float *)(const void *)ar,
                       (const float *)(const void *)br, t->ne[0], is_mul);
            continue;
        }
        if (scalar) {
            scalar_row((float *)(void *)dr, (const float *)(const void *)ar,
                       *(const float *)(const void *)br, t->ne[0], is_mul);
            continue;
        }
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
            double x = cpu_load(ar + (size_t)i0 * a->nb[0], a->type);
            double y = cpu_load(br + (size_t)(i0 % b->ne[0]) * b->nb[0], b->type);
            cpu_store(dr + (size_t)i0 * t->nb[0], t->type, (float)binary_op(x, y, is_mul));
        }
    }
}

void cpu_compute_add(const struct cpu_compute_params *p, struct bp_tensor *t) { binary(p, t, BINARY_ADD); }
void cpu_compute_mul(const struct cpu_compute_params *p, struct bp_tensor *t) { binary(p, t, BINARY_MUL); }
void cpu_compute_div(const struct cpu_compute_params *p, struct bp_tensor *t) { binary(p, t, BINARY_DIV); }

bool cpu_supports_unary(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type);
}

enum unary_kind { UNARY_SCALE, UNARY_SILU, UNARY_GELU, UNARY_SQR, UNARY_TANH, UNARY_CLAMP };

/* ---- GELU as ggml-cpu computes it ---- */

/* F16 bits of GELU of each F16 value (bits as index): 128 KiB, filled once
 * per process by the first GELU node. */
static uint16_t gelu_f16_table[1 << 16];
static pthread_once_t gelu_f16_once = PTHREAD_ONCE_INIT;

/* Each step in float, rounded as written: the plugin builds as ISO C11, in
 * which GCC does not fuse a multiply and an add, so every variant (FMA or
 * not) fills the same table. */
static void gelu_f16_fill(void)
{
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float h = bp_f16_to_f32((uint16_t)i);
        const float inner = 0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h);
        gelu_f16_table[i] = bp_f32_to_f16(0.5f * h * (1.0f + tanhf(inner)));
    }
}

static inline float gelu_f16_lookup(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return bp_f16_to_f32(gelu_f16_table[bp_f32_to_f16(x)]);
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)) || \
    (defined(__aarch64__) && defined(__ARM_NEON))
#define SILU_VECTOR 1
#if defined(__AVX512F__)
#define SILU_W 16
static inline void silu_vec(float *d, const float *x)
{
    const __m512 v = _mm512_loadu_ps(x);
    const __m512 e = cpu_exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(d, _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
}
#elif defined(__AVX2__)
#define SILU_W 8
static inline void silu_vec(float *d, const float *x)
{
    const __m256 v = _mm256_loadu_ps(x);
    const __m256 e = cpu_exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(d, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
}
#else
#define SILU_W 4
static inline void silu_vec(float *d, const float *x)
{
    const float32x4_t v = vld1q_f32(x);
    vst1q_f32(d, vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), cpu_exp_neon(vnegq_f32(v)))));
}
#endif

/* x / (1 + exp(-x)) of a dense row; the tail goes through the same vector
 * code in a padded copy, so every element gets the same arithmetic. */
static void silu_row(float *d, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + SILU_W <= n; i += SILU_W) silu_vec(d + i, x + i);
    if (i < n) {
        float in[SILU_W] = { 0 }, out[SILU_W];
        memcpy(in, x + i, (size_t)(n - i) * sizeof(float));
        silu_vec(out, in);
        memcpy(d + i, out, (size_t)(n - i) * sizeof(float));
    }
}
#endif

static void unary(const struct cpu_compute_params *p, struct bp_tensor *t, enum unary_kind kind)
{
    const struct bp_tensor *x = t->src[0];
    const double s = bp_op_param_f32(t, 0), bias = bp_op_param_f32(t, 1);
    if (kind == UNARY_GELU)
        pthread_once(&gelu_f16_once, gelu_f16_fill);
    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(t, r, &i1, &i2, &i3);
        const char *xr = cpu_at(x, 0, i1, i2, i3);
        char *dr = cpu_at(t, 0, i1, i2, i3);
#ifdef SILU_VECTOR
        if (kind == UNARY_SILU && dense_f32(t) && dense_f32(x)) {
            silu_row((float *)(void *)dr, (const float *)(const void *)xr, t->ne[0]);
            continue;
        }
#endif
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
            double v = cpu_load(xr + (size_t)i0 * x->nb[0], x->type), y;
            switch (kind) {
            case UNARY_SCALE: y = v * s + bias; break;
            case UNARY_SILU: y = v / (1.0 + exp(-v)); break;
            case UNARY_SQR: y = v * v; break;
            case UNARY_TANH: y = tanh(v); break;
            case UNARY_CLAMP: y = v < s ? s : v > bias ? bias : v; break; /* lo, hi */
            default: y = gelu_f16_lookup((float)v); break;
            }
            cpu_store(dr + (size_t)i0 * t->nb[0], t->type, (float)y);
        }
    }
}

void cpu_compute_scale(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_SCALE); }
void cpu_compute_silu(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_SILU); }
void cpu_compute_gelu(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_GELU); }
void cpu_compute_sqr(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_SQR); }
void cpu_compute_tanh(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_TANH); }
void cpu_compute_clamp(const struct cpu_compute_params *p, struct bp_tensor *t) { unary(p, t, UNARY_CLAMP); }
