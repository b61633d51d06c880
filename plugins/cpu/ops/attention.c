/*
 * attention.c — FLASH_ATTN_EXT: out = softmax(scale * q.k^T + mask) . v with
 * grouped-query heads (head h reads kv head h / (H / H_kv)). Output is
 * [Dv, H, n_q, B]: heads before tokens. A query row whose every key is
 * masked gets zeros, as SOFT_MAX does. FLASH_ATTN_SOFTCAP is the same op
 * with each score capped, c tanh(scale q.k / c), before the mask is added;
 * both kernels take it at the one place they turn a dot product into a
 * score, so every path (prefill tiles, decode rows) applies it.
 *
 * Two kernels, chosen by the build's ISA flags:
 *  - the scalar variant keeps the reference: two passes in double (scores of
 *    one query row in this thread's scratch, the exact maximum subtracted
 *    once). Every device is checked against it, so it trades speed for
 *    being obviously right.
 *  - the SIMD variants (AVX2, AVX-512, NEON) are a flash-attention kernel.
 *    A work item is one KV head and a block of query tokens, and its rows
 *    are every query head of those tokens that reads that KV head (GQA:
 *    8 heads x 4 tokens in a Llama 1B), so each 32-key tile of K and V is
 *    widened to float once (K transposed) and serves all of them. q.k^T and
 *    p.v are small GEMMs on register tiles (FA_RB rows x FA_CV vectors of
 *    accumulators); between them an online softmax in float with a
 *    polynomial exp (vec_exp.h) turns the tile's scores into weights and
 *    rescales each row's output once per tile. A tile that the mask hides
 *    from every row of the item (the future, under a causal mask; the
 *    unused tail of the decoder's cache) is skipped before it is read, and
 *    so are the keys of a tile past the last one some row sees.
 *    An item of one query token (decode: 8 rows, a few hundred keys)
 *    scores its keys in the same tiles (on AVX-512 with its rows across
 *    the lanes instead of K transposed, fa_lane_qk) but keeps every score
 *    (FA_DR rows x the visible keys fit in scratch), takes each row's
 *    softmax whole, without the running maximum, and sums p.v straight off
 *    the F16 or F32 V rows (fa_dec_item): with so few rows the per-tile
 *    work cost more than the arithmetic.
 *
 * Either way each output row is computed whole by one thread, in an order
 * fixed by the shapes alone, so results do not depend on the thread count.
 */
#include <math.h>

#include "../ops.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FA_X86 1
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define FA_NEON 1
#include <arm_neon.h>
#endif
#if defined(FA_X86) || defined(FA_NEON)
#define FA_FAST 1
#endif

bool cpu_supports_flash_attn(const struct bp_tensor *t)
{
    return cpu_is_float(t->src[0]->type) && cpu_is_float(t->src[1]->type) &&
           cpu_is_float(t->src[2]->type);
}

/* The cap c of a FLASH_ATTN_SOFTCAP node; 0 (no cap) for FLASH_ATTN_EXT. */
static float fa_softcap(const struct bp_tensor *t)
{
    return t->op == BP_OP_FLASH_ATTN_SOFTCAP ? bp_op_param_f32(t, 1) : 0.0f;
}

#ifndef FA_FAST

/* ---- the reference (scalar variant) ---- */

size_t cpu_scratch_flash_attn(const struct bp_tensor *t)
{
    return (size_t)(t->src[1]->ne[1] + t->src[2]->ne[0]) * sizeof(double);
}

void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const double scale = bp_op_param_f32(t, 0), cap = fa_softcap(t);
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t group = q->ne[2] / k->ne[2];
    double *score = p->wdata;
    double *acc = score + n_kv;

    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t h, iq, b;
        cpu_row_index(t, r, &h, &iq, &b);
        const int64_t kh = h / group;
        const char *qr = cpu_at(q, 0, iq, h, b);
        const char *mr = m ? cpu_at(m, 0, iq, h % m->ne[2], b % m->ne[3]) : NULL;
        char *dr = cpu_at(t, 0, h, iq, b);

        double mx = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            const char *kr = cpu_at(k, 0, j, kh, b);
            double s = 0.0;
            for (int64_t d = 0; d < D; d++)
                s += (double)cpu_load(qr + (size_t)d * q->nb[0], q->type) *
                     (double)cpu_load(kr + (size_t)d * k->nb[0], k->type);
            s *= scale;
            if (cap > 0.0)
                s = cap * tanh(s / cap);
            if (mr)
                s += cpu_load(mr + (size_t)j * m->nb[0], m->type);
            score[j] = s;
            if (s > mx) mx = s;
        }
        for (int64_t d = 0; d < Dv; d++)
            acc[d] = 0.0;
        if (mx != -INFINITY) {
            double sum = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                const double w = exp(score[j] - mx);
                const char *vr = cpu_at(v, 0, j, kh, b);
                sum += w;
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] += w * (double)cpu_load(vr + (size_t)d * v->nb[0], v->type);
            }
            for (int64_t d = 0; d < Dv; d++)
                acc[d] /= sum;
        }
        for (int64_t d = 0; d < Dv; d++) {
            float o = (float)acc[d];
            memcpy(dr + (size_t)d * t->nb[0], &o, 4);
        }
    }
}

#else /* FA_FAST */

#include "vec_exp.h"

/* ---- one vector type per ISA and the operations the tiles need ---- */

/* FA_RB: query rows of a register tile; with FA_CV vectors per row the
 * tile holds FA_RB * FA_CV accumulators (16 of 32 zmm or NEON registers,
 * 8 of 16 ymm), leaving room for the operands. */
