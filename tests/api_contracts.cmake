# Every BP_API declaration in host/include/backplane/*.h has its contract
# comment above it (scripts/check_api_contracts.sh), and the checker fails
# on a header where one is missing (so the first test can fail).
add_test(NAME api_contracts COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check_api_contracts.sh)
add_test(NAME api_contracts_catches_a_missing_contract
  COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check_api_contracts.sh
    ${CMAKE_CURRENT_SOURCE_DIR}/data/api_contract_missing.h)
set_tests_properties(api_contracts_catches_a_missing_contract PROPERTIES
  PASS_REGULAR_EXPRESSION "api_contract_missing.h:5: BP_API declaration without a contract")
