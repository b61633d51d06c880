# The guides as the program and the API reference carry them.
#
# `backplane help`: cmake/embed_docs.c turns docs/*.md into the C file of
# sections that host/cli/cmd_help.c prints, rebuilt whenever a guide changes.
# The `docs` target: the API reference rendered by Doxygen from the header
# contracts (host/include/backplane/*.h, abi/backplane/*.h) into
# <build>/docs/html, warnings as errors; tests/docs.cmake runs it as a test.
file(GLOB BP_GUIDES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
list(SORT BP_GUIDES)
add_executable(bp_embed_docs ${CMAKE_SOURCE_DIR}/cmake/embed_docs.c)
set(BP_HELP_TOPICS_C ${CMAKE_BINARY_DIR}/generated/help_topics.c)
add_custom_command(OUTPUT ${BP_HELP_TOPICS_C}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated
  COMMAND bp_embed_docs ${BP_HELP_TOPICS_C} ${BP_GUIDES}
  DEPENDS bp_embed_docs ${BP_GUIDES}
  COMMENT "Embedding the guides (docs/*.md) for backplane help")
add_custom_target(bp_help_topics DEPENDS ${BP_HELP_TOPICS_C})
if(TARGET backplane_cli)
  target_sources(backplane_cli PRIVATE ${BP_HELP_TOPICS_C})
  target_include_directories(backplane_cli PRIVATE ${CMAKE_SOURCE_DIR}/host/cli)
  add_dependencies(backplane_cli bp_help_topics)
endif()

option(BP_DOCS "Build the API reference with Doxygen (target docs)" ON)
find_program(BP_DOXYGEN doxygen)
if(BP_DOCS AND BP_DOXYGEN)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/Doxyfile.in ${CMAKE_BINARY_DIR}/docs/Doxyfile @ONLY)
  add_custom_target(docs
    COMMAND ${BP_DOXYGEN} ${CMAKE_BINARY_DIR}/docs/Doxyfile
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/docs
    COMMENT "API reference: ${CMAKE_BINARY_DIR}/docs/html/index.html"
    VERBATIM)
elseif(BP_DOCS)
  message(STATUS "doxygen not found: no API reference (target docs); install doxygen (scripts/packages.txt)")
endif()
