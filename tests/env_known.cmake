# Every variable the code reads is in the host's list of known variables and in docs/operating.md.
add_test(NAME env_vars_known COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/env_vars_known.sh ${CMAKE_SOURCE_DIR})
