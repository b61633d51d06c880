/*
 * gemm_amx.c — the AMX-INT8 prefill kernels (gemm_amx.h). Tile registers:
 * 0..3 the int32 results of up to four activation tiles, 4 the activation
 * (A: 16 rows x 32 bytes, loaded in place from the converted rows with
 * their own stride), 5 the weight (B: 8 rows x 64 bytes, the VNNI form of
 * 16 weight rows x 32 k). One 32-element block (a Q4_K sub-block) per
 * tile product, because every block has its own scale: the tile results
 * go through L1 and are scaled there with AVX-512, as in the x8 kernels.
 *
 * B is built per block from the two x8 groups: an x8 piece holds 8 bytes
 * of each of 8 rows, i.e. dwords (2r, 2r + 1) = row r's k-quads (2c, 2c+1);
 * B row 2c takes the even dwords of both groups' piece, row 2c + 1 the odd
 * ones (one two-source permute each). Q4_0 and Q4_K nibbles go in as
 * unsigned bytes (TDPBSUD: signed activation x unsigned weight); Q4_0's -8
 * comes back out through the activation block's quant sum, as in the
 * VNNI kernel; Q8_0 is signed x signed (TDPBSSD).
 *
 * The tile configuration is loaded at the start of every call and released
 * at its end: a call is 16 x 64 outputs over all of K, and another library
 * in the process (a second engine, a BLAS) may use the tiles between calls.
 */
#include "simd.h"
#include "gemm_amx.h"

#include <pthread.h>
#include <stdatomic.h>

#include "../cpu_features.h"

#if defined(CPU_HAVE_X86_GEMM) && defined(__x86_64__) && \
    (defined(__clang__) || __GNUC__ >= 11)
#define CPU_HAVE_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_FN __attribute__((target("amx-tile,amx-int8")))
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* A constant in memory: GCC's _tile_loadconfig tells the compiler it reads
 * 8 bytes only, so a config built on the stack lost its stores. */
static const struct amx_cfg amx_cfg = {
    .palette = 1,
    .colsb = { 64, 64, 64, 64, 32, 64 },
    .rows = { 16, 16, 16, 16, 16, 8 },
};

AMX_FN static void amx_config(void)
{
    _tile_loadconfig(&amx_cfg);
}

/* Result tile i = activation tile i (16 rows from a, ys apart) x tile 5;
 * tile numbers are immediates, hence one line per tile. */
#define AMX_PRODUCTS(DP, a, ys, nt)                                                      \
    do {                                                                                 \
        _tile_zero(0); _tile_loadd(4, (a), (ys)); DP(0, 4, 5);                           \
        if ((nt) > 1) { _tile_zero(1); _tile_loadd(4, (a) + 16 * (ys), (ys)); DP(1, 4, 5); } \
        if ((nt) > 2) { _tile_zero(2); _tile_loadd(4, (a) + 32 * (ys), (ys)); DP(2, 4, 5); } \
        if ((nt) > 3) { _tile_zero(3); _tile_loadd(4, (a) + 48 * (ys), (ys)); DP(3, 4, 5); } \
    } while (0)

#define AMX_STORE(c, nt)                                                                 \
    do {                                                                                 \
        _tile_stored(0, (c)[0], 64);                                                     \
        if ((nt) > 1) _tile_stored(1, (c)[1], 64);                                       \
        if ((nt) > 2) _tile_stored(2, (c)[2], 64);                                       \
        if ((nt) > 3) _tile_stored(3, (c)[3], 64);                                       \
    } while (0)

/* Tile 5 = the B tile just written at bt. GCC's tileloadd does not tell
 * the compiler it reads memory: the barrier keeps the stores before it. */
#define amx_load_b(bt)                                                                   \
    do {                                                                                 \
        __asm__ volatile("" ::: "memory");                                               \
        _tile_loadd(5, (bt), 64);                                                        \
    } while (0)

