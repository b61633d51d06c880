/*
 * matmul.c — MUL_MAT: dst[n, m] = sum_k W[k, n] * X[k, m], W broadcast over
 * dims 2 and 3 (W slice i2 / (e2 / d2)).
 *
 * The fast path (W rows packed along k, dst rows contiguous):
 *  1. every activation row is converted ONCE into the node's share of the
 *     graph work buffer as the kernel's vec_dot_type (Q8_0 for Q4_0/Q8_0,
 *     with Q8_1's sums after the row for Q4_1/Q5_1, Q8_K with block sums
 *     for the K-quants, F32 for float weights), the
 *     rows split evenly over the threads; then a barrier;
 *  2. the (N weight rows) x (M*batch activation rows) output is cut into
 *     2-D chunks of 16 x 16 (64 along the other side when one side is a
 *     single row); when that gives fewer than four chunks per thread the
 *     longer side is cut into one chunk per thread instead. Each thread
 *     starts at the chunk with its own index and takes the next from an
 *     atomic counter (initialised to nth), so a thread slowed by a noisy
 *     neighbour simply takes fewer chunks;
 *  3. inside a chunk, 16 x 16 blocks: one activation row meets 16 weight
 *     rows, the 16 results staged on the stack and stored as one row piece.
 * Every output element is one vec_dot, so results do not depend on the
 * thread count or the chunk order.
 *
 * A weight in the x8 layout (kernels/repack.h, a CPU_REPACK buffer) runs
 * chunks of 16 x MM_X8_ROWS (128) with row boundaries on multiples of 8
 * (16 from MM_AMX_MIN_ROWS activation rows): one gemm_x8 call
 * takes 8 weight rows and up to 4 activation rows (8 for the Q4_0 and Q8_0
 * kernels of the AVX-512 build: a batched decode step of up to 8 rows then
 * unpacks each weight block once), so each weight block is unpacked once
 * for 4 (8) outputs and each activation block once for 8; the
 * plain tail rows (R % 8) go through vec_dot. Its Q8_0 activation rows carry
 * per-block float scales and quant sums (cpu_q8_0_fill_aux). Where AMX is
 * active (kernels/gemm_amx.h) and a node has MM_AMX_MIN_ROWS activation
 * rows or more, whole 16 x 16 tiles go through the tile kernel instead
 * (mm_chunk_amx); both grids then align to 16 on both sides.
 *
 * Float weights (F32 / F16 / BF16) with at least MM_FLOAT_MIN_ROWS
 * activation rows per weight slice run the same chunks through the
 * build's register-tiled gemm_float (kernels/gemm_float_x86.c) when it has
 * one: each weight vector is converted once for several activation rows.
 * Its summation order is fixed per output element (not vec_dot's), and the
 * choice depends on the node's shape only, so results still do not depend
 * on the thread count. M = 1 (decode, memory-bound) stays on vec_dot.
 *
 * Anything else (a transposed W view) takes the strided reference path,
 * which accumulates in double.
 */
#include <stdatomic.h>

#include "../kernels/gemm_amx.h"
#include "../kernels/kernels.h"
#include "../ops.h"
#include "matmul_blas.h"

#define MM_BLOCK 16
/* One activation row per weight slice (decode) stays on vec_dot: a tile
 * has nothing to share. From 2 rows the tiled kernel is as fast or faster
 * (measured K = N = 4096, M = 2 and 3, 1 thread). */
#define MM_FLOAT_MIN_ROWS 2
/* The tiled kernel's chunks are 16 weight rows x MM_FLOAT_ROWS activation
 * rows (a multiple of every build's tile width, 6 or 4): taller than 16 so
 * each weight row is streamed fewer times (measured: 16 x 48 about 10%
 * faster than 16 x 16 at K = 4096). */
#define MM_FLOAT_ROWS 48
/* Chunks of repacked (x8) weights in prefill are 16 weight rows x 128
 * activation rows: the chunk's activation rows (a Q8 copy, 556 KB for
 * K = 4096, 822 KB of Q8_K for K = 5632) stay in the core's own L2 while
 * the weight streams past them, so the whole weight is read M / 128 times
 * instead of M / 16. With 16 the two threads' weight traffic (570 MB per
 * Q8_0 call at M = 512) went through the shared L3 and memory, and 1 -> 2
 * threads scaled 1.0-1.95x (median 1.6) on the 2-core VM; with 64,
 * 1.84-2.05x in the same runs. 128 is one AMX call's CPU_AMX_MAX_TILES
 * tiles: each weight panel is built once per 128 rows instead of twice
 * (a 128-token prompt reads and unpacks every weight once): MUL_MAT's
 * thread CPU time in builtin:1b's 128-token prefill went down 3.7% (q4_K_M),
 * 4.5% (Q4_0), 10.5% (Q8_0), medians of 3 alternating old/new runs. */
