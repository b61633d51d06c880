# `backplane quantize` (host/run/quant_presets.c, quantize_model.c) against
# llama.cpp's own files (tests/data/quantize, made by
# scripts/quantize-reference.sh): the same tensor types, the same bytes, and
# llama.cpp's files of llama-256 running with llama.cpp's logits.
# quantize_models is the set-up fixture: the F32 inputs that are not kept
# (make-arch-models.py --group large and --group quant, about 50 MB),
# written again byte for byte; the test checks their digests.
set(BP_QUANT_GEN ${CMAKE_BINARY_DIR}/tests/quantize)
add_test(NAME quantize_models
  COMMAND sh -c "python3 '${CMAKE_SOURCE_DIR}/scripts/make-arch-models.py' '${BP_QUANT_GEN}' --group large && python3 '${CMAKE_SOURCE_DIR}/scripts/make-arch-models.py' '${BP_QUANT_GEN}' --group quant")
set_tests_properties(quantize_models PROPERTIES FIXTURES_SETUP quantize_models TIMEOUT 300)
bp_add_check_test(test_quantize SOURCES test_quantize.c sha256.c cli_util.c cpu_test_util.c
  cpu_variant_util.c LIBS backplane_run ${CMAKE_DL_LIBS} ENV "BP_QUANT_GEN=${BP_QUANT_GEN}")
set_tests_properties(test_quantize PROPERTIES FIXTURES_REQUIRED quantize_models)
add_dependencies(test_quantize backplane_cli bp_plugin_cpu)
# The logits again on the avx2 variant, which a CPU without AVX-512 runs:
# its kernels sum in their own order, and 2- and 3-bit files amplify a
# last-bit difference (skipped where the CPU has no AVX2).
get_property(BP_CPU_VARIANTS GLOBAL PROPERTY BP_CPU_VARIANTS)
if("avx2" IN_LIST BP_CPU_VARIANTS)
  add_test(NAME test_quantize_logits_avx2 COMMAND test_quantize)
  get_test_property(test_quantize ENVIRONMENT bp_quantize_env)
  set_tests_properties(test_quantize_logits_avx2 PROPERTIES
    ENVIRONMENT "${bp_quantize_env};CK_RUN_CASE=logits;BACKPLANE_CPU_VARIANT=avx2;BP_TEST_EXPECT_VARIANT=avx2"
    FIXTURES_REQUIRED quantize_models SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
