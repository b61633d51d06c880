# Vulkan plugin suites, run for real on whatever Vulkan device is present
# (Mesa's lavapipe in CI). Exit code 77 = skipped: no Vulkan device here.
if(NOT TARGET bp_plugin_vulkan)
  return()
endif()
# What the suites share: vulkan0, graphs computed on it, weights and their
# reference dequantization (quant_test_util.c's block layouts), the gated
# suite main.
set(BP_VK_TEST_UTIL vk_test_util.c quant_test_util.c device_gate.c)
bp_add_check_test(test_vulkan SOURCES test_vulkan.c ${BP_VK_TEST_UTIL} log_capture.c)
add_dependencies(test_vulkan bp_plugin_vulkan backplane_cli)
if(TARGET bp_plugin_cpu)
  add_dependencies(test_vulkan bp_plugin_cpu)
endif()
set_tests_properties(test_vulkan PROPERTIES SKIP_RETURN_CODE 77)
bp_add_check_test(test_vulkan_graphs SOURCES test_vulkan_graphs.c ${BP_VK_TEST_UTIL} log_capture.c)
add_dependencies(test_vulkan_graphs bp_plugin_vulkan)
if(TARGET bp_plugin_cpu)
  add_dependencies(test_vulkan_graphs bp_plugin_cpu)
endif()
set_tests_properties(test_vulkan_graphs PROPERTIES SKIP_RETURN_CODE 77)
# The ABI 1.2 weight types: MUL_MAT on both shaders and GET_ROWS against
# bp_quant_ref.h's dequantizers, on both 16-bit paths (blocks of 22 and 18
# bytes put their f16 scales at every 2-byte position of a packed word).
# One process for all cases (CK_FORK=no), as for every device's cases
# (bp_add_device_cases): lavapipe compiles each pipeline with LLVM, seconds
# a type, and a forked case would compile them all again.
bp_add_check_test(test_vulkan_quant SOURCES test_vulkan_quant.c ${BP_VK_TEST_UTIL} ENV CK_FORK=no)
add_dependencies(test_vulkan_quant bp_plugin_vulkan)
set_tests_properties(test_vulkan_quant PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME test_vulkan_quant_packed_words COMMAND test_vulkan_quant)
set_tests_properties(test_vulkan_quant_packed_words PROPERTIES
  ENVIRONMENT "${BP_TEST_ENV};CK_FORK=no;BACKPLANE_VULKAN_F16_STORAGE=0" SKIP_RETURN_CODE 77 TIMEOUT 600)

# The kernels a GPU takes, forced on lavapipe: mul_mat.comp's three tiles in
# float and float16_t at shapes none of them divides, the integer dots.
bp_add_check_test(test_vulkan_gpu_paths SOURCES test_vulkan_gpu_paths.c ${BP_VK_TEST_UTIL})
add_dependencies(test_vulkan_gpu_paths bp_plugin_vulkan)
set_tests_properties(test_vulkan_gpu_paths PROPERTIES SKIP_RETURN_CODE 77)

# Every op x type x shape of the check harness against the CPU reference,
# on the native and the packed-word 16-bit paths and with the shared-memory
# reductions. The passes after the first differ from it in the shaders
# lavapipe runs, not in host code: a sanitizer tree would spend three
# minutes on them for nothing, so they are registered in plain trees only,
# labelled "uninstrumented" (scripts/test-all.sh runs that label in the
# valgrind stage's tree).
add_test(NAME vulkan_check COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/vulkan_check.sh
  $<TARGET_FILE:backplane_cli> first)
set_tests_properties(vulkan_check PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 600
  SKIP_RETURN_CODE 77)
if(NOT BP_SANITIZE)
  add_test(NAME vulkan_check_other_paths COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/vulkan_check.sh
    $<TARGET_FILE:backplane_cli> rest)
  set_tests_properties(vulkan_check_other_paths PROPERTIES ENVIRONMENT "${BP_TEST_ENV}"
    TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS uninstrumented)
endif()

# Under ASan these run with leak detection on, like every suite: the
# drivers stay resident (vk_loader.c), so lavapipe's process-wide
# allocations remain reachable and are not reported.

# The pipeline cache file between processes (written, loaded, bad files
# ignored).
add_test(NAME vulkan_pipeline_cache COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/vulkan_pipeline_cache.sh
  $<TARGET_FILE:backplane_cli>)
set_tests_properties(vulkan_pipeline_cache PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 300
  SKIP_RETURN_CODE 77)