/* B rows 2p, 2p + 1 from 64-byte pieces a (rows 0..7) and b (rows 8..15). */
static inline void b_rows(uint8_t bt[8][64], int p, __m512i a, __m512i b)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    _mm512_store_si512(bt[2 * p], _mm512_permutex2var_epi32(a, even, b));
    _mm512_store_si512(bt[2 * p + 1], _mm512_permutex2var_epi32(a, odd, b));
}

/* 16 f16 row scales: 8 at p, 8 at q. */
static inline __m512 scales16(const uint8_t *p, const uint8_t *q)
{
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)),
        _mm_loadu_si128((const __m128i *)(const void *)q), 1);
    return _mm512_cvtph_ps(h);
}

static inline __m512i load512(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

/* Q4_0 and Q8_0: one tile product per block, then
 * s[m] += float(c[m] - off * sum_y[m]) * d_w * d_y[m]. */
static inline __attribute__((always_inline)) void
scale_q8_0_rows(float *s, int32_t c[4][16][16], __m512 dw, const char *y, size_t ys, int64_t nb,
                int64_t b, int nt, int32_t off)
{
    for (int i = 0; i < nt; i++)
        for (int m = 0; m < 16; m++) {
            const int row = 16 * i + m;
            float dy;
            int32_t sy;
            cpu_q8_0_aux(y + (size_t)row * ys, nb, b, &dy, &sy);
            __m512i v = _mm512_load_si512(c[i][m]);
            if (off)
                v = _mm512_sub_epi32(v, _mm512_set1_epi32(off * sy));
            float *o = s + 16 * row;
            _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(v),
                                                _mm512_mul_ps(dw, _mm512_set1_ps(dy)),
                                                _mm512_loadu_ps(o)));
        }
}

AMX_FN static void gemm_q8_0_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    const int64_t nb = n / BP_QK8_0;
    const size_t xbs = CPU_REPACK_ROWS * sizeof(struct bp_block_q8_0);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    _Alignas(64) int32_t c[4][16][16];
    _Alignas(64) uint8_t bt[8][64];
    memset(s, 0, sizeof(float) * 256 * (size_t)nt);
    amx_config();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *x0 = w0 + (size_t)b * xbs, *x1 = w1 + (size_t)b * xbs;
        cpu_x8_prefetch(x0 + CPU_X8_PREFETCH_BYTES, xbs);
        cpu_x8_prefetch(x1 + CPU_X8_PREFETCH_BYTES, xbs);
        for (int p = 0; p < 4; p++) b_rows(bt, p, load512(x0 + 16 + 64 * p), load512(x1 + 16 + 64 * p));
        amx_load_b(bt);
        const char *a = (const char *)y + (size_t)b * sizeof(struct bp_block_q8_0) + 2;
        AMX_PRODUCTS(_tile_dpbssd, a, ys, nt);
        AMX_STORE(c, nt);
        scale_q8_0_rows(s, c, scales16(x0, x1), y, ys, nb, b, nt, 0);
    }
    _tile_release();
}

AMX_FN static void gemm_q4_0_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    const int64_t nb = n / BP_QK4_0;
    const size_t xbs = CPU_REPACK_ROWS * sizeof(struct bp_block_q4_0);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    _Alignas(64) int32_t c[4][16][16];
    _Alignas(64) uint8_t bt[8][64];
    memset(s, 0, sizeof(float) * 256 * (size_t)nt);
    amx_config();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *x0 = w0 + (size_t)b * xbs, *x1 = w1 + (size_t)b * xbs;
        cpu_x8_prefetch(x0 + CPU_X8_PREFETCH_BYTES, xbs);
        cpu_x8_prefetch(x1 + CPU_X8_PREFETCH_BYTES, xbs);
        /* piece p: the low nibbles are k = 8p..8p+7, the high ones 16 more */
        for (int p = 0; p < 2; p++) {
            const __m512i v0 = load512(x0 + 16 + 64 * p), v1 = load512(x1 + 16 + 64 * p);
            b_rows(bt, p, _mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4));
            b_rows(bt, p + 2, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4),
                   _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4));
        }
        amx_load_b(bt);
        const char *a = (const char *)y + (size_t)b * sizeof(struct bp_block_q8_0) + 2;
        AMX_PRODUCTS(_tile_dpbsud, a, ys, nt);
        AMX_STORE(c, nt);
        scale_q8_0_rows(s, c, scales16(x0, x1), y, ys, nb, b, nt, 8);
    }
    _tile_release();
}

