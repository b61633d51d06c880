#!/usr/bin/env bash
# test-all.sh — every test, the way CI runs them (.ci/run calls this):
#   1. build/       RelWithDebInfo build, ctest
#   2. build/       the host and CPU-plugin suites again under valgrind
#                   (ctest -L valgrind; registered by tests/valgrind.cmake)
#   3. build-asan/  AddressSanitizer + UBSan build (-DBP_SANITIZE=ON), ctest
# Every stage runs even when an earlier one failed; the last line says which
# failed and the exit status is non-zero if any did. BP_JOBS overrides -j;
# BP_CMAKE_ARGS adds configure options to both builds (e.g. -DBP_WERROR=OFF).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

jobs=${BP_JOBS:-$(nproc)}
read -r -a extra_args <<<"${BP_CMAKE_ARGS:-}"
start=$SECONDS
passed=()
failed=()
skipped=()

stage() {
    local name=$1
    shift
    echo
    echo "==== test-all: $name"
    if "$@"; then
        passed+=("$name")
    else
        failed+=("$name")
        return 1
    fi
}

build_tree() { # dir cmake-args...
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra_args[@]}" "$@" &&
        cmake --build "$dir" -j"$jobs"
}

if stage "build (build/)" build_tree build -DBP_SANITIZE=OFF -DBP_VALGRIND=ON; then
    stage "ctest (build/)" ctest --test-dir build --output-on-failure -j"$jobs" -LE valgrind
    if ctest --test-dir build -N -L valgrind | grep -q 'Total Tests: [1-9]'; then
        stage "ctest valgrind (build/)" ctest --test-dir build --output-on-failure -j"$jobs" -L valgrind
    else
        failed+=("ctest valgrind (build/): no valgrind tests registered; is valgrind installed?")
    fi
else
    skipped+=("ctest (build/)" "ctest valgrind (build/)")
fi
if stage "build (build-asan/)" build_tree build-asan -DBP_SANITIZE=ON -DBP_VALGRIND=OFF; then
    stage "ctest ASan+UBSan (build-asan/)" ctest --test-dir build-asan --output-on-failure -j"$jobs"
else
    skipped+=("ctest ASan+UBSan (build-asan/)")
fi

elapsed=$((SECONDS - start))
wall=$(printf '%dm%02ds' $((elapsed / 60)) $((elapsed % 60)))
echo
for s in "${passed[@]}"; do echo "test-all: passed: $s"; done
for s in "${failed[@]}"; do echo "test-all: FAILED: $s"; done
for s in "${skipped[@]}"; do echo "test-all: skipped (its build failed): $s"; done
if [[ ${#failed[@]} -eq 0 ]]; then
    echo "test-all: ALL PASSED (${#passed[@]} stages) in $wall"
else
    echo "test-all: FAILED (${#failed[@]} failed, ${#passed[@]} passed, ${#skipped[@]} skipped) in $wall"
    exit 1
fi
