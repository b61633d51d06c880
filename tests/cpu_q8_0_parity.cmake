# Q8_0 MUL_MAT at a 1B model's shapes against ggml-cpu's x86 arithmetic:
# once per variant, the scalar registration under valgrind.
bp_add_check_test(test_cpu_q8_0_parity SOURCES test_cpu_q8_0_parity.c cpu_test_util.c
  LIBS ${CMAKE_DL_LIBS} ENV BACKPLANE_CPU_VARIANT=scalar)
target_include_directories(test_cpu_q8_0_parity PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
add_dependencies(test_cpu_q8_0_parity bp_plugin_cpu)
get_property(BP_CPU_PARITY_VARIANTS GLOBAL PROPERTY BP_CPU_VARIANTS)
foreach(v ${BP_CPU_PARITY_VARIANTS})
  if(NOT v STREQUAL "scalar")
    add_test(NAME test_cpu_q8_0_parity_${v} COMMAND test_cpu_q8_0_parity)
    set_tests_properties(test_cpu_q8_0_parity_${v} PROPERTIES
      ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_CPU_VARIANT=${v}" SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endforeach()
