# Reference conversions (bp_quantize / bp_dequantize): hand-built blocks,
# ggml's exact bytes, round trips, accuracy against a port of ggml's K-quant
# search, argument errors, and the host-services path through a probe plugin
# (quant_plugin/, in a directory of its own so no other test loads it).
set(BP_QUANTPROBE_DIR ${CMAKE_BINARY_DIR}/tests/quant_plugin)
add_library(bp_quantprobe MODULE ${CMAKE_CURRENT_SOURCE_DIR}/quant_plugin/quantprobe.c)
target_link_libraries(bp_quantprobe PRIVATE backplane_abi)
set_target_properties(bp_quantprobe PROPERTIES PREFIX "" OUTPUT_NAME libbackplane-quantprobe
  LIBRARY_OUTPUT_DIRECTORY ${BP_QUANTPROBE_DIR})

bp_add_check_test(test_quant SOURCES test_quant.c
  ENV "BACKPLANE_PLUGIN_PATH=${BP_QUANTPROBE_DIR}" "BACKPLANE_BACKENDS=quantprobe")
add_dependencies(test_quant bp_quantprobe)