#define MM_X8_ROWS (CPU_AMX_ROWS * CPU_AMX_MAX_TILES)
/* With AMX (kernels/gemm_amx.c), x8 weights meet at least MM_AMX_MIN_ROWS
 * activation rows (a node's total) in 16 x 16 tiles; fewer stay on the
 * VNNI x8 kernel, which decode uses. One tile already wins: K = N = 2048,
 * M = 16, 1 thread, AMX / VNNI in alternating rounds 1.26x (Q4_K) to
 * 1.55x (Q4_0); M = 32 1.44x to 2.1x. */
#define MM_AMX_MIN_ROWS 16
#define MM_FLOAT_ALIGN 12

static bool w_packed(const struct bp_tensor *w)
{
    return w->nb[0] == bp_type_size((enum bp_type)w->type) &&
           w->ne[0] % bp_type_block_size((enum bp_type)w->type) == 0;
}

static bool fast_path(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0];
    const struct cpu_type_kernels *k = cpu_kernels_for((enum bp_type)w->type);
    return k->vec_dot && w_packed(w) && t->nb[0] == sizeof(float) &&
           bp_type_block_size(k->vec_dot_type) > 0 &&
           w->ne[0] % bp_type_block_size(k->vec_dot_type) == 0;
}

bool cpu_supports_mul_mat(const struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    if (!w || !x || t->type != BP_TYPE_F32 || !cpu_is_float(x->type))
        return false;
    if (!cpu_is_float(w->type) && !(bp_type_is_quantized((enum bp_type)w->type) && fast_path(t)))
        return false;
    if (cpu_tensor_repacked(w) && !cpu_kernels_for((enum bp_type)w->type)->gemm_x8)
        return false;
    if (!cpu_shape_ok(w)) /* its dims divide X's */
        return false;
    return w->ne[0] == x->ne[0] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0 &&
           t->ne[0] == w->ne[1] && t->ne[1] == x->ne[1] && t->ne[2] == x->ne[2] &&
           t->ne[3] == x->ne[3];
}

/* True when X rows can be fed to vec_dot in place (no conversion pass). */
static bool x_direct(const struct bp_tensor *x, enum bp_type vdt)
{
    return vdt == BP_TYPE_F32 && x->type == BP_TYPE_F32 && x->nb[0] == sizeof(float);
}

/* With an x8 weight, Q8_0 rows carry their aux data: they are fed to
 * gemm_x8 ys bytes apart. (Q8_1 rows always carry theirs.) */
static bool x_aux(const struct bp_tensor *t)
{
    return cpu_tensor_repacked(t->src[0]) && !cpu_type_q8_1((enum bp_type)t->src[0]->type) &&
           cpu_kernels_for((enum bp_type)t->src[0]->type)->vec_dot_type == BP_TYPE_Q8_0;
}

/* Q4_1 and Q5_1 weights: Q8_0 rows followed by Q8_1's sums (repack.h). */
static bool x_q8_1(const struct bp_tensor *t)
{
    return cpu_type_q8_1((enum bp_type)t->src[0]->type);
}

static size_t x_row_size(const struct bp_tensor *t)
{
    const enum bp_type vdt = cpu_kernels_for((enum bp_type)t->src[0]->type)->vec_dot_type;
    if (x_aux(t))
        return cpu_q8_0_aux_row_size(t->src[0]->ne[0] / BP_QK8_0);
    if (x_q8_1(t))
        return cpu_q8_1_row_size(t->src[0]->ne[0] / BP_QK8_0);
    return bp_row_size(vdt, t->src[0]->ne[0]);
}

size_t cpu_work_mul_mat(const struct bp_tensor *t)
{
    if (!fast_path(t))
        return 0;
    const struct bp_tensor *x = t->src[1];
    const enum bp_type vdt = cpu_kernels_for((enum bp_type)t->src[0]->type)->vec_dot_type;
    if (x_direct(x, vdt))
        return 0;
    return x_row_size(t) * (size_t)(x->ne[1] * x->ne[2] * x->ne[3]);
}

size_t cpu_scratch_mul_mat(const struct bp_tensor *t)
{
    /* One F32 row to stage a non-F32 or strided activation row before it is
     * quantized. */
    return fast_path(t) ? (size_t)t->src[0]->ne[0] * sizeof(float) : 0;
}

/* ---- step 1: the activation, converted once ---- */

