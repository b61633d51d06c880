/* quantize_q4_0.c — Q4_0: 32 elements, x = d * (q - 8), ggml's arithmetic. */
#include <math.h>

#include "quantize_internal.h"

/* ggml's quantize_row_q4_0_ref: d comes from the element of largest
 * magnitude *with its sign*, so that element maps exactly to q = 0 and the
 * other side gets the extra level. */
void bp__quantize_q4_0(const float *x, struct bp_block_q4_0 *y, int64_t k)
{
    const int64_t nb = k / BP_QK4_0;
    for (int64_t i = 0; i < nb; i++, x += BP_QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < BP_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = bp_f32_to_f16(d);
        for (int j = 0; j < BP_QK4_0 / 2; j++) {
            /* ggml truncates (x*id + 8.5) towards zero and caps at 15; for
             * finite input the sum lies in [0, 16.5]. The range test keeps
             * NaN away from the conversion, which would be undefined. */
            float v0 = x[j] * id + 8.5f, v1 = x[j + BP_QK4_0 / 2] * id + 8.5f;
            int q0 = v0 >= 0.0f && v0 < 16.0f ? (int)v0 : (v0 >= 16.0f ? 15 : 0);
            int q1 = v1 >= 0.0f && v1 < 16.0f ? (int)v1 : (v1 >= 16.0f ? 15 : 0);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}
