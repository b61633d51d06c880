# MUL_MATs sharing an activation run in one chunk step of the cpu backend:
# results bit-equal to each node computed alone, unsafe joins refused; and
# MUL_MATs that cannot join read an earlier conversion only while it is
# still the activation's (never a stale one). Once
# per variant (the scalar registration carries the target's name, so
# valgrind wraps it).
bp_add_check_test(test_cpu_join SOURCES test_cpu_join.c cpu_test_util.c
  LIBS ${CMAKE_DL_LIBS} ENV BACKPLANE_CPU_VARIANT=scalar)
target_include_directories(test_cpu_join PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
add_dependencies(test_cpu_join bp_plugin_cpu)
get_property(BP_CPU_JOIN_VARIANTS GLOBAL PROPERTY BP_CPU_VARIANTS)
foreach(v ${BP_CPU_JOIN_VARIANTS})
  if(NOT v STREQUAL "scalar")
    add_test(NAME test_cpu_join_${v} COMMAND test_cpu_join)
    set_tests_properties(test_cpu_join_${v} PROPERTIES
      ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_CPU_VARIANT=${v}" SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endforeach()
