# The cpu backend's plan cache (plugins/cpu/plan.h, BP_CPU_PROC_PLAN_STATS):
# decode steps plan once, any change plans again, results bit-equal to a
# fresh plan's, the cache bounded, the runner's decode steps planned once per
# KV capacity; on the default variant.
bp_add_check_test(test_cpu_plan SOURCES test_cpu_plan.c cpu_test_util.c LIBS backplane_run ${CMAKE_DL_LIBS} m)
target_include_directories(test_cpu_plan PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
add_dependencies(test_cpu_plan bp_plugin_cpu)
