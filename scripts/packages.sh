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

# Test data that is not ours to commit: the vocabularies of the npm packages
# llama-tokenizer-js (LLaMA 1/2) and llama3-tokenizer-js (LLaMA 3), pinned by
# version and sha256, fetched from the npm registry into $1 (kept there, so
# a second call is offline). Writes $1/llama-tokenizer.js and
# $1/llama3-tokenizer.js, the JavaScript files holding the base64 data.
# Returns non-zero, with a sentence, when a download or a checksum fails.
bp_npm_fetch() { # dir package version sha256 -> dir/<name>-<version>.tgz
    local dir=$1 pkg=$2 ver=$3 sum=$4
    local base=${pkg##*/}
    local tgz="$dir/$base-$ver.tgz" url="https://registry.npmjs.org/$pkg/-/$base-$ver.tgz"
    if [[ -f $tgz ]] && echo "$sum  $tgz" | sha256sum -c --status; then
        return 0
    fi
    if command -v curl >/dev/null; then
        curl -fsSL --retry 3 -o "$tgz.part" "$url"
    elif command -v wget >/dev/null; then
        wget -q -O "$tgz.part" "$url"
    else
        echo "packages: neither curl nor wget is installed to fetch $url" >&2
        return 1
    fi || { echo "packages: could not download $url (is the npm registry reachable?)" >&2; return 1; }
    if ! echo "$sum  $tgz.part" | sha256sum -c --status; then
        echo "packages: $url does not have the expected sha256 $sum" >&2
        rm -f "$tgz.part"
        return 1
    fi
    mv "$tgz.part" "$tgz"
}

bp_fetch_tokenizer_vocabs() {
    local dir=$1
    mkdir -p "$dir" || return 1
    bp_npm_fetch "$dir" llama-tokenizer-js 1.2.2 \
        ee83014ac8b379b16cf8d81e99ffcdb23dfade8c0d2e751bd06e7dc0b8476e72 || return 1
    bp_npm_fetch "$dir" llama3-tokenizer-js 1.2.0 \
        51084690c7239708a3eb6adead1173bfd61b1f4d31cb0b8487e12ba466346ff0 || return 1
    tar -xzf "$dir/llama-tokenizer-js-1.2.2.tgz" -O package/llama-tokenizer.js >"$dir/llama-tokenizer.js" &&
        tar -xzf "$dir/llama3-tokenizer-js-1.2.0.tgz" -O package/src/data-converted.js >"$dir/llama3-tokenizer.js" ||
        { echo "packages: the tokenizer packages do not hold the expected files" >&2; return 1; }
}

# The test client of `backplane serve`: the npm package openai (OpenAI's own
# Node client, no dependencies; 6.x runs on Node 20), pinned by version and
# sha256, unpacked as $1/node_modules/openai. Test set-up only (the CTest
# fixture serve_client); the product never fetches anything. Returns
# non-zero, with a sentence, when the download or the checksum fails.
bp_fetch_openai_client() {
    local dir=$1
    mkdir -p "$dir/node_modules" || return 1
    [[ -f $dir/node_modules/openai/index.mjs ]] && return 0
    bp_npm_fetch "$dir" openai 6.49.0 \
        e48de0f4c5dbecebdeb864233f5ea49be07cd3e0ff3bd3e1e6745dc5e168cced || return 1
    rm -rf "$dir/node_modules/openai.part" && mkdir -p "$dir/node_modules/openai.part" &&
        tar -xzf "$dir/openai-6.49.0.tgz" -C "$dir/node_modules/openai.part" --strip-components=1 &&
        mv "$dir/node_modules/openai.part" "$dir/node_modules/openai" ||
        { echo "packages: could not unpack $dir/openai-6.49.0.tgz" >&2; return 1; }
}