#if defined(FA_X86) && defined(__AVX512F__)
#define FA_W 16
#define FA_RB 8
typedef __m512 fa_vec;
static inline fa_vec fa_zero(void) { return _mm512_setzero_ps(); }
static inline fa_vec fa_splat(float x) { return _mm512_set1_ps(x); }
static inline fa_vec fa_load(const float *p) { return _mm512_loadu_ps(p); }
static inline fa_vec fa_load_h(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline void fa_store(float *p, fa_vec v) { _mm512_storeu_ps(p, v); }
static inline fa_vec fa_fma(fa_vec a, fa_vec b, fa_vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline fa_vec fa_mul(fa_vec a, fa_vec b) { return _mm512_mul_ps(a, b); }
static inline fa_vec fa_add(fa_vec a, fa_vec b) { return _mm512_add_ps(a, b); }
static inline fa_vec fa_sub(fa_vec a, fa_vec b) { return _mm512_sub_ps(a, b); }
static inline fa_vec fa_max(fa_vec a, fa_vec b) { return _mm512_max_ps(a, b); }
static inline fa_vec fa_div(fa_vec a, fa_vec b) { return _mm512_div_ps(a, b); }
static inline fa_vec fa_abs(fa_vec v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}
/* |mag| with the sign of s (mag has none). */
static inline fa_vec fa_copysign(fa_vec mag, fa_vec s)
{
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
}
/* x < thr ? a : b, lane by lane. */
static inline fa_vec fa_select_lt(fa_vec x, fa_vec thr, fa_vec a, fa_vec b)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, thr, _CMP_LT_OQ), b, a);
}
static inline float fa_reduce_add(fa_vec v) { return _mm512_reduce_add_ps(v); }
static inline float fa_reduce_max(fa_vec v) { return _mm512_reduce_max_ps(v); }
static inline fa_vec fa_exp(fa_vec v) { return cpu_exp_avx512(v); }
static inline bool fa_any_visible(fa_vec v)
{
    return _mm512_cmp_ps_mask(v, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ) != 0;
}
#elif defined(FA_X86)
#define FA_W 8
#define FA_RB 4
typedef __m256 fa_vec;
static inline fa_vec fa_zero(void) { return _mm256_setzero_ps(); }
static inline fa_vec fa_splat(float x) { return _mm256_set1_ps(x); }
static inline fa_vec fa_load(const float *p) { return _mm256_loadu_ps(p); }
static inline fa_vec fa_load_h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
static inline void fa_store(float *p, fa_vec v) { _mm256_storeu_ps(p, v); }
static inline fa_vec fa_fma(fa_vec a, fa_vec b, fa_vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline fa_vec fa_mul(fa_vec a, fa_vec b) { return _mm256_mul_ps(a, b); }
static inline fa_vec fa_add(fa_vec a, fa_vec b) { return _mm256_add_ps(a, b); }
static inline fa_vec fa_sub(fa_vec a, fa_vec b) { return _mm256_sub_ps(a, b); }
static inline fa_vec fa_max(fa_vec a, fa_vec b) { return _mm256_max_ps(a, b); }
static inline fa_vec fa_div(fa_vec a, fa_vec b) { return _mm256_div_ps(a, b); }
static inline fa_vec fa_abs(fa_vec v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
static inline fa_vec fa_copysign(fa_vec mag, fa_vec s)
{
    return _mm256_or_ps(mag, _mm256_and_ps(s, _mm256_set1_ps(-0.0f)));
}
static inline fa_vec fa_select_lt(fa_vec x, fa_vec thr, fa_vec a, fa_vec b)
{
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, thr, _CMP_LT_OQ));
}
static inline float fa_reduce_add(fa_vec v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float fa_reduce_max(fa_vec v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline fa_vec fa_exp(fa_vec v) { return cpu_exp_avx2(v); }
static inline bool fa_any_visible(fa_vec v)
{
    return _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ)) != 0;
}
#else /* FA_NEON */
#define FA_W 4
#define FA_RB 8
typedef float32x4_t fa_vec;
static inline fa_vec fa_zero(void) { return vdupq_n_f32(0.0f); }
static inline fa_vec fa_splat(float x) { return vdupq_n_f32(x); }
static inline fa_vec fa_load(const float *p) { return vld1q_f32(p); }
static inline fa_vec fa_load_h(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
static inline void fa_store(float *p, fa_vec v) { vst1q_f32(p, v); }
static inline fa_vec fa_fma(fa_vec a, fa_vec b, fa_vec c) { return vfmaq_f32(c, a, b); }
static inline fa_vec fa_mul(fa_vec a, fa_vec b) { return vmulq_f32(a, b); }
static inline fa_vec fa_add(fa_vec a, fa_vec b) { return vaddq_f32(a, b); }
static inline fa_vec fa_sub(fa_vec a, fa_vec b) { return vsubq_f32(a, b); }
static inline fa_vec fa_max(fa_vec a, fa_vec b) { return vmaxq_f32(a, b); }
static inline fa_vec fa_div(fa_vec a, fa_vec b) { return vdivq_f32(a, b); }
static inline fa_vec fa_abs(fa_vec v) { return vabsq_f32(v); }
static inline fa_vec fa_copysign(fa_vec mag, fa_vec s)
{
    return vbslq_f32(vdupq_n_u32(0x80000000u), s, mag);
}
static inline fa_vec fa_select_lt(fa_vec x, fa_vec thr, fa_vec a, fa_vec b)
{
    return vbslq_f32(vcltq_f32(x, thr), a, b);
}
static inline float fa_reduce_add(fa_vec v) { return vaddvq_f32(v); }
static inline float fa_reduce_max(fa_vec v) { return vmaxvq_f32(v); }
static inline fa_vec fa_exp(fa_vec v) { return cpu_exp_neon(v); }
static inline bool fa_any_visible(fa_vec v)
{
    return vminvq_u32(vceqq_f32(v, vdupq_n_f32(-INFINITY))) == 0;
}
#endif

/* tanh to a few ulps of itself, not of 1: the cap multiplies it back up
 * (Gemma 2's c = 50), and a score's error should stay near its own float
 * rounding. Below |x| = 0.625, x + x^3 P(x^2), P a degree-4 fit of
 * (tanh x - x) / x^3 weighted for relative error (about 1.3 ulps in float);
 * above, (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.29, which cancels
 * nothing (exp's flush to 0 below its range gives exactly 1), and the sign
 * of x. */
#define FA_TANH_P4 (-5.691985663e-03f)
#define FA_TANH_P3 2.062629182e-02f
#define FA_TANH_P2 (-5.373531885e-02f)
#define FA_TANH_P1 1.333138135e-01f
#define FA_TANH_P0 (-3.333327921e-01f)
static inline fa_vec fa_tanh(fa_vec x)
{
    const fa_vec one = fa_splat(1.0f), ax = fa_abs(x);
    const fa_vec s = fa_mul(x, x);
    fa_vec p = fa_fma(fa_splat(FA_TANH_P4), s, fa_splat(FA_TANH_P3));
    p = fa_fma(p, s, fa_splat(FA_TANH_P2));
    p = fa_fma(p, s, fa_splat(FA_TANH_P1));
    p = fa_fma(p, s, fa_splat(FA_TANH_P0));
    const fa_vec small = fa_fma(fa_mul(x, s), p, x);
    const fa_vec e = fa_exp(fa_sub(fa_zero(), fa_add(ax, ax)));
    const fa_vec large = fa_copysign(fa_div(fa_sub(one, e), fa_add(one, e)), x);
    return fa_select_lt(ax, fa_splat(0.625f), small, large);
}

/* Scores s (dot products) plus the mask: scale s + mask, or with a cap c > 0
 * c tanh((scale / c) s) + mask. */
static inline fa_vec fa_score(fa_vec s, fa_vec mask, float scale, float cap)
{
    if (cap > 0.0f)
        return fa_fma(fa_tanh(fa_mul(s, fa_splat(scale / cap))), fa_splat(cap), mask);
    return fa_fma(s, fa_splat(scale), mask);
}

/* Keys per tile; FA_CV vectors per register-tile row (of keys in q.k^T, of
 * value columns in p.v). */
#define FA_KB 32
#define FA_CV 2
#define FA_CW (FA_CV * FA_W)
#define FA_KV (FA_KB / FA_W)
/* Query rows (heads x tokens) a work item aims for: each K/V tile is
 * converted to float once for all of them. 64 rows (q, k, k^T, v, scores,
 * output: ~64 KiB at D = 64, in L1 and L2) ran ~8% faster than 32 at a
 * 128-token prefill. */
#define FA_ROWS 64
/* Query rows of a one-token item that share one pass over the keys (the
 * group's heads, this many at a time); their scores are kept for every key. */
#define FA_DR 16

/* The work items and the tile sizes of one node. An item is one KV head of
 * one batch and a block of qb query tokens; its rows are those tokens'
 * query heads that read this KV head (row r: token r / group, head
 * r % group of the group), so the KV head's tiles serve them all. */
struct fa_geom {
    int64_t D, Dv, Dvp, n_kv, n_q, Hkv, B, group;
    int64_t qb, rows, rows_p, n_items;
    int64_t kvp; /* n_kv rounded up to whole tiles */
    bool dec;    /* items of one token take fa_dec_item, and some item has one */
};

static int64_t fa_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static void fa_geom_of(const struct bp_tensor *t, struct fa_geom *g)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2];
    g->D = q->ne[0];
    g->Dv = v->ne[0];
    g->Dvp = fa_round_up(g->Dv, FA_CW);
    g->n_kv = k->ne[1];
    g->n_q = q->ne[1];
    g->Hkv = k->ne[2];
    g->B = q->ne[3];
    g->group = q->ne[2] / k->ne[2];
    g->qb = g->group >= FA_ROWS ? 1 : FA_ROWS / g->group;
    if (g->qb > g->n_q) g->qb = g->n_q > 0 ? g->n_q : 1; /* n_q = 0: no items, no division by 0 */
    g->rows = g->qb * g->group;
    g->rows_p = fa_round_up(g->rows, FA_RB);
    g->n_items = (g->n_q + g->qb - 1) / g->qb * g->Hkv * g->B;
    g->kvp = fa_round_up(g->n_kv, FA_KB);
    const struct bp_tensor *m = t->src[3];
    const bool v_dense =
        (v->type == BP_TYPE_F16 && v->nb[0] == 2) || (v->type == BP_TYPE_F32 && v->nb[0] == 4);
    g->dec = v_dense && g->Dv % FA_CW == 0 && (!m || m->ne[2] == 1) && g->n_q > 0 &&
             (g->n_q - 1) % g->qb == 0;
}

