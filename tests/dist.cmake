# dist: devices under mpirun (tests/test_dist.c), when the mpi plugin is
# built. The environment lets Open MPI run in a sandbox: as root, more ranks
# than cores, loopback only. In the ASan build the ranks are checked for
# memory errors but not leaks: Open MPI unloads its components before
# LeakSanitizer looks, so their allocations reach it without a module name
# to suppress them by (the runner's own leaks are checked single-process).
if(TARGET bp_plugin_mpi AND BP_MPIEXEC)
  bp_add_check_test(test_dist SOURCES test_dist.c cli_util.c LIBS backplane_run
    ENV "OMPI_MCA_oob_tcp_if_include=lo"
        "OMPI_MCA_btl_tcp_if_include=lo"
        "OMPI_MCA_rmaps_base_oversubscribe=1"
        "OMPI_MCA_btl_vader_single_copy_mechanism=none"
        "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0")
  target_compile_definitions(test_dist PRIVATE BP_TEST_MPIEXEC="${BP_MPIEXEC}")
  # The ranks are CLI processes that valgrind does not follow; its run would
  # watch only the harness waiting for them (the ASan tree checks the ranks).
  set_tests_properties(test_dist PROPERTIES LABELS no_memcheck)
  # A stand-in for a GPU plugin with a multi-process communicator.
  add_library(bp_dist_rankcomm MODULE ${CMAKE_CURRENT_LIST_DIR}/dist_plugins/rankcomm.c)
  target_link_libraries(bp_dist_rankcomm PRIVATE backplane_abi rt)
  target_compile_definitions(bp_dist_rankcomm PRIVATE _GNU_SOURCE)
  set_target_properties(bp_dist_rankcomm PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME libbackplane-rankcomm
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/dist_plugins)
  target_compile_definitions(test_dist PRIVATE BP_TEST_DIST_PLUGIN_DIR="${CMAKE_BINARY_DIR}/tests/dist_plugins")
  add_dependencies(test_dist backplane_cli bp_plugin_cpu bp_plugin_meta bp_plugin_mpi bp_dist_rankcomm)
  if(TARGET bp_plugin_vulkan)
    # Where the Vulkan plugin is built, its tests expect a device (lavapipe).
    target_compile_definitions(test_dist PRIVATE BP_TEST_HAVE_VULKAN=1)
    add_dependencies(test_dist bp_plugin_vulkan)
  endif()
endif()
