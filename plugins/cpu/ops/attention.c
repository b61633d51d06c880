/*
 * attention.c — FLASH_ATTN_EXT: out = softmax(scale * q.k^T + mask) . v with
 * grouped-query heads (head h reads kv head h / (H / H_kv)). Output is
 * [Dv, H, n_q, B]: heads before tokens. A query row whose every key is
 * masked gets zeros, as SOFT_MAX does.
 *
 * Two kernels, chosen by the build's ISA flags:
 *  - the scalar variant keeps the reference: two passes in double (scores of
 *    one query row in this thread's scratch, the exact maximum subtracted
 *    once). Every device is checked against it, so it trades speed for
 *    being obviously right.
 *  - the SIMD variants (AVX2, AVX-512, NEON) make one online-softmax pass in
 *    float over blocks of 32 keys: the block's scores, then its maximum
 *    (the accumulator is rescaled at most once a block, when the running
 *    maximum moves up), then its weights and the v accumulation. q.k and
 *    the v accumulation are vector loops; F16 K/V rows are widened in
 *    registers, and a 64-value head's accumulator stays in registers for
 *    the whole block. A key whose mask is -INFINITY is skipped before its
 *    dot product: the decoder's masks hide the unused tail of its cache
 *    capacity, and causal masks the future.
 *
 * Either way one (head, query, batch) row is one work item, whole on one
 * thread, so results do not depend on the thread count.
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

#ifndef FA_FAST

/* ---- the reference (scalar variant) ---- */

size_t cpu_scratch_flash_attn(const struct bp_tensor *t)
{
    return (size_t)(t->src[1]->ne[1] + t->src[2]->ne[0]) * sizeof(double);
}

void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const double scale = bp_op_param_f32(t, 0);
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

/* ---- vector helpers: a float row against an F32 or F16 row ---- */

/* One vector type per ISA and the handful of operations the loops below
 * need; the loops are written once against them. */
