# Loader, environment and device-list suites, with their fault-injection
# plugins (tests/fault_plugins/).
include(${CMAKE_CURRENT_LIST_DIR}/fault_plugins/fault_plugins.cmake)

# A crash must reach the probe as a signal, not as a sanitizer report.
set(BP_LOADER_TEST_ENV
  "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:handle_segv=0"
  "BACKPLANE_FAKEVAR_VARIANT=")

bp_add_check_test(test_loader SOURCES test_loader.c log_capture.c ENV ${BP_LOADER_TEST_ENV})
add_dependencies(test_loader bp_fault_plugins)
bp_add_check_test(test_devices SOURCES test_devices.c ENV ${BP_LOADER_TEST_ENV})
add_dependencies(test_devices bp_fault_plugins)

# The env helpers are host-internal (hidden in libbackplane): the suite
# compiles them in directly to test the pure functions.
bp_add_check_test(test_env SOURCES test_env.c
  ${CMAKE_SOURCE_DIR}/host/src/env.c ${CMAKE_SOURCE_DIR}/host/src/log.c
  ENV ${BP_LOADER_TEST_ENV})
target_include_directories(test_env PRIVATE ${CMAKE_SOURCE_DIR}/host/src)
add_dependencies(test_env bp_fault_plugins)
bp_add_check_test(test_env_warning SOURCES test_env_warning.c log_capture.c
  ENV ${BP_LOADER_TEST_ENV})
add_dependencies(test_env_warning bp_fault_plugins)

# ABI 1.1 table floors kept by the host, by meta over another vendor's
# device, and by the CLI (tests/fault_plugins/tables).
bp_add_check_test(test_iface_tables SOURCES test_iface_tables.c cli_util.c ENV ${BP_LOADER_TEST_ENV})
add_dependencies(test_iface_tables bp_fault_plugins backplane_cli bp_plugin_meta bp_plugin_cpu)
