#!/usr/bin/env bash
# docs_check.sh — the documents cannot rot:
#   docs_check.sh links SOURCE_DIR
#       every relative link of README.md and docs/*.md reaches a file, and
#       every #anchor a heading of its target; every ```c excerpt=FILE block
#       is still, line for line, in FILE.
#   docs_check.sh run SOURCE_DIR BINARY_DIR DOC.md
#       runs the ```sh runnable blocks of DOC.md in order, in one scratch
#       directory (the tree's top-level entries linked in, so `abi/` and
#       `examples/` resolve), with BINARY_DIR/bin first on PATH.
#   docs_check.sh help SOURCE_DIR BINARY_DIR
#       `backplane help GUIDE/TOPIC` prints every "## " and "### " section of
#       every guide, and `backplane help GUIDE/GUIDE` its introduction, as
#       the guide's file has them.
#   docs_check.sh history SOURCE_DIR
#       no source, script or document tells how the tree got here: issue or
#       session numbers, what something was before, commit hashes; and
#       no file but docs/performance.md (figures carry their date) holds a
#       date.
# Exit 1 with one line per problem, naming the file and line.
set -uo pipefail

usage="usage: docs_check.sh links|run|help|history SOURCE_DIR [BINARY_DIR [DOC.md]]"
mode=${1:?$usage}
src=${2:?$usage}
cd "$src" || exit 1
src=$(pwd)

