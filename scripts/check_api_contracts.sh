#!/bin/sh
# check_api_contracts.sh [header...] — every BP_API declaration in the
# application headers has its contract comment directly above it (STYLE.md:
# what, ownership, threads, errors). Prints each declaration without one as
# file:line and exits 1; exits 0 when all have one. With no arguments it
# checks host/include/backplane/*.h of the tree it lives in.
set -eu
if [ $# -eq 0 ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    set -- "$root"/host/include/backplane/*.h
fi
awk '
    # One contract per function: the line right above must end a comment.
    /^BP_API/ {
        if (prev !~ /\*\/[ \t]*$/) {
            printf "%s:%d: BP_API declaration without a contract comment above it: %s\n",
                   FILENAME, FNR, $0
            bad++
        }
    }
    { prev = $0 }
    FNR == 1 { prev = "" }
    END {
        if (bad) {
            printf "%d public declaration(s) lack a contract; write 1-3 lines above each " \
                   "(what, ownership, threads, errors).\n", bad
            exit 1
        }
    }
' "$@"
