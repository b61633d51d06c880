# Device identity: the fault-injection plugins under
# fault_plugins/identity/ (one GPU through two plugins, a second GPU, a
# software GPU), the real meta and cpu plugins, and vulkan0 on lavapipe
# when the build has it. Not under valgrind's list: it loads lavapipe.
bp_add_check_test(test_identity SOURCES test_identity.c
  ENV "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:handle_segv=0")
add_dependencies(test_identity bp_fault_plugins)
# The lavapipe case alone (GPU drivers are not valgrind-clean).
add_test(NAME test_identity_vulkan COMMAND test_identity vulkan)
set_tests_properties(test_identity_vulkan PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${BP_TEST_ENV}")
