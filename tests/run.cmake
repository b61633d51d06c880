# `backplane run`: the decoder against a forward pass written in the test,
# the GGUF reader/writer and its refusals, and the CLI end to end.
bp_add_check_test(test_run_decoder SOURCES test_run_decoder.c device_gate.c LIBS backplane_run)
add_dependencies(test_run_decoder bp_plugin_cpu)
bp_add_device_cases(test_run_decoder vulkan0 bp_plugin_vulkan)
bp_add_check_test(test_run_gguf SOURCES test_run_gguf.c LIBS backplane_run)
# builtin:1b generated three times: 1.1 G values each, minutes under
# valgrind; the generator itself runs there in test_run_decoder (builtin:test).
bp_add_check_test(test_run_builtin SOURCES test_run_builtin.c LIBS backplane_run)
set_tests_properties(test_run_builtin PROPERTIES LABELS no_memcheck)
bp_add_check_test(test_run_cli SOURCES test_run_cli.c)
add_dependencies(test_run_cli backplane_cli bp_plugin_cpu)
# The meta comparisons (meta:cpu*2, meta:cpu*3) need the meta plugin built.
if(TARGET bp_plugin_meta)
  add_dependencies(test_run_decoder bp_plugin_meta)
endif()

# The GGUF parser's libFuzzer harness, when clang offers -fsanitize=fuzzer
# (see tests/fuzz/README.md); scripts/test-all.sh builds and runs it in build-fuzz/.
include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake OPTIONAL)
