#!/usr/bin/env bash
# sdk_test.sh CMAKE BINARY_DIR SOURCE_DIR — the SDK as a third party sees it:
# install the build tree into a temporary prefix, build examples/plugin out of
# tree against that prefix alone (CMake package and pkg-config), build a tiny
# application both ways, then drive the INSTALLED CLI: it must find the
# installed CPU plugin with no environment, list the example device when
# BACKPLANE_PLUGIN_PATH names it, and pass `backplane check` on it.
set -euo pipefail

cmake_bin=$1
bin_dir=$2
src_dir=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bp-sdk-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fails=0

say() { printf 'sdk_test: %s\n' "$*"; }
fail() { printf 'sdk_test: FAIL: %s\n' "$*" >&2; fails=$((fails + 1)); }
# Run a command quietly, showing its output only when it fails.
quiet() {
    local log=$tmp/last.log
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        return 1
    fi
}

# The test must not depend on the caller's knobs, nor on the build tree.
unset BACKPLANE_PLUGIN_PATH BACKPLANE_BACKENDS BACKPLANE_DEVICES
export BACKPLANE_LOG=${BACKPLANE_LOG:-warn}
# The example plugin and the small applications are built without sanitizers;
# an ASan-built CLI may still load them (ASan only needs to come first).
unset CFLAGS LDFLAGS

say "installing $bin_dir into $prefix"
quiet "$cmake_bin" --install "$bin_dir" --prefix "$prefix"

for f in bin/backplane include/backplane/backplane.h include/backplane/bp_abi.h \
         include/backplane/bp_plugin.h lib/libbackplane.so \
         lib/cmake/backplane/backplaneConfig.cmake lib/cmake/backplane/backplaneConfigVersion.cmake \
         lib/pkgconfig/backplane.pc lib/pkgconfig/backplane-plugin.pc \
         share/doc/backplane/CHANGELOG.md; do
    [[ -e $prefix/$f ]] || fail "the install tree lacks $f"
done
compgen -G "$prefix/lib/backplane/libbackplane-cpu*.so" >/dev/null ||
    fail "the install tree has no CPU plugin in lib/backplane/"
[[ $fails -eq 0 ]] || exit 1

# The example stays small: with the host helpers (bp_host_helpers.h) a
# host-memory device computing ADD, MUL and MUL_MAT fits in 120 lines of code
# (non-blank lines once the compiler has stripped the comments).
loc=$(cc -fpreprocessed -dD -E -P "$src_dir/examples/plugin/example_plugin.c" | grep -c '[^[:space:]]')
[[ $loc -le 120 ]] ||
    fail "examples/plugin/example_plugin.c has $loc lines of code; keep it within 120 (use the host helpers)"

# ---- the plugin, route 1: find_package(backplane CONFIG) ----
cp -r "$src_dir/examples/plugin" "$tmp/plugin-cmake"
say "building examples/plugin with CMake against the install tree"
quiet "$cmake_bin" -S "$tmp/plugin-cmake" -B "$tmp/plugin-cmake/build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-Werror"
quiet "$cmake_bin" --build "$tmp/plugin-cmake/build"
so_cmake=$tmp/plugin-cmake/build/libbackplane-example.so
[[ -f $so_cmake ]] || { fail "the CMake build did not produce libbackplane-example.so"; exit 1; }

# ---- the plugin, route 2: make + pkg-config ----
cp -r "$src_dir/examples/plugin" "$tmp/plugin-make"
say "building examples/plugin with make + pkg-config against the install tree"
quiet env PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -C "$tmp/plugin-make" CFLAGS="-O2 -Wall -Wextra -Werror"
so_make=$tmp/plugin-make/libbackplane-example.so
[[ -f $so_make ]] || { fail "the make build did not produce libbackplane-example.so"; exit 1; }

# Hidden visibility: a plugin exports its entry points and nothing else.
if command -v nm >/dev/null; then
    for so in "$so_cmake" "$so_make"; do
        exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort | tr '\n' ' ')
        [[ $exported == "bp_plugin_abi_version bp_plugin_init " ]] ||
            fail "$so exports '$exported', expected only bp_plugin_abi_version and bp_plugin_init"
    done
