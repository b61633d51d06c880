# Chat templates (host/run/chat_template.c): every case of
# tests/data/chat/expected.txt, which llama.cpp's own llama_chat_apply_template
# wrote (scripts/chat-template-reference.sh), byte for byte.
bp_add_check_test(test_chat_template SOURCES test_chat_template.c LIBS backplane_run)
# `backplane chat-template` and `backplane run --chat` end to end (builtin:test).
bp_add_check_test(test_chat_cli SOURCES test_chat_cli.c cli_util.c LIBS backplane_run)
add_dependencies(test_chat_cli backplane_cli bp_plugin_cpu)