static void convert_x(const struct cpu_compute_params *p, const struct bp_tensor *t,
                      const struct cpu_type_kernels *k)
{
    const struct bp_tensor *x = t->src[1];
    const int64_t K = x->ne[0], rows = x->ne[1] * x->ne[2] * x->ne[3];
    const size_t rs = x_row_size(t);
    const cpu_from_float_fn from_float = cpu_kernels_for(k->vec_dot_type)->from_float;
    float *stage = p->wdata;
    const bool aux = x_aux(t), q8_1 = x_q8_1(t);
    int64_t r0, r1;
    cpu_split(rows, p, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_row_index(x, r, &i1, &i2, &i3);
        const char *src = cpu_at(x, 0, i1, i2, i3);
        const float *f;
        if (x->type == BP_TYPE_F32 && x->nb[0] == sizeof(float)) {
            f = (const float *)(const void *)src;
        } else {
            for (int64_t i = 0; i < K; i++) stage[i] = cpu_load(src + (size_t)i * x->nb[0], x->type);
            f = stage;
        }
        from_float(f, (char *)p->wshared + (size_t)r * rs, K);
        if (aux)
            cpu_q8_0_fill_aux((char *)p->wshared + (size_t)r * rs, K);
        if (q8_1)
            cpu_q8_1_fill_s(f, (char *)p->wshared + (size_t)r * rs, K);
    }
}

/* ---- steps 2 and 3: chunks and blocks ---- */

struct mm_shape {
    const struct bp_tensor *w, *x, *t;
    cpu_vec_dot_fn vec_dot;
    cpu_gemm_x8_fn gemm_x8;  /* non-NULL: W is in the x8 layout */
    cpu_gemm_amx_fn gemm_amx;  /* non-NULL: and whole 16-row tiles go through AMX */
    cpu_gemm_float_fn gemm_float;  /* non-NULL: float W through the tiled kernel */
    int x8_cols;  /* the most activation rows one gemm_x8 call takes */
    int64_t K, nr0, nr1;
    int64_t r2, r3;
    const char *xbase;  /* converted rows (row_stride apart) or NULL: X in place */
    size_t row_stride;
};

static void mm_chunk(const struct mm_shape *s, int64_t ir0_start, int64_t ir0_end,
                     int64_t ir1_start, int64_t ir1_end)
{
    const struct bp_tensor *w = s->w, *x = s->x, *t = s->t;
    float tmp[MM_BLOCK];
    for (int64_t iir1 = ir1_start; iir1 < ir1_end; iir1 += MM_BLOCK) {
        for (int64_t iir0 = ir0_start; iir0 < ir0_end; iir0 += MM_BLOCK) {
            const int64_t e1 = iir1 + MM_BLOCK < ir1_end ? iir1 + MM_BLOCK : ir1_end;
            const int64_t e0 = iir0 + MM_BLOCK < ir0_end ? iir0 + MM_BLOCK : ir0_end;
            for (int64_t ir1 = iir1; ir1 < e1; ir1++) {
                int64_t i11, i12, i13;
                cpu_row_index(x, ir1, &i11, &i12, &i13);
                const char *xr = s->xbase ? s->xbase + (size_t)ir1 * s->row_stride
                                          : cpu_at(x, 0, i11, i12, i13);
                const char *wbase = cpu_at(w, 0, 0, i12 / s->r2, i13 / s->r3);
                for (int64_t ir0 = iir0; ir0 < e0; ir0++)
                    s->vec_dot(s->K, &tmp[ir0 - iir0], wbase + (size_t)ir0 * w->nb[1], xr);
                memcpy(cpu_at(t, iir0, i11, i12, i13), tmp, (size_t)(e0 - iir0) * sizeof(float));
            }
        }
    }
}

/* The x8 weight: chunk rows start on multiples of 8 (dr0 is one). The
 * chunk's activation rows go in groups of up to x8_cols (4, or
 * CPU_GEMM_WIDE_COLS where the type's kernel takes them) that read the same W
 * slice, and each group meets all of the chunk's whole x8 groups in one
 * gemm_x8 call that writes its output rows in place (through a scratch row
 * only where a group's output rows are not evenly spaced); the rows after
 * the last x8 group go through vec_dot. A call per 8 weight rows, with the
 * row index divisions and the copy out, cost the Q4_0 kernel 5-7 % from L2
 * at decode. */
