# With -DBP_VALGRIND=ON, every libcheck suite of the host and the CPU plugin
# is registered a second time as valgrind_<suite> (label "valgrind"), so
# `ctest -L valgrind` proves them free of invalid accesses and definite leaks
# and `ctest -LE valgrind` skips them. CK_FORK=no keeps each suite in one
# process that valgrind watches. Suites for GPU plugins are left out (their
# drivers are not valgrind-clean), as is anything matching BP_VALGRIND_EXCLUDE.
option(BP_VALGRIND "Register valgrind runs of the host and CPU test suites (ctest -L valgrind)" OFF)
set(BP_VALGRIND_EXCLUDE "cuda|vulkan" CACHE STRING
  "Regex of test names not to run under valgrind")

function(bp__add_valgrind_tests)
  find_program(BP_VALGRIND_PROGRAM valgrind)
  if(NOT BP_VALGRIND_PROGRAM)
    message(WARNING "BP_VALGRIND is ON but valgrind is not installed; no valgrind tests registered.")
    return()
  endif()
  get_property(tests DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY TESTS)
  foreach(t IN LISTS tests)
    # Only libcheck suites: a test whose name is the executable target that
    # bp_add_check_test made. Scripts (sdk) exec other programs.
    if(NOT TARGET ${t} OR t MATCHES "${BP_VALGRIND_EXCLUDE}")
      continue()
    endif()
    # A suite labelled no_memcheck is too slow under valgrind (say why where it is added).
    get_test_property(${t} LABELS labels)
    if(labels MATCHES "no_memcheck")
      continue()
    endif()
    get_test_property(${t} ENVIRONMENT env)
    if(NOT env)
      set(env "")
    endif()
    # Exit 99 on a valgrind error, so it is told apart from a failing test (1).
    add_test(NAME valgrind_${t}
      COMMAND ${BP_VALGRIND_PROGRAM} --quiet --error-exitcode=99
        --leak-check=full --errors-for-leak-kinds=definite
        --child-silent-after-fork=yes --num-callers=30
        --suppressions=${CMAKE_CURRENT_SOURCE_DIR}/valgrind-glibc.supp
        $<TARGET_FILE:${t}>)
    # BACKPLANE_CPU_POLL=0: valgrind runs one thread at a time, so a waiting
    # CPU thread's spin only holds the others off; sleeping at once also
    # puts the pool's sleep and wake-up path under valgrind.
    # BP_UNDER_VALGRIND=1 lets a suite thin out its repetitions.
    set_tests_properties(valgrind_${t} PROPERTIES
      ENVIRONMENT "${env};CK_FORK=no;BACKPLANE_CPU_VARIANT=scalar;BACKPLANE_CPU_POLL=0;BP_UNDER_VALGRIND=1"
      LABELS valgrind TIMEOUT 1500)
    # The suite's fixtures (files made at set-up) come along, so that
    # `ctest -L valgrind` runs their set-up even when nothing ran before it.
    get_test_property(${t} FIXTURES_REQUIRED fixtures)
    if(fixtures)
      set_tests_properties(valgrind_${t} PROPERTIES FIXTURES_REQUIRED "${fixtures}")
    endif()
  endforeach()
endfunction()

if(BP_VALGRIND)
  # Deferred to the end of tests/: fragments sorted after this one count too.
  cmake_language(DEFER CALL bp__add_valgrind_tests)
endif()
