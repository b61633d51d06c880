#!/usr/bin/env bash
# Every BACKPLANE_* variable that the host or a plugin reads must be in the
# host's list of known variables (host/src/env.c), or users who set it get a
# "not a backplane variable" warning. Fails naming the variables missing.
set -euo pipefail
src=${1:?usage: env_vars_known.sh SOURCE_DIR}
known=$(sed -n '/bp__known_env_vars\[\] = {/,/NULL/p' "$src/host/src/env.c" | grep -oE '"BACKPLANE_[A-Z0-9_]+"' | tr -d '"' | sort -u)
used=$(grep -rhoE '"BACKPLANE_[A-Z0-9_]*[A-Z0-9]"' "$src/host" "$src/plugins" | tr -d '"' | sort -u)
missing=$(comm -23 <(printf '%s\n' "$used") <(printf '%s\n' "$known"))
if [[ -n $missing ]]; then
    echo "env_vars_known: read in the code but missing from bp__known_env_vars in host/src/env.c:" $missing >&2
    exit 1
fi
echo "env_vars_known: $(printf '%s\n' "$used" | wc -l) variables read, all known"
