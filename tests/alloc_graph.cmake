# bp_context_alloc_graph: memory reused along a graph, never under a live
# tensor, computing what separate placement computes (on the cpu device).
bp_add_check_test(test_alloc_graph SOURCES test_alloc_graph.c cpu_test_util.c LIBS ${CMAKE_DL_LIBS})
add_dependencies(test_alloc_graph bp_plugin_cpu)
