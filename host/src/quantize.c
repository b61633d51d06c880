/*
 * quantize.c — bp_quantize / bp_dequantize: argument checks and dispatch to
 * the per-format converters (quantize_q4_0.c, quantize_legacy.c,
 * quantize_k.c, quantize_k_ref.c, quantize_iq4.c, and the shared
 * reference in <backplane/bp_quant_ref.h>) through one table of codecs; the
 * plain float types are converted here.
 */
#include <backplane/bp_quantize.h>

#include <stdio.h>

#include "quantize_internal.h"

static void q_f32(const float *x, void *y, int64_t k) { memcpy(y, x, (size_t)k * sizeof(float)); }
static void dq_f32(const void *x, float *y, int64_t k) { memcpy(y, x, (size_t)k * sizeof(float)); }

static void q_f16(const float *x, void *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) ((uint16_t *)y)[i] = bp_f32_to_f16(x[i]);
}

static void dq_f16(const void *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) y[i] = bp_f16_to_f32(((const uint16_t *)x)[i]);
}

static void q_bf16(const float *x, void *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) ((uint16_t *)y)[i] = bp_f32_to_bf16(x[i]);
}

static void dq_bf16(const void *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) y[i] = bp_bf16_to_f32(((const uint16_t *)x)[i]);
}

/* The block formats' converters take their block type; the table takes bytes. */
#define BLOCK_CODEC(t, quantize, dequantize)                                              \
    static void q_##t(const float *x, void *y, int64_t k) { quantize(x, y, k); }          \
    static void dq_##t(const void *x, float *y, int64_t k) { dequantize(x, y, k); }
BLOCK_CODEC(q4_0, bp__quantize_q4_0, bp_dequantize_q4_0_ref)
BLOCK_CODEC(q8_0, bp_quantize_q8_0_ref, bp_dequantize_q8_0_ref)
BLOCK_CODEC(q4_K, bp__quantize_q4_K, bp_dequantize_q4_K_ref)
BLOCK_CODEC(q6_K, bp__quantize_q6_K, bp_dequantize_q6_K_ref)
BLOCK_CODEC(q8_K, bp_quantize_q8_K_ref, bp_dequantize_q8_K_ref)
BLOCK_CODEC(q4_1, bp__quantize_q4_1, bp_dequantize_q4_1_ref)
BLOCK_CODEC(q5_0, bp__quantize_q5_0, bp_dequantize_q5_0_ref)
BLOCK_CODEC(q5_1, bp__quantize_q5_1, bp_dequantize_q5_1_ref)
BLOCK_CODEC(q2_K, bp__quantize_q2_K, bp_dequantize_q2_K_ref)
BLOCK_CODEC(q3_K, bp__quantize_q3_K, bp_dequantize_q3_K_ref)
BLOCK_CODEC(q5_K, bp__quantize_q5_K, bp_dequantize_q5_K_ref)
BLOCK_CODEC(iq4_nl, bp__quantize_iq4_nl, bp_dequantize_iq4_nl_ref)
BLOCK_CODEC(iq4_xs, bp__quantize_iq4_xs, bp_dequantize_iq4_xs_ref)
#undef BLOCK_CODEC
static void q_q4_K_ggml(const float *x, void *y, int64_t k) { bp__quantize_q4_K_ggml(x, y, k); }
static void q_q6_K_ggml(const float *x, void *y, int64_t k) { bp__quantize_q6_K_ggml(x, y, k); }

/* Every type bp_quantize and bp_dequantize convert, with its two
 * converters (k elements, a whole number of blocks). */
static const struct codec {
    enum bp_type type;
    void (*quantize)(const float *x, void *y, int64_t k);
    void (*dequantize)(const void *x, float *y, int64_t k);
} codecs[] = {
    {BP_TYPE_F32, q_f32, dq_f32},   {BP_TYPE_F16, q_f16, dq_f16},   {BP_TYPE_BF16, q_bf16, dq_bf16},
    {BP_TYPE_Q4_0, q_q4_0, dq_q4_0}, {BP_TYPE_Q8_0, q_q8_0, dq_q8_0}, {BP_TYPE_Q4_K, q_q4_K, dq_q4_K},
    {BP_TYPE_Q6_K, q_q6_K, dq_q6_K}, {BP_TYPE_Q8_K, q_q8_K, dq_q8_K},
    {BP_TYPE_Q4_1, q_q4_1, dq_q4_1}, {BP_TYPE_Q5_0, q_q5_0, dq_q5_0}, {BP_TYPE_Q5_1, q_q5_1, dq_q5_1},
    {BP_TYPE_Q2_K, q_q2_K, dq_q2_K}, {BP_TYPE_Q3_K, q_q3_K, dq_q3_K}, {BP_TYPE_Q5_K, q_q5_K, dq_q5_K},
    {BP_TYPE_IQ4_NL, q_iq4_nl, dq_iq4_nl}, {BP_TYPE_IQ4_XS, q_iq4_xs, dq_iq4_xs},
};

