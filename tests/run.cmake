# `backplane run`: the decoder against a forward pass written in the test,
# the GGUF reader/writer and its refusals, and the CLI end to end.
bp_add_check_test(test_run_decoder SOURCES test_run_decoder.c device_gate.c LIBS backplane_run)
add_dependencies(test_run_decoder bp_plugin_cpu)
target_include_directories(test_run_decoder PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
bp_add_device_cases(test_run_decoder vulkan0 bp_plugin_vulkan)
bp_add_check_test(test_run_gguf SOURCES test_run_gguf.c LIBS backplane_run)
# builtin:1b generated three times: 1.1 G values each, minutes under
# valgrind; the generator itself runs there in test_run_decoder (builtin:test).
bp_add_check_test(test_run_builtin SOURCES test_run_builtin.c LIBS backplane_run)
set_tests_properties(test_run_builtin PROPERTIES LABELS no_memcheck)
bp_add_check_test(test_run_cli SOURCES test_run_cli.c cli_util.c)
add_dependencies(test_run_cli backplane_cli bp_plugin_cpu)
# The meta comparisons (meta:cpu*2, meta:cpu*3) need the meta plugin built.
if(TARGET bp_plugin_meta)
  add_dependencies(test_run_decoder bp_plugin_meta)
endif()

# The GGUF parser's libFuzzer harness, when clang offers -fsanitize=fuzzer
# (see tests/fuzz/README.md); scripts/test-all.sh builds and runs it in build-fuzz/.
include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake OPTIONAL)

# The memory plan against the sessions' real buffers (cpu; vulkan0 alone in
# its own test, GPU drivers being no valgrind material) and the refusal of a
# run that does not fit (a fault plugin with 1000 bytes free).
bp_add_check_test(test_run_plan SOURCES test_run_plan.c cli_util.c LIBS backplane_run)
add_dependencies(test_run_plan backplane_cli bp_fault_plugins bp_sched_partial)
add_test(NAME test_run_plan_vulkan COMMAND test_run_plan vulkan)
set_tests_properties(test_run_plan_vulkan PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${BP_TEST_ENV}")
# The same with --offload-layers 1 on vulkan0 (lavapipe), and on the
# scheduler's test device partial0 with and without it (a cpu fallback on
# any machine: the scheduler's buffers and copies are planned too).
add_test(NAME test_run_plan_vulkan_offload COMMAND test_run_plan vulkan-offload)
set_tests_properties(test_run_plan_vulkan_offload PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${BP_TEST_ENV}")
foreach(mode partial partial-offload)
  add_test(NAME test_run_plan_${mode} COMMAND test_run_plan ${mode})
  set_tests_properties(test_run_plan_${mode} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_PLUGIN_PATH=${CMAKE_BINARY_DIR}/tests/sched_plugins;BACKPLANE_SCHED_STRICT=")
endforeach()
add_test(NAME test_run_plan_tiny COMMAND test_run_plan tiny)
set_tests_properties(test_run_plan_tiny PROPERTIES TIMEOUT 900 ENVIRONMENT "${BP_TEST_ENV}")
# Meta devices per sub-device: meta:cpu*2 runs in test_run_plan itself (so
# valgrind and the sanitizers see the meta plugin measure); builtin:tiny on
# it, and meta:cpu,vulkan0 (lavapipe), in tests of their own.
add_test(NAME test_run_plan_meta_tiny COMMAND test_run_plan meta-tiny)
set_tests_properties(test_run_plan_meta_tiny PROPERTIES TIMEOUT 900 ENVIRONMENT "${BP_TEST_ENV}")
add_test(NAME test_run_plan_meta_vulkan COMMAND test_run_plan meta-vulkan)
set_tests_properties(test_run_plan_meta_vulkan PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${BP_TEST_ENV}")
# builtin:tiny on vulkan0 (lavapipe) and on meta:cpu,vulkan0, to the prompt
# and one decode step, for F16, Q4_0 and the q4_K_M mix.
foreach(mode vulkan-tiny meta-vulkan-tiny)
  string(REPLACE "-" "_" name ${mode})
  add_test(NAME test_run_plan_${name} COMMAND test_run_plan ${mode})
  set_tests_properties(test_run_plan_${name} PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "${BP_TEST_ENV}")
endforeach()
