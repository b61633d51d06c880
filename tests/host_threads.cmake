# The host's thread rules (backplane.h): first use from many threads,
# per-thread errors, concurrent lookups. Also in the TSan stage (tsan.cmake).
bp_add_check_test(test_host_threads SOURCES test_host_threads.c)
add_dependencies(test_host_threads bp_plugin_cpu)