/* The scratch of one thread, in floats. */
struct fa_tiles {
    float *q;    /* [rows_p][D]: the item's query rows, zero past the last */
    float *k;    /* [FA_KB][D]: the K tile, zero past its keys */
    float *kt;   /* [D][FA_KB]: the K tile transposed */
    float *v;    /* [FA_KB][Dvp]: the V tile, zero past its keys and Dv */
    float *s;    /* [rows_p][FA_KB]: scores, then weights */
    float *mask; /* [rows_p][FA_KB]: mask of each distinct mask row, -inf past the keys */
    float *o;    /* [rows_p][Dvp]: unnormalised outputs */
    float *mx, *sum, *c; /* [rows_p]: running maximum, weight sum, rescale */
    float *ds;           /* fa_dec_item: [FA_DR][kvp] scores, then weights */
    float *dm;           /* fa_dec_item: [kvp] the token's mask, -inf past n_kv */
};

static size_t fa_tiles_floats(const struct fa_geom *g)
{
    return (size_t)(g->rows_p * g->D + 2 * g->D * FA_KB + FA_KB * g->Dvp + 2 * g->rows_p * FA_KB +
                    g->rows_p * g->Dvp + 3 * g->rows_p + (g->dec ? (FA_DR + 1) * g->kvp : 0));
}

static void fa_tiles_in(float *w, const struct fa_geom *g, struct fa_tiles *tl)
{
    tl->q = w;
    tl->k = tl->q + g->rows_p * g->D;
    tl->kt = tl->k + g->D * FA_KB;
    tl->v = tl->kt + g->D * FA_KB;
    tl->s = tl->v + FA_KB * g->Dvp;
    tl->mask = tl->s + g->rows_p * FA_KB;
    tl->o = tl->mask + g->rows_p * FA_KB;
    tl->mx = tl->o + g->rows_p * g->Dvp;
    tl->sum = tl->mx + g->rows_p;
    tl->c = tl->sum + g->rows_p;
    tl->ds = g->dec ? tl->c + g->rows_p : NULL;
    tl->dm = g->dec ? tl->ds + FA_DR * g->kvp : NULL;
}

size_t cpu_scratch_flash_attn(const struct bp_tensor *t)
{
    struct fa_geom g;
    fa_geom_of(t, &g);
    return fa_tiles_floats(&g) * sizeof(float);
}

