#!/usr/bin/env bash
# bench-cpu-poll.sh [BUILD] — the cpu thread pool's adaptive spin against a
# fixed one (BACKPLANE_CPU_POLL_ADAPT=0), decode and prefill tokens/s of
# `backplane run`, alternating within each round. LOAD=k starts k busy
# loops for the whole measurement and stops them at the end (0: none).
#   MODELS   files (default: the 1B Q4_K_M and the 12-layer MoE benchmark files)
#   THREADS  (default 2)   ROUNDS (default 5)   PROMPT (16)   GEN (32)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
bp="$build/bin/backplane"
dir=${DIR:-$HOME/.cache/backplane-bench}
models=${MODELS:-"$dir/builtin-1b-llama-q4_K_M.gguf $dir/moe-12l-q4_k_m.gguf"}
threads=${THREADS:-2}
rounds=${ROUNDS:-5}
prompt=${PROMPT:-16}
gen=${GEN:-32}
load=${LOAD:-0}
[ -x "$bp" ] || { echo "bench-cpu-poll: no $bp; build first." >&2; exit 1; }

pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do (while :; do :; done) & pids+=($!); done

# one run: "prefill decode" tokens/s
one() {
  BACKPLANE_CPU_POLL_ADAPT=$1 "$bp" run --model "$2" --threads "$threads" --prompt-len "$prompt" \
    --n-gen "$gen" 2>/dev/null |
    awk '/^prefill:/ {p = $2} /^decode:/ {d = $2} END {print p, d}'
}

echo "bench-cpu-poll: $(nproc) CPUs, $load busy loops, $threads threads, load average $(cut -d' ' -f1 /proc/loadavg)"
for m in $models; do
  echo "== $(basename "$m"): round adaptive(prefill decode) fixed(prefill decode) decode adaptive/fixed"
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then a=$(one 1 "$m"); f=$(one 0 "$m"); else f=$(one 0 "$m"); a=$(one 1 "$m"); fi
    echo "$r $a $f" | awk '{printf "%d  %7.1f %6.1f   %7.1f %6.1f   %.3f\n", $1, $2, $3, $4, $5, $3 / $5}'
  done
done
echo "bench-cpu-poll: load average at the end $(cut -d' ' -f1 /proc/loadavg)"
