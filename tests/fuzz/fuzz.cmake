# libFuzzer harnesses: built only when the C compiler is a clang that links
# -fsanitize=fuzzer (apt: clang libclang-rt-14-dev), i.e. in the build-fuzz/
# tree of scripts/test-all.sh. Each links the sources it fuzzes directly,
# instrumented, and registers a bounded smoke run (label "fuzz") over the
# seeds that fuzz_gguf_seeds writes, so bit rot fails CI.
include(CheckCSourceCompiles)
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
  check_c_source_compiles("
    #include <stdint.h>
    #include <stddef.h>
    int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }"
    BP_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
endif()
if(BP_HAVE_LIBFUZZER)
  set(BP_FUZZ_RUNS 100000 CACHE STRING "Inputs each fuzz smoke test runs")
  set(run_dir ${CMAKE_SOURCE_DIR}/host/run)
  add_executable(fuzz_gguf ${CMAKE_CURRENT_LIST_DIR}/fuzz_gguf.c
    ${run_dir}/gguf.c ${run_dir}/gguf_write.c ${run_dir}/model.c ${run_dir}/run_error.c)
  target_include_directories(fuzz_gguf PRIVATE ${run_dir})
  target_compile_definitions(fuzz_gguf PRIVATE _GNU_SOURCE)
  target_compile_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=undefined)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_gguf PRIVATE backplane m)

  # The seed corpus, written fresh by the current writer (see gguf_seeds.c).
  add_executable(fuzz_gguf_seeds ${CMAKE_CURRENT_LIST_DIR}/gguf_seeds.c)
  target_compile_definitions(fuzz_gguf_seeds PRIVATE _GNU_SOURCE)
  target_link_libraries(fuzz_gguf_seeds PRIVATE backplane_run)
  set(corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz_gguf_corpus)
  set(found ${CMAKE_CURRENT_BINARY_DIR}/fuzz_gguf_new)
  # Emptied each run, so a local tree's smoke run costs what CI's does.
  add_test(NAME fuzz_gguf_seeds COMMAND sh -c "rm -rf '${found}' && mkdir -p '${found}' '${corpus}'")
  add_test(NAME fuzz_gguf_seeds_write COMMAND fuzz_gguf_seeds ${corpus})
  set_tests_properties(fuzz_gguf_seeds PROPERTIES FIXTURES_SETUP fuzz_gguf_dir LABELS fuzz)
  set_tests_properties(fuzz_gguf_seeds_write PROPERTIES FIXTURES_REQUIRED fuzz_gguf_dir
    FIXTURES_SETUP fuzz_gguf_corpus LABELS fuzz)
  # Inputs it finds go to a scratch directory, so the seeds stay the seeds.
  add_test(NAME fuzz_gguf_smoke COMMAND fuzz_gguf -runs=${BP_FUZZ_RUNS} -seed=1
    -dict=${CMAKE_CURRENT_LIST_DIR}/gguf.dict -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/
    ${found} ${corpus})
  set_tests_properties(fuzz_gguf_smoke PROPERTIES FIXTURES_REQUIRED fuzz_gguf_corpus
    LABELS fuzz TIMEOUT 300)
  # What the fuzz stage builds (not the whole tree).
  add_custom_target(fuzz_all DEPENDS fuzz_gguf fuzz_gguf_seeds)
endif()