docs=(README.md docs/*.md)

# The anchors of a Markdown file, one a line, as GitHub makes them: the
# heading's text in lower case, punctuation dropped, spaces as hyphens.
anchors() {
    awk '/^```/ { fence = !fence; next }
         !fence && /^#+ / {
             h = $0; sub(/^#+ +/, "", h); h = tolower(h)
             gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
             print h
         }' "$1"
}

check_links() {
    local bad=0 f target path anchor line
    for f in "${docs[@]}"; do
        # Links outside fenced blocks and inline code: "LINE TARGET" pairs.
        while read -r line target; do
            case $target in http://* | https://* | mailto:*) continue ;; esac
            path=${target%%#*}
            anchor=
            [[ $target == *"#"* ]] && anchor=${target#*#}
            if [[ -z $path ]]; then
                path=$f
            else
                path=$(dirname "$f")/$path
            fi
            if [[ ! -e $path ]]; then
                echo "$f:$line: the link '$target' leads to $path, which does not exist."
                bad=1
                continue
            fi
            if [[ -n $anchor && $path == *.md ]] && ! anchors "$path" | grep -qxF "$anchor"; then
                echo "$f:$line: the link '$target' names #$anchor, which is no heading of $path."
                bad=1
            fi
        done < <(awk '/^```/ { fence = !fence; next }
                      !fence {
                          s = $0; gsub(/`[^`]*`/, "", s)
                          while (match(s, /\]\([^) ]+\)/)) {
                              print NR, substr(s, RSTART + 2, RLENGTH - 3)
                              s = substr(s, RSTART + RLENGTH)
                          }
                      }' "$f")
    done
    # Excerpts: the block's lines, in order and adjacent, somewhere in FILE.
    local tmp
    tmp=$(mktemp -d) || return 1
    for f in "${docs[@]}"; do
        awk -v dir="$tmp" -v doc="$f" '
            /^```c excerpt=/ { n++; file = substr($0, 14); out = dir "/" n
                               print doc ":" NR " " file > (dir "/" n ".where"); on = 1; next }
            on && /^```/ { on = 0; close(out); next }
            on { print > out }' "$f"
        local w
        for w in "$tmp"/*.where; do
            [[ -e $w ]] || continue
            local where file
            read -r where file <"$w"
            if [[ ! -f $file ]]; then
                echo "$where: the excerpt names $file, which does not exist."
                bad=1
            elif ! awk 'NR == FNR { want[++n] = $0; next }
                        { have[++m] = $0 }
                        END { for (i = 1; i + n - 1 <= m; i++) {
                                  for (j = 1; j <= n && have[i + j - 1] == want[j]; j++);
                                  if (j > n) exit 0 }
                              exit 1 }' "${w%.where}" "$file"; then
                echo "$where: the excerpt is no longer in $file; copy it again from the file."
                bad=1
            fi
            rm -f "$w" "${w%.where}"
        done
    done
    rm -rf "$tmp"
    [[ $bad -eq 0 ]] && echo "docs_check: every link, anchor and excerpt of ${docs[*]} holds"
    return $bad
}

run_blocks() {
    local bin=${3:?usage: docs_check.sh run SOURCE_DIR BINARY_DIR DOC.md} doc=${4:?DOC.md}
    local work n=0 failed=0 start script rc
    bin=$(cd "$bin" && pwd) || return 1
    work=$(mktemp -d "${TMPDIR:-/tmp}/bp-docs.XXXXXX") || return 1
    trap 'rm -rf "$work"' RETURN
    local e
    for e in "$src"/*; do ln -s "$e" "$work/$(basename "$e")"; done
    mkdir "$work/.blocks"
    # One script per block, named by its first line in the document.
    awk -v dir="$work/.blocks" '
        /^```sh runnable[ \t]*$/ { on = 1; out = sprintf("%s/%06d", dir, NR + 1); next }
        on && /^```/ { on = 0; close(out); next }
        on { print > out }' "$doc"
    export PATH="$bin/bin:$PATH"
    for script in "$work"/.blocks/*; do
        [[ -e $script ]] || continue
        n=$((n + 1))
        start=$((10#$(basename "$script")))
        echo "---- $doc:$start"
        sed 's/^/    /' "$script"
        (cd "$work" && timeout 300 bash -e "$script")
        rc=$?
        if [[ $rc -ne 0 ]]; then
            echo "docs_check: FAIL: the block at $doc:$start exited $rc."
            failed=$((failed + 1))
        fi
    done
    if [[ $n -eq 0 ]]; then
        echo "docs_check: $doc has no \`\`\`sh runnable block"
    else
        echo "docs_check: $doc: $((n - failed)) of $n runnable blocks passed"
    fi
    [[ $failed -eq 0 ]]
}

check_help() {
    local bin=${3:?usage: docs_check.sh help SOURCE_DIR BINARY_DIR} tmp f guide n=0 bad=0 w topic
    bin=$(cd "$bin" && pwd) || return 1
    tmp=$(mktemp -d) || return 1
    trap 'rm -rf "$tmp"' RETURN
    for f in docs/*.md; do
        guide=$(basename "$f" .md)
        # Each section into its own file, its topic (the anchor, made as
        # anchors() makes it) in a .topic beside it: the introduction runs
        # to the first "## ", a section to the next heading of its level or
        # a higher one.
        awk -v dir="$tmp" -v guide="$guide" '
            function anchor(h) { h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h); return h }
            { line[NR] = $0 }
            /^```/ { fence = !fence }
            !fence && /^###? / { lvl = /^### / ? 3 : 2; n++; at[n] = NR; level[n] = lvl
                                 h = $0; sub(/^#+ /, "", h); topic[n] = anchor(h) }
            END {
                first = NR + 1
                for (i = 1; i <= n; i++) if (level[i] == 2) { first = at[i]; break }
                out = dir "/" guide ".0"; print guide > (out ".topic"); close(out ".topic")
                for (l = 1; l < first; l++) print line[l] > out
                close(out)
                for (i = 1; i <= n; i++) {
                    end = NR + 1
                    for (j = i + 1; j <= n; j++) if (level[j] <= level[i]) { end = at[j]; break }
                    out = dir "/" guide "." i; print topic[i] > (out ".topic"); close(out ".topic")
                    for (l = at[i]; l < end; l++) print line[l] > out
                    close(out)
                }
            }' "$f"
        for w in "$tmp/$guide".*.topic; do
            read -r topic <"$w"
            n=$((n + 1))
            if ! "$bin/bin/backplane" help "$guide/$topic" >"$tmp/got" 2>"$tmp/err"; then
                echo "$f: 'backplane help $guide/$topic' failed: $(head -1 "$tmp/err")"
                bad=1
            elif ! cmp -s "$tmp/got" "${w%.topic}"; then
                echo "$f: 'backplane help $guide/$topic' does not print the section as the guide has it; rebuild, or see:"
                diff "${w%.topic}" "$tmp/got" | head -5
                bad=1
            fi
        done
    done
    [[ $bad -eq 0 ]] && echo "docs_check: backplane help prints all $n sections of docs/*.md as they are"
    return $bad
}

check_history() {
    # Where it cannot be: sources, scripts, build files and documents; the
    # test data (files from elsewhere) and build trees are left out.
    local where=(--include='*.c' --include='*.h' --include='*.md' --include='*.cmake' --include='*.sh'
                 --include='*.py' --include='*.mjs' --include='*.cu' --include='*.cuh' --include='*.comp'
                 --include='*.glsl' --include='*.in' --include='*.txt' --include='*.json'
                 --exclude-dir='build*' --exclude-dir=.git --exclude-dir=data)
    # Narratives of change. Each pattern is spelt so that it does not
    # match itself here.
    local told='\b[Ii]ssue #?[0-9]+|\b[Ii]ssues #[0-9]+|\b[Ss]essions? [0-9]+|\b[Pp]reviously\b|\b[Ss]uperseded\b'
    told+='|\b([Ww]e|[Ii]t|[Tt]his|[Tt]hat|[Ww]hich) used to\b|\b[Nn]ew:|\b[Ww]as [^ ,]+, now\b'
    told+='|\b(was|were) added\b|\b([Tt]his|[Pp]revious|[Nn]ext|[Ee]arlier) (round|session)\b'
    told+="|\\b[Tt]he issue[']s\\b|\\b[Bb]efore (that|the|this) chang[e]|\\bnew / ol[d]\\b"
    # Figures carry their commit and date in docs/performance.md, and only there.
    local stamped='\b[Cc]ommit [0-9a-f]{7,}|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b'
    local hits
    hits=$( (grep -rnIE "$told" "${where[@]}" .; grep -nIE "$told" .ci/run /dev/null
             grep -rnIE "$stamped" "${where[@]}" . | grep -v '^\./docs/performance\.md:'
             grep -nIE "$stamped" .ci/run /dev/null) | sort -t: -k1,1 -k2,2n -u)
    if [[ -n $hits ]]; then
        echo "docs_check: development history belongs in git log, not in the tree; reword these:"
        echo "$hits"
        return 1
    fi
    echo "docs_check: no history told in the tree"
}

case $mode in
    links) check_links ;;
    run) run_blocks "$@" ;;
    help) check_help "$@" ;;
    history) check_history ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
