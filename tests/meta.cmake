# Meta plugin suites: tensor-parallel equivalence against the CPU device,
# meta buffers (split states, scatter/gather), all-reduce paths, refusals.
if(TARGET bp_plugin_meta)
  bp_add_check_test(test_meta_block SOURCES test_meta_block.c device_gate.c)
  add_dependencies(test_meta_block bp_plugin_meta bp_plugin_cpu)
  bp_add_device_cases(test_meta_block vulkan0 bp_plugin_vulkan)
endif()
if(TARGET bp_plugin_meta)
  bp_add_check_test(test_meta SOURCES test_meta.c meta_test_util.c log_capture.c)
  add_dependencies(test_meta bp_plugin_meta bp_plugin_cpu)
endif()

# Test plugins for the meta device (tests/meta_plugins/), built into
# build/tests/meta_plugins and reached only through BACKPLANE_PLUGIN_PATH.
set(BP_META_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/meta_plugins)
add_library(bp_meta_commtest MODULE ${CMAKE_CURRENT_LIST_DIR}/meta_plugins/commtest.c)
target_link_libraries(bp_meta_commtest PRIVATE backplane_abi)
set_target_properties(bp_meta_commtest PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME libbackplane-commtest
  LIBRARY_OUTPUT_DIRECTORY ${BP_META_TEST_PLUGIN_DIR})
if(TARGET bp_plugin_meta)
  bp_add_check_test(test_meta_comm SOURCES test_meta_comm.c
    ENV "BACKPLANE_PLUGIN_PATH=${BP_META_TEST_PLUGIN_DIR}" "BACKPLANE_META_ALLREDUCE=comm")
  add_dependencies(test_meta_comm bp_plugin_meta bp_plugin_cpu bp_meta_commtest)
endif()

# BACKPLANE_DEVICES=meta:cpu*4 end to end, `backplane info meta0`, and
# BACKPLANE_META_SPLIT parsing.
if(TARGET bp_plugin_meta AND TARGET backplane_cli)
  bp_add_check_test(test_meta_env SOURCES test_meta_env.c cli_util.c log_capture.c
    ENV "BACKPLANE_DEVICES=meta:cpu*4" "BACKPLANE_META_SPLIT=3,1,1,1")
  add_dependencies(test_meta_env bp_plugin_meta bp_plugin_cpu backplane_cli)
endif()

# Views of segment-split tensors (fused QKV), refused views, SET_ROWS with
# i32 ids in graphs rebuilt every step (the decoder runner's patterns).
if(TARGET bp_plugin_meta)
  bp_add_check_test(test_meta_views SOURCES test_meta_views.c meta_test_util.c log_capture.c)
  add_dependencies(test_meta_views bp_plugin_meta bp_plugin_cpu)
endif()

# The meta plugin's shared state under threads (one device per spec, the
# feature table while devices are added); a tsan suite.
if(TARGET bp_plugin_meta)
  bp_add_check_test(test_meta_threads SOURCES test_meta_threads.c)
  add_dependencies(test_meta_threads bp_plugin_meta bp_plugin_cpu)
endif()

# The all-reduce preflight and BACKPLANE_META_ALLREDUCE=auto: the commpaths
# test plugin (commtest.c with COMMTEST_PATHS: a slow, a wrong and a
# declining registry path), `check --comm`, `info`, meta:cpu*2 and
# meta:cpu,vulkan0 sums.
add_library(bp_meta_commpaths MODULE ${CMAKE_CURRENT_LIST_DIR}/meta_plugins/commtest.c)
target_compile_definitions(bp_meta_commpaths PRIVATE COMMTEST_PATHS)
target_link_libraries(bp_meta_commpaths PRIVATE backplane_abi)
set_target_properties(bp_meta_commpaths PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME libbackplane-commpaths
  LIBRARY_OUTPUT_DIRECTORY ${BP_META_TEST_PLUGIN_DIR})
if(TARGET bp_plugin_meta AND TARGET backplane_cli)
  bp_add_check_test(test_meta_allreduce SOURCES test_meta_allreduce.c cli_util.c device_gate.c log_capture.c
    ENV "BACKPLANE_PLUGIN_PATH=${BP_META_TEST_PLUGIN_DIR}")
  add_dependencies(test_meta_allreduce bp_plugin_meta bp_plugin_cpu bp_meta_commpaths backplane_cli)
  bp_add_device_cases(test_meta_allreduce vulkan0 bp_plugin_vulkan)
endif()