/* n values of a row of x as floats: F16 and F32 rows that are dense along
 * dim 0 by vectors, any other type or stride element by element. */
static void fa_widen(float *dst, const char *src, const struct bp_tensor *x, int64_t n)
{
    int64_t i = 0;
    if (x->type == BP_TYPE_F16 && x->nb[0] == 2) {
        const uint16_t *h = (const uint16_t *)(const void *)src;
        for (; i + FA_W <= n; i += FA_W) fa_store(dst + i, fa_load_h(h + i));
    } else if (x->type == BP_TYPE_F32 && x->nb[0] == 4) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (; i < n; i++) dst[i] = cpu_load(src + (size_t)i * x->nb[0], x->type);
}

#if defined(FA_X86) && defined(__AVX512F__)
/* dst[c * ds + i] = element c of r[i] for 16 rows of 16, in registers:
 * pairs of rows interleaved (ps), then pairs of pairs (pd), then the
 * 128-bit lanes of four registers transposed by two rounds of shuffles. */
static inline void fa_transpose16_regs(__m512 r[16], float *dst, size_t ds)
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* r[4G + k], lane L: element 4L + k of rows 4G .. 4G + 3 */
    for (int i = 0; i < 16; i += 4) {
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int k = 0; k < 4; k++) {
        const __m512 v0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44);
        const __m512 v1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
        const __m512 v2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
        const __m512 v3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
        _mm512_storeu_ps(dst + (0 + k) * ds, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(dst + (4 + k) * ds, _mm512_shuffle_f32x4(v0, v2, 0xDD));
        _mm512_storeu_ps(dst + (8 + k) * ds, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(dst + (12 + k) * ds, _mm512_shuffle_f32x4(v1, v3, 0xDD));
    }
}

/* dst[c * ds + r] = src[r * ss + c] for a 16 x 16 block of floats. */
static void fa_transpose16(const float *src, size_t ss, float *dst, size_t ds)
{
    __m512 r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ss);
    fa_transpose16_regs(r, dst, ds);
}
#define FA_TRANSPOSE_BLOCK 16
#else
#define FA_TRANSPOSE_BLOCK 0
#endif

/* kt = the K tile transposed: 16 x 16 blocks in registers where the ISA
 * has them (the scalar loop was most of a decode step's attention), the
 * rest element by element. */
static void fa_transpose_k(const struct fa_tiles *tl, int64_t D)
{
    int64_t d0 = 0;
#if FA_TRANSPOSE_BLOCK
    for (; d0 + FA_TRANSPOSE_BLOCK <= D; d0 += FA_TRANSPOSE_BLOCK)
        for (int j = 0; j < FA_KB; j += FA_TRANSPOSE_BLOCK)
            fa_transpose16(tl->k + j * D + d0, (size_t)D, tl->kt + d0 * FA_KB + j, FA_KB);
#endif
    for (int64_t d = d0; d < D; d++)
        for (int j = 0; j < FA_KB; j++) tl->kt[d * FA_KB + j] = tl->k[j * D + d];
}

/* kt = keys [j0, j0 + FA_KB) of KV head kh, batch b, as float, transposed.
 * Keys at or past n (1 + the last one that some row sees) are not read:
 * every row masks their scores. Dense F16 and F32 rows go from memory
 * straight into the 16 x 16 register transposes where the ISA has them, the
 * keys past n repeating key n - 1 (widening and storing a tile first cost
 * as much as the transpose); other rows are widened into k first. */
static void fa_load_kt(const struct fa_tiles *tl, const struct fa_geom *g,
                       const struct bp_tensor *k, int64_t j0, int64_t n, int64_t kh, int64_t b)
{
#if FA_TRANSPOSE_BLOCK
    const bool f16 = k->type == BP_TYPE_F16 && k->nb[0] == 2;
    if ((f16 || (k->type == BP_TYPE_F32 && k->nb[0] == 4)) && g->D % 16 == 0) {
        for (int jb = 0; jb < FA_KB; jb += 16) {
            const char *row[16];
            for (int i = 0; i < 16; i++)
                row[i] = cpu_at(k, 0, j0 + jb + i < n ? j0 + jb + i : n - 1, kh, b);
            for (int64_t d0 = 0; d0 < g->D; d0 += 16) {
                __m512 r[16];
                if (f16) {
                    for (int i = 0; i < 16; i++)
                        r[i] = _mm512_cvtph_ps(
                            _mm256_loadu_si256((const __m256i *)(const void *)(row[i] + d0 * 2)));
                } else {
                    for (int i = 0; i < 16; i++)
                        r[i] = _mm512_loadu_ps((const float *)(const void *)row[i] + d0);
                }
                fa_transpose16_regs(r, tl->kt + d0 * FA_KB + jb, FA_KB);
            }
        }
        return;
    }
#endif
    const int nb = n - j0 < FA_KB ? (int)(n - j0) : FA_KB;
    for (int j = 0; j < nb; j++) fa_widen(tl->k + j * g->D, cpu_at(k, 0, j0 + j, kh, b), k, g->D);
    memset(tl->k + nb * g->D, 0, (size_t)((FA_KB - nb) * g->D) * sizeof(float));
    fa_transpose_k(tl, g->D);
}

/* The K and V tiles of keys [j0, j0 + nb) of KV head kh, batch b, as float
 * (K transposed); the V rows past nb are zeros (never NaN garbage: their
 * weight is 0 and 0 * NaN would not be). */
static void fa_load_kv(const struct fa_tiles *tl, const struct fa_geom *g,
                       const struct bp_tensor *k, const struct bp_tensor *v, int64_t j0, int nb,
                       int64_t kh, int64_t b)
{
    fa_load_kt(tl, g, k, j0, j0 + nb, kh, b);
    for (int j = 0; j < FA_KB; j++) {
        float *vr = tl->v + (size_t)j * g->Dvp;
        int64_t d = 0;
        if (j < nb) {
            fa_widen(vr, cpu_at(v, 0, j0 + j, kh, b), v, g->Dv);
            d = g->Dv;
        }
        for (; d < g->Dvp; d++) vr[d] = 0.0f;
    }
}

