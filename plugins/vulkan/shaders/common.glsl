// common.glsl — what every backplane shader shares.
//
// Tensors are bound as raw uint arrays (bindings 0-3 sources, 4 the output)
// and addressed in BYTES through the strides in a parameter block, so views,
// permutations and 2-byte-aligned offsets need no copies. 16-bit values
// (f16, bf16, the scales of quantized blocks) go two ways: where the device
// has storageBuffer16BitAccess every shader is also built with BP_F16S and
// the same bindings are aliased as uint16_t arrays, read and written
// directly; elsewhere they are unpacked from words, and written with two
// atomics on the word (adjacent halves belong to different invocations).
// The parameter block (binding 5, VK_PB_WORDS words at push-constant `base`)
// is laid out in vk_params.h, which the C side fills from.
#extension GL_EXT_control_flow_attributes : enable
#include "vk_params.h"

layout(std430, binding = 0) buffer B0 { uint d[]; } b0;
layout(std430, binding = 1) buffer B1 { uint d[]; } b1;
layout(std430, binding = 2) buffer B2 { uint d[]; } b2;
layout(std430, binding = 3) buffer B3 { uint d[]; } b3;
layout(std430, binding = 4) buffer B4 { uint d[]; } b4;
layout(std430, binding = 5) readonly buffer PB { uint p[]; } prm;
layout(push_constant) uniform PC { uint base; } pc;
#ifdef BP_F16S
#extension GL_EXT_shader_16bit_storage : require
layout(std430, binding = 0) buffer H0 { uint16_t d[]; } h0;
layout(std430, binding = 1) buffer H1 { uint16_t d[]; } h1;
layout(std430, binding = 2) buffer H2 { uint16_t d[]; } h2;
layout(std430, binding = 3) buffer H3 { uint16_t d[]; } h3;
layout(std430, binding = 4) buffer H4 { uint16_t d[]; } h4;
#endif

#define T_F32 0u
#define T_F16 1u
#define T_BF16 2u
#define T_I32 3u
#define T_Q4_0 4u
#define T_Q8_0 5u
#define T_Q4_K 6u
#define T_Q6_K 7u
#define T_Q4_1 9u
#define T_Q5_0 10u
#define T_Q5_1 11u
#define T_Q2_K 12u
#define T_Q3_K 13u
#define T_Q5_K 14u
#define T_IQ4_NL 15u
#define T_IQ4_XS 16u

#define OUT VK_PB_OUT

uint P(uint i) { return prm.p[pc.base + i]; }
uint toff(uint s) { return P(s * VK_PB_SLOT + VK_PB_OFF); }
uint tne(uint s, uint i) { return P(s * VK_PB_SLOT + VK_PB_NE + i); }
uint tnb(uint s, uint i) { return P(s * VK_PB_SLOT + VK_PB_NB + i); }
uint ttype(uint s) { return P(s * VK_PB_SLOT + VK_PB_TYPE); }
float pf(uint i) { return uintBitsToFloat(P(VK_PB_OPP + i)); }
int pi(uint i) { return int(P(VK_PB_OPP + i)); }
uint aux(uint i) { return P(VK_PB_AUX + i); }

