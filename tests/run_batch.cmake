# The batching engine (host/run/batch.h): a slot's logits beside others equal
# its logits alone, bit for bit on cpu, close on meta:cpu*2 and, in its own
# run, vulkan0; n_ctx refusals; decode steps that allocate nothing.
bp_add_check_test(test_run_batch SOURCES test_run_batch.c device_gate.c LIBS backplane_run)
add_dependencies(test_run_batch bp_plugin_cpu)
if(TARGET bp_plugin_meta)
  add_dependencies(test_run_batch bp_plugin_meta)
endif()
bp_add_device_cases(test_run_batch vulkan0 bp_plugin_vulkan)
