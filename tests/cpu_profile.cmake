# The cpu backend's per-op profile (bp_cpu.h, BP_CPU_PROC_SET_PROFILE): node
# counts per op and step times inside the call, on the default variant.
bp_add_check_test(test_cpu_profile SOURCES test_cpu_profile.c cpu_test_util.c LIBS ${CMAKE_DL_LIBS})
target_include_directories(test_cpu_profile PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
add_dependencies(test_cpu_profile bp_plugin_cpu)
