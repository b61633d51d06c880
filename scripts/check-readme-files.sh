#!/bin/sh
# check-readme-files.sh — every source file a README or a guide (docs/*.md)
# names in backquotes exists, so they stay true as files move. A name is looked
# up beside the README, then from the repository root, then as the end of
# any tracked path (READMEs say `ops/add.c`, `add.c` or `bp_meta.h`). Names
# with a wildcard or placeholder (`*`, `X.c`, `<op>.c`, `arch_foo.c`) are patterns, not
# files. Exit 1 and one line per missing name.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
missing=0
for readme in $(git ls-files '*README.md' 'docs/*.md'); do
    dir=$(dirname "$readme")
    for name in $(grep -o '`[A-Za-z0-9_./-]*\.\(c\|h\|cu\|cuh\|comp\|glsl\|sh\|cmake\|py\)`' "$readme" |
                  tr -d '`' | sort -u); do
        case "$name" in X.c|*/X.c|*/X.h|X.h|*_foo.c) continue ;; esac
        [ -e "$dir/$name" ] && continue
        [ -e "$name" ] && continue
        git ls-files | grep -qE "(^|/)$(printf '%s' "$name" | sed 's/[.]/\\./g')\$" && continue
        echo "$readme names \`$name\`, which is not in the tree (moved or deleted? fix $readme)."
        missing=1
    done
done
exit $missing