fi

# ---- an application, both routes ----
# A sanitizer build installs a libbackplane that needs the ASan runtime, which
# must then come first: build the application with the same flags.
app_flags=""
if readelf -d "$prefix/lib/libbackplane.so" 2>/dev/null | grep -q 'libasan'; then
    app_flags="-fsanitize=address,undefined"
fi
mkdir -p "$tmp/app"
# The application is the API guide's example (the first ```c block of
# docs/api.md), so the guide cannot rot: it computes silu(W x) for a known W
# and x on the default device.
awk '/^```c$/ { on = 1; next } on && /^```/ { exit } on { print }' "$src_dir/docs/api.md" >"$tmp/app/app.c"
[[ -s $tmp/app/app.c ]] || fail "docs/api.md has no \`\`\`c application example"
cat >"$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(bp_sdk_app LANGUAGES C)
find_package(backplane 0.1 CONFIG REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE backplane::backplane)
if(NOT IS_DIRECTORY "${BACKPLANE_PLUGIN_DIR}")
  message(FATAL_ERROR "BACKPLANE_PLUGIN_DIR '${BACKPLANE_PLUGIN_DIR}' is not a directory")
endif()
file(WRITE "${CMAKE_BINARY_DIR}/abi.txt" "${BACKPLANE_ABI_MAJOR}.${BACKPLANE_ABI_MINOR}")
CM
# Expected: W = [[1,2,3],[-1,0,1]] (rows n), x = [0.5,0.25,-0.5]:
# W x = [-0.5, -1]; silu(v) = v / (1 + exp(-v)).
check_app_output() { # label output
    awk -v out="$2" 'BEGIN {
        n = split(out, f, " ")
        if (n != 3 || f[1] != "cpu:") exit 1
        e1 = -0.5 / (1 + exp(0.5)); e2 = -1 / (1 + exp(1))
        d1 = f[2] - e1; d2 = f[3] - e2
        exit !(d1 * d1 < 1e-10 && d2 * d2 < 1e-10)
    }' || fail "the $1 API example printed '$2', expected $(awk 'BEGIN {
        printf "cpu: %g %g", -0.5 / (1 + exp(0.5)), -1 / (1 + exp(1)) }')"
}
say "building the API guide's application example with CMake (backplane::backplane) and pkg-config (backplane.pc)"
quiet "$cmake_bin" -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_C_FLAGS="-Werror -Wall -Wextra $app_flags"
quiet "$cmake_bin" --build "$tmp/app/build"
# The package's ABI variables match the headers it installs (and pkg-config).
hdr_abi=$(awk '/^#define BP_ABI_MAJOR /{ma=$3} /^#define BP_ABI_MINOR /{mi=$3} END{print ma "." mi}' \
    "$prefix/include/backplane/bp_plugin.h")
[[ $(cat "$tmp/app/build/abi.txt") == "$hdr_abi" ]] ||
    fail "find_package(backplane) sets BACKPLANE_ABI_MAJOR.MINOR to '$(cat "$tmp/app/build/abi.txt")', the headers say $hdr_abi"
pc_abi=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=abi_major backplane-plugin).$(
    PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=abi_minor backplane-plugin)
[[ $pc_abi == "$hdr_abi" ]] || fail "backplane-plugin.pc says ABI $pc_abi, the headers say $hdr_abi"
out=$(BACKPLANE_DEVICES=cpu "$tmp/app/build/app" 2>&1) || fail "the CMake-built API example failed: $out"
check_app_output CMake-built "$out"
pc_cflags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags backplane)
pc_libs=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --libs backplane)
# shellcheck disable=SC2086
quiet cc -std=c11 -Wall -Wextra -Werror $app_flags $pc_cflags -o "$tmp/app/app-pc" "$tmp/app/app.c" \
    $pc_libs -Wl,-rpath,"$prefix/lib"
