#!/bin/sh
# check-format.sh [BASE] — the house style on the lines a branch changes
# (C, CUDA and GLSL sources, against BASE: the merge-base with main by
# default). It checks what every file of the tree already agrees on: no tab,
# no trailing blank, no CR, at most 120 columns. .clang-format describes the
# rest for editors (`git clang-format`), but is not enforced: clang-format 14
# breaks printf arguments after a multi-line string literal, which the tree
# deliberately does not. Exit 1 with file:line and the rule for each offence.
set -eu
cd "$(dirname "$0")/.."
base=${1:-$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)}
git diff -U0 --no-color "$base" -- '*.c' '*.h' '*.cu' '*.cuh' '*.comp' '*.glsl' | awk '
    /^\+\+\+ / { file = substr($0, 7); next }
    /^@@ / { split($3, a, ","); line = substr(a[1], 2) + 0; next }
    /^\+/ {
        text = substr($0, 2)
        why = ""
        if (text ~ /\t/) why = "a tab (indent with 4 spaces)"
        else if (text ~ /\r$/) why = "a CR line end"
        else if (text ~ /[ ]+$/) why = "trailing blanks"
        else if (length(text) > 120) why = "more than 120 columns"
        if (why != "") { printf "%s:%d: %s.\n", file, line, why; bad = 1 }
        line++
    }
    END { exit bad }'
