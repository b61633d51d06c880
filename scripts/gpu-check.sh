#!/usr/bin/env bash
# gpu-check.sh OUTDIR — build the CUDA plugin for sm_90 and prove it on the
# GPU at hand, in one unattended try of under 8 minutes (H200, 16 cores):
#   - `backplane check --device cuda0` (op equivalence against the CPU);
#   - reference figures measured in this run by bp_cuda_reference: the
#     GPU's device-to-device copy bandwidth and cuBLAS F16 GEMM GFLOP/s;
#   - `backplane bench mul_mat` for q4_K, q4_0, f16 at K=N=4096, M=1 and
#     M=512: weight bandwidth as a fraction of the D2D copy bandwidth and
#     GFLOP/s as a fraction of cuBLAS F16 GEMM;
#   - a meta device over cuda0,cuda0 (BACKPLANE_DEVICES=meta:cuda0,cuda0,
#     named meta0): `check` with BACKPLANE_CUDA_ALLREDUCE=internal and none,
#     and =nccl to record that NCCL declines a device given twice;
#   - `backplane run --model builtin:test` on meta0 against cuda0 and on
#     cuda0 against cpu (f16 and q4_K weights);
#   - with 2 or more GPUs and MPI: `mpirun -np 2 backplane run --device
#     dist:cuda0` (a rank per GPU, NCCL between them) against cuda0 alone,
#     and `bench allreduce` on GPU tensors (skipped with a message on one
#     GPU: NCCL does not allow two ranks on one GPU).
#   - where the GPU has a Vulkan driver: `backplane check` on its Vulkan
#     device with its own kernel choices and with each GPU kernel forced
#     (float tiles, integer dots, cooperative matrices), run --compare cpu,
#     and bench mul_mat (GPU_CHECK_VULKAN_PLUGIN: a prebuilt plugin when the
#     machine has no glslc).
# Every step runs under `timeout` within an overall budget; a failing step
# is recorded and the script goes on. OUTDIR/gpu-check.log (every command's
# output) and OUTDIR/summary.json are rewritten after each step, so a kill
# leaves the results so far.
#
# Environment (the last two are for a dry run on a machine without a GPU):
#   GPU_CHECK_BUILD   build directory (default: <repo>/build-gpu-check)
#   GPU_CHECK_BUDGET  seconds for the whole script (default 420)
#   GPU_CHECK_JOBS    build jobs (default: nproc)
#   GPU_CHECK_DEVICE  device under test (default cuda0); `cpu` runs every
#                     non-GPU part end to end: tiny sizes, meta:cpu,cpu, a
#                     synthetic reference line in bp_cuda_reference's format.
set -u

out=${1:-}
if [ -z "$out" ]; then
  echo "usage: scripts/gpu-check.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
log="$out/gpu-check.log"
json="$out/summary.json"
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GPU_CHECK_BUILD:-$root/build-gpu-check}
budget=${GPU_CHECK_BUDGET:-420}
dev=${GPU_CHECK_DEVICE:-cuda0}
jobs=${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 4)}
t_start=$(date +%s)
deadline=$((t_start + budget))
: >"$log"

dry=0
if [ "$dev" != "cuda0" ]; then dry=1; fi
# Bench options: M=1 keeps the bench's defaults on the GPU (512 MB of
# distinct weights, so L2 does not serve them; 2 reps per matrix); M_BIG
# takes the median of 20.
if [ "$dry" -eq 1 ]; then
  K=256
  N=256
  M_BIG=16
  opts_small=(--footprint-mb 1 --reps 5 --rounds 2)
  opts_big=(--reps 3 --rounds 2)
  meta_spec="meta:$dev,$dev"
else
  K=4096
  N=4096
  M_BIG=512
  opts_small=(--footprint-mb 512 --rounds 3)
  opts_big=(--reps 20 --rounds 3)
  meta_spec="meta:cuda0,cuda0"
fi

# The toolkit's libraries (cuBLAS, NCCL) are opened with dlopen at run time.
[ -d /usr/local/cuda/bin ] && PATH="/usr/local/cuda/bin:$PATH"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export PATH LD_LIBRARY_PATH

# ---------------------------------------------------------------- summary
keys=()
vals=()
failures=()
state="running"

jstr() { # a JSON string literal of $1
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/}
  printf '"%s"' "$s"
}