static const struct codec *codec_of(enum bp_type type)
{
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++)
        if (codecs[i].type == type) return &codecs[i];
    return NULL;
}

static bool quantizable(enum bp_type type)
{
    return codec_of(type) != NULL;
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
    char names[256] = "";
    for (size_t i = 0, at = 0; i < sizeof codecs / sizeof codecs[0] && at < sizeof names; i++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "",
                               bp_type_name(codecs[i].type));
    if (type == BP_TYPE_I32)
        bp__fail(BP_ERR_UNSUPPORTED, "%s cannot convert to or from i32: it is not a float type; "
                 "use one of %s.", what, names);
    else
        bp__fail(BP_ERR_UNSUPPORTED, "%s was given element type %d, which this library does not "
                 "know; use one of %s.", what, (int)type, names);
}

/* Where ggml's reference encoding differs from bp_quantize's: the types
 * whose quantizer refines ggml's search. */
static void (*ggml_encoder(enum bp_type type))(const float *, void *, int64_t)
{
    switch (type) {
    case BP_TYPE_Q4_K: return q_q4_K_ggml;
    case BP_TYPE_Q6_K: return q_q6_K_ggml;
    default: return codec_of(type)->quantize;
    }
}

static size_t quantize_with(const char *fn, bool ggml, enum bp_type type, const float *src, void *dst,
                            int64_t nrows, int64_t n_per_row)
{
    const char *why;
    size_t total = checked_size(type, nrows, n_per_row, &why);
    if (why) {
        if (!strcmp(why, "type")) type_error(type, fn);
        else if (!strcmp(why, "negative"))
            bp__fail(BP_ERR_INVALID_ARGUMENT, "%s was given %lld rows of %lld elements; "
                     "both counts must be zero or positive.", fn, (long long)nrows, (long long)n_per_row);
        else if (!strcmp(why, "block"))
            bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: rows of %lld elements cannot be stored "
                     "as %s, whose blocks hold %lld elements; make n_per_row a multiple of %lld "
                     "(pad the row) or pick another type.", fn, (long long)n_per_row,
                     bp_type_name(type), (long long)bp_type_block_size(type),
                     (long long)bp_type_block_size(type));
        else
            bp__fail(BP_ERR_INVALID_ARGUMENT, "%s: %lld rows of %lld elements as %s "
                     "would not fit in memory; convert fewer rows at a time.", fn, (long long)nrows,
                     (long long)n_per_row, bp_type_name(type));
        return 0;
    }
    if (total == 0) return 0;
    if (!src || !dst) {
        bp__fail(BP_ERR_INVALID_ARGUMENT, "%s was given a NULL %s pointer; pass the "
                 "%s.", fn, !src ? "source" : "destination",
                 !src ? "floats to convert" : "buffer of bp_quantize_size() bytes");
        return 0;
    }
    /* Rows are packed and every row is a whole number of blocks, so the
     * whole array converts as one run of blocks. */
    (ggml ? ggml_encoder(type) : codec_of(type)->quantize)(src, dst, nrows * n_per_row);
    return total;
}

size_t bp_quantize(enum bp_type type, const float *src, void *dst, int64_t nrows, int64_t n_per_row)
{
    return quantize_with("bp_quantize", false, type, src, dst, nrows, n_per_row);
}

size_t bp_quantize_ggml(enum bp_type type, const float *src, void *dst, int64_t nrows,
                        int64_t n_per_row)
{
    return quantize_with("bp_quantize_ggml", true, type, src, dst, nrows, n_per_row);
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
    codec_of(type)->dequantize(src, dst, n);
    return BP_OK;
}