static void mm_chunk_x8_vnni(const struct mm_shape *s, int64_t ir0_start, int64_t ir0_end,
                             int64_t ir1_start, int64_t ir1_end)
{
    const struct bp_tensor *w = s->w, *x = s->x, *t = s->t;
    const int64_t packed = s->nr0 / CPU_REPACK_ROWS * CPU_REPACK_ROWS;
    const int64_t x8_end = ir0_end < packed ? ir0_end : packed;
    const int64_t ng = x8_end > ir0_start ? (x8_end - ir0_start) / CPU_REPACK_ROWS : 0;
    const size_t gs = CPU_REPACK_ROWS * w->nb[1];
    float tmp[CPU_GEMM_WIDE_COLS][CPU_REPACK_ROWS];
    for (int64_t ir1 = ir1_start; ir1 < ir1_end;) {
        int64_t i11, i12, i13, j11, j12, j13;
        char *dst[CPU_GEMM_WIDE_COLS];
        cpu_row_index(x, ir1, &i11, &i12, &i13);
        dst[0] = cpu_at(t, ir0_start, i11, i12, i13);
        int nc = 1;
        while (nc < s->x8_cols && ir1 + nc < ir1_end) {
            cpu_row_index(x, ir1 + nc, &j11, &j12, &j13);
            if (j12 / s->r2 != i12 / s->r2 || j13 / s->r3 != i13 / s->r3)
                break;
            dst[nc++] = cpu_at(t, ir0_start, j11, j12, j13);
        }
        const char *wr = cpu_at(w, 0, ir0_start, i12 / s->r2, i13 / s->r3);
        const char *xr = s->xbase + (size_t)ir1 * s->row_stride;
        /* in place: float rows, evenly spaced (bs floats apart) */
        const ptrdiff_t d = nc > 1 ? dst[1] - dst[0] : 0;
        bool direct = t->nb[0] == sizeof(float) && d >= 0 && d % (ptrdiff_t)sizeof(float) == 0;
        for (int c = 2; c < nc && direct; c++) direct = dst[c] - dst[0] == c * d;
        if (ng > 0 && direct) {
            s->gemm_x8(s->K, (float *)(void *)dst[0], (size_t)d / sizeof(float), wr, gs, ng, xr,
                       s->row_stride, nc);
        } else {
            for (int64_t g = 0; g < ng; g++) {
                s->gemm_x8(s->K, &tmp[0][0], CPU_REPACK_ROWS, wr + (size_t)g * gs, gs, 1, xr,
                           s->row_stride, nc);
                for (int c = 0; c < nc; c++)
                    memcpy(dst[c] + (size_t)g * CPU_REPACK_ROWS * t->nb[0], tmp[c],
                           CPU_REPACK_ROWS * sizeof(float));
            }
        }
        for (int64_t r = ir0_start + ng * CPU_REPACK_ROWS; r < ir0_end; r++)
            for (int c = 0; c < nc; c++)
                s->vec_dot(s->K, (float *)(void *)(dst[c] + (size_t)(r - ir0_start) * t->nb[0]),
                           wr + (size_t)(r - ir0_start) * w->nb[1], xr + (size_t)c * s->row_stride);
        ir1 += nc;
    }
}

/* W slice of activation row r, as one number. */
static int64_t mm_slice(const struct mm_shape *s, int64_t r, int64_t *i11, int64_t *i12,
                        int64_t *i13)
{
    cpu_row_index(s->x, r, i11, i12, i13);
    return *i12 / s->r2 + (*i13 / s->r3) * s->w->ne[2];
}

/* The x8 weight through AMX: activation rows in tiles of 16 that start on
 * multiples of 16 (the grid's dr1 is one) and read one W slice, weight rows
 * in pairs of x8 groups from multiples of 16 (dr0); a tile that crosses a
 * slice, the last partial tile and a lone x8 group go through the x8 kernel.
 * So which rows take AMX depends on the shape only, never on the chunks or
 * the thread count. Up to CPU_AMX_MAX_TILES tiles share each weight pair. */