/* Mask rows of keys [j0, j0 + nb) for the item's distinct mask rows (one
 * per token when the mask has one head plane, else one per row); keys past
 * nb get -inf. Returns 1 + the last key of the tile that some row sees (0:
 * none). A tile that every row masks (the future, under a causal mask) is
 * skipped whole, and the keys past the last visible one are neither read
 * nor summed: in decode they are the unwritten tail of the cache, up to 31
 * of a tile's 32 keys. */
static int fa_load_mask(const struct fa_tiles *tl, const struct fa_geom *g, const struct bp_tensor *m,
                        int64_t j0, int nb, int64_t q0, int nt, int64_t kh, int64_t b)
{
    const bool per_token = !m || m->ne[2] == 1;
    const int n = per_token ? nt : nt * (int)g->group;
    int live = 0;
    for (int i = 0; i < n; i++) {
        float *mr = tl->mask + (size_t)i * FA_KB;
        const int64_t iq = q0 + (per_token ? i : i / g->group);
        if (m) {
            const int64_t h = kh * g->group + (per_token ? 0 : i % g->group);
            const char *src = cpu_at(m, j0, iq, h % m->ne[2], b % m->ne[3]);
            for (int j = 0; j < nb; j++) mr[j] = cpu_load(src + (size_t)j * m->nb[0], m->type);
        } else {
            for (int j = 0; j < nb; j++) mr[j] = 0.0f;
        }
        for (int j = nb; j < FA_KB; j++) mr[j] = -INFINITY;
        for (int j = nb - 1; j >= live; j--)
            if (mr[j] != -INFINITY) {
                live = j + 1;
                break;
            }
    }
    return live;
}

/* s[r * lds + j] = q[r] . k[j] for rows [0, nr) (nr a multiple of FA_RB)
 * and the tile's FA_KB keys, from the transposed tile kt [D][FA_KB]. */
static void fa_qk(const float *q, const float *kt, int64_t D, int64_t nr, float *s, int64_t lds)
{
    for (int64_t r0 = 0; r0 < nr; r0 += FA_RB)
        for (int c0 = 0; c0 < FA_KB; c0 += FA_CW) {
            fa_vec acc[FA_RB][FA_CV];
            for (int i = 0; i < FA_RB; i++)
                for (int u = 0; u < FA_CV; u++) acc[i][u] = fa_zero();
            const float *qr = q + r0 * D;
            for (int64_t d = 0; d < D; d++) {
                fa_vec kv[FA_CV];
                for (int u = 0; u < FA_CV; u++) kv[u] = fa_load(kt + d * FA_KB + c0 + u * FA_W);
                for (int i = 0; i < FA_RB; i++) {
                    const fa_vec qv = fa_splat(qr[i * D + d]);
                    for (int u = 0; u < FA_CV; u++) acc[i][u] = fa_fma(qv, kv[u], acc[i][u]);
                }
            }
            for (int i = 0; i < FA_RB; i++)
                for (int u = 0; u < FA_CV; u++)
                    fa_store(s + (r0 + i) * lds + c0 + u * FA_W, acc[i][u]);
        }
}

/* The online softmax of one tile for row r: scores become weights
 * exp(s - running max), and c[r] the factor the row's output and sum are
 * rescaled by (the old maximum's weight relative to the new one). */
static void fa_softmax_row(const struct fa_tiles *tl, int64_t r, const float *mask, float scale,
                           float cap)
{
    float *sr = tl->s + r * FA_KB;
    fa_vec s[FA_KV], bm = fa_splat(-INFINITY);
    for (int u = 0; u < FA_KV; u++) {
        s[u] = fa_score(fa_load(sr + u * FA_W), fa_load(mask + u * FA_W), scale, cap);
        bm = fa_max(bm, s[u]);
    }
    const float tile_max = fa_reduce_max(bm);
    if (tile_max == -INFINITY) { /* nothing visible here: exp(-inf + inf) would be NaN */
        tl->c[r] = 1.0f;
        for (int u = 0; u < FA_KV; u++) fa_store(sr + u * FA_W, fa_zero());
        return;
    }
    const float mx = tl->mx[r] > tile_max ? tl->mx[r] : tile_max;
    tl->c[r] = expf(tl->mx[r] - mx); /* 0 for the row's first visible tile */
    tl->mx[r] = mx;
    fa_vec sum = fa_zero();
    for (int u = 0; u < FA_KV; u++) {
        const fa_vec w = fa_exp(fa_sub(s[u], fa_splat(mx)));
        sum = fa_add(sum, w);
        fa_store(sr + u * FA_W, w);
    }
    tl->sum[r] = tl->sum[r] * tl->c[r] + fa_reduce_add(sum);
}

/* o[r] = c[r] * o[r] + w[r] . v over the tile's nb keys, rows [0, nr). */
static void fa_pv(const struct fa_tiles *tl, int64_t Dvp, int64_t nr, int nb)
{
    for (int64_t r0 = 0; r0 < nr; r0 += FA_RB)
        for (int64_t c0 = 0; c0 < Dvp; c0 += FA_CW) {
            fa_vec acc[FA_RB][FA_CV];
            for (int i = 0; i < FA_RB; i++) {
                const fa_vec c = fa_splat(tl->c[r0 + i]);
                for (int u = 0; u < FA_CV; u++)
                    acc[i][u] = fa_mul(c, fa_load(tl->o + (r0 + i) * Dvp + c0 + u * FA_W));
            }
            for (int j = 0; j < nb; j++) {
                fa_vec vv[FA_CV];
                for (int u = 0; u < FA_CV; u++) vv[u] = fa_load(tl->v + j * Dvp + c0 + u * FA_W);
                for (int i = 0; i < FA_RB; i++) {
                    const fa_vec w = fa_splat(tl->s[(r0 + i) * FA_KB + j]);
                    for (int u = 0; u < FA_CV; u++) acc[i][u] = fa_fma(w, vv[u], acc[i][u]);
                }
            }
            for (int i = 0; i < FA_RB; i++)
                for (int u = 0; u < FA_CV; u++)
                    fa_store(tl->o + (r0 + i) * Dvp + c0 + u * FA_W, acc[i][u]);
        }
}

/* Output row (head h, token iq, batch b) = o / sum, zeros when sum is 0
 * (every key masked). */
