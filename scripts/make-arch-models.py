#!/usr/bin/env python3
"""make-arch-models.py OUTDIR [--group reference|large|controls|quant] [--list]
   make-arch-models.py --tokens

Writes small random-weight GGUF v3 models, one per case below, that
llama.cpp loads: every architecture `backplane run` is to run (llama,
qwen2, qwen3, gemma2, gemma3, phi3, mistral3) with the features each one
reads, plus files llama.cpp refuses. scripts/arch-reference.sh runs it and
then takes llama.cpp's logits for every file (tests/data/arch/README.md).

Groups (default: reference):
  reference  the F32 files kept in tests/data/arch;
  large      n_embd 256 variants (head_dim 64, n_ff 512), sources of the
             quantized references: their rows are multiples of 256, so
             llama.cpp's Q4_K_M is made of real K-quants;
  controls   copies of reference cases with one feature switched off, for
             checking that the feature changes llama.cpp's logits;
  quant      shapes for comparing quantizers with llama.cpp's
             (scripts/quantize-reference.sh): 16 layers with 4 query heads
             per kv head, and rows no quantization block divides.
--list prints the group's file names and nothing else; --tokens prints the
32 token ids (in [3, 512)) that every reference evaluates.

Everything is deterministic: each tensor's values come from Python's
random.Random seeded with the CRC-32 of "<seed>/<tensor name>", uniform
with a chosen standard deviation; cases that share a seed share weights
(llama-qkv is llama-plain with q, k and v fused; phi3-long and phi3-short
differ only in a key). Keys follow llama.cpp's strict types (counts u32,
floats f32); the vocabulary is the 512-token SentencePiece placeholder of
scripts/gguf_add_vocab.py (<unk>, <s>, </s>, 256 byte tokens, tok<N>).
Pure Python 3, no packages.
"""
import math
import os
import random
import struct
import sys
import zlib

# GGUF value types (GGUF specification).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
GGML_F32 = 0
ALIGN = 32
N_VOCAB = 512
N_TOKENS = 32
TOKEN_SEED = 20240607


# ---------------------------------------------------------------- writer

def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_bytes(key, vtype, value):
    """One key/value record: the key, its type, its payload."""
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == STRING:
        return out + gstr(value)
    if vtype == ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(gstr(s) for s in items)
        fmt = {F32: "f", I32: "i", U32: "I"}[etype]
        return out + struct.pack(f"<{len(items)}{fmt}", *items)
    fmt = {U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q"}[vtype]
    return out + struct.pack(fmt, value)


def write_gguf(path, kvs, tensors):
    """kvs: [(key, type, value)]; tensors: [(name, ne, floats)] with ne in
    ggml order (ne[0] contiguous), data stored as F32."""
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kvs))
    meta = [head] + [kv_bytes(*kv) for kv in kvs]
    offset, blobs = 0, []
    for name, ne, data in tensors:
        n = 1
        for d in ne:
            n *= d
        if len(data) != n:
            raise SystemExit(f"make-arch-models: {name} has {len(data)} values for shape {ne}")
        meta.append(gstr(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                     + struct.pack("<IQ", GGML_F32, offset))
        blob = struct.pack(f"<{n}f", *data)
        blob += b"\0" * ((-len(blob)) % ALIGN)
        blobs.append(blob)
        offset += len(blob)
    meta = b"".join(meta)
    with open(path, "wb") as f:
        f.write(meta)
        f.write(b"\0" * ((-len(meta)) % ALIGN))
        for blob in blobs:
            f.write(blob)


def vocab_kvs():
    names = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    names += [f"tok{i}" for i in range(len(names), N_VOCAB)]
    # token types: 1 normal, 2 unknown, 3 control, 6 byte
    types = [2, 3, 3] + [6] * 256 + [1] * (N_VOCAB - 259)
    return [
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, names)),
        ("tokenizer.ggml.scores", ARRAY, (F32, [-float(i) for i in range(N_VOCAB)])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
    ]


# ---------------------------------------------------------------- values

def uniform(seed, name, n, std, mean=0.0):
    """n values, uniform with the given mean and standard deviation."""
    rng = random.Random(zlib.crc32(f"{seed}/{name}".encode()))
    a = std * math.sqrt(3.0)
    return [mean + rng.uniform(-a, a) for _ in range(n)]


