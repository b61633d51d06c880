/*
 * gemm_amx.h — AMX-INT8 tile kernels for prefill on weights in the x8 layout
 * (repack.h), in the avx512 build: 16 weight rows (two x8 groups) against
 * 16 activation rows per tile, up to CPU_AMX_MAX_TILES activation tiles
 * per call, so each weight block is turned into a B tile once for 128 rows
 * (a whole 128-token prompt: the weight is read and unpacked once).
 *
 * Same arithmetic as the x8 VNNI kernels up to float summation order: the
 * integer dot of every 32-element block is exact in the tile, then scaled
 * per block in float as there; Q4_K and Q6_K fold their sub-block scales
 * into the weight tiles (low and high byte of quant x scale), so the
 * super-block's scaled integer sum is exact in the tiles.
 */
#ifndef BP_CPU_GEMM_AMX_H
#define BP_CPU_GEMM_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>

#define CPU_AMX_ROWS 16      /* weight rows and activation rows of one tile */
#define CPU_AMX_MAX_TILES 8  /* activation tiles per call */

/* s[m * 16 + r] = dot(weight row r, activation row m), r < 16,
 * m < 16 * ntiles (1..CPU_AMX_MAX_TILES): rows 0..7 are the x8 group at w,
 * rows 8..15 the one at w + gs; activation rows (the vec_dot_type, Q8_0
 * with its aux data) ys bytes apart. Runs on the calling thread's tiles. */
typedef void (*cpu_gemm_amx_fn)(int64_t n, float *s, const void *w, size_t gs, const void *y,
                                size_t ys, int ntiles);

/* Ask the OS for the tile state (once per process) unless want is false;
 * true when the CPU, the OS and this build can run the AMX kernels.
 * Thread-safe; the first call decides. */
bool cpu_amx_enable(bool want);
/* Whether cpu_amx_enable succeeded (false before it is called). */
bool cpu_amx_active(void);
/* Use the AMX kernels (on) or not, process-wide, while active; false when
 * on is asked for and AMX is not active. */
bool cpu_amx_use(bool on);
/* The AMX kernel for weight type t, or NULL: AMX not active, or no kernel
 * for t. */
cpu_gemm_amx_fn cpu_gemm_amx_for(enum bp_type t);

#endif