jnum() { # $1 if it is a JSON number, else null
  if [[ ${1:-} =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then printf '%s' "$1"; else printf null; fi
}

write_summary() {
  local i tmp="$json.tmp"
  {
    printf '{\n  "state": %s,\n  "dry_run": %s,\n  "device": %s,\n  "elapsed_seconds": %s' \
      "$(jstr "$state")" "$([ "$dry" -eq 1 ] && echo true || echo false)" "$(jstr "$dev")" \
      "$(($(date +%s) - t_start))"
    printf ',\n  "failures": ['
    for i in "${!failures[@]}"; do printf '%s%s' "$([ "$i" -gt 0 ] && echo ', ')" "$(jstr "${failures[$i]}")"; done
    printf ']'
    for i in "${!keys[@]}"; do printf ',\n  %s: %s' "$(jstr "${keys[$i]}")" "${vals[$i]}"; done
    printf '\n}\n'
  } >"$tmp" && mv -f "$tmp" "$json"
}

record() { # KEY RAW-JSON-VALUE; replaces an earlier value of KEY
  local i
  for i in "${!keys[@]}"; do
    if [ "${keys[$i]}" = "$1" ]; then vals[i]=$2; write_summary; return; fi
  done
  keys+=("$1")
  vals+=("$2")
  write_summary
}

say() { echo "$*" | tee -a "$log"; }
fail() { # SENTENCE; the step that just ran may have been skipped for time
  local m=$1
  [ "$step_rc" -eq 125 ] && m="$m (skipped: out of time)"
  failures+=("$m")
  say "FAILED: $m"
  write_summary
}

# shellcheck disable=SC2317  # reached through the trap
on_signal() {
  state="killed"
  say "gpu-check: killed after $(($(date +%s) - t_start)) s; summary.json holds the steps so far."
  write_summary
  exit 143
}
trap on_signal TERM INT HUP

# ------------------------------------------------------------------ steps
# step NAME LIMIT CMD...: runs CMD under timeout (LIMIT seconds, less when
# the overall budget is short), stdout to OUTDIR/NAME.out, both streams to
# the log. Sets step_rc (124: timed out, 125: skipped for lack of time) and
# records "step.NAME".
step_rc=0
step() {
  local name=$1 limit=$2 t0 left status
  shift 2
  left=$((deadline - $(date +%s) - 5))
  if [ "$left" -lt "$limit" ]; then limit=$left; fi
  if [ "$limit" -lt 5 ]; then
    step_rc=125
    say "== $name: skipped, the ${budget} s budget is spent"
    record "step.$name" '{"status": "skipped: out of time"}'
    return 125
  fi
  say "== $name (limit ${limit} s): $*"
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
  step_rc=$?
  cat "$out/$name.out" "$out/$name.err" >>"$log"
  case $step_rc in
    0) status=ok ;;
    124|137) status="timed out after $limit s" ;;
    *) status="exit $step_rc" ;;
  esac
  say "== $name: $status in $(($(date +%s) - t0)) s"
  record "step.$name" "{\"status\": $(jstr "$status"), \"seconds\": $(($(date +%s) - t0))}"
  return "$step_rc"
}

# First value of "KEY": in a file of our pretty-printed JSON (one key per
# line), without the trailing comma or quotes.
jget() {
  sed -n "s/^[[:space:]]*\"$2\": *\\(.*\\)\$/\\1/p" "$1" 2>/dev/null | head -n 1 | sed 's/,$//; s/^"//; s/"$//'
}

# The same on a one-line JSON object (bp_cuda_reference's output).
jget_line() {
  printf '%s\n' "$1" | sed -n "s/.*\"$2\": *\\([^,}]*\\).*/\\1/p" | head -n 1 | sed 's/^"//; s/"$//'
}

ratio() { # a/b to 3 decimals, or null
  awk -v a="${1:-}" -v b="${2:-}" 'BEGIN {
    if (a ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ && b ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ && b + 0 > 0)
      printf "%.3f", a / b; else printf "null" }'
}