#if defined(FA_X86) && defined(__AVX512F__)
#define FA_W 16
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
static inline float fa_reduce(fa_vec v) { return _mm512_reduce_add_ps(v); }
#elif defined(FA_X86)
#define FA_W 8
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
static inline float fa_reduce(fa_vec v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#else /* FA_NEON */
#define FA_W 4
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
static inline float fa_reduce(fa_vec v) { return vaddvq_f32(v); }
#endif

static float fa_dot_f32(const float *a, const float *b, int64_t n)
{
    fa_vec s = fa_zero();
    int64_t i = 0;
    for (; i + FA_W <= n; i += FA_W)
        s = fa_fma(fa_load(a + i), fa_load(b + i), s);
    float r = fa_reduce(s);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

static float fa_dot_f16(const float *a, const uint16_t *b, int64_t n)
{
    fa_vec s = fa_zero();
    int64_t i = 0;
    for (; i + FA_W <= n; i += FA_W)
        s = fa_fma(fa_load(a + i), fa_load_h(b + i), s);
    float r = fa_reduce(s);
    for (; i < n; i++) r += a[i] * bp_f16_to_f32(b[i]);
    return r;
}

static void fa_axpy_f32(float *y, float w, const float *x, int64_t n)
{
    const fa_vec vw = fa_splat(w);
    int64_t i = 0;
    for (; i + FA_W <= n; i += FA_W)
        fa_store(y + i, fa_fma(vw, fa_load(x + i), fa_load(y + i)));
    for (; i < n; i++) y[i] += w * x[i];
}

static void fa_axpy_f16(float *y, float w, const uint16_t *x, int64_t n)
{
    const fa_vec vw = fa_splat(w);
    int64_t i = 0;
    for (; i + FA_W <= n; i += FA_W)
        fa_store(y + i, fa_fma(vw, fa_load_h(x + i), fa_load(y + i)));
    for (; i < n; i++) y[i] += w * bp_f16_to_f32(x[i]);
}

static void fa_scale(float *y, float c, int64_t n)
{
    const fa_vec vc = fa_splat(c);
    int64_t i = 0;
    for (; i + FA_W <= n; i += FA_W)
        fa_store(y + i, fa_mul(vc, fa_load(y + i)));
    for (; i < n; i++) y[i] *= c;
}

/* A row the vector loops can read in place: dense along dim 0, F32 or F16.
 * BF16 and strided rows (a transposed cache) are widened into scratch. */
static bool fa_direct(const struct bp_tensor *x)
{
    return (x->type == BP_TYPE_F32 && x->nb[0] == 4) || (x->type == BP_TYPE_F16 && x->nb[0] == 2);
}

static void fa_widen(float *dst, const char *src, const struct bp_tensor *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = cpu_load(src + (size_t)i * x->nb[0], x->type);
}

/* q (as float) . row j of k; tmp holds a widened row when k is not direct. */
static float fa_qk(const float *qf, const char *kr, const struct bp_tensor *k, bool direct,
                   float *tmp, int64_t D)
{
    if (!direct) {
        fa_widen(tmp, kr, k, D);
        return fa_dot_f32(qf, tmp, D);
    }
    return k->type == BP_TYPE_F16 ? fa_dot_f16(qf, (const uint16_t *)(const void *)kr, D)
                                  : fa_dot_f32(qf, (const float *)(const void *)kr, D);
}

static void fa_accumulate(float *acc, float w, const char *vr, const struct bp_tensor *v,
                          bool direct, float *tmp, int64_t Dv)
{
    if (!direct) {
        fa_widen(tmp, vr, v, Dv);
        fa_axpy_f32(acc, w, tmp, Dv);
    } else if (v->type == BP_TYPE_F16) {
        fa_axpy_f16(acc, w, (const uint16_t *)(const void *)vr, Dv);
    } else {
        fa_axpy_f32(acc, w, (const float *)(const void *)vr, Dv);
    }
}

/* Keys per block of the online softmax. */
#define FA_BLOCK 32
/* A head of this many values keeps its accumulator in registers across a
 * block (Llama's 64: 4 zmm, 8 ymm, 16 NEON q registers), instead of a load,
 * fma and store per key that each wait for the one before. */
#define FA_HEAD 64
#define FA_HEAD_VECS (FA_HEAD / FA_W)

/* acc[FA_HEAD] += w[i] * row i of v for the block's nb keys (w[i] == 0:
 * skipped), the products and sums of fa_axpy_* in the same order. */
static void fa_accumulate_head(float *acc, const float *w, int nb, const struct bp_tensor *v,
                               int64_t j0, int64_t kh, int64_t b)
{
    fa_vec a[FA_HEAD_VECS];
    for (int u = 0; u < FA_HEAD_VECS; u++)
        a[u] = fa_load(acc + u * FA_W);
    for (int i = 0; i < nb; i++) {
        if (w[i] == 0.0f)
            continue;
        const fa_vec vw = fa_splat(w[i]);
        const char *vr = cpu_at(v, 0, j0 + i, kh, b);
        if (v->type == BP_TYPE_F16) {
            const uint16_t *h = (const uint16_t *)(const void *)vr;
            for (int u = 0; u < FA_HEAD_VECS; u++)
                a[u] = fa_fma(vw, fa_load_h(h + u * FA_W), a[u]);
        } else {
            const float *f = (const float *)(const void *)vr;
            for (int u = 0; u < FA_HEAD_VECS; u++)
                a[u] = fa_fma(vw, fa_load(f + u * FA_W), a[u]);
        }
    }
    for (int u = 0; u < FA_HEAD_VECS; u++)
        fa_store(acc + u * FA_W, a[u]);
}

/* qf[D], tmp[max(D, Dv)], acc[Dv] floats. */
size_t cpu_scratch_flash_attn(const struct bp_tensor *t)
{
    const int64_t D = t->src[0]->ne[0], Dv = t->src[2]->ne[0];
    return (size_t)(D + (D > Dv ? D : Dv) + Dv) * sizeof(float);
}

void cpu_compute_flash_attn(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *m = t->src[3];
    const float scale = bp_op_param_f32(t, 0);
    const int64_t D = q->ne[0], Dv = v->ne[0], n_kv = k->ne[1];
    const int64_t group = q->ne[2] / k->ne[2];
    const bool k_direct = fa_direct(k), v_direct = fa_direct(v);
    const bool head = v_direct && Dv == FA_HEAD;
    float *qf = p->wdata;
    float *tmp = qf + D;
    float *acc = tmp + (D > Dv ? D : Dv);

    int64_t r0, r1;
    cpu_split(bp_nrows(t), p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t h, iq, b;
        cpu_row_index(t, r, &h, &iq, &b);
        const int64_t kh = h / group;
        const char *mr = m ? cpu_at(m, 0, iq, h % m->ne[2], b % m->ne[3]) : NULL;
        char *dr = cpu_at(t, 0, h, iq, b);

        fa_widen(qf, cpu_at(q, 0, iq, h, b), q, D);
        for (int64_t d = 0; d < Dv; d++)
            acc[d] = 0.0f;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j0 = 0; j0 < n_kv; j0 += FA_BLOCK) {
            const int nb = n_kv - j0 < FA_BLOCK ? (int)(n_kv - j0) : FA_BLOCK;
            /* The block's scores first: independent dot products the core
             * overlaps, where one key at a time waited for each score
             * before the next. */
            float sc[FA_BLOCK], bm = -INFINITY;
            for (int i = 0; i < nb; i++) {
                const float mj = mr ? cpu_load(mr + (size_t)(j0 + i) * m->nb[0], m->type) : 0.0f;
                sc[i] = mj == -INFINITY ? -INFINITY
                                        : fa_qk(qf, cpu_at(k, 0, j0 + i, kh, b), k, k_direct, tmp, D) *
                                                  scale + mj;
                bm = sc[i] > bm ? sc[i] : bm;
            }
            if (bm == -INFINITY)
                continue; /* every key masked: nothing counts (exp(-inf + inf) is NaN) */
            /* The running maximum moves at most once a block. */
            if (bm > mx) {
                if (mx != -INFINITY) {
                    const float c = expf(mx - bm);
                    fa_scale(acc, c, Dv);
                    sum *= c;
                }
                mx = bm;
            }
            for (int i = 0; i < nb; i++) {
                sc[i] = sc[i] == -INFINITY ? 0.0f : expf(sc[i] - mx);
                sum += sc[i];
            }
            if (head) {
                fa_accumulate_head(acc, sc, nb, v, j0, kh, b);
                continue;
            }
            for (int i = 0; i < nb; i++)
                if (sc[i] != 0.0f)
                    fa_accumulate(acc, sc[i], cpu_at(v, 0, j0 + i, kh, b), v, v_direct, tmp, Dv);
        }
        if (mx == -INFINITY) {
            for (int64_t d = 0; d < Dv; d++)
                acc[d] = 0.0f;
        } else {
            fa_scale(acc, 1.0f / sum, Dv);
        }
        if (t->nb[0] == 4) {
            memcpy(dr, acc, (size_t)Dv * 4);
        } else {
            for (int64_t d = 0; d < Dv; d++)
                memcpy(dr + (size_t)d * t->nb[0], &acc[d], 4);
        }
    }
}

#endif /* FA_FAST */
