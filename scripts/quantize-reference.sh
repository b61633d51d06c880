#!/usr/bin/env bash
# quantize-reference.sh [WORKDIR] — `backplane quantize` against llama.cpp's
# llama_model_quantize on the same inputs, every preset: prints per preset
# whether the two files are byte-identical (and where not, what differs),
# and regenerates tests/data/quantize (format in its README.md): the
# tensor types and sha256 of llama.cpp's files, and llama.cpp's logits for
# llama-256 in every preset. Run by hand after a change to the presets or
# the quantizers (network on the first run: the npm registry); nothing in
# the build or the tests runs it. Needs build/bin/backplane (or $BP).
#   1. npm installs @node-llama-cpp/linux-x64 3.22.1 into
#      ~/.cache/backplane-bench (or reuses it), cc builds
#      scripts/arch_reference.c into WORKDIR (default build/quantize-reference);
#   2. scripts/make-arch-models.py writes the 256-wide models (--group large)
#      and the quantization shapes (--group quant) into WORKDIR/gen; the
#      64-wide models come from tests/data/arch;
#   3. each model is quantized by both tools in every preset (llama.cpp on
#      one thread, and again on four for the 16-layer model, which must give
#      the same bytes); F16 and BF16 copies of llama-256 made by llama.cpp
#      are quantized again, to check conversion from those types;
#   4. llama.cpp's logits of llama-256 in every preset, from the file
#      backplane wrote (so llama.cpp is shown to load it), for
#      tests/test_quantize.c to hold backplane's runner to.
# The summary is also left in WORKDIR/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-build/quantize-reference}
out=tests/data/quantize
bp=${BP:-build/bin/backplane}
cache=${BP_BENCH_DIR:-$HOME/.cache/backplane-bench}
libs=$cache/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
drv=$work/arch_reference
cmpy=scripts/quantize_compare.py

[[ -x $bp ]] || { echo "quantize-reference: build $bp first (cmake --build build --target backplane_cli)" >&2; exit 1; }
mkdir -p "$work" "$out" "$cache"
if [[ ! -f $libs/libllama.v0.5.0.so ]]; then
    npm install --no-save --ignore-scripts --prefix "$cache" @node-llama-cpp/linux-x64@3.22.1