static void fa_write_row(float *o, float sum, const struct fa_geom *g, struct bp_tensor *t,
                         int64_t h, int64_t iq, int64_t b)
{
    if (sum == 0.0f) {
        memset(o, 0, (size_t)g->Dv * sizeof(float));
    } else {
        const fa_vec inv = fa_splat(1.0f / sum);
        for (int64_t d = 0; d < g->Dvp; d += FA_W) fa_store(o + d, fa_mul(inv, fa_load(o + d)));
    }
    char *dr = cpu_at(t, 0, h, iq, b);
    if (t->nb[0] == 4) {
        memcpy(dr, o, (size_t)g->Dv * sizeof(float));
    } else {
        for (int64_t d = 0; d < g->Dv; d++) memcpy(dr + (size_t)d * t->nb[0], &o[d], 4);
    }
}

/* One work item: KV head kh of batch b against query tokens [q0, q0 + nt). */
static void fa_item(const struct fa_tiles *tl, const struct fa_geom *g, struct bp_tensor *t,
                    int64_t q0, int nt, int64_t kh, int64_t b)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const float scale = bp_op_param_f32(t, 0), cap = fa_softcap(t);
    const int64_t nrows = nt * g->group, nr = fa_round_up(nrows, FA_RB);
    const bool per_token = !m || m->ne[2] == 1;

    for (int64_t r = 0; r < nr; r++) {
        float *qr = tl->q + r * g->D;
        if (r < nrows)
            fa_widen(qr, cpu_at(q, 0, q0 + r / g->group, kh * g->group + r % g->group, b), q, g->D);
        else
            memset(qr, 0, (size_t)g->D * sizeof(float));
        tl->mx[r] = -INFINITY;
        tl->sum[r] = 0.0f;
        tl->c[r] = 1.0f;
    }
    memset(tl->o, 0, (size_t)(nr * g->Dvp) * sizeof(float));

    for (int64_t j0 = 0; j0 < g->n_kv; j0 += FA_KB) {
        const int nk = g->n_kv - j0 < FA_KB ? (int)(g->n_kv - j0) : FA_KB;
        const int nb = fa_load_mask(tl, g, m, j0, nk, q0, nt, kh, b);
        if (nb == 0)
            continue;
        fa_load_kv(tl, g, k, v, j0, nb, kh, b);
        fa_qk(tl->q, tl->kt, g->D, nr, tl->s, FA_KB);
        for (int64_t r = 0; r < nr; r++) {
            if (r >= nrows) { /* padding rows: no weight, no rescale */
                memset(tl->s + r * FA_KB, 0, FA_KB * sizeof(float));
                continue;
            }
            const int64_t mi = per_token ? r / g->group : r;
            fa_softmax_row(tl, r, tl->mask + mi * FA_KB, scale, cap);
        }
        fa_pv(tl, g->Dvp, nr, nb);
    }

    for (int64_t r = 0; r < nrows; r++)
        fa_write_row(tl->o + r * g->Dvp, tl->mx[r] == -INFINITY ? 0.0f : tl->sum[r], g, t,
                     kh * g->group + r % g->group, q0 + r / g->group, b);
}

/* 1 + the last key that mask[0, kvp) leaves visible (0: none), a vector at
 * a time from the end: in decode most of the row can be the cache's
 * unwritten tail. kvp is a multiple of FA_W. */
static int64_t fa_visible_end(const float *mask, int64_t kvp)
{
    int64_t j = kvp;
    while (j > 0 && !fa_any_visible(fa_load(mask + j - FA_W))) j -= FA_W;
    while (j > 0 && mask[j - 1] == -INFINITY) j--;
    return j;
}

/* fa_dec_item keeps the scores of a tile's FA_KB keys for its FA_DR rows
 * together, [n_kv / FA_KB][FA_DR][FA_KB]: p.v then finds a key's weights
 * for a block of rows at fixed offsets from one pointer. */
#define FA_DTILE (FA_DR * FA_KB)
/* How many keys ahead of the tile being scored fa_dec_item asks for K rows. */
#ifndef FA_PF
#define FA_PF 32
#endif

/* Row r's scores over keys [0, n) become the weights exp(x - max x),
 * x = scale * score + mask (capped first when cap > 0, fa_score), over the
 * whole row at once (no running maximum to rescale by); returns their sum,
 * 0 when every key is masked (the weights are then zeros). The keys from n
 * to the next vector are masked. */
static float fa_dec_softmax(float *s, int64_t r, const float *mask, int64_t n, float scale, float cap)
{
    const int64_t nw = fa_round_up(n, FA_W);
    float *sr = s + r * FA_KB;
#define FA_DS(j) (sr + (j) / FA_KB * FA_DTILE + (j) % FA_KB)
    fa_vec bm = fa_splat(-INFINITY);
    for (int64_t j = 0; j < nw; j += FA_W) {
        const fa_vec x = fa_score(fa_load(FA_DS(j)), fa_load(mask + j), scale, cap);
        fa_store(FA_DS(j), x);
        bm = fa_max(bm, x);
    }
    const float mx = fa_reduce_max(bm);
    if (mx == -INFINITY) { /* exp(-inf + inf) would be NaN */
        for (int64_t j = 0; j < nw; j += FA_W) fa_store(FA_DS(j), fa_zero());
        return 0.0f;
    }
    const fa_vec vm = fa_splat(mx);
    fa_vec sum = fa_zero();
    for (int64_t j = 0; j < nw; j += FA_W) {
        const fa_vec w = fa_exp(fa_sub(fa_load(FA_DS(j)), vm));
        sum = fa_add(sum, w);
        fa_store(FA_DS(j), w);
    }
#undef FA_DS
    return fa_reduce_add(sum);
}

/* Asks for rows [j0, j1) of x (KV head kh, batch b) ahead of their use,
 * into L1 (locality 3) or only L2 (2), when they are dense. In decode the
 * cache comes from memory, the weights streamed since the last step having
 * evicted it: with K/V flushed a node took ~48 us instead of ~20 with them
 * in cache (1B shape, 192 positions, 1 thread), ~41 with the next tile's K
 * and this tile's V asked for while this tile is scored. */
