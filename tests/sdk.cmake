# The installed SDK, exercised by a third party: install into a temporary
# prefix, build examples/plugin out of tree (CMake package and make +
# pkg-config), build the API guide's application example (docs/api.md), then load the plugin
# into the installed CLI and pass `backplane check` on it. Needs make,
# pkg-config and a C compiler on PATH (scripts/packages.txt).
add_test(NAME test_sdk_out_of_tree_plugin_builds_loads_and_passes_check
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sdk_test.sh
    ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(test_sdk_out_of_tree_plugin_builds_loads_and_passes_check PROPERTIES
  ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 600 LABELS "sdk")
