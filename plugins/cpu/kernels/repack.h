/*
 * repack.h — the CPU plugin's own weight layout ("x8"): the blocks of 8
 * consecutive rows stored side by side, so that one pass over an activation
 * row feeds 8 output rows and the 8 row scales load as one vector.
 *
 * A repacked 2-D slice of R rows keeps its size: rows [8g, 8g+8) occupy the
 * same bytes as before, now as nb "x8 blocks" (block column b of the 8
 * rows); the last R % 8 rows stay in the plain ggml layout. So a plain row
 * r >= 8 * (R / 8) is still at r * row_size.
 *
 * x8 block of Q4_0 (144 bytes): d[8] (f16, row order), then qs[128]:
 *   qs[64 c + 8 r + j] = row r's qs[8 c + j], c = 0..1, j = 0..7
 *   (each byte still holds element i in its low and i + 16 in its high nibble).
 * x8 block of Q8_0 (272 bytes): d[8], then qs[256]:
 *   qs[64 c + 8 r + j] = row r's qs[8 c + j], c = 0..3.
 * x8 block of Q4_K (1152 bytes): d[8], dmin[8] (f16), then scales[96]:
 *   scales[32 c + 4 r + j] = row r's scales[4 c + j], c = 0..2 (each row's
 *   three packed 32-bit words side by side: one 256-bit load per word
 *   unpacks the 6-bit scales and mins of 8 rows at once), then qs[1024]:
 *   qs[64 c + 8 r + j] = row r's qs[8 c + j], c = 0..15.
 * x8 block of Q6_K (1680 bytes): d[8], then scales[128]:
 *   scales[32 c + 4 r + j] = row r's scales[4 c + j], c = 0..3, then two
 *   halves h of 768 bytes at 144 + 768 h, each 64-byte piece holding 8
 *   bytes of each of the 8 rows (piece[8 r + j] = row r's byte j):
 *   L(k) H(k) for k = 0..3, then L'(k) for k = 0..3, where L(k) is
 *   ql[64 h + 8 k ..], L'(k) is ql[64 h + 32 + 8 k ..], H(k) qh[32 h + 8 k ..].
 *   That is the order the kernel reads them (H(k) again with L'(k), from
 *   L1): one forward stream. With ql and qh in two regions 1 KB apart
 *   (the first layout) the same decode kernel streamed at 0.5-0.6 of the
 *   read bandwidth, and the hardware prefetcher was the bound.
 * x8 block of Q5_0 (176 bytes): d[8], then qh[32]: qh[8 k + r] = byte k of
 *   row r's qh (bit j of it: the fifth bit of element 8 k + j), then qs[128]
 *   as Q4_0's. One 64-bit load of qh[8 k ..] is the byte mask of the 64
 *   nibbles of one 512-bit register of qs.
 * x8 block of Q5_K (1408 bytes): d[8], dmin[8], scales[96] as Q4_K's, then
 *   qh[256]: qh[64 c + 8 r + j] = row r's qh[8 c + j], c = 0..3 (the fifth
 *   bits of the nibbles of qs piece 4 g + c sit in bits 2 g and 2 g + 1),
 *   then qs[1024] as Q4_K's.
 * x8 block of Q3_K (880 bytes): d[8], then scales[96] as Q4_K's (three
 *   packed words per row side by side), then hmask[256]: hmask[64 c + 8 r +
 *   j] = row r's hmask[8 c + j], c = 0..3, then qs[512]: qs[64 c + 8 r + j]
 *   = row r's qs[8 c + j], c = 0..7.
 * x8 block of IQ4_XS (1088 bytes): d[8], scales_h[8] (u16), then
 *   scales_l[32]: row r's 4 bytes at 4 r, then qs[1024] as Q4_K's.
 * x8 block of Q2_K (672 bytes): d[8], dmin[8], then scales[128]:
 *   scales[32 c + 4 r + j] = row r's scales[4 c + j], c = 0..3, then qs[512]
 *   as Q3_K's.
 * x8 block of IQ4_NL (144 bytes): Q4_0's.
 * x8 block of Q4_1 (160 bytes): d[8], m[8], then qs[128] as Q4_0's.
 * x8 block of Q5_1 (192 bytes): d[8], m[8], then qh[32] and qs[128] as
 *   Q5_0's.
 * The layout is a pure permutation of bytes, so filling a buffer with one
 * byte value means the same in both layouts.
 * With 8 bytes of a row side by side, one 64-bit broadcast of 8 activation
 * bytes meets all 8 rows in one 512-bit register (2 int32 lanes per row).
 *
 * The Q8_0 activation of a repacked weight carries, after its blocks (at
 * cpu_q8_0_aux_offset), one float scale and one int32 quant sum per block.
 */