static void fa_prefetch_rows(const struct bp_tensor *x, int64_t j0, int64_t j1, int64_t kh,
                             int64_t b, bool l1)
{
    const size_t bytes = (size_t)x->ne[0] * x->nb[0];
    if (x->nb[0] != bp_type_size(x->type)) return;
    for (int64_t j = j0; j < j1; j++) {
        const char *row = cpu_at(x, 0, j, kh, b);
        for (size_t o = 0; o < bytes; o += 64) {
            if (l1)
                __builtin_prefetch(row + o, 0, 3);
            else
                __builtin_prefetch(row + o, 0, 2);
        }
    }
}

/* o[r * ldo + c] = sum over keys j < n of w_r[j] * v[j][c] (weights w laid
 * out as in FA_DTILE), rows [0, nr) (a multiple of FA_RB), columns [0, Dv)
 * (a multiple of FA_CW), straight off the dense F16 or F32 V rows of KV
 * head kh, batch b. */
static void fa_dec_pv(const float *w, const struct bp_tensor *v, int64_t n, int64_t nr, int64_t Dv,
                      int64_t kh, int64_t b, float *o, int64_t ldo)
{
    const bool f16 = v->type == BP_TYPE_F16;
    for (int64_t r0 = 0; r0 < nr; r0 += FA_RB)
        for (int64_t c0 = 0; c0 < Dv; c0 += FA_CW) {
            fa_vec acc[FA_RB][FA_CV];
            for (int i = 0; i < FA_RB; i++)
                for (int u = 0; u < FA_CV; u++) acc[i][u] = fa_zero();
            for (int64_t j0 = 0; j0 < n; j0 += FA_KB) {
                const float *wt = w + j0 / FA_KB * FA_DTILE + r0 * FA_KB;
                const int nb = n - j0 < FA_KB ? (int)(n - j0) : FA_KB;
                const char *vr = cpu_at(v, 0, j0, kh, b);
                for (int j = 0; j < nb; j++, vr += v->nb[1]) {
                    fa_vec vv[FA_CV];
                    if (f16) {
                        for (int u = 0; u < FA_CV; u++)
                            vv[u] = fa_load_h((const uint16_t *)(const void *)vr + c0 + u * FA_W);
                    } else {
                        for (int u = 0; u < FA_CV; u++)
                            vv[u] = fa_load((const float *)(const void *)vr + c0 + u * FA_W);
                    }
                    for (int i = 0; i < FA_RB; i++) {
                        const fa_vec wv = fa_splat(wt[i * FA_KB + j]);
                        for (int u = 0; u < FA_CV; u++) acc[i][u] = fa_fma(wv, vv[u], acc[i][u]);
                    }
                }
            }
            for (int i = 0; i < FA_RB; i++)
                for (int u = 0; u < FA_CV; u++)
                    fa_store(o + (r0 + i) * ldo + c0 + u * FA_W, acc[i][u]);
        }
}

#if defined(FA_X86) && defined(__AVX512F__)
/* q.k for a block of 8 rows (FA_RB) without transposing K: the rows lie
 * across the lanes, two dims per row (lane 2i + t: row i, dim 2p + t, in
 * qp[p]), and each key's pair of dims (2p, 2p + 1) is one 64-bit broadcast,
 * a load and no shuffle. Lane pairs are summed at the end, 8 keys at a
 * time. The 16 x 16 transposes that fa_load_kt does spent half as many
 * shuffles (port 5, one of the two FMA ports) per key as the q.k FMAs: a
 * decode-step node (1B shape, 192 positions, 1 thread, K/V in cache) took
 * ~0.87 of the time this way. */
#define FA_LANE_QK 1

/* qp[p * 16 + 2i + t] = q[i * D + 2p + t] for rows i < 8. */
static void fa_lane_q(const float *q, int64_t D, float *qp)
{
    for (int64_t p = 0; p < D / 2; p++)
        for (int i = 0; i < 8; i++) memcpy(qp + p * 16 + 2 * i, q + i * D + 2 * p, 8);
}

/* s[i * FA_KB + j] = q[i] . kf[j] for 8 rows and FA_LANE_KEYS keys of the
 * widened tile kf [FA_KB][D]. Inlined with D a constant where the caller
 * knows it (64, 128: Llama heads), so that every key's row is an offset
 * from one pointer: with 16 pointers to keep, GCC ran out of registers. */
#define FA_LANE_KEYS 16
static inline __attribute__((always_inline)) void fa_lane_block(const float *qp, const float *kf,
                                                                const int64_t D, float *s)
{
    __m512 acc[FA_LANE_KEYS];
    for (int i = 0; i < FA_LANE_KEYS; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < D / 2; p++) {
        const __m512 qv = _mm512_loadu_ps(qp + p * 16);
        for (int i = 0; i < FA_LANE_KEYS; i++) {
            double x;
            memcpy(&x, kf + i * D + 2 * p, 8);
            acc[i] = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(x)), qv, acc[i]);
        }
    }
    for (int h = 0; h < FA_LANE_KEYS; h += 8) {
        /* c[m], 128-bit lane L: keys 2m, 2m + 1 of rows 2L, 2L + 1
         * ([k2m r2L, k2m r2L+1, k2m+1 r2L, k2m+1 r2L+1]), the lane pairs
         * summed; then e[g][t], lane L: keys 4g .. 4g + 3 of row 2L + t. */
        const __m512 *a = acc + h;
        __m512 c[4];
        for (int m = 0; m < 4; m++)
            c[m] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * m], a[2 * m + 1], 0x88),
                                 _mm512_shuffle_ps(a[2 * m], a[2 * m + 1], 0xDD));
        float e[2][2][16];
        for (int g = 0; g < 2; g++) {
            _mm512_storeu_ps(e[g][0], _mm512_shuffle_ps(c[2 * g], c[2 * g + 1], 0x88));
            _mm512_storeu_ps(e[g][1], _mm512_shuffle_ps(c[2 * g], c[2 * g + 1], 0xDD));
        }
        for (int i = 0; i < 8; i++)
            for (int g = 0; g < 2; g++)
                memcpy(s + i * FA_KB + h + 4 * g, &e[g][i % 2][4 * (i / 2)], 16);
    }
}

