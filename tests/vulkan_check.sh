#!/bin/sh
# vulkan_check.sh <backplane> [all|first|rest]: `backplane check --device
# vulkan0` on both 16-bit paths of the shaders: native 16-bit storage (the
# default where the device has storageBuffer16BitAccess) and packed words
# (BACKPLANE_VULKAN_F16_STORAGE=0), and the matrix products with the
# shared-memory reductions (BACKPLANE_VULKAN_SUBGROUPS=0). `first` runs the
# first of these passes that the device has, `rest` the others. Exits 77
# (CTest's skip) with a sentence when this machine has no Vulkan device.
bin="$1"
passes="${2:-all}"
if ! "$bin" devices 2>/dev/null | grep -q 'vulkan0'; then
    echo "no Vulkan device here (install mesa-vulkan-drivers for lavapipe); skipping the vulkan check."
    exit 77
fi
info=$("$bin" info vulkan0) || exit 1
n=0
# pass <title> <command...>: the n-th pass that this device has.
pass() {
    n=$((n + 1))
    case "$passes" in
    first) [ $n -eq 1 ] || exit 0 ;;
    rest) [ $n -gt 1 ] || return 0 ;;
    esac
    echo "== $1"
    shift
    "$@" || exit 1
}
if echo "$info" | grep -q 'storageBuffer16BitAccess *1'; then
    echo "$info" | grep -q 'storageBuffer16BitAccess *1 (used' || {
        echo "vulkan0 has storageBuffer16BitAccess but does not use it:"
        echo "$info" | grep storageBuffer16BitAccess
        exit 1
    }
    pass "native 16-bit storage" "$bin" check --device vulkan0
fi
packed=$(BACKPLANE_VULKAN_F16_STORAGE=0 "$bin" info vulkan0 | grep storageBuffer16BitAccess)
echo "$packed" | grep -q 'packed words' || {
    echo "BACKPLANE_VULKAN_F16_STORAGE=0 did not select the packed-word path: $packed"
    exit 1
}
pass "shared-memory reductions (BACKPLANE_VULKAN_SUBGROUPS=0): MUL_MAT, MUL_MAT_ID" \
    env BACKPLANE_VULKAN_SUBGROUPS=0 "$bin" check --device vulkan0 --op MUL_MAT --op MUL_MAT_ID
pass "packed 16-bit words (BACKPLANE_VULKAN_F16_STORAGE=0)" \
    env BACKPLANE_VULKAN_F16_STORAGE=0 "$bin" check --device vulkan0
