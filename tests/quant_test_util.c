/* quant_test_util.c — see quant_test_util.h. */
#include "quant_test_util.h"

#include <backplane/bp_quant_ref.h>

/* bp_quant_ref.h's dequantizers take their block type; one signature for
 * the table below. */
#define REF(name)                                                                                  \
    static void ref_##name(const void *x, float *y, int64_t k)                                     \
    {                                                                                              \
        bp_dequantize_##name##_ref((const struct bp_block_##name *)x, y, k);                       \
    }
REF(q4_0)
REF(q4_1)
REF(q5_0)
REF(q5_1)
REF(q8_0)
REF(iq4_nl)
REF(iq4_xs)
REF(q2_K)
REF(q3_K)
REF(q4_K)
REF(q5_K)
REF(q6_K)
#undef REF

const struct quant_layout quant_layouts[] = {
    {BP_TYPE_Q4_0, ref_q4_0, 1, {offsetof(struct bp_block_q4_0, d)}},
    {BP_TYPE_Q4_1, ref_q4_1, 2, {offsetof(struct bp_block_q4_1, d), offsetof(struct bp_block_q4_1, m)}},
    {BP_TYPE_Q5_0, ref_q5_0, 1, {offsetof(struct bp_block_q5_0, d)}},
    {BP_TYPE_Q5_1, ref_q5_1, 2, {offsetof(struct bp_block_q5_1, d), offsetof(struct bp_block_q5_1, m)}},
    {BP_TYPE_Q8_0, ref_q8_0, 1, {offsetof(struct bp_block_q8_0, d)}},
    {BP_TYPE_IQ4_NL, ref_iq4_nl, 1, {offsetof(struct bp_block_iq4_nl, d)}},
    {BP_TYPE_IQ4_XS, ref_iq4_xs, 1, {offsetof(struct bp_block_iq4_xs, d)}},
    {BP_TYPE_Q2_K, ref_q2_K, 2, {offsetof(struct bp_block_q2_K, d), offsetof(struct bp_block_q2_K, dmin)}},
    {BP_TYPE_Q3_K, ref_q3_K, 1, {offsetof(struct bp_block_q3_K, d)}},
    {BP_TYPE_Q4_K, ref_q4_K, 2, {offsetof(struct bp_block_q4_K, d), offsetof(struct bp_block_q4_K, dmin)}},
    {BP_TYPE_Q5_K, ref_q5_K, 2, {offsetof(struct bp_block_q5_K, d), offsetof(struct bp_block_q5_K, dmin)}},
    {BP_TYPE_Q6_K, ref_q6_K, 1, {offsetof(struct bp_block_q6_K, d)}},
};
const int n_quant_layouts = (int)(sizeof quant_layouts / sizeof quant_layouts[0]);

const struct quant_layout *quant_layout_of(enum bp_type t)
{
    for (int i = 0; i < n_quant_layouts; i++)
        if (quant_layouts[i].type == t) return &quant_layouts[i];
    return NULL;
}