out=$(BACKPLANE_DEVICES=cpu "$tmp/app/app-pc" 2>&1) || fail "the pkg-config-built API example failed: $out"
check_app_output pkg-config-built "$out"
plugindir=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=plugindir backplane-plugin)
[[ $(cd "$plugindir" 2>/dev/null && pwd -P) == $(cd "$prefix/lib/backplane" && pwd -P) ]] ||
    fail "backplane-plugin.pc plugindir is '$plugindir', expected $prefix/lib/backplane"

# ---- the installed CLI ----
cli=$prefix/bin/backplane
version=$("$cli" version 2>&1 || true)
want_version=$(awk '/^project\(backplane VERSION/ {print $3}' "$src_dir/CMakeLists.txt")
[[ $version == *"$want_version"* ]] || fail "'backplane version' printed '$version', expected it to contain $want_version"

say "installed CLI, no environment: finds the installed CPU plugin"
if out=$(cd "$tmp" && "$cli" devices 2>&1); then
    grep -Eq '(^|[^[:alnum:]_])cpu([^[:alnum:]_]|$)' <<<"$out" ||
        fail "'backplane devices' from the install tree does not list the cpu device:"$'\n'"$out"
    ! grep -q example0 <<<"$out" ||
        fail "'backplane devices' lists example0 although nothing pointed at it"
else
    fail "'backplane devices' exited non-zero:"$'\n'"$out"
fi

for so in "$so_cmake" "$so_make"; do
    say "BACKPLANE_PLUGIN_PATH=$so: devices lists example0"
    if out=$(BACKPLANE_PLUGIN_PATH=$so "$cli" devices 2>&1); then
        grep -q example0 <<<"$out" ||
            fail "'backplane devices' with BACKPLANE_PLUGIN_PATH=$so does not list example0:"$'\n'"$out"
        grep -Eq '(^|[^[:alnum:]_])cpu([^[:alnum:]_]|$)' <<<"$out" ||
            fail "'backplane devices' with BACKPLANE_PLUGIN_PATH set lost the installed cpu device:"$'\n'"$out"
    else
        fail "'backplane devices' with BACKPLANE_PLUGIN_PATH=$so exited non-zero:"$'\n'"$out"
    fi
done

# The directory form of BACKPLANE_PLUGIN_PATH works as well as the file form.
say "check --device example0 (plugin found through a directory in BACKPLANE_PLUGIN_PATH)"
plugdir=$tmp/plugins
mkdir -p "$plugdir"
cp "$so_cmake" "$plugdir/"
set +e
out=$(BACKPLANE_PLUGIN_PATH=$plugdir "$cli" check --device example0 2>&1)
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
    fail "'backplane check --device example0' exited $rc:"$'\n'"$out"
else
    # One line per case ("PASS  example0   ADD  f32 ..."), then a summary.
    # Every op the example claims has passing cases, nothing fails, and the
    # ops it declines are listed as unsupported rather than failed.
    for op in ADD MUL MUL_MAT; do
        grep -Eq "^PASS +example0 +$op " <<<"$out" ||
            fail "'backplane check --device example0' shows no passing $op case:"$'\n'"$out"
    done
    ! grep -Eq '^FAIL' <<<"$out" ||
        fail "'backplane check --device example0' has failing cases:"$'\n'"$(grep -E '^FAIL' <<<"$out")"
    grep -Eq '^example0: [1-9][0-9]* passed, 0 failed, [1-9][0-9]* unsupported' <<<"$out" ||
        fail "'backplane check --device example0' summary is not 'N passed, 0 failed, M unsupported':"$'\n'"$out"
    grep -Eq '^UNSUP +example0 +SILU ' <<<"$out" ||
        fail "'backplane check --device example0' does not list SILU as unsupported"
    # Only F32: the F16 cases of its own ops are declined, not failed.
    grep -Eq '^UNSUP +example0 +MUL_MAT +f16 ' <<<"$out" ||
        fail "'backplane check --device example0' does not list f16 MUL_MAT as unsupported"
fi

if [[ $fails -ne 0 ]]; then
    say "$fails check(s) failed"
    exit 1
fi
say "all SDK checks passed"
