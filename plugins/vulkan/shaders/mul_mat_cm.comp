#version 450
// MUL_MAT with cooperative matrices (VK_NV_cooperative_matrix: 16 x 16 x 16
// products of float16_t into float), for GPUs that offer them: a workgroup
// of four subgroups computes a 64 (rows of W) x 64 (columns of X) tile of
// one (i2, i3) slice, each subgroup a 32 x 32 quarter as 2 x 2 matrices.
// Per step of 32 elements of K the W tile is dequantised into shared memory
// as mul_mat.comp does (8 consecutive elements of one row per invocation,
// through dequant.glsl), row-major, and X beside it, column by column; the
// accumulators go through shared memory at the end so that rows past N and
// columns past M are not stored. Off unless BACKPLANE_VULKAN_COOPMAT=1: no
// device here offers the extension, so it has not run.
// W in slot 0, X in slot 1; the workgroup size (constant 0) is four
// subgroups.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
#include "common.glsl"
#include "dequant.glsl"

#define BN 64u
#define BM 64u
#define BK 32u
shared float16_t ws[BN * BK];   // (n, k) at n * BK + k
shared float16_t xs[BM * BK];   // (k, m) at m * BK + k
shared float cs[BN * BM];       // (n, m) at m * BN + n

#define HMAT fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FMAT fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

void main()
{
    uint t = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
    uint N = tne(OUT, 0u), M = tne(OUT, 1u), K = tne(0u, 0u);
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint z = gl_WorkGroupID.z, i2 = z % tne(OUT, 2u), i3 = z / tne(OUT, 2u);
    uint r2 = tne(1u, 2u) / tne(0u, 2u), r3 = tne(1u, 3u) / tne(0u, 3u);
    uint xb = tnb(1u, 0u), xt = ttype(1u), nb0 = tnb(0u, 0u), wrs = tnb(0u, 1u), bs = wbs();
    uint w0 = at(0u, 0u, 0u, i2 / r2, i3 / r3), x0 = at(1u, 0u, 0u, i2, i3), xcs = tnb(1u, 1u);
    // This subgroup's quarter: rows sn .. sn + 31, columns sm .. sm + 31.
    uint sg = gl_SubgroupID, sn = (sg & 1u) * 32u, sm = (sg >> 1) * 32u;
    FMAT c00 = FMAT(0.0), c01 = FMAT(0.0), c10 = FMAT(0.0), c11 = FMAT(0.0);
    for (uint k0 = 0u; k0 < K; k0 += BK) {
        for (uint u = t; u < BN * 4u; u += WG) {
            uint r = u / 4u, kp = (u % 4u) * 8u;
            uint row = w0 + min(n0 + r, N - 1u) * wrs;
            if (bs == 1u) {
                for (uint i = 0u; i < 8u; i++) {
                    uint k = k0 + kp + i;
                    ws[r * BK + kp + i] = float16_t(k < K ? ld(0u, row + k * nb0, WTYPE) : 0.0);
                }
            } else {
                uint blk = row + (k0 / bs) * nb0, j0 = k0 % bs + kp;
                for (uint i = 0u; i < 8u; i++) ws[r * BK + kp + i] = float16_t(wblk(blk, j0 + i));
            }
        }
        for (uint u = t; u < BM * 4u; u += WG) {
            uint c = u / 4u, kp = (u % 4u) * 8u;
            uint col = x0 + min(m0 + c, M - 1u) * xcs;
            for (uint i = 0u; i < 8u; i++) {
                uint k = k0 + kp + i;
                float v = 0.0;
                if (k < K)
                    v = xt == T_F32 ? uintBitsToFloat(rd(1u, (col + k * xb) >> 2)) : ld(1u, col + k * xb, xt);
                xs[c * BK + kp + i] = float16_t(v);
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            HMAT a0, a1, b0, b1;
            coopMatLoadNV(a0, ws, sn * BK + kk, BK, false);
            coopMatLoadNV(a1, ws, (sn + 16u) * BK + kk, BK, false);
            coopMatLoadNV(b0, xs, sm * BK + kk, BK, true);
            coopMatLoadNV(b1, xs, (sm + 16u) * BK + kk, BK, true);
            c00 = coopMatMulAddNV(a0, b0, c00);
            c01 = coopMatMulAddNV(a0, b1, c01);
            c10 = coopMatMulAddNV(a1, b0, c10);
            c11 = coopMatMulAddNV(a1, b1, c11);
        }
        barrier();
    }
    coopMatStoreNV(c00, cs, sm * BN + sn, BN, true);
    coopMatStoreNV(c01, cs, (sm + 16u) * BN + sn, BN, true);
    coopMatStoreNV(c10, cs, sm * BN + sn + 16u, BN, true);
    coopMatStoreNV(c11, cs, (sm + 16u) * BN + sn + 16u, BN, true);
    barrier();
    for (uint i = t; i < BN * BM; i += WG) {
        uint n = n0 + i % BN, m = m0 + i / BN;
        if (n < N && m < M) st(at(OUT, n, m, i2, i3), T_F32, cs[i]);
    }
}
