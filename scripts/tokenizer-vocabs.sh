#!/usr/bin/env bash
# tokenizer-vocabs.sh DIR BUILDER — test set-up (CTest fixture
# tokenizer_vocabs): fetch the real vocabularies (scripts/packages.sh,
# bp_fetch_tokenizer_vocabs) into DIR and build from them, with BUILDER
# (tests/tokenizer_vocab_gguf.c), the GGUF files the tokenizer tests read:
#   llama-spm.gguf            LLaMA 1/2 SentencePiece, 32 000 tokens
#   llama3-<pre>.gguf         LLaMA 3 byte-level BPE, 128 256 tokens, with
#                             tokenizer.ggml.pre = llama-bpe, qwen2, gpt-2, default
# A failed download fails the set-up, and with it the tests: never a skip.
set -euo pipefail
dir=$1 builder=$2
source "$(dirname "$0")/packages.sh"
bp_fetch_tokenizer_vocabs "$dir"
"$builder" spm "$dir/llama-tokenizer.js" "$dir/llama-spm.gguf"
for pre in llama-bpe qwen2 gpt-2 default; do
    "$builder" bpe "$dir/llama3-tokenizer.js" "$dir/llama3-$pre.gguf" "$pre"
done