fi
cc -O2 -Wall -o "$drv" scripts/arch_reference.c -ldl -lm
export GGML_NO_BACKTRACE=1
rm -rf "$work/gen" "$work/lc" "$work/bp"
mkdir -p "$work/gen" "$work/lc" "$work/bp"
python3 scripts/make-arch-models.py "$work/gen" --group large
python3 scripts/make-arch-models.py "$work/gen" --group quant
python3 scripts/make-arch-models.py --tokens >"$work/tokens.txt"
rm -f "$out"/*.logits "$out"/EXPECTED
exec > >(tee "$work/summary.txt")

# preset name : llama_ftype
presets="Q4_0:2 Q4_1:3 Q5_0:8 Q5_1:9 Q2_K:10 Q3_K_S:11 Q3_K_M:12 Q3_K_L:13 IQ4_NL:25 IQ4_XS:30
         Q4_K_S:14 Q4_K_M:15 Q5_K_S:16 Q5_K_M:17 Q6_K:18 Q8_0:7 F16:1 BF16:32 F32:0"
# model name : source (arch/FILE: tests/data/arch; gen/FILE: make-arch-models
# output; MODEL:PRESET: that case's output, each tool's own)
models="llama-plain:arch/llama-plain.gguf llama-untied:arch/llama-untied.gguf
        llama-qkv:arch/llama-qkv.gguf qwen2:arch/qwen2.gguf gemma3:arch/gemma3.gguf
        phi3-long:arch/phi3-long.gguf mixtral:arch/mixtral.gguf
        llama-256:gen/llama-256.gguf qwen2-256:gen/qwen2-256.gguf qwen3-256:gen/qwen3-256.gguf
        gemma3-256:gen/gemma3-256.gguf phi3-256:gen/phi3-256.gguf llama-gqa4:gen/llama-gqa4.gguf
        llama-odd:gen/llama-odd.gguf llama-256-f16:llama-256:F16 llama-256-bf16:llama-256:BF16"

expected=$work/EXPECTED
{
    echo "# tests/data/quantize/EXPECTED — made by scripts/quantize-reference.sh; format in README.md."
} >"$expected"

declare -A verdict   # preset -> identical count / total
n_diff=0
for m in $models; do
    name=${m%%:*}
    src=${m#*:}
    case $src in
        arch/*) lc_in=tests/data/$src; bp_in=$lc_in ;;
        gen/*) lc_in=$work/$src; bp_in=$lc_in ;;
        *) lc_in=$work/lc/${src%%:*}-${src#*:}.gguf; bp_in=$work/bp/${src%%:*}-${src#*:}.gguf ;;
    esac
    if ! cmp -s "$lc_in" "$bp_in"; then
        echo "quantize-reference: $name: the two tools' inputs differ; fix ${src} first" >&2
        exit 1
    fi
    echo "== $name ($src)"
    echo "model $name $src $(sha256sum "$lc_in" | cut -d' ' -f1)" >>"$expected"
    tensors_written=0
    for p in $presets; do
        preset=${p%%:*}
        ftype=${p#*:}
        # the float copies are inputs here, not cases of their own
        if [[ $src == *:* && ($preset == F16 || $preset == BF16) ]]; then continue; fi
        lc=$work/lc/$name-$preset.gguf
        bpf=$work/bp/$name-$preset.gguf
        lc_rc=0 bp_rc=0
        "$drv" --quantize "$libs" "$lc_in" "$lc" "$ftype" >"$work/lc.log" 2>&1 || lc_rc=$?
        "$bp" quantize "$bp_in" "$bpf" "$preset" >/dev/null 2>"$work/bp.log" || bp_rc=$?
        if [[ $lc_rc != 0 ]]; then
            # llama.cpp names the tensor it could not place in its last warning
            hint=$(grep -o 'warning: [^ ]*' "$work/lc.log" | tail -1 | cut -d' ' -f2)
            hint=${hint:-failed}
            if [[ $bp_rc != 0 ]] && grep -qF -- "$hint" "$work/bp.log"; then
                res="both refuse ($hint)"
                key=identical
            else
                res="MISMATCH: llama.cpp refuses ($hint), backplane $( [[ $bp_rc == 0 ]] && echo writes a file || head -c 200 "$work/bp.log")"
                key=differs
                n_diff=$((n_diff + 1))
            fi
            echo "$preset refuse $hint" >>"$expected"
        else
            if [[ $tensors_written == 0 ]]; then
                python3 "$cmpy" types "$lc" | sed -n 1p >>"$expected"
                tensors_written=1
            fi
            if [[ $bp_rc != 0 ]]; then
                res="MISMATCH: backplane refuses: $(cat "$work/bp.log")"
                key=differs
                n_diff=$((n_diff + 1))
            else
                res=$(python3 "$cmpy" diff "$lc" "$bpf" || true)
                key=$([[ $res == identical ]] && echo identical || echo differs)
                [[ $key == identical ]] || n_diff=$((n_diff + 1))
            fi
            same=$([[ $key == identical ]] && echo same || echo differs)
            echo "$preset $(sha256sum "$lc" | cut -d' ' -f1) $same $(python3 "$cmpy" types "$lc" | tail -1)" >>"$expected"
        fi
        printf '  %-7s %s\n' "$preset" "$res"
        v=${verdict[$preset]:-0/0}
        i=${v%/*} t=${v#*/}
        [[ $key == identical ]] && i=$((i + 1))
        verdict[$preset]=$i/$((t + 1))
    done
done

echo "== llama.cpp on 4 threads gives its 1-thread bytes (llama-gqa4)"
for p in $presets; do
    preset=${p%%:*}
    "$drv" --quantize "$libs" "$work/gen/llama-gqa4.gguf" "$work/lc4.gguf" "${p#*:}" 4 >/dev/null 2>&1
    cmp -s "$work/lc4.gguf" "$work/lc/llama-gqa4-$preset.gguf" ||
        { echo "quantize-reference: llama.cpp's $preset differs between 1 and 4 threads" >&2; exit 1; }
done
echo "  all presets: the same bytes"

echo "== llama.cpp's logits of backplane's llama-256 files (N_CTX 256)"
for p in $presets; do
    preset=${p%%:*}
    [[ $preset == F32 ]] && continue
    lower=$(echo "$preset" | tr 'A-Z' 'a-z')
    f=$work/bp/llama-256-$preset.gguf
    "$drv" "$libs" "$f" 256 "$work/tokens.txt" "$out/llama-256-$lower.logits" >"$work/run.log" 2>&1 ||
        { cat "$work/run.log" >&2; exit 1; }
    printf '  %-7s %s\n' "$preset" "$(tail -1 "$work/run.log")"
done

mv "$expected" "$out/EXPECTED"
(cd "$out" && sha256sum -- EXPECTED *.logits >SHA256SUMS)
echo "== byte-identical with llama.cpp, per preset (cases, refusals included)"
for p in $presets; do
    preset=${p%%:*}
    printf '  %-7s %s\n' "$preset" "${verdict[$preset]}"
done
echo "== $n_diff case(s) differ"
