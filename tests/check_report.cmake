# `backplane check --report` against its schema (host/cli/check_report.schema.json,
# validated with Python's jsonschema) and `check --diff` on planted regressions.
add_test(NAME check_report COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_report_test.py
  $<TARGET_FILE:backplane_cli> ${CMAKE_SOURCE_DIR}/host/cli/check_report.schema.json
  ${CMAKE_BINARY_DIR}/tests/check_report)
set_tests_properties(check_report PROPERTIES ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_BACKENDS=cpu"
  TIMEOUT 600)
