#!/usr/bin/env python3
"""make-moe-bench-model.py OUT.gguf [--layers N] [--experts E] [--used K]
                                 [--embd D] [--ff-exp F]

Writes a random-weight Qwen3-MoE-shaped GGUF file in F16 for benchmarks
(scripts/bench-moe.sh quantizes it with llama.cpp): by default Qwen3-30B-A3B's
layer shape (n_embd 2048, 32 query and 4 kv heads of 128, q/k norms, NEOX
RoPE base 1e6, experts of 768) with 64 experts of which 8 are used, over 12
layers: about 3.9 B parameters, 0.7 B of them read per token. The
vocabulary is make-arch-models.py's 512 tokens, so the output projection is
small and a decoded token's weight bytes are the layers'.

The values are F16 numbers drawn once into a pool (uniform, the spread of
a 1/sqrt(fan-in) initialisation) and each tensor is a slice of the pool at
a seeded offset: a benchmark needs real numbers, not independent ones, and
Python alone draws a few million a second.
"""
import argparse
import importlib.util
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("mam", os.path.join(HERE, "make-arch-models.py"))
mam = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mam)

GGML_F32, GGML_F16 = 0, 1
POOL = 1 << 22  # F16 values in the pool


def f16_pool(scale):
    rng = random.Random(12345)
    vals = [rng.uniform(-scale, scale) for _ in range(POOL)]
    return struct.pack(f"<{POOL}e", *vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--used", type=int, default=8)
    ap.add_argument("--embd", type=int, default=2048)
    ap.add_argument("--ff-exp", type=int, default=768)
    a = ap.parse_args()
    E, L, NE, FE = a.embd, a.layers, a.experts, a.ff_exp
    H, HKV, D = 32, 4, 128
    arch = "qwen3moe"
    kvs = [("general.architecture", mam.STRING, arch), ("general.file_type", mam.U32, 1)]
    for suffix, vt, v in [("context_length", mam.U32, 4096), ("embedding_length", mam.U32, E),
                          ("block_count", mam.U32, L), ("feed_forward_length", mam.U32, 6144),
                          ("attention.head_count", mam.U32, H), ("attention.head_count_kv", mam.U32, HKV),
                          ("attention.key_length", mam.U32, D), ("attention.value_length", mam.U32, D),
                          ("attention.layer_norm_rms_epsilon", mam.F32, 1e-6),
                          ("rope.dimension_count", mam.U32, D), ("rope.freq_base", mam.F32, 1e6),
                          ("expert_count", mam.U32, NE), ("expert_used_count", mam.U32, a.used),
                          ("expert_feed_forward_length", mam.U32, FE)]:
        kvs.append((f"{arch}.{suffix}", vt, v))
    kvs += mam.vocab_kvs()
    V = mam.N_VOCAB
    # (name, ne, type): norms F32 around 1, everything else F16 from the pool
    tensors = [("token_embd.weight", [E, V], GGML_F16), ("output_norm.weight", [E], GGML_F32)]
    for i in range(L):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", [E], GGML_F32), (b + "attn_q.weight", [E, H * D], GGML_F16),
                    (b + "attn_k.weight", [E, HKV * D], GGML_F16), (b + "attn_v.weight", [E, HKV * D], GGML_F16),
                    (b + "attn_q_norm.weight", [D], GGML_F32), (b + "attn_k_norm.weight", [D], GGML_F32),
                    (b + "attn_output.weight", [H * D, E], GGML_F16), (b + "ffn_norm.weight", [E], GGML_F32),
                    (b + "ffn_gate_inp.weight", [E, NE], GGML_F32),
                    (b + "ffn_gate_exps.weight", [E, FE, NE], GGML_F16),
                    (b + "ffn_up_exps.weight", [E, FE, NE], GGML_F16),
                    (b + "ffn_down_exps.weight", [FE, E, NE], GGML_F16)]
    pool = f16_pool(1.7 / (E ** 0.5))  # uniform of std 1/sqrt(E)
    rng = random.Random(7)
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kvs))
    meta, offset, sizes = [head] + [mam.kv_bytes(*kv) for kv in kvs], 0, []
    for name, ne, ty in tensors:
        n = 1
        for d in ne:
            n *= d
        size = n * (4 if ty == GGML_F32 else 2)
        meta.append(mam.gstr(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                    + struct.pack("<IQ", ty, offset))
        sizes.append(size)
        offset += size + (-size) % mam.ALIGN
    meta = b"".join(meta)
    with open(a.out, "wb") as f:
        f.write(meta)
        f.write(b"\0" * ((-len(meta)) % mam.ALIGN))
        for (name, ne, ty), size in zip(tensors, sizes):
            if ty == GGML_F32:
                n = size // 4
                f.write(struct.pack(f"<{n}f", *[1.0 + 0.1 * rng.uniform(-1, 1) for _ in range(n)]))
            else:
                left = size
                while left > 0:
                    start = 2 * rng.randrange(POOL // 2)
                    piece = pool[start:start + min(left, len(pool) - start)]
                    f.write(piece)
                    left -= len(piece)
            f.write(b"\0" * ((-size) % mam.ALIGN))
    print(f"{a.out}: {sum(sizes) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
