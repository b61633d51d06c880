#!/usr/bin/env bash
# gpu-check.sh OUTDIR — build the CUDA plugin for sm_90 and prove it on the
# GPU at hand: `backplane check --device cuda0`, the mul_mat benchmark
# (Q4_K, Q4_0, F16; K=N=4096; M=1 and 512) against reference figures
# measured in the same run (D2D copy bandwidth, cuBLAS F16 GEMM), and a meta
# device over cuda0,cuda0 with BACKPLANE_CUDA_ALLREDUCE=internal and none.
# Writes OUTDIR/gpu-check.log and OUTDIR/summary.json. Exits non-zero, with
# a sentence, when there is no GPU (after building) or a step fails.
set -u
out=${1:-}
if [ -z "$out" ]; then
  echo "usage: scripts/gpu-check.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/gpu-check.log"
json="$out/summary.json"
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-gpu-check"
: >"$log"
results=()

say() { echo "$*" | tee -a "$log"; }
record() { results+=("\"$1\": $2"); }
finish() {
  local rc=$1 msg=$2
  say "$msg"
  {
    printf '{\n  "ok": %s,\n  "message": "%s"' "$([ "$rc" -eq 0 ] && echo true || echo false)" "$msg"
    for r in "${results[@]}"; do printf ',\n  %s' "$r"; done
    printf '\n}\n'
  } >"$json"
  exit "$rc"
}

# ---- build ----
tests=ON
if ! pkg-config --exists check 2>/dev/null; then
  tests=OFF
  say "libcheck (pkg-config 'check') is missing: building without the test suites."
fi
jobs=$(nproc 2>/dev/null || echo 4)
say "configuring $build (BP_CUDA=ON, sm_90 only, tests $tests)"
if ! cmake -S "$root" -B "$build" -DBP_CUDA=ON -DBP_CUDA_ARCHITECTURES=90 \
     -DBP_BUILD_TESTS=$tests -DBP_WERROR=OFF -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1; then
  finish 1 "cmake configure failed; see $log."
fi
t0=$(date +%s)
if ! cmake --build "$build" -j "$jobs" >>"$log" 2>&1; then
  finish 1 "the build failed; see $log."
fi
record build_seconds $(( $(date +%s) - t0 ))
record tests_built "\"$tests\""
bp="$build/bin/backplane"
ref="$build/bin/bp_cuda_reference"

# ---- is there a GPU? ----
"$bp" devices >>"$log" 2>&1
if ! "$bp" devices 2>/dev/null | grep -qE '^ +[0-9]+ +cuda0 '; then
  why=$(BACKPLANE_LOG=info "$bp" devices 2>&1 | grep -m1 'cuda: info' | sed 's/^cuda: info: //')
  finish 3 "No CUDA device here, so nothing ran on a GPU: ${why:-the cuda plugin reports zero devices}"
fi

# ---- unit tests, op equivalence ----
fail=0
if [ "$tests" = ON ]; then
  if (cd "$build" && ctest -R cuda --output-on-failure) >>"$log" 2>&1; then
    record ctest_cuda '"passed"'
  else
    record ctest_cuda '"failed"'; fail=1
  fi
fi
if "$bp" check --device cuda0 >>"$log" 2>&1; then
  record check_cuda0 '"passed"'
else
  record check_cuda0 '"failed"'; fail=1
fi

# ---- reference figures ----
refj=$("$ref" 0 4096 4096 512 2>>"$log")
say "reference: $refj"
record reference "${refj:-null}"
d2d=$(echo "$refj" | sed -n 's/.*"d2d_copy_gbps": \([0-9.]*\).*/\1/p')
hgemm=$(echo "$refj" | sed -n 's/.*"cublas_hgemm_gflops": \([0-9.]*\).*/\1/p')

# ---- mul_mat benchmark ----
if "$bp" bench --help >/dev/null 2>&1; then
  for t in q4_K q4_0 f16; do
    for m in 1 512; do
      line=$("$bp" bench mul_mat --device cuda0 --type "$t" -K 4096 -N 4096 -M "$m" --json 2>>"$log" | tail -1)
      say "bench $t M=$m: $line"
      gbps=$(echo "$line" | sed -n 's/.*"weight_gbps": *\([0-9.]*\).*/\1/p')
      gflops=$(echo "$line" | sed -n 's/.*"gflops": *\([0-9.]*\).*/\1/p')
      frac_bw=null; frac_fl=null
      if [ -n "$gbps" ] && [ -n "$d2d" ]; then frac_bw=$(awk -v a="$gbps" -v b="$d2d" 'BEGIN{printf "%.3f", a/(b/2)}'); fi
      if [ -n "$gflops" ] && [ -n "$hgemm" ]; then frac_fl=$(awk -v a="$gflops" -v b="$hgemm" 'BEGIN{printf "%.3f", a/b}'); fi
      record "bench_${t}_M$m" "{\"raw\": ${line:-null}, \"weight_bw_vs_d2d_read\": $frac_bw, \"gflops_vs_cublas_hgemm\": $frac_fl}"
    done
  done
else
  say "backplane has no bench command yet: mul_mat benchmark skipped."
  record bench '"skipped: no bench command"'
fi

# ---- meta over cuda0,cuda0 ----
if [ -e "$build/lib/backplane/libbackplane-meta.so" ]; then
  for mode in internal none; do
    if BACKPLANE_CUDA_ALLREDUCE=$mode "$bp" check --device meta:cuda0,cuda0 >>"$log" 2>&1; then
      record "meta_cuda0x2_$mode" '"passed"'
    else
      record "meta_cuda0x2_$mode" '"failed"'; fail=1
    fi
  done
  record meta_nccl '"declines: NCCL needs distinct GPUs; cuda0 given twice falls back to internal"'
else
  say "the meta plugin is not built: meta checks skipped."
  record meta '"skipped: no meta plugin"'
fi

if [ "$fail" -eq 0 ]; then
  finish 0 "GPU check passed."
fi
finish 1 "some GPU checks failed; see $log."