static void mm_chunk_amx(const struct mm_shape *s, int64_t ir0_start, int64_t ir0_end,
                         int64_t ir1_start, int64_t ir1_end)
{
    enum { T = CPU_AMX_ROWS, MAXR = CPU_AMX_ROWS * CPU_AMX_MAX_TILES };
    const struct bp_tensor *w = s->w, *t = s->t;
    const int64_t pairs_end = s->nr0 / T * T < ir0_end ? s->nr0 / T * T : ir0_end;
    _Alignas(64) float tmp[MAXR][T];
    int64_t i11[MAXR], i12[MAXR], i13[MAXR];
    for (int64_t ir1 = ir1_start; ir1 < ir1_end;) {
        const int64_t slice = mm_slice(s, ir1, &i11[0], &i12[0], &i13[0]);
        int nt = 0;
        while (nt < CPU_AMX_MAX_TILES && ir1 + T * (nt + 1) <= ir1_end &&
               mm_slice(s, ir1 + T * nt + T - 1, &i11[T * nt + T - 1], &i12[T * nt + T - 1],
                        &i13[T * nt + T - 1]) == slice)
            nt++;
        if (nt == 0) {
            const int64_t e = ir1 + T < ir1_end ? ir1 + T : ir1_end;
            mm_chunk_x8_vnni(s, ir0_start, ir0_end, ir1, e);
            ir1 = e;
            continue;
        }
        for (int m = 1; m < T * nt; m++) cpu_row_index(s->x, ir1 + m, &i11[m], &i12[m], &i13[m]);
        const char *wbase = cpu_at(w, 0, 0, i12[0] / s->r2, i13[0] / s->r3);
        const char *xr = s->xbase + (size_t)ir1 * s->row_stride;
        int64_t ir0 = ir0_start;
        for (; ir0 + T <= pairs_end; ir0 += T) {
            s->gemm_amx(s->K, &tmp[0][0], wbase + (size_t)ir0 * w->nb[1],
                        CPU_REPACK_ROWS * w->nb[1], xr, s->row_stride, nt);
            for (int m = 0; m < T * nt; m++)
                memcpy(cpu_at(t, ir0, i11[m], i12[m], i13[m]), tmp[m], sizeof tmp[m]);
        }
        if (ir0 < ir0_end)
            mm_chunk_x8_vnni(s, ir0, ir0_end, ir1, ir1 + T * nt);
        ir1 += T * nt;
    }
}

static void mm_chunk_x8(const struct mm_shape *s, int64_t ir0_start, int64_t ir0_end,
                        int64_t ir1_start, int64_t ir1_end)
{
    if (s->gemm_amx)
        mm_chunk_amx(s, ir0_start, ir0_end, ir1_start, ir1_end);
    else
        mm_chunk_x8_vnni(s, ir0_start, ir0_end, ir1_start, ir1_end);
}

/* Float weights, many activation rows: the chunk's weight rows meet up to
 * MM_FLOAT_ROWS activation rows at a time that read the same W slice, in one
 * gemm_float call that writes the outputs in place. */
static void mm_chunk_float(const struct mm_shape *s, int64_t ir0_start, int64_t ir0_end,
                           int64_t ir1_start, int64_t ir1_end)
{
    const struct bp_tensor *w = s->w, *x = s->x, *t = s->t;
    const float *xr[MM_FLOAT_ROWS];
    float *yr[MM_FLOAT_ROWS];
    for (int64_t ir1 = ir1_start; ir1 < ir1_end;) {
        int64_t i11, i12, i13;
        cpu_row_index(x, ir1, &i11, &i12, &i13);
        const int64_t w2 = i12 / s->r2, w3 = i13 / s->r3;
        int nc = 0;
        for (; nc < MM_FLOAT_ROWS && ir1 < ir1_end; nc++, ir1++) {
            cpu_row_index(x, ir1, &i11, &i12, &i13);
            if (i12 / s->r2 != w2 || i13 / s->r3 != w3)
                break;
            const char *xp = s->xbase ? s->xbase + (size_t)ir1 * s->row_stride
                                      : cpu_at(x, 0, i11, i12, i13);
            xr[nc] = (const float *)(const void *)xp;
            yr[nc] = (float *)(void *)cpu_at(t, ir0_start, i11, i12, i13);
        }
        s->gemm_float(s->K, cpu_at(w, 0, ir0_start, w2, w3), w->nb[1], ir0_end - ir0_start, xr,
                      yr, nc);
    }
}

/* The chunk grid of step 2 for nth threads; it depends on nth only, so a
 * chunk computes the same rows whichever thread takes it. */
struct mm_grid {
    int64_t nchunk0, dr0, dr1, total;
};

static struct mm_shape mm_shape_of(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const struct cpu_type_kernels *k = cpu_kernels_for((enum bp_type)w->type);
    const bool direct = x_direct(x, k->vec_dot_type);
    const bool tiled = !cpu_tensor_repacked(w) && k->vec_dot_type == BP_TYPE_F32 &&
                       x->ne[1] * (x->ne[2] / w->ne[2]) >= MM_FLOAT_MIN_ROWS;
    const int64_t nr1 = x->ne[1] * x->ne[2] * x->ne[3];
    return (struct mm_shape){
        .w = w, .x = x, .t = t, .vec_dot = k->vec_dot, .K = w->ne[0],
        .gemm_x8 = cpu_tensor_repacked(w) ? k->gemm_x8 : NULL,
        .gemm_amx = cpu_tensor_repacked(w) && !direct && nr1 >= MM_AMX_MIN_ROWS
                        ? cpu_gemm_amx_for((enum bp_type)w->type) : NULL,
        .gemm_float = tiled ? k->gemm_float : NULL, .x8_cols = cpu_gemm_x8_cols(k),
        .nr0 = w->ne[1], .nr1 = nr1,
        .r2 = x->ne[2] / w->ne[2], .r3 = x->ne[3] / w->ne[3],
        .xbase = direct ? NULL : p->wshared, .row_stride = direct ? 0 : x_row_size(t),
    };
}

