#!/usr/bin/env bash
# dist-bench.sh [BUILD] — decode speed of a dist:cpu job: np=2 with one
# thread per rank against np=1 with two threads (the same two cores), and
# the same np=2 over TCP loopback (--mca btl self,tcp: no shared memory, a
# stand-in for a node boundary). The two jobs cannot share one process, so
# the rounds alternate (reference, np=2, np=2 over TCP) and each ratio is
# taken within its round; the median round is reported with the range.
#
# Environment: ROUNDS (default 5), MODEL (builtin:tiny), WTYPE (a built-in
# model's weight type, default f16), NGEN (32 tokens).
set -euo pipefail
build=${1:-build}
bp="$build/bin/backplane"
rounds=${ROUNDS:-5}
model=${MODEL:-builtin:tiny}
ngen=${NGEN:-32}
wtype=${WTYPE:-f16}
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)

# "decode tokens/s, reductions and bytes reduced per token" of one job
key() { sed -n "s/^ *\"$1\": *\([0-9.e+-]*\).*/\1/p" <<<"$2" | head -n 1; }
job() {
  local np=$1 threads=$2 out
  shift 2
  out=$("${mpirun[@]}" "$@" -np "$np" "$bp" run --model "$model" --weight-type "$wtype" --device dist:cpu --threads "$threads" \
    --n-gen "$ngen" --json 2>/dev/null)
  echo "$(key decode_tokens_per_s "$out") $(key reductions_per_token "$out") $(key bytes_reduced_per_token "$out")"
}

median_range() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f [%.3f, %.3f]", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

shm=() tcp=()
for ((r = 1; r <= rounds; r++)); do
  read -r one _ <<<"$(job 1 2)"
  read -r two red bytes <<<"$(job 2 1)"
  read -r two_tcp _ <<<"$(job 2 1 --mca btl self,tcp --mca btl_tcp_if_include lo)"
  shm+=("$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.4f", a / b }')")
  tcp+=("$(awk -v a="$two_tcp" -v b="$one" 'BEGIN { printf "%.4f", a / b }')")
  echo "round $r: np=1 x 2 threads $one tok/s; np=2 x 1 thread $two tok/s (shared memory), $two_tcp tok/s (TCP)"
done
echo "$model ($wtype) decode, np=2 (1 thread each) / np=1 (2 threads), median of $rounds rounds [range]:"
echo "  shared memory: $(printf '%s\n' "${shm[@]}" | median_range)"
echo "  TCP loopback:  $(printf '%s\n' "${tcp[@]}" | median_range)"
echo "  per decoded token at np=2: $red reductions, $bytes bytes reduced (one copy each)"