# "check" JSON -> {"passed": n, "failed": n, "unsupported": n, "failing": [...], "unsupported_cases": [...]}
check_summary() {
  local f=$1 lists
  [ -f "$f" ] || f=/dev/null
  lists=$(awk '
    function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return s }
    function val(line) { sub(/^[^:]*: *"/, "", line); sub(/",?$/, "", line); return line }
    /^ *"op": /   { op = val($0) }
    /^ *"type": / { ty = val($0) }
    /^ *"case": / { cs = val($0) }
    /^ *"status": "fail"/        { if (nf < 20) fl = fl (nf++ ? ", " : "") "\"" esc(op " " ty " " cs) "\"" }
    /^ *"status": "unsupported"/ { if (nu < 20) ul = ul (nu++ ? ", " : "") "\"" esc(op " " ty " " cs) "\"" }
    END { printf "[%s]\t[%s]", fl, ul }' "$f")
  printf '{"passed": %s, "failed": %s, "unsupported": %s, "failing": %s, "unsupported_cases": %s}' \
    "$(jnum "$(jget "$f" passed)")" "$(jnum "$(jget "$f" failed)")" \
    "$(jnum "$(jget "$f" unsupported)")" "${lists%%$'\t'*}" "${lists#*$'\t'}"
}

# `run --json` -> figures and the comparison
run_summary() {
  local f=$1
  printf '{"decode_tokens_per_s": %s, "prefill_tokens_per_s": %s, "max_abs_logit_diff": %s, "argmax_agrees": %s}' \
    "$(jnum "$(jget "$f" decode_tokens_per_s)")" "$(jnum "$(jget "$f" prefill_tokens_per_s)")" \
    "$(jnum "$(jget "$f" max_abs_logit_diff)")" \
    "$(case $(jget "$f" argmax_agrees) in true) echo true ;; false) echo false ;; *) echo null ;; esac)"
}

write_summary
say "gpu-check: device $dev, budget $budget s, output $out"
[ "$dry" -eq 1 ] && say "DRY RUN on $dev: tiny sizes, $meta_spec, a synthetic GPU reference line."

# ------------------------------------------------------------------ machine
if command -v nvidia-smi >/dev/null 2>&1 &&
   step nvidia_smi 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv,noheader; then
  record gpu "$(jstr "$(head -n 1 "$out/nvidia_smi.out")")"
else
  record gpu '"nvidia-smi not available"'
fi
command -v nvcc >/dev/null 2>&1 && step nvcc_version 20 nvcc --version &&
  record nvcc "$(jstr "$(grep -m1 release "$out/nvcc_version.out")")"

# ------------------------------------------------------------------ build
tests=ON
if ! pkg-config --exists check 2>/dev/null; then
  tests=OFF
  say "libcheck (pkg-config 'check') is missing: building without the CUDA unit tests."
fi
record tests_built "$(jstr "$tests")"
if ! step configure 120 cmake -S "$root" -B "$build" -DBP_CUDA=ON -DBP_CUDA_ARCHITECTURES=90-real \
       -DBP_VULKAN=OFF -DBP_BUILD_TESTS=$tests -DBP_WERROR=OFF -DCMAKE_BUILD_TYPE=Release; then
  fail "cmake configure (CUDA toolkit missing or too old?); see $log."
  state="finished"; write_summary; exit 1
fi
targets=(backplane_cli bp_plugin_cpu bp_plugin_meta bp_plugin_cuda bp_cuda_reference)
[ "$tests" = ON ] && targets+=(test_cuda_policy test_cuda_quant test_cuda_load)
if ! step build 240 cmake --build "$build" -j "$jobs" --target "${targets[@]}"; then
  fail "the build failed or ran out of time; see $log."
  state="finished"; write_summary; exit 1
fi
bp="$build/bin/backplane"
ref="$build/bin/bp_cuda_reference"

step devices 30 env BACKPLANE_LOG=info "$bp" devices
if grep -qE "^ +[0-9]+ +$dev " "$out/devices.out"; then
  record device_description "$(jstr "$(grep -m1 -E "^ +[0-9]+ +$dev " "$out/devices.out" | sed 's/^ *//; s/  */ /g')")"
else
  why=$(grep -m1 'cuda: info: no CUDA device' "$out/devices.err" | sed 's/^cuda: info: //')
  record no_device_reason "$(jstr "${why:-the cuda plugin reports zero devices}")"
  fail "no device $dev here, so nothing ran on a GPU: ${why:-the cuda plugin reports zero devices}"
  state="finished"; write_summary; exit 3
