#!/usr/bin/env bash
# arch-reference.sh [WORKDIR] — regenerate tests/data/arch from scratch: the
# random-weight GGUF models of every architecture, llama.cpp's quantized
# copies of some, llama.cpp's logits for each, and the MANIFEST that lists
# them (format in tests/data/arch/README.md). Run by hand when a case
# changes (network on the first run: the npm registry); nothing in the
# build or the tests runs it.
#   1. npm installs @node-llama-cpp/linux-x64 3.22.1 (llama.cpp's prebuilt
#      CPU libllama) into ~/.cache/backplane-bench, as
#      scripts/bench-llamacpp.py --install does, or reuses it there;
#   2. cc builds scripts/arch_reference.c into WORKDIR (default
#      build/arch-reference), which also holds what is not kept: the
#      n_embd-256 F32 sources, the control models, the checks' logits;
#   3. scripts/make-arch-models.py writes the models, arch_reference
#      --quantize makes Q4_K_M (and a few Q8_0) files, arch_reference takes
#      the logits of every file (twice for the F32 ones, which must be
#      identical), and records the files llama.cpp refuses;
#   4. checks that each feature is live: logits of a model against the
#      same model with the feature off differ (and, where llama.cpp ignores
#      a key, do not), and that the context settings (F32 KV cache, flash
#      attention off) take effect; prints max |logit| per case and the
#      sizes. The printed summary is also left in WORKDIR/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-build/arch-reference}
out=tests/data/arch
cache=${BP_BENCH_DIR:-$HOME/.cache/backplane-bench}
libs=$cache/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
drv=$work/arch_reference
gen=scripts/make-arch-models.py

mkdir -p "$work" "$out" "$cache"
if [[ ! -f $libs/libllama.v0.5.0.so ]]; then
    npm install --no-save --ignore-scripts --prefix "$cache" @node-llama-cpp/linux-x64@3.22.1
fi
cc -O2 -Wall -o "$drv" scripts/arch_reference.c -ldl -lm
# ggml attaches gdb for a backtrace when llama.cpp aborts; not wanted here
export GGML_NO_BACKTRACE=1