#ifndef BP_CPU_REPACK_H
#define BP_CPU_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <backplane/bp_abi.h>
#include <backplane/bp_quant.h>

#define CPU_REPACK_ROWS 8

/* out[c * bs + 8 g + r] = dot(row r of x8 group g, activation row c), for
 * r < 8, g < ng, c < ncols (<= cpu_gemm_x8_cols, kernels.h): group g at w + g gs
 * (consecutive groups of one weight: gs = 8 row sizes), y rows ys bytes
 * apart. One call walks a chunk's groups: a call per group cost its two
 * indirect calls and the copy out of a scratch row. */
#define CPU_GEMM_MAX_COLS 4
#define CPU_GEMM_X8_PARAMS                                                               \
    int64_t n, float *s, size_t bs, const void *w, size_t gs, int64_t ng, const void *y, \
        size_t ys, int ncols
typedef void (*cpu_gemm_x8_fn)(CPU_GEMM_X8_PARAMS);

/* Some builds' kernels for some types (cpu_type_kernels.gemm_x8_cols) take
 * up to CPU_GEMM_WIDE_COLS activation rows a call: a batched decode step of
 * that many rows then unpacks each weight block once. Each column is still
 * computed exactly as when it is alone (the same operations in the same
 * order), so a row's result does not depend on the others. */
#define CPU_GEMM_WIDE_COLS 8

/* cpu_gemm_<T>_x8_<ISA> over an always-inline T##_x8(..., const int ncols)
 * with ncols a constant in each copy: the per-column accumulators stay in
 * registers instead of a stack array indexed at run time. */
#define CPU_X8_GROUPS(T, NC)                                                             \
    for (int64_t g_ = 0; g_ < ng; g_++)                                                  \
    T##_x8(n, s + (size_t)8 * g_, bs, (const uint8_t *)w + (size_t)g_ * gs, y, ys, NC)
#define CPU_X8_DISPATCH(T, ISA)                                                          \
    void cpu_gemm_##T##_x8_##ISA(CPU_GEMM_X8_PARAMS)                                     \
    {                                                                                    \
        switch (ncols) {                                                                 \
        case 1: CPU_X8_GROUPS(T, 1); break;                                              \
        case 2: CPU_X8_GROUPS(T, 2); break;                                              \
        case 3: CPU_X8_GROUPS(T, 3); break;                                              \
        default: CPU_X8_GROUPS(T, 4); break;                                             \
        }                                                                                \
    }
/* The same for kernels that take up to CPU_GEMM_WIDE_COLS columns. */
#define CPU_X8_DISPATCH_WIDE(T, ISA)                                                     \
    void cpu_gemm_##T##_x8_##ISA(CPU_GEMM_X8_PARAMS)                                     \
    {                                                                                    \
        switch (ncols) {                                                                 \
        case 1: CPU_X8_GROUPS(T, 1); break;                                              \
        case 2: CPU_X8_GROUPS(T, 2); break;                                              \
        case 3: CPU_X8_GROUPS(T, 3); break;                                              \
        case 4: CPU_X8_GROUPS(T, 4); break;                                              \
        case 5: CPU_X8_GROUPS(T, 5); break;                                              \
        case 6: CPU_X8_GROUPS(T, 6); break;                                              \
        case 7: CPU_X8_GROUPS(T, 7); break;                                              \
        default: CPU_X8_GROUPS(T, 8); break;                                             \
        }                                                                                \
    }

