#version 450
// MUL_MAT, tiled (prefill on GPUs): a workgroup computes a BN (rows of W)
// x BM (columns of X) tile of one (i2, i3) slice, the sizes specialisation
// constants that pipelines.c picks per device and per product
// (vk_mm_tiles). Per step of BK elements of K it dequantises the W tile
// into shared memory once (dequant.glsl; an invocation takes 8 consecutive
// elements of one row, so neighbouring invocations read neighbouring
// bytes of a block and its scales once per step) and stages the X tile the
// same way, both k-major. Invocation t then accumulates 8 rows
// tr + RS i (RS = BN / 8) against TM consecutive columns from registers:
// 8 TM multiply-adds per 8 + TM shared reads. Built with BP_F16T the
// tiles are float16_t (devices with shaderFloat16): half the shared
// memory per tile, the products still summed in float.
// Rows past N and columns past M are loaded clamped and not stored; K past
// its end loads zeros. W in slot 0, X in slot 1. The workgroup size
// (constant 0) is BN * BM / (8 * TM).
// Built with BP_MM_ID for MUL_MAT_ID (ids in slot 2; output [N, U, T],
// column j = u + U t is slot u of token t, with X column (u % X1, t)):
// workgroup (x, y, z) computes rows x BN .. of expert z for the columns
// routed to it, BM at a time: those of rank y, y + Y, ... (Y = the grid's
// height) in the order of j. It counts the ids that pick z once (each
// invocation a contiguous run, then a prefix sum in shared memory), so
// each chunk's columns are found by one more pass over the invocation's
// run. z = E writes zeros for the ids outside [0, E).
layout(local_size_x_id = 0) in;
#include "common.glsl"
#include "dequant.glsl"

#ifdef BP_F16T
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define TILE float16_t
#else
#define TILE float
#endif

layout(constant_id = 2) const uint BN = 64u;
layout(constant_id = 3) const uint BM = 32u;
layout(constant_id = 4) const uint TM = 4u;   // 4 or 8
#define BK 32u
#define RS (BN / 8u)
shared TILE ws[BK * BN];
shared TILE xs[BK * BM];

float wsr(uint k, uint r) { return float(ws[k * BN + r]); }

#ifdef BP_MM_ID
shared uint cols[BM];                  // the chunk's columns j
shared uint pre[BN * BM / (8u * TM)];  // the invocations' hit counts, then their prefix sums
uint U_;                               // slots per token
// Byte of X column m < M of the chunk (m past M repeats a stored column)
// and of row n of output column m.
uint xcol(uint m, uint M)
{
    uint j = cols[min(m, M - 1u)];
    return at(1u, 0u, (j % U_) % tne(1u, 1u), j / U_, 0u);
}
uint ocol(uint n, uint m) { return at(OUT, n, cols[m] % U_, cols[m] / U_, 0u); }
#else
uint X0_, XCS_, I2_, I3_;              // the (i2, i3) slice's X and its column stride
uint xcol(uint m, uint M) { return X0_ + min(m, M - 1u) * XCS_; }
uint ocol(uint n, uint m) { return at(OUT, n, m, I2_, I3_); }
#endif

