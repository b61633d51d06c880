# `backplane serve` (host/serve/), when it is built (libmicrohttpd and
# Jansson found):
#   test_serve_request  request parsing and validation, the error object,
#                       stop strings (C, no socket)
#   serve_openai        the server driven by OpenAI's own Node client (npm
#                       openai): endpoints, streaming, concurrency, aborts,
#                       auth, bad inputs, a full queue, SIGTERM
#   serve_load          64 requests from 16 clients on 4 slots, each answer
#                       equal to its prompt's solo text
# The two node tests need node and the openai package, which the set-up
# fixture serve_client fetches (scripts/packages.sh); without them they
# skip (77), except under CI where the set-up fails instead. They spawn the
# server, so the valgrind stage leaves them out (they are not libcheck
# suites); the ASan tree runs them against its sanitized server.
if(NOT TARGET backplane_serve)
  return()
endif()

bp_add_check_test(test_serve_request SOURCES test_serve_request.c LIBS backplane_serve)

set(BP_SERVE_CLIENT_DIR ${CMAKE_BINARY_DIR}/tests/serve-client)
add_test(NAME serve_client COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/serve/client-setup.sh ${BP_SERVE_CLIENT_DIR})
set_tests_properties(serve_client PROPERTIES FIXTURES_SETUP serve_client TIMEOUT 300)

find_program(BP_NODE node)
if(BP_SERVE_NO_NODE)  # test hook: behave as on a machine without node
  set(BP_NODE OFF)
endif()
foreach(t openai load)
  if(BP_NODE)
    add_test(NAME serve_${t} COMMAND ${BP_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/serve/${t}.mjs)
  else()
    # No node: say so and skip; under CI (CI=true), where it must run, fail.
    add_test(NAME serve_${t} COMMAND sh -c
      "echo 'serve_${t}: node (20 or later) is not installed'; [ \"$CI\" = true ] && exit 1; exit 77")
  endif()
  set_tests_properties(serve_${t} PROPERTIES
    ENVIRONMENT "${BP_TEST_ENV};BP_BIN=$<TARGET_FILE:backplane_cli>;BP_OPENAI_DIR=${BP_SERVE_CLIENT_DIR}"
    FIXTURES_REQUIRED serve_client SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "serve")
endforeach()