/* Q4_K: sub-block j's tile product is multiplied by its 6-bit scale in
 * int32 and summed over the super-block (exact, as in the VNNI kernel);
 * the min term sum_j m[j] * (sum of the activation's sub-block j) is one
 * madd per pair of sub-blocks; then
 * s += float(sumi) * d * d_y - float(summ) * dmin * d_y. */
AMX_FN static void gemm_q4_K_amx(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                 size_t ys, int nt)
{
    const int64_t nb = n / BP_QK_K;
    const size_t xbs = CPU_REPACK_ROWS * sizeof(struct bp_block_q4_K);
    const uint8_t *w0 = w, *w1 = (const uint8_t *)w + gs;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i k03 = _mm512_set1_epi32(0x03030303), kff = _mm512_set1_epi32(0xff);
    const __m512i klo = _mm512_set1_epi32(0xff), khi = _mm512_set1_epi32(0xff0000);
    _Alignas(64) int32_t c[4][16][16];
    _Alignas(64) int32_t sumi[4 * 16][16];
    _Alignas(64) uint8_t bt[8][64];
    memset(s, 0, sizeof(float) * 256 * (size_t)nt);
    amx_config();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *x0 = w0 + (size_t)b * xbs, *x1 = w1 + (size_t)b * xbs;
        cpu_x8_prefetch(x0 + CPU_X8_PREFETCH_BYTES, xbs);
        cpu_x8_prefetch(x1 + CPU_X8_PREFETCH_BYTES, xbs);
        /* the three packed scale words of 16 rows, row r in lane r */
        __m512i u[3];
        for (int q = 0; q < 3; q++)
            u[q] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(
                                          (const __m256i *)(const void *)(x0 + 32 + 32 * q))),
                                      _mm256_loadu_si256((const __m256i *)(const void *)(x1 + 32 + 32 * q)), 1);
        const __m512i sc_lo = _mm512_and_si512(u[0], k3f), mn_lo = _mm512_and_si512(u[1], k3f);
        const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u[2], k0f),
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[0], 6), k03), 4));
        const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u[2], 4), k0f),
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[1], 6), k03), 4));
        /* mins of sub-blocks 2p and 2p + 1 as the two int16 of each lane */
        __m512i mm[4];
        mm[0] = _mm512_or_si512(_mm512_and_si512(mn_lo, klo), _mm512_and_si512(_mm512_slli_epi32(mn_lo, 8), khi));
        mm[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn_lo, 16), klo),
                                _mm512_and_si512(_mm512_srli_epi32(mn_lo, 8), khi));
        mm[2] = _mm512_or_si512(_mm512_and_si512(mn_hi, klo), _mm512_and_si512(_mm512_slli_epi32(mn_hi, 8), khi));
        mm[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn_hi, 16), klo),
                                _mm512_and_si512(_mm512_srli_epi32(mn_hi, 8), khi));
        memset(sumi, 0, sizeof(int32_t) * 256 * (size_t)nt);
        const char *yb = (const char *)y + (size_t)b * sizeof(struct bp_block_q8_K);
        for (int j = 0; j < 8; j++) {
            const int g = j / 2;
            for (int k = 0; k < 4; k++) {
                const __m512i v0 = load512(x0 + 128 + 64 * (4 * g + k));
                const __m512i v1 = load512(x1 + 128 + 64 * (4 * g + k));
                if (j & 1)
                    b_rows(bt, k, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4),
                           _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4));
                else
                    b_rows(bt, k, _mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4));
            }
            amx_load_b(bt);
            const char *a = yb + offsetof(struct bp_block_q8_K, qs) + 32 * j;
            AMX_PRODUCTS(_tile_dpbsud, a, ys, nt);
            AMX_STORE(c, nt);
            const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(j < 4 ? sc_lo : sc_hi, 8 * (j & 3)), kff);
            for (int i = 0; i < nt; i++)
                for (int m = 0; m < 16; m++)
                    _mm512_store_si512(sumi[16 * i + m],
                        _mm512_add_epi32(_mm512_load_si512(sumi[16 * i + m]),
                                         _mm512_mullo_epi32(_mm512_load_si512(c[i][m]), sc)));
        }
        const __m512 dw = scales16(x0, x1), mw = scales16(x0 + 16, x1 + 16);
        for (int row = 0; row < 16 * nt; row++) {
            const struct bp_block_q8_K *q = (const void *)(yb + (size_t)row * ys);
            const __m256i bsv = _mm256_loadu_si256((const __m256i *)(const void *)q->bsums);
            const __m128i bp = _mm_hadd_epi16(_mm256_castsi256_si128(bsv), _mm256_extracti128_si256(bsv, 1));
            __m512i summ = _mm512_madd_epi16(mm[0], _mm512_set1_epi32(_mm_extract_epi32(bp, 0)));
            summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mm[1], _mm512_set1_epi32(_mm_extract_epi32(bp, 1))));
            summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mm[2], _mm512_set1_epi32(_mm_extract_epi32(bp, 2))));
            summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mm[3], _mm512_set1_epi32(_mm_extract_epi32(bp, 3))));
            const __m512 dy = _mm512_set1_ps(q->d);
            float *o = s + 16 * row;
            __m512 acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sumi[row])),
                                         _mm512_mul_ps(dw, dy), _mm512_loadu_ps(o));
            acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(mw, dy), acc);
            _mm512_storeu_ps(o, acc);
        }
    }
    _tile_release();
}

