# CPU reference plugin suites: every op against a scalar computation in the
# test, threading, concurrency, and a direct ABI smoke test of the .so.
bp_add_check_test(test_cpu_ops SOURCES test_cpu_ops.c cpu_test_util.c)
add_dependencies(test_cpu_ops bp_plugin_cpu)
bp_add_check_test(test_cpu_threads SOURCES test_cpu_threads.c cpu_test_util.c)
add_dependencies(test_cpu_threads bp_plugin_cpu)

# The ABI smoke test links neither libbackplane nor the plugin: it dlopens
# the built .so and plays the host itself.
add_executable(test_cpu_abi test_cpu_abi.c)
target_compile_definitions(test_cpu_abi PRIVATE _GNU_SOURCE
  BP_TEST_PLUGIN_DIR="${BP_PLUGIN_OUTPUT_DIR}")
target_link_libraries(test_cpu_abi PRIVATE backplane_abi PkgConfig::CHECK Threads::Threads
  ${CMAKE_DL_LIBS} m)
add_dependencies(test_cpu_abi bp_plugin_cpu)
add_test(NAME test_cpu_abi COMMAND test_cpu_abi)
set_tests_properties(test_cpu_abi PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 600)