uint rd(uint s, uint w)
{
    switch (s) {
    case 0u: return b0.d[w];
    case 1u: return b1.d[w];
    case 2u: return b2.d[w];
    case 3u: return b3.d[w];
    default: return b4.d[w];
    }
}
#ifdef BP_F16S
uint rd_u16(uint s, uint byte)
{
    uint i = byte >> 1;
    switch (s) {
    case 0u: return uint(h0.d[i]);
    case 1u: return uint(h1.d[i]);
    case 2u: return uint(h2.d[i]);
    case 3u: return uint(h3.d[i]);
    default: return uint(h4.d[i]);
    }
}
// Stores the low 16 bits at byte (2-aligned) of the output.
void st_u16(uint byte, uint bits) { h4.d[byte >> 1] = uint16_t(bits & 0xffffu); }
#else
uint rd_u16(uint s, uint byte) { return (rd(s, byte >> 2) >> ((byte & 2u) * 8u)) & 0xffffu; }
void st_u16(uint byte, uint bits)
{
    uint sh = (byte & 2u) * 8u;
    atomicAnd(b4.d[byte >> 2], ~(0xffffu << sh));
    atomicOr(b4.d[byte >> 2], (bits & 0xffffu) << sh);
}
#endif
uint rd_u8(uint s, uint byte) { return (rd(s, byte >> 2) >> ((byte & 3u) * 8u)) & 0xffu; }
int rd_i8(uint s, uint byte) { return int(rd_u8(s, byte) << 24) >> 24; }
float f16(uint h) { return unpackHalf2x16(h).x; }

float ld(uint s, uint byte, uint type)
{
    if (type == T_F32) return uintBitsToFloat(rd(s, byte >> 2));
    if (type == T_F16) return f16(rd_u16(s, byte));
    if (type == T_BF16) return uintBitsToFloat(rd_u16(s, byte) << 16);
    return float(int(rd(s, byte >> 2)));
}
int ld_i32(uint s, uint byte) { return int(rd(s, byte >> 2)); }

uint at(uint s, uint i0, uint i1, uint i2, uint i3)
{
    return toff(s) + i0 * tnb(s, 0u) + i1 * tnb(s, 1u) + i2 * tnb(s, 2u) + i3 * tnb(s, 3u);
}

uint bf16_bits(float v)
{
    uint x = floatBitsToUint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

void st(uint byte, uint type, float v)
{
    if (type == T_F32 || type == T_I32) {
        b4.d[byte >> 2] = type == T_F32 ? floatBitsToUint(v) : uint(int(v));
        return;
    }
    st_u16(byte, type == T_F16 ? packHalf2x16(vec2(v, 0.0)) : bf16_bits(v));
}

// The F32 output of a fused chain's first node, bound to slot VK_PB_FUSED (2).
void st_fused(uint byte, float v) { b2.d[byte >> 2] = floatBitsToUint(v); }

// Store raw bits of a value of `type` (no conversion).
void st_bits(uint byte, uint type, uint bits)
{
    if (type == T_F32 || type == T_I32) {
        b4.d[byte >> 2] = bits;
        return;
    }
    st_u16(byte, bits);
}
uint ld_bits(uint s, uint byte, uint type)
{
    return (type == T_F32 || type == T_I32) ? rd(s, byte >> 2) : rd_u16(s, byte);
}

// Flat invocation index over a (x, y) grid: the host splits large counts
// into rows of at most 65535 workgroups.
uint gidx() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x; }
uint gid_group() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

// Element index -> (i0, i1, i2, i3) over the shape of slot s.
uvec4 unflat(uint s, uint i)
{
    uvec4 r;
    r.x = i % tne(s, 0u); i /= tne(s, 0u);
    r.y = i % tne(s, 1u); i /= tne(s, 1u);
    r.z = i % tne(s, 2u);
    r.w = i / tne(s, 2u);
    return r;
}
uint nel(uint s) { return tne(s, 0u) * tne(s, 1u) * tne(s, 2u) * tne(s, 3u); }
// The byte of slot s's element at c, s repeated over a larger shape (a
// broadcast operand: each index modulo s's extent).
uint at_rep(uint s, uvec4 c)
{
    return at(s, c.x % tne(s, 0u), c.y % tne(s, 1u), c.z % tne(s, 2u), c.w % tne(s, 3u));
}
// SILU; one definition for SILU and the fused SILU -> MUL, and precise in
// both, so that no compiler reshapes it with the fused multiply that follows
// (the two round alike).
float silu(float v)
{
    precise float r = v / (1.0 + exp(-v));
    return r;
}
