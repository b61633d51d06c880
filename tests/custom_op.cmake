# Vendor-defined ops (BP_OP_CUSTOM) and the host helpers of ABI 1.1, through
# a test plugin built the way a vendor would build one (custom_op_plugin/,
# in a directory of its own so no other test loads it). The suite also runs
# the CLI's check on it, so it depends on the CLI.
set(BP_CUSTOMOP_DIR ${CMAKE_BINARY_DIR}/tests/custom_op_plugin)
add_library(bp_customop MODULE ${CMAKE_CURRENT_SOURCE_DIR}/custom_op_plugin/customop.c)
target_link_libraries(bp_customop PRIVATE backplane_abi)
set_target_properties(bp_customop PROPERTIES PREFIX "" OUTPUT_NAME libbackplane-customop
  C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${BP_CUSTOMOP_DIR})

bp_add_check_test(test_custom_op SOURCES test_custom_op.c cli_util.c
  ENV "BACKPLANE_PLUGIN_PATH=${BP_CUSTOMOP_DIR}" "BACKPLANE_BACKENDS=customop,cpu,meta")
add_dependencies(test_custom_op bp_customop backplane_cli)

# The same suite with every plugin the build has (vulkan0 on lavapipe, cuda
# devices where a GPU is present): each must decline custom ops it does not
# know. Not a valgrind candidate: GPU drivers are not valgrind-clean.
add_test(NAME test_custom_op_every_plugin COMMAND test_custom_op)
set_tests_properties(test_custom_op_every_plugin PROPERTIES TIMEOUT 600
  ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_PLUGIN_PATH=${BP_CUSTOMOP_DIR}")
