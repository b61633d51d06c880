#!/usr/bin/env bash
# Every environment variable the host or a plugin reads must be known and
# documented:
#   - every BACKPLANE_* name in the code is in the host's list of known
#     variables (host/src/env.c), or users who set it get a "not a backplane
#     variable" warning;
#   - every variable read (the BACKPLANE_* names, the names passed to
#     getenv / get_env, and the launcher marks the mpi plugin looks for) and
#     every name of that list is in docs/operating.md, where operators look.
# Fails naming the variables missing.
set -euo pipefail
src=${1:?usage: env_vars_known.sh SOURCE_DIR}
known=$(sed -n '/bp__known_env_vars\[\] = {/,/NULL/p' "$src/host/src/env.c" | grep -oE '"BACKPLANE_[A-Z0-9_]+"' | tr -d '"' | sort -u)
used=$(grep -rhoE '"BACKPLANE_[A-Z0-9_]*[A-Z0-9]"' "$src/host" "$src/plugins" | tr -d '"' | sort -u)
missing=$(comm -23 <(printf '%s\n' "$used") <(printf '%s\n' "$known"))
if [[ -n $missing ]]; then
    echo "env_vars_known: read in the code but missing from bp__known_env_vars in host/src/env.c:" $missing >&2
    exit 1
fi
read_by_name=$(grep -rhoE '(getenv|get_env)\([^)]*"[A-Z][A-Z0-9_]*"' "$src/host" "$src/plugins" --include='*.c' |
               grep -oE '"[A-Z][A-Z0-9_]*"' | tr -d '"')
launcher=$(grep -hE 'static const char \*const marks\[\] = \{' "$src/plugins/mpi/group.c" | grep -oE '"[A-Z][A-Z0-9_]*"' | tr -d '"')
all=$(printf '%s\n' $known $used $read_by_name $launcher | sort -u)
undocumented=$(for v in $all; do grep -qw -- "$v" "$src/docs/operating.md" || echo "$v"; done)
if [[ -n $undocumented ]]; then
    echo "env_vars_known: read by the code but not in docs/operating.md:" $undocumented >&2
    exit 1
fi
echo "env_vars_known: $(printf '%s\n' $all | wc -l) variables read, all known and in docs/operating.md"
