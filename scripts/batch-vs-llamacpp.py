#!/usr/bin/env python3
"""batch-vs-llamacpp.py — the batching engine (`backplane bench batch`)
against llama.cpp's batched decode (llamacpp_batched.c: N sequences, one
llama_decode of N tokens per step) on the same GGUF file and threads, in
alternating rounds (ours, theirs, ours, theirs, ...).

  scripts/batch-vs-llamacpp.py --model FILE.gguf [--dir DIR] [--cli PATH]
                               [--threads 2] [--counts 1,2,4,8]
                               [--steps 28] [--rounds 3]

DIR (default ~/.cache/backplane-bench) holds llama.cpp's prebuilt library,
installed by scripts/bench-llamacpp.py --install; llamacpp_batched is built
into it with cc. Each round runs both as separate processes, one round
each (every count in turn, 34-token prompts, one untimed step, then
--steps timed steps). Printed per count: aggregate tokens/s of both
(median and range over the rounds), the ratio backplane / llama.cpp taken
within each round, and each engine's speed-up over its own one sequence.
The machine may be shared, so figures drift between rounds; the ratios
within a round are the fair comparison.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPT = 34  # bench_batch.c's PROMPT


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"batch-vs-llamacpp: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def lib_dir(d):
    return os.path.join(d, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")


def per_count(obj):
    return {s["n"]: s["tokens_per_s"] for s in obj["sequences"]}


def span(v):
    return f"{statistics.median(v):.1f} ({min(v):.1f}..{max(v):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/backplane-bench"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "backplane"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--counts", default="1,2,4,8")
    ap.add_argument("--steps", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    libs = lib_dir(a.dir)
    if not os.path.exists(os.path.join(libs, "libllama.v0.5.0.so")):
        sys.exit(f"batch-vs-llamacpp: llama.cpp is not installed in {a.dir}; run "
                 f"scripts/bench-llamacpp.py --install first.")
    driver = os.path.join(a.dir, "llamacpp_batched")
    src = os.path.join(HERE, "llamacpp_batched.c")
    if not os.path.exists(driver) or os.path.getmtime(driver) < os.path.getmtime(src):
        run(["cc", "-O2", "-o", driver, src, "-ldl"])
    counts = [int(c) for c in a.counts.split(",")]
    with open("/proc/loadavg") as f:
        print(f"machine: {os.cpu_count()} CPUs, load average {f.read().split()[0]} at the start")
    bp_rows, lc_rows = [], []
    for r in range(a.rounds):
        bp = per_count(json.loads(run([a.cli, "bench", "batch", "--model", a.model, "--threads",
                                       str(a.threads), "-M", str(max(counts)), "--rounds", "1",
                                       "--reps", str(a.steps), "--json"])))
        lc = per_count(json.loads(run([driver, libs, a.model, str(a.threads), a.counts, str(PROMPT),
                                       str(a.steps), "1"])))
        bp_rows.append(bp)
        lc_rows.append(lc)
        print(f"round {r + 1}: " + ", ".join(f"{n}: {bp.get(n, 0):.1f} / {lc[n]:.1f}" for n in counts)
              + "  (sequences: backplane / llama.cpp aggregate tokens/s)")
    print(f"== {a.model}, {a.threads} threads, {a.rounds} rounds of {a.steps} steps, median (range):")
    for n in counts:
        bp = [row[n] for row in bp_rows if n in row]
        lc = [row[n] for row in lc_rows]
        ratio = [b[n] / l[n] for b, l in zip(bp_rows, lc_rows) if n in b]
        bp_gain = [b[n] / b[counts[0]] for b in bp_rows if n in b]
        lc_gain = [l[n] / l[counts[0]] for l in lc_rows]
        print(f"   {n} sequences: backplane {span(bp)}, llama.cpp {span(lc)} tokens/s; "
              f"backplane / llama.cpp {statistics.median(ratio):.2f}x ({min(ratio):.2f}..{max(ratio):.2f}); "
              f"vs {counts[0]} sequence: backplane {statistics.median(bp_gain):.2f}x, "
              f"llama.cpp {statistics.median(lc_gain):.2f}x")


if __name__ == "__main__":
    main()
