# The GGUF reader's libFuzzer harness: built only when the C compiler is a
# clang that links -fsanitize=fuzzer (apt: clang libclang-rt-14-dev). It
# links the reader sources directly, instrumented, not libbackplane.
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
  add_executable(fuzz_gguf ${CMAKE_CURRENT_LIST_DIR}/fuzz_gguf.c
    ${CMAKE_SOURCE_DIR}/host/run/gguf.c ${CMAKE_SOURCE_DIR}/host/run/gguf_write.c
    ${CMAKE_SOURCE_DIR}/host/run/model.c)
  target_include_directories(fuzz_gguf PRIVATE ${CMAKE_SOURCE_DIR}/host/run)
  target_compile_definitions(fuzz_gguf PRIVATE _GNU_SOURCE)
  target_compile_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_gguf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_gguf PRIVATE backplane)
  # Smoke run in CI: a few seconds from an empty corpus.
  add_test(NAME fuzz_gguf_smoke COMMAND fuzz_gguf -runs=20000
    -dict=${CMAKE_CURRENT_LIST_DIR}/gguf.dict)
endif()