fi

# ------------------------------------------------------------------ unit tests, op equivalence
if [ "$tests" = ON ]; then
  # shellcheck disable=SC2016  # $1 expands in the inner shell
  step ctest_cuda 90 bash -c 'cd "$1" && ctest -R cuda --output-on-failure' ctest "$build" ||
    fail "ctest -R cuda"
fi
step info 30 "$bp" info "$dev"
step "check_$dev" 150 "$bp" check --device "$dev" --json
record "check_$dev" "$(check_summary "$out/check_$dev.out")"
[ "$step_rc" -eq 0 ] || fail "backplane check --device $dev"
# The plugin takes MUL_MAT and GET_ROWS on every quantized weight type, so
# each of those cases must have run on the device rather than been declined
# (a declined case counts as unsupported, not failed, in check's exit code).
quant_declined=$(awk '
    function val(line) { sub(/^[^:]*: *"/, "", line); sub(/",?$/, "", line); return line }
    /^ *"op": /   { op = val($0) }
    /^ *"type": / { ty = val($0) }
    /^ *"status": "unsupported"/ { if ((op == "MUL_MAT" || op == "GET_ROWS") && ty ~ /^i?q[0-9]/) n++ }
    END { print n + 0 }' "$out/check_$dev.out" 2>/dev/null)
record "check_${dev}_quant_declined" "${quant_declined:-null}"
[ "${quant_declined:-0}" -eq 0 ] ||
  fail "$dev declined $quant_declined quantized MUL_MAT/GET_ROWS case(s) of check (unsupported_cases names them)"

# ------------------------------------------------------------------ reference figures
if [ "$dry" -eq 1 ]; then
  step reference 60 "$ref" 0 "$K" "$N" "$M_BIG" # no GPU: records the tool's refusal
  refj="{\"device\": \"cuda0\", \"status\": \"OK\", \"d2d_copy_gbps\": 40.0, \"cublas_hgemm_gflops\": 200.0, \"sync_floor_us\": 50.00, \"K\": $K, \"N\": $N, \"M\": $M_BIG}"
  say "dry run: synthetic reference line $refj"
  record reference_synthetic true
else
  step reference 90 "$ref" 0 "$K" "$N" "$M_BIG"
  refj=$(grep -m1 '^{' "$out/reference.out")
  [ "$step_rc" -eq 0 ] || fail "bp_cuda_reference (D2D copy and cuBLAS F16 GEMM)"
fi
d2d=$(jget_line "$refj" d2d_copy_gbps)
hgemm=$(jget_line "$refj" cublas_hgemm_gflops)
sync_us=$(jget_line "$refj" sync_floor_us)
record reference "{\"status\": $(jstr "$(jget_line "$refj" status)"), \"d2d_copy_gbps\": $(jnum "$d2d"), \"cublas_hgemm_gflops\": $(jnum "$hgemm"), \"sync_floor_us\": $(jnum "$sync_us"), \"M\": $M_BIG}"

# ------------------------------------------------------------------ mul_mat benchmark
# D2D copy GB/s counts bytes read plus written, i.e. the DRAM traffic rate,
# which is the ceiling of a kernel that only streams its weights in. Each
# timed bench call includes a launch + synchronize seen from the host
# (sync_floor_us); a 4096 x 4096 q4_K matrix streams in about 3 us on an
# H200, so the figures net of that floor are reported too (an estimate).
net_gbps() { # weight GB/s, seconds per call, floor in us -> GB/s net of the floor, or null
  awk -v g="${1:-}" -v s="${2:-}" -v f="${3:-}" 'BEGIN {
    num = "^-?[0-9.]+([eE][-+]?[0-9]+)?$"
    if (g ~ num && s ~ num && f ~ num && s - f * 1e-6 > 0) printf "%.4g", g * s / (s - f * 1e-6)
    else printf "null" }'
}
for t in q4_K q4_0 f16; do
  for m in 1 "$M_BIG"; do
    name="bench_${t}_M$m"
    if [ "$m" -eq 1 ]; then extra=("${opts_small[@]}"); else extra=("${opts_big[@]}"); fi
    step "$name" 90 "$bp" bench mul_mat --device "$dev" --type "$t" -K "$K" -N "$N" -M "$m" "${extra[@]}" --json
    f="$out/$name.out"
    if [ "$step_rc" -ne 0 ]; then
      fail "bench mul_mat $t M=$m"
      record "$name" null
      continue
    fi
    gbps=$(jget "$f" weight_gb_per_s)
    gflops=$(jget "$f" gflops)
    secs=$(jget "$f" seconds)
    net=$(net_gbps "$gbps" "$secs" "$sync_us")
    record "$name" "{\"seconds\": $(jnum "$secs"), \"reps\": $(jnum "$(jget "$f" reps)"), \"matrices\": $(jnum "$(jget "$f" matrices)"), \"weight_gb_per_s\": $(jnum "$gbps"), \"gflops\": $(jnum "$gflops"), \"weight_bw_over_d2d\": $(ratio "$gbps" "$d2d"), \"gflops_over_cublas_hgemm\": $(ratio "$gflops" "$hgemm"), \"net_of_sync_floor\": {\"weight_gb_per_s\": $net, \"weight_bw_over_d2d\": $(ratio "$net" "$d2d")}}"
    say "$name: $gbps GB/s of weights ($(ratio "$gbps" "$d2d") of D2D; net of the sync floor $(ratio "$net" "$d2d")), $gflops GFLOP/s ($(ratio "$gflops" "$hgemm") of cuBLAS F16 GEMM)"
  done