def tokens():
    rng = random.Random(TOKEN_SEED)
    return [rng.randrange(3, N_VOCAB) for _ in range(N_TOKENS)]


# ---------------------------------------------------------------- models

BASE = dict(n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_layer=2,
            eps=1e-5, ctx_train=4096, emb_std=0.5, qk_gain=1.5, out_norm=1.0)
# half the embedding spread at 4x the width keeps the tied logits in range
LARGE = dict(n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512, n_layer=2, emb_std=0.25)


def model(arch, **kw):
    """A case: BASE dimensions, the arch, and what kw adds or changes.
    Feature flags: tied, fused_qkv, qkv_bias, o_bias, ffn_bias, out_bias,
    qk_norm, post_norms (gemma), fused_up (phi3), experts (count, used),
    n_ff_exp, shexp (a shared expert's width; shexp_key writes its key),
    rope_freqs / rope_long / rope_short (factor lists), v_dim, n_rot,
    keys {suffix: (type, value)} under "<arch>.", extra_tensors [names],
    write_head_lens."""
    m = dict(BASE, arch=arch, tied=True, keys={}, extra_tensors=[])
    m.update(kw)
    return m


def arch_kvs(m):
    a, kvs = m["arch"], []

    def put(suffix, vtype, value):
        kvs.append((f"{a}.{suffix}", vtype, value))

    kvs.append(("general.architecture", STRING, a))
    # no general.name: llama.cpp's vocab loader special-cases names that
    # contain "phi3" (it then needs an <|endoftext|> token)
    kvs.append(("general.file_type", U32, 0))
    put("context_length", U32, m["ctx_train"])
    put("embedding_length", U32, m["n_embd"])
    put("block_count", U32, m["n_layer"])
    put("feed_forward_length", U32, m["n_ff"])
    put("attention.head_count", U32, m["n_head"])
    put("attention.head_count_kv", U32, m["n_head_kv"])
    put("attention.layer_norm_rms_epsilon", F32, m["eps"])
    if m.get("write_head_lens") or m["head_dim"] * m["n_head"] != m["n_embd"] or "v_dim" in m:
        put("attention.key_length", U32, m["head_dim"])
        put("attention.value_length", U32, m.get("v_dim", m["head_dim"]))
    put("rope.dimension_count", U32, m.get("n_rot", m["head_dim"]))
    if "experts" in m:
        put("expert_count", U32, m["experts"][0])
        put("expert_used_count", U32, m["experts"][1])
    if "n_ff_exp" in m:
        put("expert_feed_forward_length", U32, m["n_ff_exp"])
    if m.get("shexp_key"):
        put("expert_shared_feed_forward_length", U32, m["shexp"])
    for suffix, (vtype, value) in m["keys"].items():
        # a key given here replaces one written above, in place
        key = f"{a}.{suffix}"
        for i, kv in enumerate(kvs):
            if kv[0] == key:
                kvs[i] = (key, vtype, value)
                break
        else:
            kvs.append((key, vtype, value))
    return kvs + vocab_kvs()


