# Contexts, op constructors (shape inference and rejection), the ABI's
# shared op shape rules (bp_op_shapes.h), graphs,
# allocation, buffers and the backend wrappers. No plugin is needed: the
# suites define their own host-memory buffer type and fake device.
bp_add_check_test(test_shapes SOURCES test_shapes.c)
bp_add_check_test(test_alloc SOURCES test_alloc.c)
bp_add_check_test(test_op_shapes SOURCES test_op_shapes.c)
