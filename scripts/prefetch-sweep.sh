#!/usr/bin/env bash
# prefetch-sweep.sh — decode weight streaming (`backplane run --bandwidth`)
# over a grid of the cpu plugin's x8 prefetch distances
# (BACKPLANE_CPU_PREFETCH=L2,L1 bytes), per model file.
#
# Each round visits every (file, point) pair once, in an order that is
# reversed every other round, so that a drift in the machine's bandwidth
# falls on every point alike; each figure is already a ratio against the
# read probe of its own run. With --lock FILE each run holds the lock
# (flock) only for itself, so other measurements can interleave.
#
# usage: scripts/prefetch-sweep.sh [--backplane BIN] [--threads N]
#            [--rounds R] [--n-gen N] [--lock FILE]
#            [--points "L2,L1 L2,L1 ..."] [--default] FILE.gguf...
#   --default  also measures the CPU's own distances (no variable set)
#   Prints one line per run (the median window's fraction of the read
#   bandwidth, the best window's, the read bandwidth in GB/s), then per
#   file and point the median (min-max) of both fractions over the rounds.
set -euo pipefail

bin=""
threads=1
rounds=3
ngen=48
lock=""
points="4096,2048 8192,2048 8192,4096 16384,4096 16384,8192 32768,4096"
with_default=0
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --backplane) bin="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --n-gen) ngen="$2"; shift 2 ;;
        --lock) lock="$2"; shift 2 ;;
        --points) points="$2"; shift 2 ;;
        --default) with_default=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "prefetch-sweep: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) files+=("$1"); shift ;;
    esac
done
if [ ${#files[@]} -eq 0 ]; then
    echo "prefetch-sweep: give at least one GGUF file (see --help)" >&2
    exit 2
fi
if [ -z "$bin" ]; then
    here="$(cd "$(dirname "$0")/.." && pwd)"
    bin="$here/build/bin/backplane"
fi
if [ ! -x "$bin" ]; then
    echo "prefetch-sweep: '$bin' is not an executable; build first or pass --backplane" >&2
    exit 2
fi

pts=()
[ "$with_default" = 1 ] && pts+=("default")
for p in $points; do pts+=("$p"); done

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

# one run: prints the median and the best window's fraction, and the read
# bandwidth
one() {
    local file="$1" point="$2" env=()
    [ "$point" != default ] && env=(BACKPLANE_CPU_PREFETCH="$point")
    local cmd=(env "${env[@]}" "$bin" run --model "$file" --threads "$threads"
               --prompt-len 16 --n-gen "$ngen" --bandwidth --json)
    [ -n "$lock" ] && cmd=(flock "$lock" "${cmd[@]}")
    "${cmd[@]}" 2>/dev/null |
        python3 -c 'import json,sys; j = json.load(sys.stdin); print("%.3f\t%.3f\t%.1f" % (j["decode_bandwidth_fraction"], j["decode_bandwidth_fraction_max"], j["read_bandwidth_bytes_per_s"] / 1e9))'
}

echo "# $(uname -n), $(nproc) CPUs, threads $threads, rounds $rounds; $(uptime | sed 's/.*load/load/')"
for ((r = 0; r < rounds; r++)); do
    order=()
    for f in "${files[@]}"; do
        for p in "${pts[@]}"; do order+=("$f|$p"); done
    done
    if [ $((r % 2)) = 1 ]; then
        rev=()
        for ((i = ${#order[@]} - 1; i >= 0; i--)); do rev+=("${order[$i]}"); done
        order=("${rev[@]}")
    fi
    for fp in "${order[@]}"; do
        f="${fp%%|*}" p="${fp#*|}"
        if v="$(one "$f" "$p")"; then
            printf '%s\t%s\t%s\n' "$(basename "$f")" "$p" "$v" | tee -a "$results"
        else
            echo "prefetch-sweep: run failed: $f at $p" >&2
        fi
    done
    echo "# round $((r + 1)) done; $(uptime | sed 's/.*load/load/')"
done

python3 - "$results" <<'EOF'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f, p, med, best, bw = line.rstrip("\n").split("\t")
    runs[(f, p)].append((float(med), float(best), float(bw)))
def fmt(v):
    return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
print("\nfile\tL2,L1\tmedian window\tbest window\tread GB/s\truns")
for (f, p), r in runs.items():
    print(f"{f}\t{p}\t{fmt([x[0] for x in r])}\t{fmt([x[1] for x in r])}\t"
          f"{statistics.median([x[2] for x in r]):.1f}\t{len(r)}")
EOF