done

# ------------------------------------------------------------------ meta over the device twice
if [ -e "$build/lib/backplane/libbackplane-meta.so" ]; then
  for mode in internal none nccl; do
    name="meta_check_$mode"
    step "$name" 150 env BACKPLANE_DEVICES="$meta_spec" BACKPLANE_CUDA_ALLREDUCE=$mode BACKPLANE_LOG=info \
      "$bp" check --device meta0 --json
    rc=$step_rc
    path=$(grep -m1 -oE 'all-reduce over [0-9]+ CUDA backends uses [a-z]+' "$out/$name.err")
    decl=$(grep -m1 -oE '(a CUDA device is given twice|comm_init declines|libnccl.so.2 could not)[^.]*\.' "$out/$name.err")
    record "$name" "{\"result\": $(check_summary "$out/$name.out"), \"allreduce\": $(jstr "${path:-no CUDA all-reduce (declined or not used)}"), \"cuda_says\": $(jstr "${decl:-}")}"
    [ "$rc" -eq 0 ] || fail "check on $meta_spec with BACKPLANE_CUDA_ALLREDUCE=$mode"
  done
  if [ "$dry" -eq 0 ]; then
    if grep -q 'NCCL needs distinct GPUs' "$out/meta_check_nccl.err"; then
      record nccl_on_device_twice '"declines: NCCL needs distinct GPUs, the internal path is used"'
    else
      record nccl_on_device_twice '"the decline sentence was not logged"'
      fail "NCCL did not report declining cuda0 given twice"
    fi
  fi
  step run_meta 120 env BACKPLANE_DEVICES="$meta_spec" BACKPLANE_CUDA_ALLREDUCE=internal "$bp" run \
    --device meta0 --compare "$dev" --model builtin:test --json
  record "run_meta0_vs_$dev" "$(run_summary "$out/run_meta.out")"
  [ "$step_rc" -eq 0 ] || fail "run --device meta0 --compare $dev"
else
  say "the meta plugin is not built: meta checks skipped."
  record meta '"skipped: no meta plugin"'
fi

# ------------------------------------------------------------------ ranks across GPUs (MPI + NCCL)
n_gpus=1
if [ "$dry" -eq 0 ]; then
  n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  dist_dev=dist:cuda0
else
  n_gpus=2   # the dry run exercises the step on the CPU
  dist_dev=dist:$dev
fi
mpirun_cmd=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun_cmd+=(--allow-run-as-root)
if [ "${n_gpus:-0}" -lt 2 ]; then
  say "multi-process step skipped: $n_gpus GPU here, and NCCL does not allow two ranks on one GPU."
  record dist '"skipped: fewer than 2 GPUs"'
elif ! command -v mpirun >/dev/null 2>&1 ||
     ! step build_mpi 120 cmake --build "$build" -j "$jobs" --target bp_plugin_mpi; then
  say "multi-process step skipped: MPI or the mpi plugin is missing (install openmpi-bin libopenmpi-dev)."
  record dist '"skipped: no MPI"'
