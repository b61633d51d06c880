/*
 * kernels.h — the C-callable launchers of the CUDA kernels. Each takes
 * tensor views by value (data pointer, type, shape, byte strides) so that
 * kernels honour every stride exactly as the CPU reference does, and
 * returns the launch's cudaError_t as an int (0 = success).
 *
 * Element types inside kernels are switched at run time rather than
 * templated: it keeps the build small (CI compiles this on 2 cores) at a
 * cost only elementwise ops notice.
 */
#ifndef BP_CUDA_KERNELS_H
#define BP_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cuda_tview {
    void   *data;
    int     type;          /* enum bp_type */
    int64_t ne[4];
    size_t  nb[4];
};

/* Activations quantized for integer dot products: 32 values, their scale
 * and the sum of the quants (for the zero points and mins of the weights:
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q4_K, Q5_K). */
struct cuda_block_q8_1 {
    float  d;
    int    s;
    int8_t qs[32];
};

/* CLAMP takes lo and hi as the launcher's scale and bias. */
enum cuda_unary {
    CUDA_UNARY_SCALE = 0, CUDA_UNARY_SILU = 1, CUDA_UNARY_GELU = 2, CUDA_UNARY_SQR = 3, CUDA_UNARY_TANH = 4,
    CUDA_UNARY_CLAMP = 5
};

enum cuda_binary { CUDA_BINARY_ADD = 0, CUDA_BINARY_MUL = 1, CUDA_BINARY_DIV = 2 };

/* MUL_MAT_ID's routing: ids [n_used, n_tok] (I32, any strides) and where a
 * bad id is reported (err as for GET_ROWS). ids.data == NULL: MUL_MAT. */
struct cuda_mmid {
    struct cuda_tview ids;
    int *err;
    int node;
};

/* What ROPE_EXT adds to ROPE, with the parts that depend on neither the
 * position nor the pair worked out on the host: ROPE is ext_factor 0 and
 * mscale 1 (and no factors). */
struct cuda_rope_ext {
    float ext_factor;       /* YaRN's mix; 0: none */
    float corr_lo, corr_hi; /* YaRN's correction range of pair indices */
    float mscale;           /* cos and sin are multiplied by it */
};

/* op: enum cuda_binary. */
int cuda_launch_binary(struct cuda_tview dst, struct cuda_tview a, struct cuda_tview b, int op,
                       cudaStream_t s);
int cuda_launch_unary(struct cuda_tview dst, struct cuda_tview x, int kind, float scale, float bias,
                      cudaStream_t s);
/* Copy src into dst in row-major element order (CPY, CONT, conversions). */
int cuda_launch_dup(struct cuda_tview dst, struct cuda_tview src, cudaStream_t s);
/* err: device ints [node+1, bad id, position], written by the first bad id. */
int cuda_launch_get_rows(struct cuda_tview dst, struct cuda_tview tab, struct cuda_tview ids,
                         int *err, int node, cudaStream_t s);
int cuda_launch_set_rows(struct cuda_tview dst, struct cuda_tview v, struct cuda_tview ids,
                         int *err, int node, cudaStream_t s);

int cuda_launch_rms_norm(struct cuda_tview dst, struct cuda_tview x, float eps, cudaStream_t s);
/* SUM_ROWS: dst [1, r, d2, d3] F32. */
int cuda_launch_sum_rows(struct cuda_tview dst, struct cuda_tview x, cudaStream_t s);
/* TOP_K: dst [k, r, d2, d3] I32, the rule of bp_ops.h (ties by ascending
 * index, NaN after every number). */
int cuda_launch_top_k(struct cuda_tview dst, struct cuda_tview x, cudaStream_t s);
/* mask.data == NULL: no mask. */
int cuda_launch_soft_max(struct cuda_tview dst, struct cuda_tview x, struct cuda_tview mask,
                         float scale, cudaStream_t s);
/* ROPE and ROPE_EXT; ff.data == NULL: no frequency factors. */
int cuda_launch_rope(struct cuda_tview dst, struct cuda_tview x, struct cuda_tview pos, struct cuda_tview ff,
                     int n_dims, int neox, float freq_base, float freq_scale, struct cuda_rope_ext ext,
                     cudaStream_t s);
/* FLASH_ATTN_EXT, and FLASH_ATTN_SOFTCAP when softcap > 0 (each score
 * softcap tanh(score / softcap) before the mask). */
int cuda_launch_flash_attn(struct cuda_tview dst, struct cuda_tview q, struct cuda_tview k,
                           struct cuda_tview v, struct cuda_tview mask, float scale, float softcap,
                           cudaStream_t s);

/* MUL_MAT, any W type, float X: one warp per output element (fallback).
 * With id.ids.data set, MUL_MAT_ID: dst [N, n_used, n_tok], W [K, N, n_expert],
 * X [K, X1, n_tok]; element (n, u, t) is row n of expert ids[u, t] times
 * X row (u % X1, t). */
int cuda_launch_mul_mat_generic(struct cuda_tview dst, struct cuda_tview w, struct cuda_tview x,
                                struct cuda_mmid id, cudaStream_t s);
/* Quantize every row of X (K = ne[0], a multiple of 32) to q8_1 blocks, rows
 * in dst order (m fastest, then dims 2 and 3). */
int cuda_launch_quantize_q8_1(struct cuda_tview x, struct cuda_block_q8_1 *out, cudaStream_t s);
/* MUL_MAT for quantized W (the types cuda_mul_mat_q_type names) on
 * quantized X: dp4a dot products, each weight byte read once per activation
 * column. */
int cuda_launch_mul_mat_q(struct cuda_tview dst, struct cuda_tview w,
                          const struct cuda_block_q8_1 *xq, cudaStream_t s);
/* MUL_MAT_ID for quantized W on X quantized by cuda_launch_quantize_q8_1
 * (rows in order (x1, t)), x1 = X's ne[1]: the same dot products, the
 * expert of each (slot, token) read from id.ids; a bad id reported in
 * id.err and its outputs left unwritten. */
int cuda_launch_mul_mat_id_q(struct cuda_tview dst, struct cuda_tview w,
                             const struct cuda_block_q8_1 *xq, int64_t x1, struct cuda_mmid id,
                             cudaStream_t s);
/* Dequantize W slice (i2, i3) into a packed F16 [K, N] matrix. */
int cuda_launch_dequant_f16(struct cuda_tview w, int64_t i2, int64_t i3, void *out, cudaStream_t s);
/* True when cuda_launch_mul_mat_q handles W of this type, which then
 * cuda_launch_dequant_f16 and GET_ROWS take too: Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. */
int cuda_mul_mat_q_type(int type);

/* All-reduce helpers on packed arrays. */
int cuda_launch_add_inplace(void *dst, const void *src, int type, int64_t n, cudaStream_t s);
int cuda_launch_f32_to_bf16(const float *src, uint16_t *dst, int64_t n, cudaStream_t s);
int cuda_launch_bf16_to_f32(const uint16_t *src, float *dst, int64_t n, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif /* BP_CUDA_KERNELS_H */