/* How far ahead of the bytes being read the x8 decode kernels (VNNI and
 * AVX2, every type) ask for weight bytes: into L2 (prefetcht1) at
 * CPU_X8_L2_PREFETCH_BYTES and again into L1 (prefetcht0) at
 * CPU_X8_L1_PREFETCH_BYTES, one request per 64 bytes as they are first
 * read, so the requests come spread over a block instead of a burst at its
 * start. Prefetches never fault, so running past the end of the tensor is
 * harmless. (A compiler may drop them silently: see cpu_x8_prefetch in
 * simd.h; tests/cpu_prefetch_check.sh checks that they are there.) They
 * read cpu_x8_prefetch_bytes, set once at plugin load per CPU family
 * (prefetch.c), unless the build defines them as constants.
 *
 * The near L1 request is what lets a kernel keep pace with a plain read:
 * with L2 requests alone, the demand loads still miss L1 and wait on fill
 * buffers while the kernel computes. On a 2-vCPU Granite Rapids-class
 * Xeon (AMX exposed), one thread, K = 2048, N = 5632,
 * `bench mul_mat` against the same-run read probe, two alternated passes,
 * L2 at 16 KiB (Q4_0, Q8_0) or 4 KiB (Q4_K, Q6_K) alone -> L2 at 4 KiB plus
 * L1 at 2 KiB: Q4_0 0.86-0.88 -> 0.95-0.96, Q8_0 0.88-0.89 -> 0.92-0.95,
 * Q4_K 0.81-0.83 -> 0.88-0.91, Q6_K 0.81-0.83 -> 0.88-0.89 (the AVX2
 * kernels on the same machine: Q4_0 0.85-0.89 -> 0.90-0.91, Q4_K
 * 0.77-0.81 -> 0.81-0.83, Q6_K 0.74-0.75 -> 0.83-0.85). In a standalone
 * harness of the Q4_0 kernel over 576 MiB, L2 at 4 KiB with L1 at 0.5-2
 * KiB gave 0.92-0.97 of the fastest read loop, L2 alone at 2-32 KiB
 * 0.87-0.93, L1 alone at 2 KiB 0.89-0.93, no prefetch 0.79, NTA 0.31.
 *
 * With L2 requests only, on an Emerald Rapids VM without AMX:
 * per piece at 4 KiB against 2 KiB made Q4_K 1.12x and Q6_K 1.16x as fast,
 * and a burst reaching past about 4 KiB missed to memory and held the fill
 * buffers the demand loads then waited for. (On a Zen 4 VM
 * 4-32 KiB were indistinguishable and no prefetch cost Q6_K a
 * quarter.) */
struct cpu_x8_prefetch {
    int l2, l1; /* bytes ahead */
    int l1_32;  /* the L1 distance of the 32-weight-block walks (Q4_0, Q5_0,
                 * Q8_0): they read a block in a third of a K-quant's time
                 * and want their own (prefetch.c) */
};
/* The distances in use (prefetch.c: per CPU family, 4096 and 2048 until
 * cpu_x8_prefetch_choose runs). */
extern struct cpu_x8_prefetch cpu_x8_prefetch_bytes;
/* Set cpu_x8_prefetch_bytes from the running CPU's vendor and family, or
 * from env ("L2,L1[,L1_32]" in bytes, multiples of 64 up to 65536, L1_32
 * defaulting to L1; the BACKPLANE_CPU_PREFETCH variable) when given; desc
 * gets one line saying
 * which. False when env is given but malformed (the CPU's row is used). */
bool cpu_x8_prefetch_choose(const char *env, char *desc, size_t cap);
#ifndef CPU_X8_L2_PREFETCH_BYTES
#define CPU_X8_L2_PREFETCH_BYTES ((size_t)cpu_x8_prefetch_bytes.l2)
#endif
#ifndef CPU_X8_L1_PREFETCH_BYTES
#define CPU_X8_L1_PREFETCH_BYTES ((size_t)cpu_x8_prefetch_bytes.l1)
#endif
#ifndef CPU_X8_L1_PREFETCH_BYTES_32
#define CPU_X8_L1_PREFETCH_BYTES_32 ((size_t)cpu_x8_prefetch_bytes.l1_32)
#endif

/* True for the weight types this build repacks (every type with an x8
 * layout, except Q6_K in builds without its x8 kernel): THE list of what a
 * CPU_REPACK buffer repacks (repack_io.c) and what the weight buffer type
 * answers for (plugin.c). */
