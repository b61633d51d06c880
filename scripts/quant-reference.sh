#!/usr/bin/env bash
# quant-reference.sh [DIR] — regenerate tests/data/quant/: fixed inputs and,
# for each of q4_1, q5_0, q5_1, q2_K, q3_K, q5_K, iq4_nl and iq4_xs, the
# bytes ggml's own quantizer makes of them and the floats its dequantizer
# makes of those bytes (tests/test_quant.c holds backplane to them bit for
# bit). Run by hand when the cases change (network: the npm registry):
#   1. npm @node-llama-cpp/linux-x64 3.22.1, llama.cpp's prebuilt ggml, into
#      DIR (default ~/.cache/backplane-bench, where bench-llamacpp.py
#      --install puts it; kept there, so a second run is offline);
#   2. scripts/quant_reference.c, which dlopen()s libggml-base and calls
#      ggml_quantize_chunk and the type's to_float.
# Nothing of the package is committed: only the inputs and ggml's outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-$HOME/.cache/backplane-bench}
pkg=@node-llama-cpp/linux-x64@3.22.1
libs=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [[ ! -f $libs/libggml-base.so ]]; then
    mkdir -p "$dir"
    npm install --no-save --ignore-scripts --prefix "$dir" "$pkg"
fi
cc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -o "$dir/quantref" scripts/quant_reference.c -ldl -lm
mkdir -p tests/data/quant
"$dir/quantref" "$libs/libggml-base.so" tests/data/quant
echo "quant-reference: wrote tests/data/quant/inputs.txt and ggml-*.txt"
