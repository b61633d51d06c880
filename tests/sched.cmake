# The scheduler: hand-built graphs over the test plugin `partial`
# (sched_plugins/partial.c: F32 ADD, MUL, MUL_MAT only), built like an
# out-of-tree plugin (ABI headers alone) into build/tests/sched_plugins and
# reached only through BACKPLANE_PLUGIN_PATH.
set(BP_SCHED_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/sched_plugins)
add_library(bp_sched_partial MODULE ${CMAKE_CURRENT_LIST_DIR}/sched_plugins/partial.c)
target_link_libraries(bp_sched_partial PRIVATE backplane_abi)
set_target_properties(bp_sched_partial PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME libbackplane-partial
  C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${BP_SCHED_PLUGIN_DIR})
# The same source as family "streams": two devices with async copies and
# events (counted), for the scheduler's queued-copy path.
add_library(bp_sched_streams MODULE ${CMAKE_CURRENT_LIST_DIR}/sched_plugins/partial.c)
target_compile_definitions(bp_sched_streams PRIVATE PARTIAL_ASYNC)
target_link_libraries(bp_sched_streams PRIVATE backplane_abi)
set_target_properties(bp_sched_streams PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME libbackplane-streams
  C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${BP_SCHED_PLUGIN_DIR})

bp_add_check_test(test_sched SOURCES test_sched.c
  ENV "BACKPLANE_PLUGIN_PATH=${BP_SCHED_PLUGIN_DIR}" "BACKPLANE_SCHED_STRICT=")
add_dependencies(test_sched bp_plugin_cpu bp_sched_partial bp_sched_streams)

# The runner on the scheduler: partial0 and meta:cpu,partial0 against the cpu,
# counters, strict mode.
bp_add_check_test(test_sched_run SOURCES test_sched_run.c LIBS backplane_run
  ENV "BACKPLANE_PLUGIN_PATH=${BP_SCHED_PLUGIN_DIR}" "BACKPLANE_SCHED_STRICT=")
add_dependencies(test_sched_run bp_plugin_cpu bp_sched_partial)
if(TARGET bp_plugin_meta)
  add_dependencies(test_sched_run bp_plugin_meta)
endif()

# --offload-layers 1 on vulkan0 (lavapipe in CI); 77 = skipped without Vulkan.
if(TARGET bp_plugin_vulkan)
  bp_add_check_test(test_sched_vulkan SOURCES test_sched_vulkan.c device_gate.c LIBS backplane_run
    ENV "BACKPLANE_SCHED_STRICT=")
  add_dependencies(test_sched_vulkan bp_plugin_cpu bp_plugin_vulkan)
  set_tests_properties(test_sched_vulkan PROPERTIES SKIP_RETURN_CODE 77)
endif()

# `run --device partial0` (--json, --strict) and `check --sched` end to end.
if(TARGET backplane_cli)
  bp_add_check_test(test_sched_cli SOURCES test_sched_cli.c cli_util.c
    ENV "BACKPLANE_PLUGIN_PATH=${BP_SCHED_PLUGIN_DIR}" "BACKPLANE_SCHED_STRICT=")
  add_dependencies(test_sched_cli backplane_cli bp_plugin_cpu bp_sched_partial)
endif()