/* Weight rows per chunk at decode (one activation row): nr0 / (4 nth),
 * within [MM_DECODE_CHUNK_MIN, MM_DECODE_CHUNK_MAX]. Each thread owns a
 * contiguous range of chunks (task_claim.h), so their size only sets how
 * finely an idle thread can take over a late one's rows, while every chunk
 * costs its claim, grid and dispatch work: with 64-row chunks the Q4_0 x8
 * kernel ran from L2 at 34.2-34.4 GB/s, with 1024-row ones at 36.0-37.2
 * (1 thread, K = 2048, alternating). Four chunks a thread keep the
 * take-over fine enough; the minimum keeps K and V's 256 rows in four. */
#define MM_DECODE_CHUNK_MIN 64
#define MM_DECODE_CHUNK_MAX 1024
static int64_t mm_decode_chunk(int64_t nr0, int nth)
{
    const int64_t c = nr0 / (4 * (int64_t)nth);
    return c < MM_DECODE_CHUNK_MIN ? MM_DECODE_CHUNK_MIN : c > MM_DECODE_CHUNK_MAX ? MM_DECODE_CHUNK_MAX : c;
}

/* A batched decode step (x8 weights, at most x8_cols activation rows: one
 * gemm_x8 call per weight group meets them all) streams the weight once,
 * as one row does, so it takes the decode chunks too: with 16-row chunks
 * each chunk's claim, grid and row setup came back every 2 x8 groups. */
static bool mm_streams_once(const struct mm_shape *s)
{
    return s->nr1 == 1 || (s->gemm_x8 && s->nr1 <= s->x8_cols);
}

static struct mm_grid mm_grid_of(const struct mm_shape *s, int nth)
{
    const int64_t chunk = mm_streams_once(s) ? mm_decode_chunk(s->nr0, nth) : s->nr0 == 1 ? 64 : 16;
    const int64_t chunk1 = s->gemm_float ? MM_FLOAT_ROWS : s->gemm_x8 ? MM_X8_ROWS : chunk;
    int64_t nchunk0 = (s->nr0 + chunk - 1) / chunk;
    int64_t nchunk1 = (s->nr1 + chunk1 - 1) / chunk1;
    bool per_thread = false;
    if (nchunk0 * nchunk1 < (int64_t)nth * 4) {
        nchunk0 = s->nr0 > s->nr1 ? nth : 1;
        nchunk1 = s->nr0 > s->nr1 ? 1 : nth;
        per_thread = true;
    }
    int64_t dr0 = (s->nr0 + nchunk0 - 1) / nchunk0;
    /* AMX tiles start on multiples of 16 in every grid. The grid follows
     * the shape alone, not whether AMX runs (BACKPLANE_CPU_AMX, bp_cpu_set_amx),
     * so a chunk count planned once stays right when it is switched. */
    const bool tiles16 = s->gemm_x8 && s->nr1 >= MM_AMX_MIN_ROWS;
    const int64_t align0 = tiles16 ? CPU_AMX_ROWS : s->gemm_x8 ? CPU_REPACK_ROWS : 1;
    dr0 = (dr0 + align0 - 1) / align0 * align0;
    int64_t dr1 = (s->nr1 + nchunk1 - 1) / nchunk1;
    if (tiles16) {
        dr1 = (dr1 + CPU_AMX_ROWS - 1) / CPU_AMX_ROWS * CPU_AMX_ROWS;
        nchunk1 = (s->nr1 + dr1 - 1) / dr1;
    }
    if (s->gemm_float && !per_thread) { /* whole tiles; the last chunk takes the rest */
        dr1 = (dr1 + MM_FLOAT_ALIGN - 1) / MM_FLOAT_ALIGN * MM_FLOAT_ALIGN;
        nchunk1 = (s->nr1 + dr1 - 1) / dr1;
    }
    return (struct mm_grid){ .nchunk0 = nchunk0, .dr0 = dr0, .dr1 = dr1,
                             .total = nchunk0 * nchunk1 };
}

