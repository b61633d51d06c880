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
bp_add_check_test(test_quantize SOURCES test_quantize.c sha256.c cli_util.c LIBS backplane_run
  ENV "BP_QUANT_GEN=${BP_QUANT_GEN}")
set_tests_properties(test_quantize PROPERTIES FIXTURES_REQUIRED quantize_models)
add_dependencies(test_quantize backplane_cli bp_plugin_cpu)