bool cpu_repack_type_ok(enum bp_type t);
/* Rearrange 8 plain rows (row_size bytes apart in src) of n elements into
 * one x8 group at dst, and back. dst and src do not overlap. */
void cpu_repack_pack(enum bp_type t, void *dst, const void *src, size_t row_size, int64_t n);
void cpu_repack_unpack(enum bp_type t, void *dst, const void *src, size_t row_size, int64_t n);

/* Byte offset of the per-block aux data after a Q8_0 row of nb blocks, and
 * the bytes of the whole row with it. */
static inline size_t cpu_q8_0_aux_offset(int64_t nb)
{
    return ((size_t)nb * sizeof(struct bp_block_q8_0) + 63) & ~(size_t)63;
}
/* Where its int32 quant sums start: after the nb float scales. */
static inline size_t cpu_q8_0_aux_sums_offset(int64_t nb)
{
    return cpu_q8_0_aux_offset(nb) + (size_t)nb * 4;
}
static inline size_t cpu_q8_0_aux_row_size(int64_t nb)
{
    return cpu_q8_0_aux_sums_offset(nb) + (size_t)nb * 4;
}
/* Block b's scale, as a float, from the aux data of a Q8_0 row of nb
 * blocks (its quant sum, what the x8 kernels take weight offsets out with,
 * is the int32 at cpu_q8_0_aux_sums_offset(nb) + 4 b). */
static inline float cpu_q8_0_aux_d(const char *row, int64_t nb, int64_t b)
{
    float d;
    memcpy(&d, row + cpu_q8_0_aux_offset(nb) + 4 * b, 4);
    return d;
}
/* Fill the aux data (scale as float, sum of quants) of a Q8_0 row. */
void cpu_q8_0_fill_aux(void *row, int64_t n);

/* Q4_1 and Q5_1 weights meet ggml's Q8_1 activation, as ggml-cpu's dots do
 * (its vec_dot_type for both): a Q8_0 row (the same quants and f16 scales)
 * with aux data shaped as the Q8_0 aux's, each block's scale as a float,
 * then in place of the quant sum Q8_1's s = d * sum(qs) (a float, with d
 * the unrounded amax / 127, rounded to f16). The min term is m * s: with
 * the exact m * f16(d) * sum(qs) instead, the 1B model's logits stood
 * 0.18-0.44 from llama.cpp's. Their x8 kernels read the float scales as
 * the Q8_0 ones do (cpu_q8_0_aux_d); the unsigned quants need no sum. */
static inline bool cpu_type_q8_1(enum bp_type t)
{
    return t == BP_TYPE_Q4_1 || t == BP_TYPE_Q5_1;
}
static inline size_t cpu_q8_1_row_size(int64_t nb)
{
    return cpu_q8_0_aux_row_size(nb);
}
/* Block b's s of a Q8_1 row of nb blocks. */
static inline float cpu_q8_1_s(const void *row, int64_t nb, int64_t b)
{
    float v;
    memcpy(&v, (const char *)row + cpu_q8_0_aux_sums_offset(nb) + 4 * b, 4);
    return v;
}
/* Write the aux data (scale as float, s) of each block of a Q8_1 row: x
 * its n source floats, row already quantized to Q8_0 from them. */
void cpu_q8_1_fill_s(const float *x, void *row, int64_t n);

/* The reference: row by row through the scalar vec_dot of each block,
 * adding the per-block terms in the plain reference's order. */
void cpu_gemm_q4_0_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q8_0_x8_ref(CPU_GEMM_X8_PARAMS);
/* The K-quants take Q8_K activation rows as they are (their bsums carry the
 * min / -32 terms): no aux data. */
void cpu_gemm_q4_K_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q6_K_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_0_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_K_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q3_K_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_xs_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q2_K_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_iq4_nl_x8_ref(CPU_GEMM_X8_PARAMS);
/* Q4_1 and Q5_1 take Q8_1 rows (cpu_q8_1_row_size bytes apart). */
void cpu_gemm_q4_1_x8_ref(CPU_GEMM_X8_PARAMS);
void cpu_gemm_q5_1_x8_ref(CPU_GEMM_X8_PARAMS);

#endif