static bool amx_probe(void)
{
    struct cpu_isa isa;
    cpu_isa_detect(&isa);
    if (!isa.amx_tile || !isa.amx_int8 || !isa.os_amx)
        return false;
    /* Linux keeps the 8 KiB tile data out of a process's state until it
     * asks; without this the first tile load faults. */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

static atomic_int amx_state; /* 0 not asked, 1 active, 2 off */
static pthread_mutex_t amx_mu = PTHREAD_MUTEX_INITIALIZER;

bool cpu_amx_enable(bool want)
{
    pthread_mutex_lock(&amx_mu);
    if (atomic_load(&amx_state) == 0) {
        bool ok = false;
#if defined(CPU_HAVE_AMX)
        ok = want && amx_probe();
#else
        (void)want;
#endif
        atomic_store(&amx_state, ok ? 1 : 2);
    }
    pthread_mutex_unlock(&amx_mu);
    return atomic_load(&amx_state) == 1;
}

bool cpu_amx_active(void)
{
    return atomic_load_explicit(&amx_state, memory_order_relaxed) == 1;
}

cpu_gemm_amx_fn cpu_gemm_amx_for(enum bp_type t)
{
    if (!cpu_amx_active())
        return NULL;
#if defined(CPU_HAVE_AMX)
    static const cpu_gemm_amx_fn table[BP_TYPE_COUNT] = {
        [BP_TYPE_Q4_0] = gemm_q4_0_amx,
        [BP_TYPE_Q8_0] = gemm_q8_0_amx,
        [BP_TYPE_Q4_K] = gemm_q4_K_amx,
    };
    return (unsigned)t < BP_TYPE_COUNT ? table[t] : NULL;
#else
    (void)t;
    return NULL;
#endif
}
