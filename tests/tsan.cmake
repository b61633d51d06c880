# With -DBP_TSAN=ON (scripts/test-all.sh's build-tsan/ tree): the suites that
# run threads — the CPU plugin's pool and ops, the meta device's workers and
# the loader's probe — get the label "tsan", and the target tsan_suites
# builds just them and what they load, so the stage does not pay for the
# whole tree. TSAN_OPTIONS makes the first report fail the test; every
# suppression in tsan.supp carries its justification.
set(BP_TSAN_SUITES
  test_cpu_ops test_cpu_threads test_cpu_task_claim test_cpu_fast test_cpu_attention test_cpu_join
  test_meta test_meta_block test_meta_comm test_meta_views test_meta_threads test_meta_allreduce
  test_loader test_devices test_env test_host_threads)
if(BP_TSAN)
  add_custom_target(tsan_suites)
  foreach(t IN LISTS BP_TSAN_SUITES)
    if(NOT TARGET ${t})
      continue()
    endif()
    add_dependencies(tsan_suites ${t})
    get_test_property(${t} ENVIRONMENT env)
    set_tests_properties(${t} PROPERTIES LABELS tsan ENVIRONMENT
      "${env};TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan.supp")
  endforeach()
endif()
