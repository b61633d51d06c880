# Every architecture and feature `backplane run` reads against llama.cpp's
# logits (tests/data/arch): cpu and meta:cpu*2, and vulkan0 in its own run.
bp_add_check_test(test_run_arch SOURCES test_run_arch.c device_gate.c LIBS backplane_run)
add_dependencies(test_run_arch bp_plugin_cpu)
if(TARGET bp_plugin_meta)
  add_dependencies(test_run_arch bp_plugin_meta)
endif()
bp_add_device_cases(test_run_arch vulkan0 bp_plugin_vulkan)
