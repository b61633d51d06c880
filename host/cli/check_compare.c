/*
 * check_compare.c — is a device's output close enough to the CPU reference?
 *
 * The measure is the normalised mean squared error, sum (a-b)^2 / sum b^2,
 * which does not care about the output's scale. Thresholds sit in one table:
 * exact-by-construction ops (copies, gathers) get the tightest bound; ops
 * whose summation order or transcendental functions differ between honest
 * implementations get more room; anything rounded through f16/bf16 gets the
 * room one unit in the last place of that format leaves.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_harness.h"

struct threshold_row {
    enum bp_op op;
    double f32, f16, bf16;
};

static const struct threshold_row thresholds[] = {
    {BP_OP_GET_ROWS,       1e-7, 1e-7, 1e-7},  /* pure gathers: exact after conversion */
    {BP_OP_SET_ROWS,       1e-7, 1e-5, 1e-4},
    {BP_OP_CPY,            1e-7, 1e-5, 1e-4},
    {BP_OP_CONT,           1e-7, 1e-7, 1e-7},
    {BP_OP_ADD,            1e-7, 1e-5, 1e-4},
    {BP_OP_MUL,            1e-7, 1e-5, 1e-4},
    {BP_OP_SCALE,          1e-7, 1e-5, 1e-4},
    {BP_OP_SILU,           1e-7, 1e-5, 1e-4},
    /* The cpu reference computes GELU as ggml-cpu does (bp_ops.h), through
     * F16 on the way in and out: against the exact formula that alone is
     * an NMSE of about 9e-8 on uniform inputs. */
    {BP_OP_GELU,           1e-6, 1e-5, 1e-4},
    {BP_OP_SQR,            1e-7, 1e-5, 1e-4},
    {BP_OP_TANH,           1e-7, 1e-5, 1e-4},
    {BP_OP_RMS_NORM,       1e-6, 1e-5, 1e-4},
    {BP_OP_SOFT_MAX,       1e-6, 1e-6, 1e-5},  /* the output is f32 whatever the mask type */
    {BP_OP_ROPE,           1e-6, 1e-5, 1e-4},
    {BP_OP_ROPE_EXT,       1e-6, 1e-5, 1e-4},  /* positions to 1024: a float angle is off by ~1e-4 */
    {BP_OP_MUL_MAT,        1e-6, 1e-5, 1e-4},  /* f16 weights: the activations may be rounded too */
    {BP_OP_FLASH_ATTN_EXT, 1e-6, 5e-5, 5e-4},
    {BP_OP_FLASH_ATTN_SOFTCAP, 1e-6, 5e-5, 5e-4},
    {BP_OP_MUL_MAT_ID,     1e-6, 1e-5, 1e-4},  /* as MUL_MAT (quantized weights too, below) */
    {BP_OP_TOP_K,          0.0,  0.0,  0.0},   /* indices: exact, the tie rule included */
    {BP_OP_SUM_ROWS,       1e-7, 1e-7, 1e-7},
    {BP_OP_DIV,            1e-7, 1e-5, 1e-4},
    {BP_OP_CLAMP,          1e-7, 1e-7, 1e-7},
};

/* Quantized inputs: the device and the reference start from the same bytes,
 * so a gather is exact and MUL_MAT differs only in what each side does with
 * the activations. A device that quantizes them (Q8_0 blocks of 32 for the
 * 32-element weight types, Q8_K blocks of 256 for the K-quants and IQ4_XS)
 * adds rounding noise of variance step^2/12 per element, step = amax/127;
 * for the harness's uniform [-1, 1) activations that is about 5e-6 against
 * a signal variance of 1/3, an expected NMSE of about 1.6e-5 whichever side
 * quantizes (and up to twice that when both do, differently). Measured over
 * 200 random w[256,17] x[256,1] cases: mean 1.7e-5, worst 1.1e-4 (17 outputs
 * make the estimate spread). The limit leaves room for that spread, for both
 * sides quantizing, and for f16 accumulation on GPUs; a wrong scale, min or
 * nibble order costs 1e-2 or more. */
