# bp_device_weight_buffer_type / BP_PROC_WEIGHT_BUFFER_TYPE: which buffer
# type each device offers for MUL_MAT weights, and that MUL_MAT gives the
# same result there as in the default buffer type.
bp_add_check_test(test_weight_buffer_type SOURCES test_weight_buffer_type.c)
add_dependencies(test_weight_buffer_type bp_plugin_cpu)
if(TARGET bp_plugin_meta)
  add_dependencies(test_weight_buffer_type bp_plugin_meta)
endif()
