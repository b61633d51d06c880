/*
 * test_cpu_attention_isa.c — the CPU plugin's FLASH_ATTN_EXT kernel
 * (plugins/cpu/ops/attention.c) compiled on its own for one ISA and run on
 * hand-made tensors against a double-precision softmax written here. The
 * x86 variants are also checked through the plugin (test_cpu_attention_*);
 * this program exists so that the NEON loops are executed (cross-compiled
 * for aarch64 and run under qemu-user), not only compiled.
 *
 * Plain C, no libcheck: exit 0 on success, 1 with a line per failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* attention.c needs nothing else of the plugin: the barrier is never
 * reached by a single thread. */
void cpu_params_barrier(const struct cpu_compute_params *p) { (void)p; }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void make(struct bp_tensor *t, enum bp_type type, int64_t a, int64_t b, int64_t c,
                 int64_t d)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->ne[0] = a; t->ne[1] = b; t->ne[2] = c; t->ne[3] = d;
    t->nb[0] = bp_type_size(type);
    for (int i = 1; i < 4; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    t->data = calloc((size_t)(a * b * c * d), t->nb[0]);
}

static void fill(struct bp_tensor *t, double amp)
{
    const int64_t n = bp_nelements(t);
    for (int64_t i = 0; i < n; i++) {
        const float v = (float)(amp * uniform());
        if (t->type == BP_TYPE_F16) {
            const uint16_t h = bp_f32_to_f16(v);
            memcpy((char *)t->data + 2 * i, &h, 2);
        } else {
            memcpy((char *)t->data + 4 * i, &v, 4);
        }
    }
}

static double at(const struct bp_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const char *p = (const char *)t->data + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
                    (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
    if (t->type == BP_TYPE_F16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return bp_f16_to_f32(h);
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* One case: D, Dv with SIMD tails, grouped-query heads, a mask with a fully
 * masked query row (when n_q > 1), scattered -INFINITY keys and, from key
 * `written` on, the unwritten tail of a decoder's cache. cap > 0: the node
 * is FLASH_ATTN_SOFTCAP, scores c tanh(scale q.k / c) before the mask. */
static int run_case(enum bp_type kv_type, int64_t D, int64_t Dv, int64_t n_kv, int64_t H,
                    int64_t H_kv, int64_t n_q, int64_t written, float cap)
{
    struct bp_tensor q, k, v, m, out;
    make(&q, BP_TYPE_F32, D, n_q, H, 1);
    make(&k, kv_type, D, n_kv, H_kv, 1);
    make(&v, kv_type, Dv, n_kv, H_kv, 1);
    make(&m, BP_TYPE_F32, n_kv, n_q, 1, 1);
    make(&out, BP_TYPE_F32, Dv, H, n_q, 1);
    fill(&q, 1.0);
    fill(&k, 1.0);
    fill(&v, 2.0);
    for (int64_t i = 0; i < n_q; i++)
        for (int64_t j = 0; j < n_kv; j++) {
            float mv = (float)(0.5 * uniform());
            if (i == 1 || ((j * 7 + i) % 5 == 0 && j != written - 1) || j >= written)
                mv = -INFINITY; /* row 1 entirely masked, key written - 1 seen by the rest */
            memcpy((char *)m.data + 4 * (i * n_kv + j), &mv, 4);
        }
    const float scale = 1.0f / sqrtf((float)D);
    out.op = cap > 0.0f ? BP_OP_FLASH_ATTN_SOFTCAP : BP_OP_FLASH_ATTN_EXT;
    out.src[0] = &q; out.src[1] = &k; out.src[2] = &v; out.src[3] = &m;
    memcpy(&out.op_params[0], &scale, 4);
    memcpy(&out.op_params[1], &cap, 4);
    int failures = 0;
    if (!bp_op_shapes_ok(&out) || !cpu_supports_flash_attn(&out)) {
        printf("FAIL the kernel declines a well-formed node (D=%lld)\n", (long long)D);
        failures++;
        goto done;
    }
    void *scratch = malloc(cpu_scratch_flash_attn(&out));
    struct cpu_compute_params p = { .ith = 0, .nth = 1, .wdata = scratch,
                                    .wsize = cpu_scratch_flash_attn(&out) };
    cpu_compute_flash_attn(&p, &out);
    free(scratch);

    double *score = malloc((size_t)n_kv * sizeof *score);
    for (int64_t h = 0; h < H; h++)
        for (int64_t iq = 0; iq < n_q; iq++) {
            const int64_t kh = h / (H / H_kv);
            double mx = -INFINITY;
            for (int64_t j = 0; j < n_kv; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += at(&q, d, iq, h, 0) * at(&k, d, j, kh, 0);
                score[j] = s * scale;
                if (cap > 0.0f) score[j] = cap * tanh(score[j] / cap);
                score[j] += at(&m, j, iq, 0, 0);
                if (score[j] > mx) mx = score[j];
            }
            for (int64_t d = 0; d < Dv; d++) {
                double num = 0, den = 0;
                for (int64_t j = 0; j < n_kv && mx != -INFINITY; j++) {
                    const double w = exp(score[j] - mx);
                    num += w * at(&v, d, j, kh, 0);
                    den += w;
                }
                const double want = den > 0 ? num / den : 0.0, got = at(&out, d, h, iq, 0);
                if (!(fabs(got - want) <= 2e-5 * (1.0 + fabs(want)))) {
                    if (failures++ < 8)
                        printf("FAIL %s cap %g D=%lld Dv=%lld head %lld query %lld d %lld: kernel %.8g, "
                               "reference %.8g\n", bp_type_name(kv_type), (double)cap, (long long)D,
                               (long long)Dv, (long long)h, (long long)iq, (long long)d, got, want);
                }
            }
        }
    free(score);
done:
    free(q.data); free(k.data); free(v.data); free(m.data); free(out.data);
    return failures;
}

int main(void)
{
    int failures = 0;
    /* cap 0: FLASH_ATTN_EXT; 0.3 saturates these scores, 50 (Gemma 2's)
     * barely bends them */
    static const float caps[] = { 0.0f, 0.3f, 50.0f };
    for (int c = 0; c < 3; c++) {
        const float cap = caps[c];
        failures += run_case(BP_TYPE_F32, 64, 64, 37, 4, 2, 3, 37, cap);
        failures += run_case(BP_TYPE_F16, 64, 64, 37, 4, 2, 3, 37, cap);
        failures += run_case(BP_TYPE_F16, 70, 43, 19, 6, 3, 4, 19, cap); /* tails of every width */
        failures += run_case(BP_TYPE_F32, 5, 3, 9, 2, 1, 2, 9, cap);     /* shorter than one vector */
        /* decode: one token, GQA 8:1, a cache written up to 1, 33 and 192 */
        failures += run_case(BP_TYPE_F16, 64, 64, 64, 16, 2, 1, 1, cap);
        failures += run_case(BP_TYPE_F16, 64, 64, 64, 16, 2, 1, 33, cap);
        failures += run_case(BP_TYPE_F16, 64, 64, 256, 32, 4, 1, 192, cap);
        failures += run_case(BP_TYPE_F32, 64, 64, 100, 8, 1, 1, 70, cap);
    }
    if (failures) {
        printf("%d attention failures\n", failures);
        return 1;
    }
    printf("attention: all cases match the double reference\n");
    return 0;
}
