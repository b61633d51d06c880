#!/usr/bin/env bash
# The x8 kernels ask for weight bytes ahead of use (cpu_x8_prefetch in
# plugins/cpu/kernels/simd.h). GCC 12 once deleted every one of those
# prefetches as dead code without a word (it judged the non-inlined helper
# "const"), and only a disassembly showed it. This fails when a SIMD build
# of the CPU plugin carries too few prefetcht1 (the L2 requests) or
# prefetcht0 (the L1 requests, cpu_x8_prefetch_l1).
set -euo pipefail
objdump=${OBJDUMP:-objdump}
if ! command -v "$objdump" >/dev/null; then
    echo "cpu_prefetch_check: $objdump not found; skipping" >&2
    exit 77
fi
status=0
for so in "$@"; do
    dis=$("$objdump" -d "$so")
    for insn in prefetcht1 prefetcht0; do
        n=$(grep -c "$insn" <<<"$dis" || true)
        if (( n < 4 )); then
            echo "cpu_prefetch_check: $so has $n $insn instructions; the x8 kernels' prefetches were compiled out" >&2
            status=1
        else
            echo "cpu_prefetch_check: $(basename "$so"): $n $insn"
        fi
    done
done
exit $status
