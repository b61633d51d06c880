/* vk_params.h — the layout of a dispatch's parameter block, included by the
 * C code that fills it (backend.c, ops.c) and by the shaders that read it
 * (common.glsl, through glslc -I). The block is VK_PB_WORDS 32-bit words:
 * per tensor slot (bindings 0-3 sources, VK_PB_OUT the output) VK_PB_SLOT
 * words, then the node's op_params, then words the plugin chooses per op.
 * Plain #defines with u suffixes: the one syntax C and GLSL both read. */
#ifndef BP_VK_PARAMS_H
#define BP_VK_PARAMS_H

#define VK_PB_WORDS 64u /* one block per dispatch */
#define VK_PB_OUT 4u    /* the output's slot (its binding) */
#define VK_PB_SLOT 10u  /* words per tensor slot: */
#define VK_PB_OFF 0u    /*   byte offset within the binding */
#define VK_PB_NE 1u     /*   ne[0..3] */
#define VK_PB_NB 5u     /*   nb[0..3], bytes */
#define VK_PB_TYPE 9u   /*   bp_type */
#define VK_PB_OPP 50u   /* node op_params[0..VK_PB_N_OPP) */
#define VK_PB_N_OPP 8u
#define VK_PB_AUX 58u   /* plugin-chosen words [VK_PB_AUX, VK_PB_WORDS) */
#define VK_PB_N_AUX 6u

/* mul_mat_vec_q8.comp: rows per workgroup of 128 invocations. */
#define VK_MMQ_ROWS 16u
/* mul_mat_cpu.comp (CPU devices): a workgroup is one subgroup of
 * VK_MMC_LANES invocations and computes VK_MMC_ROWS rows of W (eight per
 * lane) by VK_MMC_COLS columns of X, K in steps of VK_MMC_STEP. */
#define VK_MMC_LANES 8u
#define VK_MMC_ROWS 64u
#define VK_MMC_COLS 8u
#define VK_MMC_STEP 16u

/* aux[0] of the binary shader (ADD, MUL, DIV) */
#define VK_BINARY_ADD 0u
#define VK_BINARY_MUL 1u
#define VK_BINARY_DIV 2u
#define VK_BINARY_ADD_SLOTS 3u /* fused ADD chain (fusion.c): slot 0's aux1 slots of dim 1 summed */

/* Invocations per workgroup of the elementwise shader. */
#define VK_EW_LOCAL 128u
/* aux[0] of the elementwise shader */
#define VK_EW_COPY 0u
#define VK_EW_SCALE 1u
#define VK_EW_SILU 2u
#define VK_EW_GELU 3u
#define VK_EW_SQR 4u
#define VK_EW_TANH 5u
#define VK_EW_CLAMP 6u /* op params 0 and 1: lo, hi */
/* aux[2] of the silu_mul shader (elementwise.comp's fused SILU -> MUL
 * build): 0, one element per invocation; else the chain stride s of a
 * dispatch whose output overlaps its source shifted by s elements:
 * invocation r computes elements r, r + s, ..., upwards, or downwards when
 * aux[3] = 1 (fusion.c). */

/* aux[0] of the rms_norm shader: a row reduction */
#define VK_ROWS_RMS_NORM 0u
#define VK_ROWS_SUM 1u /* SUM_ROWS: the sum alone */
#define VK_ROWS_RMS_NORM_MUL 2u /* fused RMS_NORM -> MUL (fusion.c): the row times slot 1 */
#define VK_ROWS_ADD_RMS_NORM_MUL 3u /* fused ADD -> RMS_NORM -> MUL (fusion.c): slot 0 + slot 3 first */

/* A fused chain (fusion.c) binds its first node's output, an F32 tensor the
 * shader writes besides the output, to this source slot; the second op's
 * other operand, repeated over the output's shape, is slot 1. */
#define VK_PB_FUSED 2u

/* aux words of the rope shader: aux[0] VK_ROPE_PLAIN or VK_ROPE_EXT; for
 * ROPE_EXT aux[1] = 1 when slot 2 holds the frequency factors, and the
 * float bits of YaRN's correction range (aux[2] lo, aux[3] hi) and of the
 * magnitude (aux[4]), which the plugin works out once per node. aux[5]
 * non-zero: ROPE -> SET_ROWS of one row in one dispatch (fusion.c): each
 * rotated element goes to the SET_ROWS destination (the output) in the row
 * the ids (slot 3) give, the ROPE's output itself is not stored, and slot 0
 * gives the shape. VK_ROPE_STORE_ROW: the ROPE's output is the row;
 * VK_ROPE_STORE_HEADS: head h of [D, heads, 1] is plane h's row. */
#define VK_ROPE_STORE_ROW 1u
#define VK_ROPE_STORE_HEADS 2u
#define VK_ROPE_PLAIN 0u
#define VK_ROPE_EXT 1u

/* aux[1] of the flash_attn shader: 1 for FLASH_ATTN_SOFTCAP, whose cap is
 * op param 1 (aux[0] says whether there is a mask). */
#define VK_ATTN_SOFTCAP 1u
/* Largest head size (K's and V's) flash_attn.comp holds: a query row in
 * shared memory, V's elements in four registers per invocation of 64.
 * Larger heads go to flash_attn_wide.comp. */
#define VK_FA_MAX_D 256u
/* Largest head size flash_attn_cpu.comp holds (CPU devices with
 * mul_mat_cpu): VK_FAC_MAX_D / 8 query and output elements in registers
 * per lane. Larger heads go to flash_attn.comp. */
#define VK_FAC_MAX_D 128u

#endif