else
  step dist_single 120 "$bp" run --device "${dist_dev#dist:}" --model builtin:test --json
  step dist_run 180 env BACKPLANE_LOG=info "${mpirun_cmd[@]}" -np 2 "$bp" run --device "$dist_dev" \
    --model builtin:test --json
  rc=$step_rc
  single_tokens=$(tr -d ' \n' <"$out/dist_single.out" | grep -o '"tokens":\[[^]]*\]')
  dist_tokens=$(tr -d ' \n' <"$out/dist_run.out" | grep -o '"tokens":\[[^]]*\]')
  same=false
  [ -n "$dist_tokens" ] && [ "$single_tokens" = "$dist_tokens" ] && same=true
  record dist_run "{\"tokens_match_single_gpu\": $same, \"comm\": $(jstr "$(jget "$out/dist_run.out" comm)"), \"decode_tokens_per_s\": $(jnum "$(jget "$out/dist_run.out" decode_tokens_per_s)"), \"single_decode_tokens_per_s\": $(jnum "$(jget "$out/dist_single.out" decode_tokens_per_s)")}"
  { [ "$rc" -eq 0 ] && [ "$same" = true ]; } || fail "mpirun -np 2 run --device $dist_dev (tokens vs one device)"
  step dist_allreduce 120 "${mpirun_cmd[@]}" -np 2 "$bp" bench allreduce --device "${dist_dev#dist:}" --rounds 3
  [ "$step_rc" -eq 0 ] || fail "mpirun -np 2 bench allreduce --device ${dist_dev#dist:}"
  record dist_allreduce "$(jstr "$(cat "$out/dist_allreduce.out")")"
fi

# ------------------------------------------------------------------ end to end against the CPU
step run_f16 120 "$bp" run --device "$dev" --compare cpu --model builtin:test --json
record "run_${dev}_vs_cpu_f16" "$(run_summary "$out/run_f16.out")"
[ "$step_rc" -eq 0 ] || fail "run --device $dev --compare cpu (f16 weights)"
# Quantized weights: both devices quantize activations (q8_1 here, q8_K on
# the CPU), so logits differ slightly; pseudo-random weights make near-ties,
# so an argmax disagreement alone is reported, not failed.
step run_q4_K 120 "$bp" run --device "$dev" --compare cpu --model builtin:test --weight-type q4_K --json
record "run_${dev}_vs_cpu_q4_K" "$(run_summary "$out/run_q4_K.out")"
if [ "$step_rc" -ne 0 ] && [ "$(jget "$out/run_q4_K.out" argmax_agrees)" != false ]; then
  fail "run --device $dev --compare cpu (q4_K weights)"
fi
# llama.cpp's q4_K_M mix: q4_K and q6_K weights in one model.
step run_q4_K_M 120 "$bp" run --device "$dev" --compare cpu --model builtin:test --weight-type q4_K_M --json
record "run_${dev}_vs_cpu_q4_K_M" "$(run_summary "$out/run_q4_K_M.out")"
if [ "$step_rc" -ne 0 ] && [ "$(jget "$out/run_q4_K_M.out" argmax_agrees)" != false ]; then
  fail "run --device $dev --compare cpu (q4_K_M weights)"
fi

# ------------------------------------------------------------------ Vulkan on the GPU
# The Vulkan plugin's GPU kernels (the three tiles in float16_t and in
# float, integer dots, cooperative matrices), through the GPU driver's
# Vulkan where it is installed; none of them runs on lavapipe by itself.
# glslc is seldom on a GPU machine: GPU_CHECK_VULKAN_PLUGIN names a
# libbackplane-vulkan.so built from this tree elsewhere (carried with the
# run), else it is built here when glslc is there. No Vulkan GPU is
# recorded, not failed.
vk_plugin=${GPU_CHECK_VULKAN_PLUGIN:-}
if [ -z "$vk_plugin" ] && command -v glslc >/dev/null 2>&1 &&
   step build_vulkan 200 bash -c "cmake -S '$root' -B '$build-vulkan' -DBP_VULKAN=ON -DBP_CUDA=OFF \
        -DBP_BUILD_TESTS=OFF -DBP_WERROR=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build '$build-vulkan' -j '$jobs' --target bp_plugin_vulkan"; then
  vk_plugin=$(find "$build-vulkan" -name libbackplane-vulkan.so | head -n 1)