rm -f "$out"/*.gguf "$out"/*.logits "$out"/MANIFEST
rm -rf "$work/large" "$work/controls" "$work/check"
mkdir -p "$work/check"
python3 "$gen" "$out"
python3 "$gen" "$work/large" --group large
python3 "$gen" "$work/controls" --group controls
python3 "$gen" --tokens >"$work/tokens.txt"
exec > >(tee "$work/summary.txt")

# Floats of a .logits file: "max |x|", or "max |a - b|" of two files.
logits_stat() {
    python3 - "$@" <<'EOF'
import struct, sys
def load(p):
    d = open(p, "rb").read()
    return struct.unpack(f"<{len(d) // 4}f", d)
a = load(sys.argv[1])
if len(sys.argv) == 2:
    print(f"{max(abs(x) for x in a):.4f}")
else:
    b = load(sys.argv[2])
    if len(a) != len(b):
        sys.exit(f"arch-reference: {sys.argv[1]} and {sys.argv[2]} differ in size")
    print(f"{max(abs(x - y) for x, y in zip(a, b)):.3g}")
EOF
}

# Tensor types of a GGUF file, counted: "q4_K x10, q6_K x5, f32 x9".
tensor_types() {
    python3 - "$1" <<'EOF'
import collections, struct, sys
buf = open(sys.argv[1], "rb").read()
names = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 12: "q4_K", 13: "q5_K", 14: "q6_K", 6: "q5_0", 7: "q5_1", 3: "q4_1"}
_, _, n_t, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
pos = 24
def skip(pos, t):
    size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if t in size:
        return pos + size[t]
    if t == 8:
        return pos + 8 + struct.unpack_from("<Q", buf, pos)[0]
    et, n = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    for _ in range(n):
        pos = skip(pos, et)
    return pos
for _ in range(n_kv):
    pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
    t = struct.unpack_from("<I", buf, pos)[0]
    pos = skip(pos + 4, t)
count = collections.Counter()
for _ in range(n_t):
    pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
    nd = struct.unpack_from("<I", buf, pos)[0]
    pos += 4 + 8 * nd
    count[names.get(struct.unpack_from("<I", buf, pos)[0], "?")] += 1
    pos += 12
print(", ".join(f"{k} x{v}" for k, v in sorted(count.items())))
EOF
}

manifest=$work/MANIFEST
{
    echo "# tests/data/arch/MANIFEST — made by scripts/arch-reference.sh; format in README.md."
    echo "tokens $(cat "$work/tokens.txt")"
} >"$manifest"

# ref FILE N_CTX TOL LOGITS: llama.cpp's logits, taken twice (must match).
ref() {
    local file=$1 n_ctx=$2 tol=$3 logits=$4
    "$drv" "$libs" "$out/$file" "$n_ctx" "$work/tokens.txt" "$out/$logits" >/dev/null 2>"$work/check/err"
    "$drv" "$libs" "$out/$file" "$n_ctx" "$work/tokens.txt" "$work/check/again.logits" >/dev/null 2>&1
    if ! cmp -s "$out/$logits" "$work/check/again.logits"; then
        echo "arch-reference: two runs of $file gave different logits" >&2
        exit 1
    fi
    echo "$file $n_ctx $tol $logits" >>"$manifest"
    printf '  %-30s n_ctx %4s  max |logit| %8s  (reproduced)\n' "$logits" "$n_ctx" "$(logits_stat "$out/$logits")"
}

# refuse FILE HINT: llama.cpp must refuse (exit 1) or abort (a signal).
refuse() {
    local file=$1 hint=$2 rc=0
    # in a subshell that reports the abort itself, quietly
    ( "$drv" "$libs" "$out/$file" 256 "$work/tokens.txt" "$work/check/refused.logits" \
        >"$work/check/refused.out" 2>&1; exit $? ) 2>/dev/null || rc=$?
    local why
    if [[ $rc == 1 ]]; then
        why=$(grep -m1 '^refused: ' "$work/check/refused.out" | sed 's/^refused: //')
        why="load error: ${why#llama_model_load: error loading model: }"
    elif [[ $rc -gt 128 ]]; then
        why="abort (signal $((rc - 128))): $(grep -m1 -o 'GGML_ASSERT.*' "$work/check/refused.out" || echo '?')"
    else
        echo "arch-reference: llama.cpp did not refuse $file (exit $rc)" >&2
        exit 1
    fi
    echo "$file 256 2e-3 refuse $hint" >>"$manifest"
    printf '  %-30s %s\n' "$file" "$why"
}

# quant IN OUT FTYPE: llama.cpp's llama_model_quantize.
quant() {
    "$drv" --quantize "$libs" "$1" "$out/$2" "$3" >"$work/check/quant.out" 2>&1 ||
        { cat "$work/check/quant.out" >&2; exit 1; }
    printf '  %-30s %s\n' "$2" "$(tensor_types "$out/$2")"
}

echo "== F32 references"
for c in llama-plain llama-untied llama-qkv llama-bias-freqs llama-yarn llama-linear \
         llama-headdim qwen2 qwen2-outbias qwen3 gemma2 gemma3 gemma3-softcap \
         phi3-long phi3-short mistral3 mixtral qwen3moe qwen2moe; do
    ref "$c.gguf" 256 2e-3 "$c.logits"
done
# orig ctx 256: n_ctx 256 is not above it (short factors), 512 is (long)
ref llama-longrope.gguf 256 2e-3 llama-longrope-short.logits
ref llama-longrope.gguf 512 2e-3 llama-longrope-long.logits

echo "== quantized by llama.cpp (tensor types)"
for c in llama qwen2 qwen3 gemma3 phi3 mixtral qwen3moe qwen2moe; do
    quant "$work/large/$c-256.gguf" "$c-256-q4_k_m.gguf" 15
done
quant "$out/llama-plain.gguf" llama-plain-q8_0.gguf 7
quant "$out/qwen2.gguf" qwen2-q8_0.gguf 7
echo "== quantized references"
# Gemma's GELU reads an f16 table (ggml-cpu), so a last-bit difference in a
# gate value can move its output by an f16 step, which the 8-bit activations
# of the next product then carry on: measured on gemma3-256-q4_k_m,
# backplane's cpu matches llama.cpp to 1e-5 up to position 9 and within 0.105
# after it, and backplane's own vulkan0 and cpu differ by 0.12; the same file
# in F32 matches to 2e-4. Its tolerance is 0.15.
for c in llama qwen2 qwen3 gemma3 phi3 mixtral qwen3moe qwen2moe; do
    tol=6e-2
    [[ $c == gemma3 ]] && tol=0.15
    ref "$c-256-q4_k_m.gguf" 256 "$tol" "$c-256-q4_k_m.logits"
done
for c in llama-plain qwen2; do
    ref "$c-q8_0.gguf" 256 6e-2 "$c-q8_0.logits"
done

echo "== refusals"
refuse refuse-unknown-tensor.gguf blk.0.foo.weight
refuse refuse-key-type.gguf llama.context_length
refuse refuse-scaling-type.gguf llama3
refuse refuse-kv-length.gguf value_length
# qwen2 with experts: llama.cpp's qwen2 loader asks for the dense FFN
refuse refuse-moe-qwen2.gguf expert

for f in $(python3 "$gen" "$out" --list); do
    grep -q "^$f " "$manifest" || { echo "arch-reference: $f is not in the MANIFEST" >&2; exit 1; }
done
mv "$manifest" "$out/MANIFEST"

# live A_LOGITS B_GGUF N_CTX WHAT [same]: B's logits against A's.
live() {
    local a=$1 b=$2 n_ctx=$3 what=$4 expect=${5:-differ}
    "$drv" "$libs" "$b" "$n_ctx" "$work/tokens.txt" "$work/check/b.logits" >/dev/null 2>&1
    local d
    d=$(logits_stat "$a" "$work/check/b.logits")
    printf '  %-58s max |diff| %s\n' "$what" "$d"
    if [[ $expect == differ ]] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-3) }'; then
        echo "arch-reference: $what: the feature does not change llama.cpp's logits" >&2
        exit 1
    fi
    if [[ $expect == same ]] && awk -v d="$d" 'BEGIN { exit !(d > 1e-4) }'; then
        echo "arch-reference: $what: expected the same logits" >&2
        exit 1
    fi
}

echo "== features are live (reference against the same model with the feature off)"
c=$work/controls
live "$out/llama-bias-freqs.logits" "$c/ctl-llama-freqs-ones.gguf" 256 "llama-bias-freqs: rope_freqs all 1"
live "$out/llama-yarn.logits" "$c/ctl-llama-yarn-none.gguf" 256 "llama-yarn: no scaling keys"
live "$out/llama-yarn.logits" "$c/ctl-llama-yarn-attn1.gguf" 256 "llama-yarn: attn_factor 1"
live "$out/llama-yarn.logits" "$c/ctl-llama-yarn-nobeta.gguf" 256 \
    "llama-yarn: yarn_beta_*/log_multiplier dropped (ignored)" same
