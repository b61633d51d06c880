# The `backplane` CLI: its commands run as a user would run them, and the
# check harness proven against deliberately broken plugins (check_plugins/).
set(BP_CHECKPLUG_DIR ${CMAKE_BINARY_DIR}/tests/check_plugins)
set(BP_CHECKPLUG_TARGETS)
foreach(p badadd oobwrite nansilu)
  add_library(bp_checkplug_${p} MODULE
    ${CMAKE_CURRENT_SOURCE_DIR}/check_plugins/${p}.c
    ${CMAKE_CURRENT_SOURCE_DIR}/check_plugins/checkplug.c)
  target_link_libraries(bp_checkplug_${p} PRIVATE backplane_abi m)
  # Outside the main plugin directory: only BACKPLANE_PLUGIN_PATH finds them.
  set_target_properties(bp_checkplug_${p} PROPERTIES PREFIX "" OUTPUT_NAME libbackplane-${p}
    LIBRARY_OUTPUT_DIRECTORY ${BP_CHECKPLUG_DIR})
  list(APPEND BP_CHECKPLUG_TARGETS bp_checkplug_${p})
endforeach()

# A plugin that crashes in init, in a directory of its own so that only the
# test that asks for it pays for the probe.
add_library(bp_checkplug_crashinit MODULE ${CMAKE_CURRENT_SOURCE_DIR}/check_plugins/crashinit.c)
target_link_libraries(bp_checkplug_crashinit PRIVATE backplane_abi)
set_target_properties(bp_checkplug_crashinit PROPERTIES PREFIX "" OUTPUT_NAME libbackplane-crashinit
  LIBRARY_OUTPUT_DIRECTORY ${BP_CHECKPLUG_DIR}/crashing)
list(APPEND BP_CHECKPLUG_TARGETS bp_checkplug_crashinit)

# A distinct sanitizer exit code, so "the CLI reported a failure" (1) is told
# apart from "the CLI itself has a memory error" (23); crashes in the probe
# child must arrive as signals, not as sanitizer reports.
bp_add_check_test(test_cli SOURCES test_cli.c cli_util.c ${CMAKE_SOURCE_DIR}/host/cli/json.c
  ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:handle_segv=0:exitcode=23"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=23")
target_include_directories(test_cli PRIVATE ${CMAKE_SOURCE_DIR}/host/cli)
target_compile_definitions(test_cli PRIVATE BP_TEST_CHECKPLUG_DIR="${BP_CHECKPLUG_DIR}")
add_dependencies(test_cli backplane_cli ${BP_CHECKPLUG_TARGETS})

# The helper the CLI suites run the program through (cli_util.c), on shell
# commands whose output and exit status are known.
bp_add_check_test(test_cli_util SOURCES test_cli_util.c cli_util.c)
