# `backplane run` with a tied output: the copy in the device's weight buffer
# type, bit-equal logits against the untied model with the same bytes, and
# meta / vulkan (no copy) against the cpu.
bp_add_check_test(test_run_tied_output SOURCES test_run_tied_output.c device_gate.c
  LIBS backplane_run)
add_dependencies(test_run_tied_output bp_plugin_cpu)
bp_add_device_cases(test_run_tied_output vulkan0 bp_plugin_vulkan)
if(TARGET bp_plugin_meta)
  add_dependencies(test_run_tied_output bp_plugin_meta)
endif()
