# libFuzzer harnesses (the GGUF reader, the plugin loader): built only when the C compiler is a clang that links
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
  file(GLOB arch_sources CONFIGURE_DEPENDS ${run_dir}/arch*.c)
  add_executable(fuzz_gguf ${CMAKE_CURRENT_LIST_DIR}/fuzz_gguf.c
    ${run_dir}/gguf.c ${run_dir}/gguf_write.c ${run_dir}/model.c ${run_dir}/llama_schema.c
    ${arch_sources} ${run_dir}/run_error.c)
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
  # One small file per architecture (and the refusals) from tests/data/arch,
  # so mutations reach every architecture's keys and tensor table.
  set(arch_data ${CMAKE_SOURCE_DIR}/tests/data/arch)
  set(arch_seeds qwen2 qwen3 gemma2 gemma3-softcap phi3-long mistral3 llama-bias-freqs llama-longrope
    refuse-key-type refuse-scaling-type refuse-unknown-tensor refuse-kv-length)
  list(TRANSFORM arch_seeds PREPEND ${arch_data}/)
  list(TRANSFORM arch_seeds APPEND .gguf)
  add_test(NAME fuzz_gguf_seeds_arch COMMAND cp ${arch_seeds} ${corpus})
  set_tests_properties(fuzz_gguf_seeds_arch PROPERTIES FIXTURES_REQUIRED fuzz_gguf_dir
    FIXTURES_SETUP fuzz_gguf_corpus LABELS fuzz)
  set_tests_properties(fuzz_gguf_seeds PROPERTIES FIXTURES_SETUP fuzz_gguf_dir LABELS fuzz)
  set_tests_properties(fuzz_gguf_seeds_write PROPERTIES FIXTURES_REQUIRED fuzz_gguf_dir
    FIXTURES_SETUP fuzz_gguf_corpus LABELS fuzz)
  # Inputs it finds go to a scratch directory, so the seeds stay the seeds.
  add_test(NAME fuzz_gguf_smoke COMMAND fuzz_gguf -runs=${BP_FUZZ_RUNS} -seed=1
    -dict=${CMAKE_CURRENT_LIST_DIR}/gguf.dict -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/
    ${found} ${corpus})
  set_tests_properties(fuzz_gguf_smoke PROPERTIES FIXTURES_REQUIRED fuzz_gguf_corpus
    LABELS fuzz TIMEOUT 300)

  # The loader, compiled in and instrumented, against a plugin whose answers
  # each input scripts (fuzzplug.c). No seeds: its inputs are a few bytes.
  file(GLOB host_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/host/src/*.c)
  add_library(fuzzplug MODULE ${CMAKE_CURRENT_LIST_DIR}/fuzzplug.c)
  target_link_libraries(fuzzplug PRIVATE backplane_abi)
  target_compile_options(fuzzplug PRIVATE -fsanitize=address,undefined)
  set_target_properties(fuzzplug PROPERTIES PREFIX "" OUTPUT_NAME libbackplane-fuzzplug
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fuzz_plugins)
  add_executable(fuzz_loader ${CMAKE_CURRENT_LIST_DIR}/fuzz_loader.c ${host_sources})
  target_include_directories(fuzz_loader PRIVATE ${CMAKE_SOURCE_DIR}/host/include
    ${CMAKE_SOURCE_DIR}/host/src)
  # No installed plugin directory: only the scripted plugin may be found.
  target_compile_definitions(fuzz_loader PRIVATE _GNU_SOURCE
    BP_VERSION_STRING="${PROJECT_VERSION}" BP_PLUGIN_SUBDIR="${BP_PLUGIN_SUBDIR}"
    BP_INSTALL_PLUGIN_DIR="/nonexistent/backplane-fuzz"
    BP_FUZZPLUG_PATH="$<TARGET_FILE:fuzzplug>")
  target_compile_options(fuzz_loader PRIVATE -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=undefined)
  target_link_options(fuzz_loader PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_loader PRIVATE backplane_abi Threads::Threads ${CMAKE_DL_LIBS} m)
  add_dependencies(fuzz_loader fuzzplug)
  add_test(NAME fuzz_loader_smoke COMMAND fuzz_loader -runs=${BP_FUZZ_RUNS} -seed=1
    -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/loader-)
  set_tests_properties(fuzz_loader_smoke PROPERTIES LABELS fuzz TIMEOUT 300)

  # The request bodies and stop strings of `backplane serve`, when it is built.
  set(fuzz_targets fuzz_gguf fuzz_gguf_seeds fuzz_loader)
  if(TARGET backplane_serve)
    set(serve_dir ${CMAKE_SOURCE_DIR}/host/serve)
    add_executable(fuzz_serve_request ${CMAKE_CURRENT_LIST_DIR}/fuzz_serve_request.c
      ${serve_dir}/request.c ${serve_dir}/text.c ${serve_dir}/error.c)
    target_include_directories(fuzz_serve_request PRIVATE ${serve_dir} ${run_dir})
    target_compile_definitions(fuzz_serve_request PRIVATE _GNU_SOURCE)
    target_compile_options(fuzz_serve_request PRIVATE -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined)
    target_link_options(fuzz_serve_request PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_serve_request PRIVATE backplane_abi PkgConfig::JANSSON)
    target_include_directories(fuzz_serve_request PRIVATE ${CMAKE_SOURCE_DIR}/host/include)
    add_test(NAME fuzz_serve_request_smoke COMMAND fuzz_serve_request -runs=${BP_FUZZ_RUNS} -seed=1
      -dict=${CMAKE_CURRENT_LIST_DIR}/serve.dict -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/serve-)
    set_tests_properties(fuzz_serve_request_smoke PROPERTIES LABELS fuzz TIMEOUT 300)
    list(APPEND fuzz_targets fuzz_serve_request)
  endif()

  # What the fuzz stage builds (not the whole tree).
  add_custom_target(fuzz_all DEPENDS ${fuzz_targets})
endif()
