#!/usr/bin/env bash
# chat-template-reference.sh [BUILD] — regenerate tests/data/chat/expected.txt:
# what llama.cpp's llama_chat_apply_template (its native formatter, no Jinja)
# makes of every built-in name and every text of tests/data/chat/templates.txt
# over the message lists of tests/data/chat/messages.txt. Run by hand when
# those files change:
#   1. libllama from npm @node-llama-cpp/linux-x64 3.22.1: the copy that
#      scripts/bench-llamacpp.py --install put in ~/.cache/backplane-bench when
#      there is one, else fetched into BUILD/chat-template-reference (network:
#      the npm registry; pinned by sha256);
#   2. scripts/chat_template_reference.c, which dlopen()s it.
# Nothing of the package is committed: only our inputs and its outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$build/chat-template-reference
mkdir -p "$work"
lib=$(ls ~/.cache/backplane-bench/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama*.so \
      2>/dev/null | head -n1 || true)
if [[ -z $lib ]]; then
    source scripts/packages.sh
    bp_npm_fetch "$work" @node-llama-cpp/linux-x64 3.22.1 \
        0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
    tar -xzf "$work/linux-x64-3.22.1.tgz" -C "$work"
    lib=$(ls "$work"/package/bins/linux-x64/libllama*.so | head -n1)
fi
cc -O2 -Wall -o "$work/chatref" scripts/chat_template_reference.c -ldl
"$work/chatref" "$lib" tests/data/chat/templates.txt tests/data/chat/messages.txt \
    >tests/data/chat/expected.txt
echo "chat-template-reference: wrote tests/data/chat/expected.txt ($(grep -c '^case' tests/data/chat/expected.txt) cases)"