// Rows n0 .. n0 + BN - 1 of the W matrix at byte w0 against columns
// m0 .. m0 + BM - 1 of those below M (xcol, ocol).
void tile(uint n0, uint m0, uint M, uint w0)
{
    uint t = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    uint N = tne(OUT, 0u), K = tne(0u, 0u);
    uint xb = tnb(1u, 0u), xt = ttype(1u), nb0 = tnb(0u, 0u), wrs = tnb(0u, 1u), bs = wbs();
    uint tr = t % RS, tc = (t / RS) * TM;
    // Row tr + RS i in ci (columns tc .. tc + 3) and, when TM is 8, di
    // (columns tc + 4 .. tc + 7). No arrays: a driver may keep an indexed
    // array in memory.
    vec4 c0 = vec4(0.0), c1 = vec4(0.0), c2 = vec4(0.0), c3 = vec4(0.0);
    vec4 c4 = vec4(0.0), c5 = vec4(0.0), c6 = vec4(0.0), c7 = vec4(0.0);
    vec4 d0 = vec4(0.0), d1 = vec4(0.0), d2 = vec4(0.0), d3 = vec4(0.0);
    vec4 d4 = vec4(0.0), d5 = vec4(0.0), d6 = vec4(0.0), d7 = vec4(0.0);
    for (uint k0 = 0u; k0 < K; k0 += BK) {
        // W: BN rows x 4 pieces of 8 elements; piece u % 4 of row u / 4.
        for (uint u = t; u < BN * 4u; u += WG) {
            uint row = w0 + min(n0 + u / 4u, N - 1u) * wrs, kp = (u % 4u) * 8u;
            uint o = kp * BN + u / 4u;
            if (bs == 1u) {
                for (uint i = 0u; i < 8u; i++) {
                    uint k = k0 + kp + i;
                    ws[o + i * BN] = TILE(k < K ? ld(0u, row + k * nb0, WTYPE) : 0.0);
                }
            } else {
                // BK divides every block size: the step lies in one block.
                uint blk = row + (k0 / bs) * nb0, j0 = k0 % bs + kp;
                for (uint i = 0u; i < 8u; i++) ws[o + i * BN] = TILE(wblk(blk, j0 + i));
            }
        }
        // X: BM columns x 4 pieces of 8 elements, likewise.
        for (uint u = t; u < BM * 4u; u += WG) {
            uint col = xcol(m0 + u / 4u, M), kp = (u % 4u) * 8u;
            uint o = kp * BM + u / 4u;
            for (uint i = 0u; i < 8u; i++) {
                uint k = k0 + kp + i;
                float v = 0.0;
                if (k < K)
                    v = xt == T_F32 ? uintBitsToFloat(rd(1u, (col + k * xb) >> 2)) : ld(1u, col + k * xb, xt);
                xs[o + i * BM] = TILE(v);
            }
        }
        barrier();
        for (uint k = 0u; k < BK; k++) {
            uint xo = k * BM + tc;
            vec4 x = vec4(float(xs[xo]), float(xs[xo + 1u]), float(xs[xo + 2u]), float(xs[xo + 3u]));
            float a0 = wsr(k, tr), a1 = wsr(k, tr + RS), a2 = wsr(k, tr + 2u * RS),
                  a3 = wsr(k, tr + 3u * RS), a4 = wsr(k, tr + 4u * RS), a5 = wsr(k, tr + 5u * RS),
                  a6 = wsr(k, tr + 6u * RS), a7 = wsr(k, tr + 7u * RS);
            c0 += a0 * x; c1 += a1 * x; c2 += a2 * x; c3 += a3 * x;
            c4 += a4 * x; c5 += a5 * x; c6 += a6 * x; c7 += a7 * x;
            if (TM == 8u) {
                vec4 y = vec4(float(xs[xo + 4u]), float(xs[xo + 5u]), float(xs[xo + 6u]),
                              float(xs[xo + 7u]));
                d0 += a0 * y; d1 += a1 * y; d2 += a2 * y; d3 += a3 * y;
                d4 += a4 * y; d5 += a5 * y; d6 += a6 * y; d7 += a7 * y;
            }
        }
        barrier();
    }
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        if (j >= TM) break;
        uint m = m0 + tc + j;
        if (m >= M) break;
        uint l = j & 3u;
        bool hi = j >= 4u;
        vec4 r0 = hi ? d0 : c0, r1 = hi ? d1 : c1, r2v = hi ? d2 : c2, r3v = hi ? d3 : c3;
        vec4 r4 = hi ? d4 : c4, r5 = hi ? d5 : c5, r6 = hi ? d6 : c6, r7 = hi ? d7 : c7;
        if (n0 + tr < N) st(ocol(n0 + tr, m), T_F32, r0[l]);
        if (n0 + tr + RS < N) st(ocol(n0 + tr + RS, m), T_F32, r1[l]);
        if (n0 + tr + 2u * RS < N) st(ocol(n0 + tr + 2u * RS, m), T_F32, r2v[l]);
        if (n0 + tr + 3u * RS < N) st(ocol(n0 + tr + 3u * RS, m), T_F32, r3v[l]);
        if (n0 + tr + 4u * RS < N) st(ocol(n0 + tr + 4u * RS, m), T_F32, r4[l]);
        if (n0 + tr + 5u * RS < N) st(ocol(n0 + tr + 5u * RS, m), T_F32, r5[l]);
        if (n0 + tr + 6u * RS < N) st(ocol(n0 + tr + 6u * RS, m), T_F32, r6[l]);
        if (n0 + tr + 7u * RS < N) st(ocol(n0 + tr + 7u * RS, m), T_F32, r7[l]);
    }
}

#ifdef BP_MM_ID
// Does column j pick expert want (want = E: an id outside [0, E))?
bool picks(uint j, uint want, uint E)
{
    uint e = uint(ld_i32(2u, at(2u, j % U_, j / U_, 0u, 0u)));
    return want == E ? e >= E : e == want;
}
#endif

void main()
{
    uint n0 = gl_WorkGroupID.x * BN;
#ifdef BP_MM_ID
    uint t = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    U_ = tne(OUT, 1u);
    uint E = tne(0u, 2u), want = gl_WorkGroupID.z, total = U_ * tne(OUT, 2u);
    uint per = (total + WG - 1u) / WG, lo = min(t * per, total), hi = min(lo + per, total);
    uint mine = 0u;
    for (uint j = lo; j < hi; j++)
        if (picks(j, want, E)) mine++;
    pre[t] = mine;
    barrier();
    for (uint d = 1u; d < WG; d <<= 1) { // inclusive prefix sum
        uint v = t >= d ? pre[t - d] : 0u;
        barrier();
        pre[t] += v;
        barrier();
    }
    uint before = pre[t] - mine, all = pre[WG - 1u];
    uint w0 = at(0u, 0u, 0u, min(want, E - 1u), 0u);
    for (uint c0 = gl_WorkGroupID.y * BM; c0 < all; c0 += gl_NumWorkGroups.y * BM) {
        if (mine > 0u && before < c0 + BM && before + mine > c0) {
            uint r = before;
            for (uint j = lo; j < hi && r < c0 + BM; j++)
                if (picks(j, want, E)) {
                    if (r >= c0) cols[r - c0] = j;
                    r++;
                }
        }
        barrier();
        uint nc = min(all - c0, BM), N = tne(OUT, 0u);
        if (want < E) {
            tile(n0, 0u, nc, w0);
        } else {
            for (uint u = t; u < BN * nc; u += WG)
                if (n0 + u % BN < N) st(ocol(n0 + u % BN, u / BN), T_F32, 0.0);
        }
        barrier(); // the next chunk's columns overwrite cols
    }
#else
    uint z = gl_WorkGroupID.z;
    I2_ = z % tne(OUT, 2u);
    I3_ = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    X0_ = at(1u, 0u, 0u, I2_, I3_);
    XCS_ = tnb(1u, 1u);
    tile(n0, gl_WorkGroupID.y * BM, tne(OUT, 1u), at(0u, 0u, 0u, I2_ / r2, I3_ / r3));
#endif
}