live "$out/llama-linear.logits" "$c/ctl-llama-linear-none.gguf" 256 "llama-linear: no scaling keys"
live "$out/llama-longrope-short.logits" "$out/llama-longrope.gguf" 512 "llama-longrope: n_ctx 256 (short) vs 512 (long)"
live "$out/llama-longrope-long.logits" "$c/ctl-llama-longrope-none.gguf" 512 "llama-longrope: no factor tensors"
live "$out/llama-plain.logits" "$out/llama-qkv.gguf" 256 "llama-qkv: same weights as llama-plain, fused" same
live "$out/qwen2-outbias.logits" "$c/ctl-qwen2-nooutbias.gguf" 256 "qwen2-outbias: no output.bias"
live "$out/qwen3.logits" "$c/ctl-qwen3-qknorm-ones.gguf" 256 "qwen3: q/k norm weights all 1"
live "$out/gemma2.logits" "$c/ctl-gemma2-noswa.gguf" 256 "gemma2: sliding window 4096"
live "$out/gemma2.logits" "$c/ctl-gemma2-nocap.gguf" 256 "gemma2: attention softcap 1e9"
live "$out/gemma3.logits" "$c/ctl-gemma3-noswa.gguf" 256 "gemma3: no sliding_window key"
live "$out/gemma3.logits" "$c/ctl-gemma3-swabase.gguf" 256 "gemma3: freq_base_swa 1e6"
live "$out/gemma3.logits" "$c/ctl-gemma3-nolinear.gguf" 256 "gemma3: no linear x8"
live "$out/gemma3-softcap.logits" "$c/ctl-gemma3-nosoftcap.gguf" 256 "gemma3-softcap: no final softcap"
live "$out/phi3-long.logits" "$out/phi3-short.gguf" 256 "phi3-long vs phi3-short (same weights)"
live "$out/phi3-long.logits" "$c/ctl-phi3-nofactors.gguf" 256 "phi3-long: no factor tensors"
live "$out/mistral3.logits" "$c/ctl-mistral3-notemp.gguf" 256 "mistral3: no temperature_scale"
live "$out/mistral3.logits" "$c/ctl-mistral3-nobeta.gguf" 256 "mistral3: no yarn_beta_fast/slow"
live "$out/mistral3.logits" "$c/ctl-mistral3-nologmul.gguf" 256 "mistral3: no yarn_log_multiplier"

echo "== the context settings take effect (llama.cpp's defaults instead)"
for f in llama-plain gemma2; do
    "$drv" "$libs" "$out/$f.gguf" 256 "$work/tokens.txt" "$work/check/kv.logits" --kv f16 >/dev/null 2>&1
    printf '  %-58s max |diff| %s\n' "$f: F16 KV cache" "$(logits_stat "$out/$f.logits" "$work/check/kv.logits")"
    "$drv" "$libs" "$out/$f.gguf" 256 "$work/tokens.txt" "$work/check/fa.logits" --fa >/dev/null 2>&1
    printf '  %-58s max |diff| %s\n' "$f: flash attention on" "$(logits_stat "$out/$f.logits" "$work/check/fa.logits")"
done

(cd "$out" && sha256sum -- *.gguf *.logits >SHA256SUMS)
echo "== llama.cpp's CPU backend here"
"$drv" "$libs" "$out/llama-plain.gguf" 256 "$work/tokens.txt" "$work/check/b.logits" 2>&1 >/dev/null |
    grep -o 'libggml-cpu-[a-z0-9_]*\.so' | sed 's/^/  /'
echo "== sizes"
du -sh "$out" | sed 's/^/  /'
