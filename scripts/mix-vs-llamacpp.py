#!/usr/bin/env python3
"""mix-vs-llamacpp.py — backplane's q4_K_M mix against llama.cpp's own.

  scripts/mix-vs-llamacpp.py [--dir DIR] [--models test,test+fused,tiny]
                             [--mix q4_K_M]

For each built-in model (NAME, or NAME+fused for --fused-qkv), saves it in
f16 with `backplane run --save`, gives it a vocabulary (gguf_add_vocab.py),
has llama.cpp's llama_model_quantize make the mix from it
(`llamacpp_bench --quantize`), saves backplane's `--weight-type MIX` of the
same model, and compares every tensor's name, type and shape. Prints one
line per model and exits 1 on any difference. Needs the llama.cpp library
that `scripts/bench-llamacpp.py --install` puts in DIR (default
~/.cache/backplane-bench); nothing in the build or the tests runs this.
builtin:1b takes minutes (1.1 G values quantized twice).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FTYPES = {"q4_K_M": 15}  # llama_ftype of llama.h
# ggml type numbers (ggml.h) of the types backplane stores
GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 12: "q4_K", 14: "q6_K", 30: "bf16"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def tensors(path):
    """{name: (type name, shape)} from a GGUF file's tensor infos."""
    with open(path, "rb") as f:
        buf = f.read(64 << 20)  # the header; tensor data is not read
    pos = 4
    _, n_t, n_kv = struct.unpack_from("<IQQ", buf, pos)
    pos += 20

    def string(p):
        (n,) = struct.unpack_from("<Q", buf, p)
        return buf[p + 8:p + 8 + n].decode(), p + 8 + n

    def skip(p, t):
        if t in SCALAR:
            return p + SCALAR[t]
        if t == 8:
            return string(p)[1]
        et, cnt = struct.unpack_from("<IQ", buf, p)
        p += 12
        if et in SCALAR:
            return p + SCALAR[et] * cnt
        for _ in range(cnt):
            p = skip(p, et)
        return p

    for _ in range(n_kv):
        _, pos = string(pos)
        (t,) = struct.unpack_from("<I", buf, pos)
        pos = skip(pos + 4, t)
    out = {}
    for _ in range(n_t):
        name, pos = string(pos)
        (nd,) = struct.unpack_from("<I", buf, pos)
        shape = struct.unpack_from(f"<{nd}Q", buf, pos + 4)
        t, _ = struct.unpack_from("<IQ", buf, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        out[name] = (GGML_TYPES.get(t, str(t)), shape)
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mix-vs-llamacpp: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/backplane-bench"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "backplane"))
    ap.add_argument("--models", default="test,test+fused,tiny")
    ap.add_argument("--mix", default="q4_K_M", choices=sorted(FTYPES))
    a = ap.parse_args()
    driver = os.path.join(a.dir, "llamacpp_bench")
    libs = os.path.join(a.dir, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
    if not os.path.exists(driver) or not os.path.isdir(libs):
        sys.exit(f"mix-vs-llamacpp: no llama.cpp in {a.dir}; run scripts/bench-llamacpp.py --install.")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in a.models.split(","):
            name, _, fused = spec.partition("+")
            extra = ["--fused-qkv"] if fused else []
            base = [a.cli, "run", "--model", f"builtin:{name}", "--device", "cpu", "--prompt-len", "1",
                    "--n-gen", "1"] + extra
            f16, vocab, lc, bp = (os.path.join(tmp, f"{spec}-{k}.gguf") for k in ("f16", "vocab", "lc", "bp"))
            run(base + ["--weight-type", "f16", "--save", f16])
            run([sys.executable, os.path.join(HERE, "gguf_add_vocab.py"), f16, vocab])
            run([driver, "--quantize", libs, vocab, lc, str(FTYPES[a.mix])])
            run(base + ["--weight-type", a.mix, "--save", bp])
            want, got = tensors(lc), tensors(bp)
            diff = sorted(n for n in want.keys() | got.keys() if want.get(n) != got.get(n))
            hi = sum(t == "q6_K" for t, _ in want.values())
            print(f"builtin:{spec} {a.mix}: {len(want)} tensors, {hi} in q6_K by llama.cpp: " +
                  ("types equal" if not diff else f"{len(diff)} differ"))
            for n in diff[:20]:
                print(f"   {n}: llama.cpp {want.get(n)}, backplane {got.get(n)}")
            bad += bool(diff)
            for p in (f16, vocab, lc, bp):
                os.remove(p)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
