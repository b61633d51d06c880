#version 450
// MUL_MAT of one column (decode) with integer dot products
// (SPV_KHR_integer_dot_product, OpSDotKHR on four packed int8 pairs), for
// devices that report them accelerated: W of Q4_0 or Q8_0 against X
// quantized to Q8_0 as the CPU reference quantizes it (per 32 elements d =
// max |x| / 127, q = round(x / d)), so the sums are exact integers and only
// the per-block scaling is float.
// A workgroup of 128 first quantizes the whole column into shared memory
// (an invocation per block of 32, the column's blocks spread over all of
// them; K / 32 blocks at most MAXB, specialisation constant 2, which
// pipelines.c sizes from maxComputeSharedMemorySize), then computes NR
// rows: LPR invocations per row, each a stride of the row's blocks, summed
// in shared memory. Quantizing per workgroup costs a read of X per NR rows,
// as the float mat-vec reads X per row pair; it needs no scratch buffer and
// no second dispatch.
// W in slot 0, X (contiguous F32, K a multiple of 32) in slot 1.
#extension GL_EXT_spirv_intrinsics : require
layout(local_size_x = 128) in;
#include "common.glsl"
#include "dequant.glsl"

// OpSDotKHR with PackedVectorFormat4x8Bit (0): the sum of the products of
// the four signed bytes of a and of b. Capabilities DotProductKHR (6019),
// DotProductInput4x8BitPackedKHR (6018).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);

layout(constant_id = 2) const uint MAXB = 256u;
#define WG 128u
#define NR VK_MMQ_ROWS
#define LPR (WG / NR)
shared uint xq[MAXB * 8u];
shared float xd[MAXB];
shared float red[WG];

// Four bytes at a 2-byte-aligned offset of slot 0.
uint w32(uint byte) { return rd_u16(0u, byte) | (rd_u16(0u, byte + 2u) << 16); }

// Four unsigned nibbles, one per byte, as signed bytes minus 8: each byte
// b (0..15) becomes b + 0x78 (no carry out of the byte), whose top bit
// flipped is b - 8 in two's complement.
uint minus8(uint v) { return (v + 0x78787878u) ^ 0x80808080u; }

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint N = tne(OUT, 0u), K = tne(0u, 0u), nb = K / 32u;
    uint g = gid_group();
    uint nrb = (N + NR - 1u) / NR, n0 = (g % nrb) * NR, z = g / nrb;
    uint i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint x0 = at(1u, 0u, 0u, i2, i3);
    for (uint b = t; b < nb; b += WG) {
        uint xo = (x0 >> 2) + b * 32u;
        float amax = 0.0;
        for (uint i = 0u; i < 32u; i++) amax = max(amax, abs(uintBitsToFloat(rd(1u, xo + i))));
        // as bp_quantize_q8_0_ref: the quants from the float scale, rounded
        // half away from zero; the scale kept as f16
        float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
        for (uint w = 0u; w < 8u; w++) {
            uint packed = 0u;
            for (uint i = 0u; i < 4u; i++) {
                float v = uintBitsToFloat(rd(1u, xo + 4u * w + i)) * id;
                int q = int(sign(v) * floor(abs(v) + 0.5));
                packed |= uint(q & 0xff) << (8u * i);
            }
            xq[b * 8u + w] = packed;
        }
        xd[b] = unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x;
    }
    barrier();

    uint r = t / LPR, l = t % LPR, n = min(n0 + r, N - 1u);
    uint row = at(0u, 0u, n, i2 / r2, i3 / r3), nb0 = tnb(0u, 0u);
    float acc = 0.0;
    for (uint b = l; b < nb; b += LPR) {
        uint blk = row + b * nb0;
        int s = 0;
        if (WTYPE == T_Q4_0) {
            for (uint w = 0u; w < 4u; w++) {
                uint q = w32(blk + 2u + 4u * w);
                s += sdot4x8(minus8(q & 0x0f0f0f0fu), xq[b * 8u + w], 0);
                s += sdot4x8(minus8((q >> 4) & 0x0f0f0f0fu), xq[b * 8u + w + 4u], 0);
            }
        } else {
            for (uint w = 0u; w < 8u; w++) s += sdot4x8(w32(blk + 2u + 4u * w), xq[b * 8u + w], 0);
        }
        acc += f16(rd_u16(0u, blk)) * xd[b] * float(s);
    }
    red[t] = acc;
    barrier();
    for (uint w = LPR / 2u; w > 0u; w >>= 1) {
        if (l < w) red[t] += red[t + w];
        barrier();
    }
    if (l == 0u && n0 + r < N) st(at(OUT, n0 + r, 0u, i2, i3), T_F32, red[t]);
}
