#!/bin/sh
# vulkan_pipeline_cache.sh <backplane>: the Vulkan plugin's pipeline cache
# file between processes. A first process writes it, a second loads it; a
# truncated file and one of garbage are ignored with one log line (the
# process still computes and passes) and replaced by a valid file; "0"
# writes no file. Exits 77 (CTest's skip) when there is no Vulkan device.
bin="$1"
if ! "$bin" devices 2>/dev/null | grep -q 'vulkan0'; then
    echo "no Vulkan device here (install mesa-vulkan-drivers for lavapipe); skipping."
    exit 77
fi
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
log="$dir/log"
# run VALUE: one process with BACKPLANE_VULKAN_PIPELINE_CACHE=VALUE (empty:
# unset, the default place under XDG_CACHE_HOME).
export XDG_CACHE_HOME="$dir/xdg"
run() {
    if [ -n "$1" ]; then export BACKPLANE_VULKAN_PIPELINE_CACHE="$1"; else unset BACKPLANE_VULKAN_PIPELINE_CACHE; fi
    BACKPLANE_LOG=debug "$bin" check --device vulkan0 --op ADD >"$log" 2>&1 || { cat "$log"; echo "check failed"; exit 1; }
}
expect() {
    grep -q "$1" "$log" || { cat "$log"; echo "expected a log line matching: $1"; exit 1; }
}
cdir="$XDG_CACHE_HOME/backplane/vulkan"
run ""
set -- "$cdir"/*.vkpc
[ $# -eq 1 ] && [ -s "$1" ] || { ls -la "$cdir"; echo "the first process wrote no cache file"; exit 1; }
f="$1"
case "$(basename "$f")" in
    [0-9a-f]*-[0-9a-f]*-[0-9a-f]*.vkpc) ;;
    *) echo "cache file name is not <uuid>-<driver>-<shaders>.vkpc: $f"; exit 1 ;;
esac
run "$cdir"
expect "vulkan0 loaded [0-9]* bytes of pipeline cache from $f"

head -c 30 "$f" >"$dir/cut" && mv "$dir/cut" "$f"
run "$cdir"
expect "ignores its pipeline cache file $f: its length disagrees"
run "$cdir"
expect "vulkan0 loaded [0-9]* bytes of pipeline cache"

printf 'not a pipeline cache at all, only words\n' >"$f"
run "$cdir"
expect "ignores its pipeline cache file $f: it does not start with"

rm -rf "$XDG_CACHE_HOME/backplane"
run 0
[ ! -e "$XDG_CACHE_HOME/backplane" ] || { echo "BACKPLANE_VULKAN_PIPELINE_CACHE=0 still wrote a file"; exit 1; }
echo "pipeline cache: written, loaded, truncated and garbage files rejected, off with 0"
