/*
 * bp_quantize.h — reference conversions between f32 and the stored element
 * types (application API; the same functions reach plugins through
 * host->get_proc_address(BP_HOST_PROC_QUANTIZE / BP_HOST_PROC_DEQUANTIZE)).
 *
 * Layouts are ggml's, byte for byte (see <backplane/bp_quant.h>):
 *   - dequantization gives the same floats as ggml's, to the bit, for Q4_0,
 *     Q8_0, Q4_K, Q6_K and Q8_K;
 *   - Q4_0, Q8_0 and Q8_K quantization writes the same bytes as ggml's
 *     reference quantizers (quantize_row_*_ref) for finite input;
 *   - Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS quantization
 *     writes ggml's bytes too (the path llama.cpp's quantizer takes without
 *     an importance matrix);
 *   - Q4_K and Q6_K quantization starts from ggml's search and keeps a
 *     refined encoding only where it lowers the squared error of the block,
 *     so it is never less accurate than ggml's on any block;
 *     bp_quantize_ggml keeps ggml's encoding instead.
 * F32, F16 and BF16 are accepted too (copy / round-to-nearest-even), so that
 * a caller can convert to any storable type through one function.
 *
 * The functions are pure, thread-safe and allocate nothing. Non-finite
 * input is not an error, but its encoding is unspecified.
 */
#ifndef BP_QUANTIZE_H
#define BP_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>
#include <backplane/bp_quant.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Converts nrows rows of n_per_row floats (src, packed) to type, writing
 * nrows * bp_row_size(type, n_per_row) bytes to dst (packed rows).
 * Returns the bytes written. Returns 0 and sets bp_last_error() when src or
 * dst is NULL, a count is negative, n_per_row is not a multiple of the
 * type's block size (bp_type_block_size), the size overflows, or the type
 * cannot be quantized to (I32, unknown). Zero rows or zero elements per row
 * write nothing and return 0 without an error. */
BP_API size_t bp_quantize(enum bp_type type, const float *src, void *dst, int64_t nrows,
                          int64_t n_per_row);

/* bp_quantize with ggml's reference encoding for every type: Q4_K and Q6_K
 * skip the refinement, so for finite input the bytes are those llama.cpp's
 * quantizer writes without an importance matrix. Same arguments and errors. */
BP_API size_t bp_quantize_ggml(enum bp_type type, const float *src, void *dst, int64_t nrows,
                               int64_t n_per_row);

/* Converts n elements of type at src (packed blocks) to floats at dst.
 * n must be a multiple of the block size. Returns BP_OK, or
 * BP_ERR_INVALID_ARGUMENT (NULL pointer, negative or misaligned n) /
 * BP_ERR_UNSUPPORTED (I32, unknown type) with bp_last_error() set. */
BP_API bp_status bp_dequantize(enum bp_type type, const void *src, float *dst, int64_t n);

/* Bytes bp_quantize writes for nrows x n_per_row; 0 when the shape is not
 * valid for the type (the same rules as bp_quantize, but no error is set). */
BP_API size_t bp_quantize_size(enum bp_type type, int64_t nrows, int64_t n_per_row);

#ifdef __cplusplus
}
#endif
#endif /* BP_QUANTIZE_H */