def arch_tensors(m):
    s, a = m["seed"], m["arch"]
    E, H, HKV, D, F, V = m["n_embd"], m["n_head"], m["n_head_kv"], m["head_dim"], m["n_ff"], N_VOCAB
    DV = m.get("v_dim", D)
    out = []

    def norm(name, n, center=1.0):
        out.append((name, [n], uniform(s, name, n, 0.12, center)))

    def lin(name, n_in, n_out, gain=1.0):
        """A weight W[out][in]: ggml ne = {in, out}; std gain/sqrt(in)."""
        return (name, [n_in, n_out], uniform(s, name, n_in * n_out, gain / math.sqrt(n_in)))

    def bias(name, n):
        out.append((name, [n], uniform(s, name, n, 0.3)))

    out.append(("token_embd.weight", [E, V], uniform(s, "token_embd.weight", E * V, m["emb_std"])))
    norm("output_norm.weight", E, m["out_norm"])
    if not m["tied"]:
        out.append(lin("output.weight", E, V, m["emb_std"] * math.sqrt(E) / 2))
    if m.get("out_bias"):
        bias("output.bias", V)
    for key in ("rope_freqs", "rope_long", "rope_short"):
        if m.get(key) is not None:
            name = {"rope_freqs": "rope_freqs.weight", "rope_long": "rope_factors_long.weight",
                    "rope_short": "rope_factors_short.weight"}[key]
            out.append((name, [len(m[key])], list(m[key])))
    for i in range(m["n_layer"]):
        b = f"blk.{i}."
        norm(b + "attn_norm.weight", E)
        q = lin(b + "attn_q.weight", E, H * D, m["qk_gain"])
        k = lin(b + "attn_k.weight", E, HKV * D, m["qk_gain"])
        v = lin(b + "attn_v.weight", E, HKV * DV)
        if m.get("fused_qkv"):
            # rows [q | k | v]: ggml ne {in, out}, so the data concatenates
            out.append((b + "attn_qkv.weight", [E, H * D + HKV * D + HKV * DV], q[2] + k[2] + v[2]))
        else:
            out += [q, k, v]
        if m.get("qkv_bias"):
            bias(b + "attn_q.bias", H * D)
            bias(b + "attn_k.bias", HKV * D)
            bias(b + "attn_v.bias", HKV * DV)
        if m.get("qk_norm") == "ones":
            out.append((b + "attn_q_norm.weight", [D], [1.0] * D))
            out.append((b + "attn_k_norm.weight", [D], [1.0] * D))
        elif m.get("qk_norm"):
            norm(b + "attn_q_norm.weight", D)
            norm(b + "attn_k_norm.weight", D)
        # every arch here sizes attn_output by the key length (llama.cpp's
        # llama graph then asserts value_length == key_length)
        out.append(lin(b + "attn_output.weight", H * D, E))
        if m.get("o_bias"):
            bias(b + "attn_output.bias", E)
        if m.get("post_norms"):
            norm(b + "post_attention_norm.weight", E)
        norm(b + "ffn_norm.weight", E)
        if "experts" in m:
            # llama: experts are n_ff wide; qwen3moe: expert_feed_forward_length;
            # qwen2moe without the key: n_ff / expert_used_count
            n_exp, FE = m["experts"][0], m.get("n_ff_exp", F // m["experts"][1] if a == "qwen2moe" else F)
            out.append(lin(b + "ffn_gate_inp.weight", E, n_exp, 3.0))
            for t, n_in, n_out in (("gate", E, FE), ("up", E, FE), ("down", FE, E)):
                name = f"{b}ffn_{t}_exps.weight"
                out.append((name, [n_in, n_out, n_exp],
                            uniform(s, name, n_in * n_out * n_exp, 1.0 / math.sqrt(n_in))))
            if "shexp" in m:
                # the shared expert (m["shexp"] wide) and its sigmoid gate's
                # vector, whose dot with the normed input spreads about +-2
                FS = m["shexp"]
                name = b + "ffn_gate_inp_shexp.weight"
                out.append((name, [E], uniform(s, name, E, 2.0 / math.sqrt(E))))
                out.append(lin(b + "ffn_gate_shexp.weight", E, FS))
                out.append(lin(b + "ffn_up_shexp.weight", E, FS))
                out.append(lin(b + "ffn_down_shexp.weight", FS, E))
        else:
            g = lin(b + "ffn_gate.weight", E, F)
            u = lin(b + "ffn_up.weight", E, F)
            if m.get("fused_up"):
                out.append((b + "ffn_up.weight", [E, 2 * F], g[2] + u[2]))  # gate first
            else:
                out += [g, u]
            out.append(lin(b + "ffn_down.weight", F, E))
            if m.get("ffn_bias"):
                bias(b + "ffn_gate.bias", F)
                bias(b + "ffn_up.bias", F)
                bias(b + "ffn_down.bias", E)
        if m.get("post_norms"):
            norm(b + "post_ffw_norm.weight", E)
    for name in m["extra_tensors"]:
        out.append((name, [E], uniform(s, name, E, 0.1)))
    return out


# ---------------------------------------------------------------- cases

# rope_freqs as Llama 3.1's converter writes them (1 for fast pairs, the
# factor for slow ones, in between), but on pairs that rotate within 32
# positions at base 5e5, so that the factors show.
LLAMA3_FACTORS = [1.0, 8.0, 2.5, 1.0, 8.0, 1.6, 1.0, 8.0]
LONG_8 = [1.0, 3.0, 6.0, 1.5, 9.0, 12.0, 2.0, 16.0]
SHORT_8 = [1.0, 1.05, 1.2, 1.0, 1.4, 1.1, 1.3, 1.0]
PHI3_LONG = [1.0, 2.5, 5.0, 1.25, 8.0, 12.0]  # n_rot 12 -> 6 pairs
PHI3_SHORT = [1.0, 1.1, 1.02, 1.3, 1.05, 1.2]


def linear(factor):
    return {"rope.scaling.type": (STRING, "linear"), "rope.scaling.factor": (F32, factor)}


def gemma2(name, **kw):
    keys = {"attention.sliding_window": (U32, 4), "attn_logit_softcapping": (F32, 50.0),
            "final_logit_softcapping": (F32, 30.0)}
    keys.update(kw.pop("keys", {}))
    return model("gemma2", name=name, post_norms=True, qk_gain=4.0, out_norm=4.0,
                 write_head_lens=True, keys=keys, **kw)


def gemma3(name, **kw):
    keys = {"attention.sliding_window": (U32, 4), "rope.freq_base": (F32, 1e6),
            "rope.freq_base_swa": (F32, 1e4), **linear(8.0)}
    keys.update(kw.pop("keys", {}))
    return model("gemma3", name=name, n_layer=kw.pop("n_layer", 6), post_norms=True,
                 qk_norm=True, write_head_lens=True, keys=keys, **kw)


def phi3(name, orig, **kw):
    return model("phi3", name=name, fused_qkv=True, fused_up=True, n_rot=kw.pop("n_rot", 12),
                 tied=False, ctx_train=8192, rope_long=kw.pop("rope_long", PHI3_LONG),
                 rope_short=kw.pop("rope_short", PHI3_SHORT),
                 keys={"rope.scaling.original_context_length": (U32, orig),
                       "rope.scaling.attn_factor": (F32, 1.19)}, **kw)


def yarn_keys(factor, orig, attn):
    return {"rope.scaling.type": (STRING, "yarn"), "rope.scaling.factor": (F32, factor),
            "rope.scaling.original_context_length": (U32, orig),
            "rope.scaling.attn_factor": (F32, attn)}


def mistral3(name, drop=()):
    keys = yarn_keys(4.0, 16, 1.0)
    keys.update({"rope.scaling.yarn_beta_fast": (F32, 0.5), "rope.scaling.yarn_beta_slow": (F32, 0.125),
                 "rope.scaling.yarn_log_multiplier": (F32, 0.5),
                 "attention.temperature_scale": (F32, 0.5)})
    for k in drop:
        del keys[k]
    return model("mistral3", name=name, seed="mistral3", keys=keys)


def reference_cases():
    llama_yarn = yarn_keys(4.0, 32, 1.1)
    # Converters copy these from the HF config; the llama arch never reads
    # them (llama.cpp uses 32 and 1 and no log multiplier): a runner must
    # ignore them.
    llama_yarn.update({"rope.scaling.yarn_beta_fast": (F32, 0.5),
                       "rope.scaling.yarn_beta_slow": (F32, 0.125),
                       "rope.scaling.yarn_log_multiplier": (F32, 0.5)})
    longrope = {"rope.scaling.type": (STRING, "longrope"),
                "rope.scaling.original_context_length": (U32, 256),
                "rope.scaling.attn_factor": (F32, 1.1)}
    return [
        model("llama", name="llama-plain"),
        model("llama", name="llama-untied", tied=False),
        model("llama", name="llama-qkv", seed="llama-plain", fused_qkv=True),
        model("llama", name="llama-bias-freqs", qkv_bias=True, o_bias=True, ffn_bias=True,
              rope_freqs=LLAMA3_FACTORS, keys={"rope.freq_base": (F32, 5e5)}),
        model("llama", name="llama-yarn", keys=llama_yarn),
        model("llama", name="llama-linear", keys=linear(2.0)),
        model("llama", name="llama-headdim", head_dim=32),
        model("llama", name="llama-longrope", rope_long=LONG_8, rope_short=SHORT_8, keys=longrope),
        model("qwen2", name="qwen2", qkv_bias=True, keys={"rope.freq_base": (F32, 1e6)}),
        model("qwen2", name="qwen2-outbias", qkv_bias=True, tied=False, out_bias=True,
              keys={"rope.freq_base": (F32, 1e6)}),
        model("qwen3", name="qwen3", head_dim=32, qk_norm=True, keys={"rope.freq_base": (F32, 1e6)}),
        gemma2("gemma2"),
        gemma3("gemma3"),
        # 2 layers, pattern 2 given as a key: layer 0 sliding, layer 1 global
        gemma3("gemma3-softcap", n_layer=2,
               keys={"final_logit_softcapping": (F32, 20.0),
                     "attention.sliding_window_pattern": (U32, 2)}),
        phi3("phi3-long", 32, seed="phi3"),
        phi3("phi3-short", 4096, seed="phi3"),
        mistral3("mistral3"),
        # refusals: 1 layer and n_ff 32, since only loading matters
        model("llama", name="refuse-unknown-tensor", n_layer=1, n_ff=32,
              extra_tensors=["blk.0.foo.weight"]),
        model("llama", name="refuse-key-type", n_layer=1, n_ff=32,
              keys={"context_length": (I32, 4096)}),
        model("llama", name="refuse-scaling-type", n_layer=1, n_ff=32,
              keys={"rope.scaling.type": (STRING, "llama3"), "rope.scaling.factor": (F32, 8.0)}),
        model("llama", name="refuse-kv-length", n_layer=1, n_ff=32, v_dim=32),
        # Mixtral-style: 4 experts, top 2 (seed of its first name)
        model("llama", name="mixtral", seed="refuse-moe", experts=(4, 2), n_ff=64),
        # Qwen3-MoE: q/k norms, 8 experts of 32, top 2, no shared expert
        model("qwen3moe", name="qwen3moe", experts=(8, 2), n_ff_exp=32, qk_norm=True,
              keys={"rope.freq_base": (F32, 1e6)}),
        # Qwen2-MoE: qwen2's attention, 4 experts, top 2, weights not
        # renormalised, a gated shared expert; no width keys, so experts are
        # n_ff / 2 = 32 and the shared expert n_ff = 64 wide (llama.cpp's
        # defaults); llama.cpp requires output.weight
        model("qwen2moe", name="qwen2moe", experts=(4, 2), n_ff=64, shexp=64, qkv_bias=True, tied=False,
              keys={"rope.freq_base": (F32, 1e6)}),
        # an architecture whose experts backplane does not compute
        model("qwen2", name="refuse-moe-qwen2", n_layer=1, experts=(4, 2), n_ff=32),
    ]


def large_cases():
    return [
        model("llama", name="llama-256", **LARGE),
        model("qwen2", name="qwen2-256", qkv_bias=True, keys={"rope.freq_base": (F32, 1e6)}, **LARGE),
        model("qwen3", name="qwen3-256", qk_norm=True, write_head_lens=True,
              keys={"rope.freq_base": (F32, 1e6)}, **LARGE),
        # 2 layers: pattern 2 makes layer 0 sliding, layer 1 global
        # gemma scales embeddings by sqrt(n_embd): a smaller table keeps the
        # tied logits near 30
        gemma3("gemma3-256", keys={"attention.sliding_window_pattern": (U32, 2)},
               **dict(LARGE, emb_std=0.125)),
        phi3("phi3-256", 32, n_rot=48, rope_long=PHI3_LONG * 4, rope_short=PHI3_SHORT * 4, **LARGE),
        # experts whose rows hold whole K-quant blocks (256)
        model("llama", name="mixtral-256", experts=(4, 2), **dict(LARGE, n_ff=256)),
        model("qwen3moe", name="qwen3moe-256", experts=(8, 2), n_ff_exp=256, qk_norm=True,
              write_head_lens=True, keys={"rope.freq_base": (F32, 1e6)}, **LARGE),
        # both width keys written, as converters do
        model("qwen2moe", name="qwen2moe-256", experts=(4, 2), n_ff_exp=256, shexp=256, shexp_key=True,
              qkv_bias=True, tied=False, keys={"rope.freq_base": (F32, 1e6)}, **LARGE),
    ]


def control_cases():
    """Each control is a reference case with one feature off (same seed)."""
    ones = [1.0] * 8
    ref = {m["name"]: m for m in reference_cases()}

    def off(base, name, **change):
        m = dict(ref[base], name=name, seed=ref[base].get("seed", base))
        keys = dict(m["keys"])
        for k in change.pop("drop_keys", ()):
            del keys[k]
        keys.update(change.pop("set_keys", {}))
        m["keys"] = keys
        m.update(change)
        return m

    return [
        off("llama-bias-freqs", "ctl-llama-freqs-ones", rope_freqs=ones),
        off("llama-yarn", "ctl-llama-yarn-none", drop_keys=[k for k in ref["llama-yarn"]["keys"]]),
        off("llama-yarn", "ctl-llama-yarn-attn1", set_keys={"rope.scaling.attn_factor": (F32, 1.0)}),
        off("llama-yarn", "ctl-llama-yarn-nobeta",
            drop_keys=["rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
                       "rope.scaling.yarn_log_multiplier"]),
        off("llama-linear", "ctl-llama-linear-none", drop_keys=["rope.scaling.type", "rope.scaling.factor"]),
        off("qwen2-outbias", "ctl-qwen2-nooutbias", out_bias=False),
        off("gemma2", "ctl-gemma2-noswa", set_keys={"attention.sliding_window": (U32, 4096)}),
        off("gemma2", "ctl-gemma2-nocap", set_keys={"attn_logit_softcapping": (F32, 1e9)}),
        off("gemma3", "ctl-gemma3-noswa", drop_keys=["attention.sliding_window"]),
        off("gemma3", "ctl-gemma3-swabase", set_keys={"rope.freq_base_swa": (F32, 1e6)}),
        off("gemma3", "ctl-gemma3-nolinear", drop_keys=["rope.scaling.type", "rope.scaling.factor"]),
        off("gemma3-softcap", "ctl-gemma3-nosoftcap", drop_keys=["final_logit_softcapping"]),
        off("llama-longrope", "ctl-llama-longrope-none", drop_keys=["rope.scaling.type"],
            rope_long=None, rope_short=None),
        off("phi3-long", "ctl-phi3-nofactors", rope_long=None, rope_short=None),
        off("qwen3", "ctl-qwen3-qknorm-ones", qk_norm="ones"),
        mistral3("ctl-mistral3-notemp", drop=["attention.temperature_scale"]),
        mistral3("ctl-mistral3-nobeta",
                 drop=["rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"]),
        mistral3("ctl-mistral3-nologmul", drop=["rope.scaling.yarn_log_multiplier"]),
    ]


def quant_cases():
    """Shapes that llama.cpp's per-layer quantization rules and fallbacks
    tell apart (scripts/quantize-reference.sh)."""
    return [
        # 16 layers: the first sixteenth, first eighth and use_more_bits
        # layers all differ; one kv head for four query heads (n_gqa 4);
        # untied output
        model("llama", name="llama-gqa4", n_embd=256, n_head=4, n_head_kv=1, head_dim=64, n_ff=256,
              n_layer=16, emb_std=0.25, tied=False),
        # ffn_down rows of 80 values: no 32-value block divides them, so the
        # K-quants fall back to F16 and the legacy presets fail
        model("llama", name="llama-odd", n_ff=80),
    ]


GROUPS = {"reference": reference_cases, "large": large_cases, "controls": control_cases,
          "quant": quant_cases}


def main():
    args = sys.argv[1:]
    if args == ["--tokens"]:
        print(" ".join(str(t) for t in tokens()))
        return
    group, listing = "reference", False
    if "--list" in args:
        args.remove("--list")
        listing = True
    if "--group" in args:
        i = args.index("--group")
        group = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
    if len(args) != 1 or args[0].startswith("-") or group not in GROUPS:
        raise SystemExit("usage: make-arch-models.py OUTDIR [--group reference|large|controls|quant] [--list]\n"
                         "       make-arch-models.py --tokens")
    cases = GROUPS[group]()
    if listing:
        for m in cases:
            print(m["name"] + ".gguf")
        return
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    for m in cases:
        m.setdefault("seed", m["name"])
        write_gguf(os.path.join(outdir, m["name"] + ".gguf"), arch_kvs(m), arch_tensors(m))


if __name__ == "__main__":
    main()
