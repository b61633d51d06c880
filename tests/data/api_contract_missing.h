/* A fixture for api_contracts_catches_a_missing_contract: the second
 * declaration has no contract above it, so the checker must fail. */
/* Documented. */
BP_API int bp_fixture_documented(void);
BP_API int bp_fixture_undocumented(void);