static void mm_run_chunk(const struct mm_shape *s, const struct mm_grid *g, int64_t current)
{
    const int64_t c0 = current % g->nchunk0;
    const int64_t c1 = current / g->nchunk0;
    const int64_t a0 = g->dr0 * c0, a1 = g->dr1 * c1;
    const int64_t b0 = a0 + g->dr0 < s->nr0 ? a0 + g->dr0 : s->nr0;
    const int64_t b1 = a1 + g->dr1 < s->nr1 ? a1 + g->dr1 : s->nr1;
    if (a0 < b0 && a1 < b1) {
        if (s->gemm_x8)
            mm_chunk_x8(s, a0, b0, a1, b1);
        else if (s->gemm_float)
            mm_chunk_float(s, a0, b0, a1, b1);
        else
            mm_chunk(s, a0, b0, a1, b1);
    }
}

static void mul_mat_fast(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const struct cpu_type_kernels *k = cpu_kernels_for((enum bp_type)w->type);
    const bool direct = x_direct(x, k->vec_dot_type);

    if (!direct)
        convert_x(p, t, k);
    if (p->ith == 0)
        atomic_store_explicit(p->chunk, p->nth, memory_order_relaxed);
    cpu_params_barrier(p);

    struct mm_shape s = mm_shape_of(p, t);
    if (cpu_mul_mat_blas(p, t, &s.nr0, &s.nr1))
        return;

    const struct mm_grid g = mm_grid_of(&s, p->nth);
    int64_t current = p->ith;
    while (current < g.total) {
        mm_run_chunk(&s, &g, current);
        current = atomic_fetch_add_explicit(p->chunk, 1, memory_order_relaxed);
    }
}

/* ---- the same, in steps that need no barrier (see ops.h) ---- */

bool cpu_mul_mat_stepwise(const struct bp_tensor *t)
{
    /* BLAS takes F32 weights only, and it splits by thread, not by chunk. */
    return fast_path(t) && t->src[0]->type != BP_TYPE_F32;
}

void cpu_mul_mat_convert(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct cpu_type_kernels *k = cpu_kernels_for((enum bp_type)t->src[0]->type);
    if (!x_direct(t->src[1], k->vec_dot_type))
        convert_x(p, t, k);
}

int64_t cpu_mul_mat_n_chunks(const struct bp_tensor *t, int nth)
{
    const struct cpu_compute_params p = { .ith = 0, .nth = nth };
    const struct mm_shape s = mm_shape_of(&p, (struct bp_tensor *)t);
    return mm_grid_of(&s, nth).total;
}

bool cpu_mul_mat_chunks_stream(const struct bp_tensor *t, int nth)
{
    const struct cpu_compute_params p = { .ith = 0, .nth = nth };
    const struct mm_shape s = mm_shape_of(&p, (struct bp_tensor *)t);
    const struct mm_grid g = mm_grid_of(&s, nth);
    return g.total == g.nchunk0;
}

void cpu_mul_mat_chunk(const struct cpu_compute_params *p, struct bp_tensor *t, int64_t c)
{
    const struct mm_shape s = mm_shape_of(p, t);
    const struct mm_grid g = mm_grid_of(&s, p->nth);
    mm_run_chunk(&s, &g, c);
}

bool cpu_mul_mat_same_x(const struct bp_tensor *a, const struct bp_tensor *b)
{
    if (!cpu_mul_mat_stepwise(a) || !cpu_mul_mat_stepwise(b) || a->src[1] != b->src[1])
        return false;
    const struct cpu_type_kernels *ka = cpu_kernels_for((enum bp_type)a->src[0]->type);
    const struct cpu_type_kernels *kb = cpu_kernels_for((enum bp_type)b->src[0]->type);
    return ka->vec_dot_type == kb->vec_dot_type && x_aux(a) == x_aux(b) &&
           x_q8_1(a) == x_q8_1(b) && x_row_size(a) == x_row_size(b);
}

/* ---- the strided reference path ---- */

static double dot(const char *a, size_t sa, int32_t ta, const char *b, size_t sb, int32_t tb,
                  int64_t n)
{
    double acc = 0.0;
    for (int64_t k = 0; k < n; k++)
        acc += (double)cpu_load(a + (size_t)k * sa, ta) * (double)cpu_load(b + (size_t)k * sb, tb);
    return acc;
}

