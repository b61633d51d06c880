#!/usr/bin/env bash
# tokenizer-reference.sh [BUILD] — regenerate tests/data/tokenizer/ref-*.txt:
# the token ids llama.cpp's own tokenizer gives for every string of
# tests/data/tokenizer/cases.txt, on each vocabulary GGUF the tests build.
# Run once by hand when cases.txt changes (network: the npm registry):
#   1. the vocabularies and GGUFs as the tests make them (tokenizer-vocabs.sh,
#      with BUILD/bin/tokenizer_vocab_gguf; BUILD defaults to build/);
#   2. npm @node-llama-cpp/linux-x64 3.22.1, llama.cpp's prebuilt libllama;
#   3. scripts/tokenizer_reference.c, which dlopen()s it, loads each GGUF
#      with vocab_only and calls llama_tokenize / llama_token_to_piece.
# Nothing of the packages is committed: only cases.txt and the ids.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$build/tokenizer-reference
source scripts/packages.sh
mkdir -p "$work"
scripts/tokenizer-vocabs.sh "$build/tests/tokenizer" "$build/bin/tokenizer_vocab_gguf"
bp_npm_fetch "$work" @node-llama-cpp/linux-x64 3.22.1 \
    0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
tar -xzf "$work/linux-x64-3.22.1.tgz" -C "$work"
lib=$(ls "$work"/package/bins/linux-x64/libllama*.so | head -n1)
cc -O2 -Wall -o "$work/tokref" scripts/tokenizer_reference.c -ldl
for g in llama-spm llama3-llama-bpe llama3-qwen2 llama3-gpt-2 llama3-default; do
    "$work/tokref" "$lib" "$build/tests/tokenizer/$g.gguf" tests/data/tokenizer/cases.txt \
        >"tests/data/tokenizer/ref-$g.txt"
done
echo "tokenizer-reference: wrote tests/data/tokenizer/ref-*.txt"