fi
vkdev=""
if [ -n "$vk_plugin" ] && [ -f "$vk_plugin" ]; then
  vk_plugin=$(cd "$(dirname "$vk_plugin")" && pwd)/$(basename "$vk_plugin")
  vk=(env BACKPLANE_PLUGIN_PATH="$vk_plugin")
  step vulkan_devices 30 "${vk[@]}" "$bp" devices
  # a GPU's Vulkan device; in a dry run any (lavapipe's is a CPU device)
  kinds="GPU|IGPU"
  [ "$dry" -eq 1 ] && kinds="GPU|IGPU|ACCEL"
  vkdev=$(grep -m1 -oE "^ +[0-9]+ +vulkan[0-9]+ +($kinds) " "$out/vulkan_devices.out" | awk '{print $2}')
fi
if [ -z "$vkdev" ]; then
  record vulkan '"no Vulkan GPU device here (no plugin built: glslc missing and GPU_CHECK_VULKAN_PLUGIN unset, or no Vulkan driver for the GPU)"'
else
  step vulkan_info 60 "${vk[@]}" "$bp" info "$vkdev"
  record vulkan_device "$(jstr "$(grep -m1 -E "^ +[0-9]+ +$vkdev " "$out/vulkan_devices.out" | sed 's/^ *//; s/  */ /g')")"
  for f in integer_dot_product cooperative_matrix mul_mat_tiles; do
    record "vulkan_$f" "$(jstr "$(sed -n "s/^ *$vkdev\.$f *//p" "$out/vulkan_info.out" | head -n 1)")"
  done
  # the device's own choices, then each kernel forced
  for v in default BACKPLANE_VULKAN_F16_TILES=0 BACKPLANE_VULKAN_INT_DOT=1 BACKPLANE_VULKAN_COOPMAT=1; do
    name="check_vulkan_${v%%=*}"
    ops=(--op MUL_MAT --op MUL_MAT_ID)
    [ "$v" = default ] && ops=()
    step "$name" 150 "${vk[@]}" ${v/#default/BACKPLANE_LOG=warn} "$bp" check --device "$vkdev" "${ops[@]}" --json
    record "$name" "$(check_summary "$out/$name.out")"
    [ "$step_rc" -eq 0 ] || fail "backplane check --device $vkdev ($v)"
  done
  step run_vulkan_q4_K_M 120 "${vk[@]}" "$bp" run --device "$vkdev" --compare cpu --model builtin:test \
    --weight-type q4_K_M --json
  record "run_${vkdev}_vs_cpu_q4_K_M" "$(run_summary "$out/run_vulkan_q4_K_M.out")"
  if [ "$step_rc" -ne 0 ] && [ "$(jget "$out/run_vulkan_q4_K_M.out" argmax_agrees)" != false ]; then
    fail "run --device $vkdev --compare cpu (q4_K_M weights)"
  fi
  for t in q4_0 q4_K f16; do
    for m in 1 "$M_BIG"; do
      name="bench_vulkan_${t}_m$m"
      if [ "$m" -eq 1 ]; then extra=("${opts_small[@]}"); else extra=("${opts_big[@]}"); fi
      step "$name" 90 "${vk[@]}" "$bp" bench mul_mat --device "$vkdev" --type "$t" -K "$K" -N "$N" -M "$m" \
        "${extra[@]}" --json
      gbps=$(jget "$out/$name.out" weight_gb_per_s)
      gflops=$(jget "$out/$name.out" gflops)
      record "$name" "{\"weight_gb_per_s\": $(jnum "$gbps"), \"gflops\": $(jnum "$gflops"), \"weight_bw_over_d2d\": $(ratio "$gbps" "${d2d:-}"), \"gflops_over_cublas_hgemm\": $(ratio "$gflops" "${hgemm:-}")}"
    done
  done
fi

state="finished"
if [ "${#failures[@]}" -eq 0 ]; then
  say "GPU check passed in $(($(date +%s) - t_start)) s."
  write_summary
  exit 0
fi
say "${#failures[@]} GPU check step(s) failed in $(($(date +%s) - t_start)) s; see $json and $log."
write_summary
exit 1
