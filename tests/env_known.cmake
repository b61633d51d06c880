# The host's list of known BACKPLANE_* variables covers every one the code reads.
add_test(NAME env_vars_known COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/env_vars_known.sh ${CMAKE_SOURCE_DIR})