/* s[i * FA_KB + j - j0] = q[i] . k[j] for 8 rows and keys [j0, j0 + FA_KB)
 * of KV head kh, batch b (dense F16 or F32 rows, D a multiple of 16); keys
 * at or past n repeat key n - 1 (their scores are masked). The tile is
 * widened (copied, for F32) into kf [FA_KB][D] first, whole: its stores
 * then retire before the broadcasts read them. Not inlined: inside
 * fa_dec_item GCC kept pointers in vector registers, a move per FMA. */
static __attribute__((noinline)) void fa_lane_qk(const float *qp, const struct bp_tensor *k,
                                                 int64_t D, int64_t j0, int64_t n, int64_t kh,
                                                 int64_t b, float *kf, float *s)
{
    for (int j = 0; j < FA_KB; j++) {
        const char *src = cpu_at(k, 0, j0 + j < n ? j0 + j : n - 1, kh, b);
        float *dst = kf + j * D;
        if (k->type == BP_TYPE_F16) {
            for (int64_t d = 0; d < D; d += 16)
                _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(
                                              (const __m256i *)(const void *)(src + 2 * d))));
        } else {
            memcpy(dst, src, (size_t)D * sizeof(float));
        }
    }
    for (int jb = 0; jb < FA_KB; jb += FA_LANE_KEYS) {
        if (D == 64)
            fa_lane_block(qp, kf + jb * D, 64, s + jb);
        else if (D == 128)
            fa_lane_block(qp, kf + jb * D, 128, s + jb);
        else
            fa_lane_block(qp, kf + jb * D, D, s + jb);
    }
}
#endif

/* A work item of one query token iq (a decode step) against KV head kh of
 * batch b: the group's query heads, FA_DR at a time, score every visible
 * key in tiles as fa_item does, then the softmax of each whole row and p.v
 * straight off the V rows. At 8 rows and ~200 keys fa_item's per-tile work
 * (V widened and stored, the mask tile, the online rescale) cost more than
 * the arithmetic. */
static void fa_dec_item(const struct fa_tiles *tl, const struct fa_geom *g, struct bp_tensor *t,
                        int64_t iq, int64_t kh, int64_t b)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const float scale = bp_op_param_f32(t, 0), cap = fa_softcap(t);
    fa_prefetch_rows(k, 0, g->n_kv < FA_PF ? g->n_kv : FA_PF, kh, b, true);
    if (m)
        fa_widen(tl->dm, cpu_at(m, 0, iq, 0, b % m->ne[3]), m, g->n_kv);
    else
        for (int64_t j = 0; j < g->n_kv; j++) tl->dm[j] = 0.0f;
    for (int64_t j = g->n_kv; j < g->kvp; j++) tl->dm[j] = -INFINITY;
    const int64_t n = fa_visible_end(tl->dm, g->kvp);

    for (int64_t h0 = 0; h0 < g->group; h0 += FA_DR) {
        const int64_t nrows = g->group - h0 < FA_DR ? g->group - h0 : FA_DR;
        const int64_t nr = fa_round_up(nrows, FA_RB);
        for (int64_t r = 0; r < nr; r++) {
            float *qr = tl->q + r * g->D;
            if (r < nrows)
                fa_widen(qr, cpu_at(q, 0, iq, kh * g->group + h0 + r, b), q, g->D);
            else
                memset(qr, 0, (size_t)g->D * sizeof(float));
        }
#ifdef FA_LANE_QK
        const bool lane = nr == 8 && g->D % 16 == 0 && k->nb[0] == bp_type_size(k->type) &&
                          (k->type == BP_TYPE_F16 || k->type == BP_TYPE_F32);
        if (lane) fa_lane_q(tl->q, g->D, tl->kt);
#endif
        for (int64_t j0 = 0; j0 < n; j0 += FA_KB) {
            const int64_t j1 = j0 + FA_KB < n ? j0 + FA_KB : n;
            float *s = tl->ds + j0 / FA_KB * FA_DTILE;
            fa_prefetch_rows(k, j0 + FA_PF, j1 + FA_PF < n ? j1 + FA_PF : n, kh, b, true);
            fa_prefetch_rows(v, j0, j1, kh, b, false); /* for p.v, after the scores */
#ifdef FA_LANE_QK
            if (lane) {
                fa_lane_qk(tl->kt, k, g->D, j0, n, kh, b, tl->k, s);
                continue;
            }
#endif
            fa_load_kt(tl, g, k, j0, n, kh, b);
            fa_qk(tl->q, tl->kt, g->D, nr, s, FA_KB);
        }
        for (int64_t r = 0; r < nrows; r++)
            tl->sum[r] = fa_dec_softmax(tl->ds, r, tl->dm, n, scale, cap);
        for (int64_t j0 = 0; j0 < n && nrows < nr; j0 += FA_KB) /* padding rows: no weight */
            memset(tl->ds + j0 / FA_KB * FA_DTILE + nrows * FA_KB, 0,
                   (size_t)((nr - nrows) * FA_KB) * sizeof(float));
        fa_dec_pv(tl->ds, v, n, nr, g->Dv, kh, b, tl->o, g->Dvp);
        for (int64_t r = 0; r < nrows; r++)
            fa_write_row(tl->o + r * g->Dvp, tl->sum[r], g, t, kh * g->group + h0 + r, iq, b);
    }
}

void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    struct fa_geom g;
    struct fa_tiles tl;
    fa_geom_of(t, &g);
    fa_tiles_in(p->wdata, &g, &tl);
    /* Items are dealt round robin, query blocks outermost: under a causal
     * mask a later block sees more keys, and dealing them in turn gives every
     * thread a like share of short and long ones. Each item is whole on one
     * thread, so the result does not depend on the thread count. */
    const int64_t per_block = g.Hkv * g.B;
    for (int64_t it = p->ith; it < g.n_items; it += p->nth) {
        const int64_t q0 = it / per_block * g.qb, kh = it % per_block % g.Hkv, b = it % per_block / g.Hkv;
        const int nt = (int)(g.n_q - q0 < g.qb ? g.n_q - q0 : g.qb);
        if (nt == 1 && g.dec)
            fa_dec_item(&tl, &g, t, q0, kh, b);
        else
            fa_item(&tl, &g, t, q0, nt, kh, b);
    }
}

#endif /* FA_FAST */
