#!/usr/bin/env bash
# bench-moe.sh [BUILD] — the mixture-of-experts benchmark: a random-weight
# Qwen3-MoE-shaped file (make-moe-bench-model.py: Qwen3-30B-A3B's layer
# shape, 64 experts of which 8 are used) quantized to Q4_K_M by llama.cpp's
# own llama_model_quantize (llamacpp_bench --quantize), then backplane
# against llama.cpp in alternating rounds (bench-llamacpp.py --gguf), then
# backplane's decode weight streaming against the read bandwidth measured in
# the same run (`run --bandwidth`: the active experts' bytes only).
#
# Environment:
#   LAYERS   layers of the file (default 12: 3.9 B parameters, 7.2 GiB in
#            F16, 2.2 GiB in Q4_K_M; 0.7 B read per token)
#   DIR      where the files go (default ~/.cache/backplane-bench; made
#            once, kept for the next run; KEEP_F16=0 deletes the F16 source
#            once quantized)
#   THREADS  thread counts (default 1,2); ROUNDS (default 3); PROMPT
#            (default 64 tokens); GEN (default 32 steps); BW_GEN (decode
#            steps of the bandwidth run, default 64)
# Needs llama.cpp's prebuilt library in DIR (bench-llamacpp.py --install).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
bp="$build/bin/backplane"
layers=${LAYERS:-12}
dir=${DIR:-$HOME/.cache/backplane-bench}
threads=${THREADS:-1,2}
rounds=${ROUNDS:-3}
prompt=${PROMPT:-64}
gen=${GEN:-32}
bw_gen=${BW_GEN:-64}
libs="$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
f16="$dir/moe-${layers}l-f16.gguf"
q4="$dir/moe-${layers}l-q4_k_m.gguf"

[ -x "$bp" ] || { echo "bench-moe: no $bp; build first (cmake --build build)." >&2; exit 1; }
[ -f "$libs/libllama.v0.5.0.so" ] || {
  echo "bench-moe: llama.cpp is not installed in $dir; run scripts/bench-llamacpp.py --install." >&2; exit 1; }
if [ ! -f "$q4" ]; then
  [ -f "$f16" ] || python3 "$here/make-moe-bench-model.py" "$f16" --layers "$layers"
  driver="$dir/llamacpp_bench"
  [ -x "$driver" ] && [ "$driver" -nt "$here/llamacpp_bench.c" ] || cc -O2 -o "$driver" "$here/llamacpp_bench.c" -ldl
  echo "bench-moe: quantizing $f16 to Q4_K_M with llama.cpp"
  /usr/bin/time -f "bench-moe: quantize took %e s, peak RSS %M KB" \
    "$driver" --quantize "$libs" "$f16" "$q4" 15 >/dev/null
  [ "${KEEP_F16:-1}" = 0 ] && rm -f "$f16"
fi
echo "bench-moe: $q4 ($(du -h "$q4" | cut -f1)), $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg)"
python3 "$here/bench-llamacpp.py" --dir "$dir" --cli "$bp" --gguf "$q4" --threads "$threads" \
  --rounds "$rounds" --prompt "$prompt" --gen "$gen" --prefill-runs 2
for th in ${threads//,/ }; do
  echo "== decode weight streaming, $th thread(s):"
  "$bp" run --model "$q4" --threads "$th" --prompt-len "$prompt" --n-gen "$bw_gen" --bandwidth | tail -n 3
done
