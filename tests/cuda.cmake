# CUDA plugin suites (only when the plugin is built). Host-side policy and
# the kernels' quantized-row readers (built for the host) run everywhere
# without a GPU; the load test proves the plugin loads and reports zero
# devices cleanly where there is no driver, and runs its GPU cases only when
# a CUDA device is present.
if(TARGET bp_plugin_cuda)
  bp_add_check_test(test_cuda_policy SOURCES test_cuda_policy.c
    ${CMAKE_SOURCE_DIR}/plugins/cuda/comm_policy.c)
  target_include_directories(test_cuda_policy PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cuda)
  bp_add_check_test(test_cuda_quant SOURCES test_cuda_quant.c quant_test_util.c LIBS bp_cuda_quant_host)
  bp_add_check_test(test_cuda_load SOURCES test_cuda_load.c device_gate.c)
  add_dependencies(test_cuda_load bp_plugin_cuda bp_plugin_cpu)
  bp_add_device_cases(test_cuda_load cuda0 bp_plugin_cuda)
endif()
