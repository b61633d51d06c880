# The Llama schema (host/run/llama_schema.c) against a hand-written layout and
# against what the binder, the builtin generator's GGUF, the split table and
# the decoder's buffer types make of it.
bp_add_check_test(test_run_schema SOURCES test_run_schema.c LIBS backplane_run)
add_dependencies(test_run_schema bp_plugin_cpu)
