# shellcheck shell=bash
# packages.sh — sourced by scripts/setup.sh and .ci/run so that both install
# exactly the list in scripts/packages.txt.

bp_packages_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/packages.txt"

# Packages of packages.txt that dpkg does not report as installed.
bp_missing_packages() {
    local p
    while read -r p; do
        [[ -z $p || $p == \#* ]] && continue
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done <"$bp_packages_file"
}

# Install what is missing with apt-get (as root, or through sudo).
bp_install_packages() {
    if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
        echo "packages: not a Debian system; make sure these are installed:" \
             "$(grep -v '^#' "$bp_packages_file" | tr '\n' ' ')" >&2
        return 0
    fi
    local missing
    missing=$(bp_missing_packages | tr '\n' ' ')
    if [[ -z ${missing// /} ]]; then
        echo "packages: all of $(basename "$bp_packages_file") already installed"
        return 0
    fi
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null; then
            sudo=(sudo)
        else
            echo "packages: missing $missing; run as root or install them first" >&2
            return 1
        fi
    fi
    echo "packages: installing $missing"
    "${sudo[@]}" apt-get update -q
    # shellcheck disable=SC2086
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
}
