#!/usr/bin/env python3
"""bench-llamacpp.py — backplane against llama.cpp's prebuilt CPU library on
the same GGUF files, in alternating rounds, printing both and the ratios.

  scripts/bench-llamacpp.py [--install] [--dir DIR] [--types q4_0,q4_K_M,q8_0]
                            [--quantizer llama|backplane] [--threads 1,2]
                            [--prompt 128] [--gen 64] [--rounds 3]
                            [--prefill-runs 3] [--model builtin:1b] [--vulkan]
                            [--gguf FILE.gguf]

Set-up (once, --install): npm installs @node-llama-cpp/linux-x64 3.22.1
into DIR (default ~/.cache/backplane-bench); nothing in the build or the
tests uses it. The built-in model (MODEL) is written by `backplane run
--save` and given a placeholder vocabulary (gguf_add_vocab.py) so that
llama.cpp loads it. With --quantizer llama (the default) it is saved in F16
and every type is made from that file by llama.cpp's own
llama_model_quantize (`llamacpp_bench --quantize`): the files a llama.cpp
user has, with llama.cpp's per-tensor mixes (q4_K_M puts attn_v and
ffn_down of some layers and output.weight in Q6_K; q4_0 puts output.weight
in Q6_K). With --quantizer backplane each type is saved by backplane in that
type throughout (--weight-type), q4_K_M in the same per-tensor mix as
llama.cpp's (backplane's quantizer, same tensor types). Files are kept in DIR.

Per type and thread count, each round runs backplane (`run --json
--prefill-runs R`) and then llama.cpp (llamacpp_bench.c, built here with
cc) as separate processes: the first prefill of a process is the cold one,
the median of the R - 1 after it the warm one. Ratios are taken within a
round (backplane / llama.cpp) and the median round is printed with the
range: the machine is shared, so absolute figures drift between rounds.
The last round also compares the logits of both at the last prompt
position (largest |difference|, and whether the greedy tokens agree).

--gguf FILE benches that file as it is (one that llama.cpp loads, with a
vocabulary: a mixture of experts from make-moe-bench-model.py quantized
by llama.cpp, say) instead of a built-in model; --types is then not read.

--vulkan: llama.cpp's Vulkan build (@node-llama-cpp/linux-x64-vulkan, the
same version, every layer offloaded: llama.cpp's default) on Vulkan device
0 (GGML_VK_VISIBLE_DEVICES=0; Mesa's lavapipe where it is the only one)
against `backplane run --device vulkan0`; --threads then only sets the
host threads of both. That backend returns from llama_decode while the
graph still runs, so llamacpp_bench ends each prefill's clock after
llama_synchronize, when the logits are there.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PKG = "@node-llama-cpp/linux-x64@3.22.1"
PKG_VULKAN = "@node-llama-cpp/linux-x64-vulkan@3.22.1"
# llama_ftype numbers of llama.h (stable since the K-quants)
LLAMA_FTYPES = {"q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_K": 10,
                "q3_K_S": 11, "q3_K_M": 12, "q3_K_L": 13, "q4_K_S": 14, "q4_K_M": 15,
                "q5_K_S": 16, "q5_K_M": 17, "q6_K": 18, "iq4_nl": 25, "iq4_xs": 30}
KEYS = ("prefill_tokens_per_s", "prefill_warm_tokens_per_s", "decode_tokens_per_s")


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"bench-llamacpp: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def lib_dir(d, vulkan=False):
    name = "linux-x64-vulkan" if vulkan else "linux-x64"
    return os.path.join(d, "node_modules", "@node-llama-cpp", name, "bins", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--install", action="store_true")
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/backplane-bench"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "backplane"))
    ap.add_argument("--model", default="builtin:1b")
    ap.add_argument("--types", default="q4_0,q4_K_M,q8_0")
    ap.add_argument("--quantizer", choices=("llama", "backplane"), default="llama")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prefill-runs", type=int, default=3)
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--vulkan", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    # The CPU build quantizes in both modes; the Vulkan build runs with --vulkan.
    qlibs = lib_dir(a.dir)
    libs = lib_dir(a.dir, a.vulkan)
    # One npm call for every package: `npm install --no-save` removes from
    # DIR the packages its command line does not name.
    pkgs = [PKG, PKG_VULKAN] if a.vulkan else [PKG]
    if not all(os.path.exists(os.path.join(d, n)) for d, n in
               ((qlibs, "libllama.v0.5.0.so"), (libs, "libllama.vulkan.v0.5.0.so" if a.vulkan
                                                 else "libllama.v0.5.0.so"))):
        if not a.install:
            sys.exit(f"bench-llamacpp: llama.cpp is not installed in {a.dir}; run again with "
                     f"--install (npm install {' '.join(pkgs)}).")
        run(["npm", "install", "--no-save", "--ignore-scripts", "--prefix", a.dir] + pkgs)
    lc_env = dict(os.environ, GGML_VK_VISIBLE_DEVICES="0") if a.vulkan else None
    bp_device = "vulkan0" if a.vulkan else "cpu"
    driver = os.path.join(a.dir, "llamacpp_bench")
    src = os.path.join(HERE, "llamacpp_bench.c")
    if not os.path.exists(driver) or os.path.getmtime(driver) < os.path.getmtime(src):
        run(["cc", "-O2", "-o", driver, src, "-ldl"])
    with open("/proc/loadavg") as f:
        print(f"machine: {os.cpu_count()} CPUs, load average {f.read().split()[0]} at the start")

    def saved(t):
        """The model saved by backplane in type t, with a vocabulary."""
        plain = os.path.join(a.dir, f"{a.model.replace(':', '-')}-{t}.gguf")
        vocab = plain.replace(".gguf", "-vocab.gguf")
        if not os.path.exists(vocab):
            run([a.cli, "run", "--model", a.model, "--weight-type", t, "--prompt-len", "1",
                 "--n-gen", "1", "--save", plain])
            run([sys.executable, os.path.join(HERE, "gguf_add_vocab.py"), plain, vocab])
            os.remove(plain)
        return vocab

    # The last round's logit dumps, named by this process: other benchmarks
    # may share DIR at the same time.
    dumps = [os.path.join(a.dir, f"{who}-{os.getpid()}.f32") for who in ("bp", "lc")]
    for t in ([os.path.basename(a.gguf)] if a.gguf else a.types.split(",")):
        if a.gguf:
            vocab = a.gguf
        elif a.quantizer == "backplane" or t == "f16":
            vocab = saved(t)
        else:
            if t not in LLAMA_FTYPES:
                sys.exit(f"bench-llamacpp: llama.cpp's quantizer makes {', '.join(LLAMA_FTYPES)}; "
                         f"not {t}.")
            vocab = os.path.join(a.dir, f"{a.model.replace(':', '-')}-llama-{t}.gguf")
            if not os.path.exists(vocab):
                run([driver, "--quantize", qlibs, saved("f16"), vocab, str(LLAMA_FTYPES[t])])
        for th in (int(x) for x in a.threads.split(",")):
            rows = []
            for r in range(a.rounds):
                last = r == a.rounds - 1
                bp_cmd = [a.cli, "run", "--device", bp_device, "--model", vocab, "--threads", str(th),
                          "--prompt-len", str(a.prompt), "--n-gen", str(a.gen), "--json",
                          "--prefill-runs", str(a.prefill_runs)]
                lc_cmd = [driver, libs, vocab, str(th), str(a.prompt), str(a.gen),
                          str(a.prefill_runs)]
                if last:
                    bp_cmd += ["--dump-logits", dumps[0]]
                    lc_cmd += [dumps[1]]
                bp = json.loads(run(bp_cmd))
                lc = json.loads(run(lc_cmd, env=lc_env))
                rows.append((bp, lc))
                print(f"{t} {th} thread(s) round {r + 1}: " + ", ".join(
                    f"{k.replace('_tokens_per_s', '')} {bp.get(k, 0):.1f} / {lc.get(k, 0):.1f}"
                    for k in KEYS) + "  (backplane / llama.cpp tokens/s)")
            print(f"== {t}, {th} thread(s), {a.prompt}-token prompt, {a.gen} steps, median of "
                  f"{a.rounds} rounds:")
            for k in KEYS:
                ratios = [bp[k] / lc[k] for bp, lc in rows if bp.get(k) and lc.get(k)]
                if ratios:
                    print(f"   {k.replace('_tokens_per_s', ''):14s} backplane / llama.cpp "
                          f"{statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}..{max(ratios):.2f}); "
                          f"median {statistics.median(b[k] for b, _ in rows):.1f} / "
                          f"{statistics.median(l[k] for _, l in rows):.1f} tokens/s")
            bp, lc = rows[-1]
            same = bp["tokens"] == lc["tokens"]
            agree = next((i for i, (x, y) in enumerate(zip(bp["tokens"], lc["tokens"])) if x != y),
                         len(bp["tokens"]))
            diff = logit_diff(dumps[0], dumps[1],
                              a.prompt, bp["model"]["n_vocab"])
            print(f"   logits at the last prompt position: largest |difference| {diff[0]:.4f} "
                  f"(sd {diff[1]:.3f}); greedy tokens {'agree' if same else f'part after {agree}'}")
            for d in dumps:
                os.remove(d)


def logit_diff(bp_path, lc_path, n_prompt, n_vocab):
    """Largest |difference| between the last prompt row of backplane's dump
    (rows: every prompt position, then decode steps) and llama.cpp's first row."""
    import array
    b, l = array.array("f"), array.array("f")
    with open(bp_path, "rb") as f:
        f.seek((n_prompt - 1) * n_vocab * 4)
        b.fromfile(f, n_vocab)
    with open(lc_path, "rb") as f:
        l.fromfile(f, n_vocab)
    return max(abs(x - y) for x, y in zip(b, l)), statistics.pstdev(l)


if __name__ == "__main__":
    main()