static const struct {
    enum bp_op op;
    enum bp_type type;
    double limit;
} quant_thresholds[] = {
    {BP_OP_GET_ROWS, BP_TYPE_Q4_0, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q8_0, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q4_K, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q6_K, 1e-7},
    {BP_OP_MUL_MAT,  BP_TYPE_Q4_0, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q8_0, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q4_K, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q6_K, 5e-4},
    {BP_OP_GET_ROWS, BP_TYPE_Q4_1, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q5_0, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q5_1, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q2_K, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q3_K, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_Q5_K, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_IQ4_NL, 1e-7},
    {BP_OP_GET_ROWS, BP_TYPE_IQ4_XS, 1e-7},
    {BP_OP_MUL_MAT,  BP_TYPE_Q4_1, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q5_0, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q5_1, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q2_K, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q3_K, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_Q5_K, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_IQ4_NL, 5e-4},
    {BP_OP_MUL_MAT,  BP_TYPE_IQ4_XS, 5e-4},
};

double check_threshold(enum bp_op op, enum bp_type type)
{
    /* MUL_MAT_ID is MUL_MAT per slot: the same rounding of the activations. */
    if (op == BP_OP_MUL_MAT_ID && bp_type_is_quantized(type)) op = BP_OP_MUL_MAT;
    for (size_t i = 0; i < sizeof quant_thresholds / sizeof quant_thresholds[0]; i++)
        if (quant_thresholds[i].op == op && quant_thresholds[i].type == type)
            return quant_thresholds[i].limit;
    for (size_t i = 0; i < sizeof thresholds / sizeof thresholds[0]; i++) {
        if (thresholds[i].op != op) continue;
        switch (type) {
        case BP_TYPE_F16: return thresholds[i].f16;
        case BP_TYPE_BF16: return thresholds[i].bf16;
        default: return thresholds[i].f32;
        }
    }
    return 1e-6;
}

double check_case_threshold(const struct check_case *c)
{
    return c->custom_case ? c->custom_case->max_nmse : check_threshold(c->op, c->type);
}

static const char *class_name(float x)
{
    return isnan(x) ? "NaN" : (x > 0 ? "+Inf" : "-Inf");
}

void check_compare(const struct check_case *c, const struct check_output *ref,
                   const struct check_output *dev, struct check_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->threshold = check_case_threshold(c);
    if (ref->n != dev->n || !ref->values || !dev->values) {
        snprintf(v->message, sizeof v->message, "output has %zu elements, the reference %zu",
                 dev->n, ref->n);
        return;
    }
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < ref->n; i++) {
        float r = ref->values[i], d = dev->values[i];
        if (!isfinite(r) || !isfinite(d)) {
            bool same = (isnan(r) && isnan(d)) || (isinf(r) && isinf(d) && (r > 0) == (d > 0));
            if (same) continue;
            if (!isfinite(d))
                snprintf(v->message, sizeof v->message,
                         "%s in the output at element %zu where the reference is %g",
                         class_name(d), i, (double)r);
            else
                snprintf(v->message, sizeof v->message,
                         "the reference has %s at element %zu where the output is %g",
                         class_name(r), i, (double)d);
            v->worst_index = i;
            v->nmse = NAN;
            return;
        }
        double diff = (double)d - (double)r;
        err += diff * diff;
        norm += (double)r * (double)r;
        if (fabs(diff) > v->max_abs_err) {
            v->max_abs_err = fabs(diff);
            v->worst_index = i;
        }
    }
    v->ref_rms = ref->n ? sqrt(norm / (double)ref->n) : 0.0;
    /* An all-zero reference: fall back to the absolute squared error. */
    v->nmse = norm > 0.0 ? err / norm : err;
    if (v->nmse > v->threshold) {
        snprintf(v->message, sizeof v->message,
                 "nmse %.3g exceeds %.0e; largest error %.3g at element %zu (%g, reference %g)",
                 v->nmse, v->threshold, v->max_abs_err, v->worst_index,
                 (double)dev->values[v->worst_index], (double)ref->values[v->worst_index]);
        return;
    }
    v->pass = true;
}
