/*
 * quantize.c — bp_quantize / bp_dequantize: argument checks and dispatch to
 * the per-format converters (quantize_q4_0.c, quantize_k.c, and the shared
 * reference in <backplane/bp_quant_ref.h>). The plain float types are handled here.
 */
#include <backplane/bp_quantize.h>

#include "quantize_internal.h"

static bool quantizable(enum bp_type type)
{
    return type != BP_TYPE_I32 && bp_type_block_size(type) > 0;
}

/* The byte count for a valid shape; 0 otherwise (why goes to *why). */
static size_t checked_size(enum bp_type type, int64_t nrows, int64_t n_per_row, const char **why)
{
    *why = NULL;
    if (!quantizable(type)) {
        *why = "type";
        return 0;
    }
    if (nrows < 0 || n_per_row < 0) {
        *why = "negative";
        return 0;
    }
    if (n_per_row % bp_type_block_size(type) != 0) {
        *why = "block";
        return 0;
    }
    size_t row = bp_row_size(type, n_per_row);
    if (nrows > 0 && row > SIZE_MAX / (size_t)nrows) {
        *why = "overflow";
        return 0;
    }
    return row * (size_t)nrows;
}

size_t bp_quantize_size(enum bp_type type, int64_t nrows, int64_t n_per_row)
{
    const char *why;
    return checked_size(type, nrows, n_per_row, &why);
}

static void type_error(enum bp_type type, const char *what)
{
    if (type == BP_TYPE_I32)
        bp__fail(BP_ERR_UNSUPPORTED, "%s cannot convert to or from i32: it is not a float type; "
                 "use one of f32, f16, bf16, q4_0, q8_0, q4_K, q6_K, q8_K.", what);
    else
        bp__fail(BP_ERR_UNSUPPORTED, "%s was given element type %d, which this library does not "
                 "know; use one of f32, f16, bf16, q4_0, q8_0, q4_K, q6_K, q8_K.", what, (int)type);
}

size_t bp_quantize(enum bp_type type, const float *src, void *dst, int64_t nrows, int64_t n_per_row)
{
    const char *why;
    size_t total = checked_size(type, nrows, n_per_row, &why);
    if (why) {
        if (!strcmp(why, "type")) type_error(type, "bp_quantize");
        else if (!strcmp(why, "negative"))
            bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_quantize was given %lld rows of %lld elements; "
                     "both counts must be zero or positive.", (long long)nrows, (long long)n_per_row);
        else if (!strcmp(why, "block"))
            bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_quantize: rows of %lld elements cannot be stored "
                     "as %s, whose blocks hold %lld elements; make n_per_row a multiple of %lld "
                     "(pad the row) or pick another type.", (long long)n_per_row,
                     bp_type_name(type), (long long)bp_type_block_size(type),
                     (long long)bp_type_block_size(type));
        else
            bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_quantize: %lld rows of %lld elements as %s "
                     "would not fit in memory; convert fewer rows at a time.", (long long)nrows,
                     (long long)n_per_row, bp_type_name(type));
        return 0;
    }
    if (total == 0) return 0;
    if (!src || !dst) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_quantize was given a NULL %s pointer; pass the "
                 "%s.", !src ? "source" : "destination",
                 !src ? "floats to convert" : "buffer of bp_quantize_size() bytes");
        return 0;
    }
    /* Rows are packed and every row is a whole number of blocks, so the
     * whole array converts as one run of blocks. */
    const int64_t k = nrows * n_per_row;
    switch (type) {
    case BP_TYPE_F32: memcpy(dst, src, total); break;
    case BP_TYPE_F16:
        for (int64_t i = 0; i < k; i++) ((uint16_t *)dst)[i] = bp_f32_to_f16(src[i]);
        break;
    case BP_TYPE_BF16:
        for (int64_t i = 0; i < k; i++) ((uint16_t *)dst)[i] = bp_f32_to_bf16(src[i]);
        break;
    case BP_TYPE_Q4_0: bp__quantize_q4_0(src, dst, k); break;
    case BP_TYPE_Q8_0: bp_quantize_q8_0_ref(src, dst, k); break;
    case BP_TYPE_Q4_K: bp__quantize_q4_K(src, dst, k); break;
    case BP_TYPE_Q6_K: bp__quantize_q6_K(src, dst, k); break;
    case BP_TYPE_Q8_K: bp_quantize_q8_K_ref(src, dst, k); break;
    default: type_error(type, "bp_quantize"); return 0;
    }
    return total;
}

bp_status bp_dequantize(enum bp_type type, const void *src, float *dst, int64_t n)
{
    if (!quantizable(type)) {
        type_error(type, "bp_dequantize");
        return BP_ERR_UNSUPPORTED;
    }
    const int64_t bs = bp_type_block_size(type);
    if (n < 0 || n % bs != 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_dequantize was asked for %lld elements of "
                        "%s, whose blocks hold %lld elements; n must be a non-negative multiple "
                        "of %lld.", (long long)n, bp_type_name(type), (long long)bs, (long long)bs);
    if (n == 0) return BP_OK;
    if (!src || !dst)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_dequantize was given a NULL %s pointer; "
                        "pass the %s.", !src ? "source" : "destination",
                        !src ? "blocks to convert" : "array of n floats");
    switch (type) {
    case BP_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case BP_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = bp_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case BP_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = bp_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case BP_TYPE_Q4_0: bp_dequantize_q4_0_ref(src, dst, n); break;
    case BP_TYPE_Q8_0: bp_dequantize_q8_0_ref(src, dst, n); break;
    case BP_TYPE_Q4_K: bp_dequantize_q4_K_ref(src, dst, n); break;
    case BP_TYPE_Q6_K: bp_dequantize_q6_K_ref(src, dst, n); break;
    case BP_TYPE_Q8_K: bp_dequantize_q8_K_ref(src, dst, n); break;
    default: type_error(type, "bp_dequantize"); return BP_ERR_UNSUPPORTED;
    }
    return BP_OK;
}
