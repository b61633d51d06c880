#version 450
// MUL_MAT for few columns (decode's matrix-vector products, and prefill on
// CPU devices): a workgroup computes NR rows x up to NC columns of one
// (i2, i3) slice. Its invocations split K in chunks of 32; each chunk of a
// weight row is dequantised once into registers (dequant.glsl's wblk, one
// block address per chunk so its scales are read once) and multiplied
// with every column, so W is read once per NC columns. The partial sums are
// reduced with subgroupAdd where the workgroup is one subgroup (BP_SG: its
// size is the device's subgroup size; a driver that still splits it takes
// the shared-memory path), otherwise in shared memory. The workgroup size
// is specialisation constant 0.
// W in slot 0, X in slot 1. Rows past N and columns past M are computed
// on clamped indices and not stored.
// Built again with BP_MMID (mul_mat_vec_id*), MUL_MAT_ID: one column per
// workgroup, (slot u, token t), rows of expert ids[u, t] (slot 2) against
// X row (u % X1, t).
#ifdef BP_SG
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
layout(local_size_x_id = 0) in;
#include "common.glsl"
#include "dequant.glsl"

#define NR 2u
#ifdef BP_MMID
#define NC 1u
#else
#define NC 8u
#endif
// Shared-memory reduction (also the _sg builds' fallback where a driver
// splits the workgroup into several subgroups after all).
shared float red[NR * NC][128];

float ldx(uint byte, uint xt)
{
    return xt == T_F32 ? uintBitsToFloat(rd(1u, byte >> 2)) : ld(1u, byte, xt);
}

// Column offsets of the eight-column path (set once in main).
uint xc1, xc2, xc3, xc4, xc5, xc6, xc7;

// Element k of rows 0 and 1 (v0, v1) times X[k] of the eight columns from byte xi.
void col8(float v0, float v1, uint xi, uint xt, inout vec4 a0, inout vec4 a1, inout vec4 b0,
          inout vec4 b1)
{
    vec4 xl = vec4(ldx(xi, xt), ldx(xi + xc1, xt), ldx(xi + xc2, xt), ldx(xi + xc3, xt));
    vec4 xh = vec4(ldx(xi + xc4, xt), ldx(xi + xc5, xt), ldx(xi + xc6, xt), ldx(xi + xc7, xt));
    a0 += v0 * xl;
    a1 += v0 * xh;
    b0 += v1 * xl;
    b1 += v1 * xh;
}

