# The documents cannot rot (tests/docs_check.sh): their links and excerpts
# hold, their runnable blocks run, `backplane help` prints their sections as
# they are, no file tells the tree's history, and the API reference renders
# without a Doxygen warning.
add_test(NAME docs_links COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.sh links ${CMAKE_SOURCE_DIR})
add_test(NAME history_free COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.sh history ${CMAKE_SOURCE_DIR})
add_test(NAME docs_help
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.sh help ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(docs_help PROPERTIES LABELS "docs")

# One test per document with ```sh runnable blocks, run against this tree's
# program and plugins.
file(GLOB BP_DOCS_WITH_BLOCKS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
list(PREPEND BP_DOCS_WITH_BLOCKS ${CMAKE_SOURCE_DIR}/README.md)
foreach(doc ${BP_DOCS_WITH_BLOCKS})
  file(STRINGS ${doc} runnable REGEX "^```sh runnable")
  if(runnable)
    get_filename_component(name ${doc} NAME_WE)
    string(TOLOWER ${name} name)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${doc})
    add_test(NAME docs_runnable_${name}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.sh run ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${rel})
    set_tests_properties(docs_runnable_${name} PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 600 LABELS "docs")
  endif()
endforeach()

# The API reference: Doxygen with warnings as errors (cmake/docs.cmake). A
# machine without Doxygen fails here with the package to install, rather
# than leaving the reference unbuilt.
if(BP_DOCS AND BP_DOXYGEN)
  add_test(NAME api_reference COMMAND ${BP_DOXYGEN} ${CMAKE_BINARY_DIR}/docs/Doxyfile
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/docs)
elseif(BP_DOCS)
  add_test(NAME api_reference COMMAND ${CMAKE_COMMAND} -E echo
    "api_reference: doxygen is not installed; install it (scripts/packages.txt) or configure -DBP_DOCS=OFF.")
  set_tests_properties(api_reference PROPERTIES WILL_FAIL TRUE)
endif()
