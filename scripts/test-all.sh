#!/usr/bin/env bash
# test-all.sh — every test, the way CI runs them (.ci/run calls this):
#   1. build/       RelWithDebInfo build
#   2. build/       the host and CPU-plugin suites under valgrind
#                   (ctest -L valgrind; registered by tests/valgrind.cmake),
#                   and the few tests that only a plain tree registers
#                   (ctest -L uninstrumented: shader paths that a sanitizer
#                   would watch nothing of)
#   3. build-asan/  AddressSanitizer + UBSan build (-DBP_SANITIZE=ON): every
#                   suite. The same suites uninstrumented in build/ would add
#                   a third of the run and find nothing this stage misses;
#                   BP_PLAIN_TESTS=1 runs them too
#                   (ctest -LE 'valgrind|uninstrumented')
#   4. build-tsan/  ThreadSanitizer build (-DBP_TSAN=ON) of the suites that run
#                   threads: cpu, meta, loader (ctest -L tsan; tests/tsan.cmake)
#   5. build-fuzz/  clang + libFuzzer: the fuzz harnesses (tests/fuzz/) and a
#                   bounded smoke run of each over generated seeds (ctest -L fuzz)
#   6. build-release/  Release (-O3) build of what users build (the library,
#                   CLI and plugins; no tests), warnings as errors: the
#                   optimiser's inlining finds warnings (format truncation)
#                   that the -O2 trees never see
# Every stage runs even when an earlier one failed; the last line says which
# failed and the exit status is non-zero if any did. BP_JOBS overrides -j;
# BP_CMAKE_ARGS adds configure options to every build (e.g. -DBP_WERROR=OFF).
# BP_PLAIN_TESTS=1 adds the uninstrumented run of stage 1. The trees share
# their compiled shaders through build-spirv/ (BP_SPIRV_CACHE_DIR).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

jobs=${BP_JOBS:-$(nproc)}
read -r -a extra_args <<<"${BP_CMAKE_ARGS:-}"
extra_args+=("-DBP_SPIRV_CACHE_DIR=$PWD/build-spirv")
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
    if [[ ${BP_PLAIN_TESTS:-0} == 1 ]]; then
        stage "ctest (build/)" ctest --test-dir build --output-on-failure -j"$jobs" -LE 'valgrind|uninstrumented'
    fi
    if ctest --test-dir build -N -L valgrind | grep -q 'Total Tests: [1-9]'; then
        stage "ctest valgrind + uninstrumented (build/)" ctest --test-dir build --output-on-failure -j"$jobs" \
            -L 'valgrind|uninstrumented'
    else
        failed+=("ctest valgrind (build/): no valgrind tests registered; is valgrind installed?")
    fi
else
    skipped+=("ctest valgrind (build/)")
fi
if stage "build (build-asan/)" build_tree build-asan -DBP_SANITIZE=ON -DBP_VALGRIND=OFF; then
    stage "ctest ASan+UBSan (build-asan/)" ctest --test-dir build-asan --output-on-failure -j"$jobs"
else
    skipped+=("ctest ASan+UBSan (build-asan/)")
fi

# The stages below report their own wall times, so the cost of the
# sanitizer and Release trees stays visible beside stages 1-3.
timed() { # name command...
    local t0=$SECONDS name=$1
    shift
    stage "$name" "$@"
    local rc=$?
    echo "test-all: $name took $((SECONDS - t0)) s"
    return $rc
}

# Only the suites labelled tsan (and what they load) are built: no GPU plugins.
tsan_build() {
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra_args[@]}" -DBP_TSAN=ON \
        -DBP_SANITIZE=OFF -DBP_VALGRIND=OFF -DBP_CUDA=OFF -DBP_VULKAN=OFF &&
        cmake --build build-tsan -j"$jobs" --target tsan_suites
}
if timed "build (build-tsan/)" tsan_build; then
    timed "ctest ThreadSanitizer (build-tsan/)" \
        ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L tsan
else
    skipped+=("ctest ThreadSanitizer (build-tsan/)")
fi

# libFuzzer needs clang and its runtime (clang, libclang-rt-14-dev in
# scripts/packages.txt); without them the stage fails rather than passing
# silently, since a harness nobody builds rots.
fuzz_build() {
    cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo "${extra_args[@]}" \
        -DCMAKE_C_COMPILER=clang -DBP_SANITIZE=OFF -DBP_CUDA=OFF -DBP_VULKAN=OFF || return 1
    if ! grep -q '^BP_HAVE_LIBFUZZER:INTERNAL=1$' build-fuzz/CMakeCache.txt; then
        echo "test-all: clang cannot link -fsanitize=fuzzer; install clang and" \
            "libclang-rt-14-dev (scripts/packages.txt)." >&2
        return 1
    fi
    cmake --build build-fuzz -j"$jobs" --target fuzz_all
}
if timed "build (build-fuzz/)" fuzz_build; then
    timed "fuzz smoke (build-fuzz/)" ctest --test-dir build-fuzz --output-on-failure -L fuzz
else
    skipped+=("fuzz smoke (build-fuzz/)")
fi

# Built only: its code is the code the trees above test. The test suites are
# left out; they build with warnings as errors in every tree above.
release_build() {
    cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release "${extra_args[@]}" -DBP_SANITIZE=OFF \
        -DBP_VALGRIND=OFF -DBP_BUILD_TESTS=OFF &&
        cmake --build build-release -j"$jobs"
}
timed "build Release (build-release/)" release_build

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