void main()
{
    uint t = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    uint N = tne(OUT, 0u), K = tne(0u, 0u);
    uint nrb = (N + NR - 1u) / NR;
    uint g = gid_group(), n0 = (g % nrb) * NR, rest = g / nrb;
#ifdef BP_MMID
    uint nu = tne(OUT, 1u);
    if (rest >= nu * tne(OUT, 2u)) return;
    uint u = rest % nu, tok = rest / nu;
    int e = ld_i32(2u, at(2u, u, tok, 0u, 0u));
    if (e < 0 || uint(e) >= tne(0u, 2u)) {
        // Out of range (checked on the host when the ids are an input):
        // zeros, the same branch for the whole workgroup.
        if (t == 0u)
            for (uint r = 0u; r < NR; r++)
                if (n0 + r < N) st(at(OUT, n0 + r, u, tok, 0u), T_F32, 0.0);
        return;
    }
    uint wbase = at(0u, 0u, 0u, uint(e), 0u);
    uint xr0 = at(1u, 0u, u % tne(1u, 1u), tok, 0u), xcs = 0u, ncols = 1u;
#else
    uint M = tne(OUT, 1u), ncb = (M + NC - 1u) / NC;
    uint m0 = (rest % ncb) * NC, z = rest / ncb;
    if (z >= tne(OUT, 2u) * tne(OUT, 3u)) return;
    uint i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint wbase = at(0u, 0u, 0u, i2 / r2, i3 / r3);
    uint xr0 = at(1u, 0u, m0, i2, i3), xcs = tnb(1u, 1u), ncols = min(NC, M - m0);
#endif
    uint wrs = tnb(0u, 1u), nb0 = tnb(0u, 0u), xb = tnb(1u, 0u), xt = ttype(1u);
    uint bs = wbs();
    uint row0 = wbase + min(n0, N - 1u) * wrs, row1 = wbase + min(n0 + 1u, N - 1u) * wrs;
    // No arrays (a CPU driver keeps an indexed array in memory): two rows,
    // and one column as scalars or eight as two vec4 per row.
    vec4 a0 = vec4(0.0), a1 = vec4(0.0), b0 = vec4(0.0), b1 = vec4(0.0);
    // Column offsets of the eight-column path, clamped to the last column.
    xc1 = min(1u, ncols - 1u) * xcs; xc2 = min(2u, ncols - 1u) * xcs;
    xc3 = min(3u, ncols - 1u) * xcs; xc4 = min(4u, ncols - 1u) * xcs;
    xc5 = min(5u, ncols - 1u) * xcs; xc6 = min(6u, ncols - 1u) * xcs;
    xc7 = min(7u, ncols - 1u) * xcs;
    for (uint c = t; c * 32u < K; c += WG) {
        uint kb = c * 32u, kn = min(32u, K - kb);
        uint blk0 = row0 + (kb / bs) * nb0, blk1 = row1 + (kb / bs) * nb0, j0 = kb % bs;
        if (ncols == 1u) {
            // One column (decode): whole chunks four elements at a time, so
            // that the four reads of a block's scales are the same loads,
            // which the compiler merges.
            uint jstep = kn == 32u ? 4u : 1u;
            for (uint j = 0u; j < kn; j += jstep) {
                vec4 w0, w1;
                uint n = jstep, xr = xr0 + (kb + j) * xb;
                if (bs == 1u) {
                    uint o = (kb + j) * nb0;
                    w0 = vec4(ld(0u, row0 + o, WTYPE), n > 1u ? ld(0u, row0 + o + nb0, WTYPE) : 0.0,
                              n > 1u ? ld(0u, row0 + o + 2u * nb0, WTYPE) : 0.0,
                              n > 1u ? ld(0u, row0 + o + 3u * nb0, WTYPE) : 0.0);
                    w1 = vec4(ld(0u, row1 + o, WTYPE), n > 1u ? ld(0u, row1 + o + nb0, WTYPE) : 0.0,
                              n > 1u ? ld(0u, row1 + o + 2u * nb0, WTYPE) : 0.0,
                              n > 1u ? ld(0u, row1 + o + 3u * nb0, WTYPE) : 0.0);
                } else {
                    uint q = j0 + j;
                    w0 = vec4(wblk(blk0, q), wblk(blk0, q + 1u), wblk(blk0, q + 2u), wblk(blk0, q + 3u));
                    w1 = vec4(wblk(blk1, q), wblk(blk1, q + 1u), wblk(blk1, q + 2u), wblk(blk1, q + 3u));
                }
                vec4 x = vec4(ldx(xr, xt), n > 1u ? ldx(xr + xb, xt) : 0.0,
                              n > 1u ? ldx(xr + 2u * xb, xt) : 0.0, n > 1u ? ldx(xr + 3u * xb, xt) : 0.0);
                a0.x += dot(w0, x);
                b0.x += dot(w1, x);
            }
        } else {
            // Up to eight columns: each element of the two rows once, times
            // every column (here unrolling only adds register pressure).
            for (uint j = 0u; j < kn; j++) {
                float w0 = bs == 1u ? ld(0u, row0 + (kb + j) * nb0, WTYPE) : wblk(blk0, j0 + j);
                float w1 = bs == 1u ? ld(0u, row1 + (kb + j) * nb0, WTYPE) : wblk(blk1, j0 + j);
                col8(w0, w1, xr0 + (kb + j) * xb, xt, a0, a1, b0, b1);
            }
        }
    }
    float acc[NR * NC];
#ifdef BP_MMID
    acc[0] = a0.x;
    acc[1] = b0.x;
#else
    acc[0] = a0.x; acc[1] = a0.y; acc[2] = a0.z; acc[3] = a0.w;
    acc[4] = a1.x; acc[5] = a1.y; acc[6] = a1.z; acc[7] = a1.w;
    acc[8] = b0.x; acc[9] = b0.y; acc[10] = b0.z; acc[11] = b0.w;
    acc[12] = b1.x; acc[13] = b1.y; acc[14] = b1.z; acc[15] = b1.w;
#endif
#ifdef BP_SG
    if (gl_NumSubgroups == 1u) {
        [[unroll]] for (uint i = 0u; i < NR * NC; i++) acc[i] = subgroupAdd(acc[i]);
    } else {
#endif
    [[unroll]] for (uint i = 0u; i < NR * NC; i++) red[i][t] = acc[i];
    barrier();
    for (uint w = WG / 2u; w > 0u; w >>= 1) {
        if (t < w)
            [[unroll]] for (uint i = 0u; i < NR * NC; i++) red[i][t] += red[i][t + w];
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < NR * NC; i++) acc[i] = red[i][0];
#ifdef BP_SG
    }
#endif
    if (t != 0u) return;
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        if (n0 + r >= N) continue;
        [[unroll]] for (uint col = 0u; col < NC; col++) {
            if (col >= ncols) continue;
#ifdef BP_MMID
            st(at(OUT, n0 + r, u, tok, 0u), T_F32, acc[r * NC + col]);
#else
            st(at(OUT, n0 + r, m0 + col, i2, i3), T_F32, acc[r * NC + col]);
#endif
        }
    }
}