static void mul_mat_strided(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    const struct bp_tensor *w = t->src[0], *x = t->src[1];
    const int64_t K = w->ne[0], N = t->ne[0];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    /* Split over output elements, not rows: M = 1 still uses every thread. */
    int64_t f0, f1;
    cpu_split(bp_nelements(t), p, &f0, &f1);
    for (int64_t f = f0; f < f1; f++) {
        int64_t n = f % N, m, i2, i3;
        cpu_row_index(t, f / N, &m, &i2, &i3);
        const char *wr = cpu_at(w, 0, n, i2 / r2, i3 / r3);
        const char *xr = cpu_at(x, 0, m, i2, i3);
        float v = (float)dot(wr, w->nb[0], w->type, xr, x->nb[0], x->type, K);
        memcpy(cpu_at(t, n, m, i2, i3), &v, 4);
    }
}

void cpu_compute_mul_mat(const struct cpu_compute_params *p, struct bp_tensor *t)
{
    if (fast_path(t))
        mul_mat_fast(p, t);
    else
        mul_mat_strided(p, t);
}

/* ---- one weight slice times converted rows (MUL_MAT_ID, ops/matmul_id.c) ----
 *
 * The same chunk grid and kernels as a MUL_MAT node, on a node made up on
 * the stack: W is one 2-D slice (x8 where the stack is), X the nr1 rows
 * already converted at xrows (cpu_mul_mat_x_row_size bytes apart; F32 rows
 * when the vec_dot type is F32), the result nr1 rows of N floats at out. */

static void rows_node(const struct bp_tensor *w, const void *xrows, int64_t nr1, float *out,
                      struct bp_tensor *fx, struct bp_tensor *ft)
{
    const int64_t K = w->ne[0], N = w->ne[1];
    const size_t rs = x_row_size(&(struct bp_tensor){ .src = { (struct bp_tensor *)w } });
    *fx = (struct bp_tensor){ .type = BP_TYPE_F32, .ne = { K, nr1, 1, 1 },
                              .nb = { sizeof(float), rs, rs * (size_t)nr1, rs * (size_t)nr1 },
                              .data = (void *)xrows };
    *ft = (struct bp_tensor){ .type = BP_TYPE_F32, .op = BP_OP_MUL_MAT, .ne = { N, nr1, 1, 1 },
                              .nb = { sizeof(float), (size_t)N * sizeof(float),
                                      (size_t)(N * nr1) * sizeof(float),
                                      (size_t)(N * nr1) * sizeof(float) },
                              .data = out, .src = { (struct bp_tensor *)w, fx } };
}

bool cpu_mul_mat_rows_ok(const struct bp_tensor *w)
{
    const struct cpu_type_kernels *k = cpu_kernels_for((enum bp_type)w->type);
    return k->vec_dot && w_packed(w) && bp_type_block_size(k->vec_dot_type) > 0 &&
           w->ne[0] % bp_type_block_size(k->vec_dot_type) == 0 &&
           (!cpu_tensor_repacked(w) || k->gemm_x8);
}

size_t cpu_mul_mat_x_row_size(const struct bp_tensor *w)
{
    return x_row_size(&(struct bp_tensor){ .src = { (struct bp_tensor *)w } });
}

void cpu_mul_mat_convert_row(const struct bp_tensor *w, const float *x, void *dst)
{
    const struct bp_tensor t = { .src = { (struct bp_tensor *)w } };
    const enum bp_type vdt = cpu_kernels_for((enum bp_type)w->type)->vec_dot_type;
    cpu_kernels_for(vdt)->from_float(x, dst, w->ne[0]);
    if (x_aux(&t))
        cpu_q8_0_fill_aux(dst, w->ne[0]);
    if (x_q8_1(&t))
        cpu_q8_1_fill_s(x, dst, w->ne[0]);
}

int64_t cpu_mul_mat_rows_n_chunks(const struct bp_tensor *w, int64_t nr1, int nth)
{
    struct bp_tensor fx, ft;
    rows_node(w, NULL, nr1, NULL, &fx, &ft);
    const struct cpu_compute_params p = { .ith = 0, .nth = nth };
    const struct mm_shape s = mm_shape_of(&p, &ft);
    return mm_grid_of(&s, nth).total;
}

void cpu_mul_mat_rows_chunk(const struct bp_tensor *w, const void *xrows, int64_t nr1, float *out,
                            int nth, int64_t c)
{
    struct bp_tensor fx, ft;
    rows_node(w, xrows, nr1, out, &fx, &ft);
    const struct cpu_compute_params p = { .ith = 0, .nth = nth, .wshared = (void *)xrows };
    const struct mm_shape s = mm_shape_of(&p, &ft);
    const struct mm_grid g = mm_grid_of(&s, nth);
    mm_run_chunk(&s, &g, c);
}
