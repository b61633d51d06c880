#version 450
// ROPE and ROPE_EXT, one output element per invocation; pos (I32) in slot 1,
// (aux5 = 1: fused with the SET_ROWS that stores it, vk_params.h)
// ROPE_EXT's frequency factors (F32, one per pair) in slot 2 when aux1 = 1.
// op params: n_dims, mode, freq_base, freq_scale; ROPE_EXT also n_ctx_orig,
// ext_factor, attn_factor, beta_fast, beta_slow, of which the shader reads
// ext_factor: the plugin turns the rest into YaRN's correction range
// (aux2, aux3) and the magnitude (aux4) once per node (vk_params.h).
layout(local_size_x = 128) in;
#include "common.glsl"

void main()
{
    uint i = gidx();
    uint kv = aux(5u);
    uint shape = kv != 0u ? 0u : OUT;
    if (i >= nel(shape)) return;
    uvec4 c = unflat(shape, i);
    uint n_dims = uint(pi(0u));
    bool neox = pi(1u) == 2;
    uint xr = at(0u, 0u, c.y, c.z, c.w), nb = tnb(0u, 0u), ty = ttype(0u);
    uint o = at(OUT, c.x, c.y, c.z, c.w);
    if (kv != 0u) {
        // the destination row's id, as SET_ROWS reads it for row 0 of plane h
        uint h = kv == VK_ROPE_STORE_HEADS ? c.y : 0u;
        int id = ld_i32(3u, at(3u, 0u, h % tne(3u, 1u), 0u, 0u));
        if (id < 0 || uint(id) >= tne(OUT, 1u)) return;
        o = kv == VK_ROPE_STORE_HEADS ? at(OUT, c.x, uint(id), h, 0u) : at(OUT, i, uint(id), 0u, 0u);
    }
    if (c.x >= n_dims) {
        st(o, ttype(OUT), ld(0u, xr + c.x * nb, ty));
        return;
    }
    uint half_d = n_dims / 2u;
    uint p, a, b;
    if (neox) { p = c.x < half_d ? c.x : c.x - half_d; a = p; b = p + half_d; }
    else { p = c.x / 2u; a = 2u * p; b = a + 1u; }
    int pos_i = ld_i32(1u, at(1u, c.z, 0u, 0u, 0u));
    float freq = pow(pf(2u), -2.0 * float(p) / float(n_dims));
    float theta, m = 1.0;
    if (aux(0u) == VK_ROPE_EXT) {
        // theta_ext = pos freq / factor, theta_int = freq_scale theta_ext;
        // under YaRN the pair's ramp mixes the two (bp_ops.h).
        float theta_ext = float(pos_i) * freq;
        if (aux(1u) == 1u) theta_ext /= ld(2u, at(2u, p, 0u, 0u, 0u), T_F32);
        theta = pf(3u) * theta_ext;
        float ext_factor = pf(5u);
        if (ext_factor != 0.0) {
            float lo = uintBitsToFloat(aux(2u)), hi = uintBitsToFloat(aux(3u));
            float ramp = (1.0 - clamp((float(p) - lo) / max(0.001, hi - lo), 0.0, 1.0)) * ext_factor;
            theta = theta * (1.0 - ramp) + theta_ext * ramp;
        }
        m = uintBitsToFloat(aux(4u));
    } else {
        theta = float(pos_i) * pf(3u) * freq;
    }
    float cs = cos(theta) * m, sn = sin(theta) * m;
    float x0 = ld(0u, xr + a * nb, ty), x1 = ld(0u, xr + b * nb, ty);
    st(o, ttype(OUT), c.x == a ? x0 * cs - x1 * sn : x0 * sn + x1 * cs);
}
