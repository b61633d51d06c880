# The NEON flash-attention loops (plugins/cpu/ops/attention.c) executed, not
# only compiled: the kernel file and a self-contained test against a double
# softmax, cross-compiled for aarch64 and run under qemu-user. The x86
# variants are checked through the plugin (test_cpu_attention_*).
find_program(BP_AARCH64_CC aarch64-linux-gnu-gcc)
find_program(BP_QEMU_AARCH64 qemu-aarch64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64" AND BP_AARCH64_CC AND BP_QEMU_AARCH64
   AND EXISTS /usr/aarch64-linux-gnu/lib)
  set(neon_fa_exe ${CMAKE_BINARY_DIR}/tests/test_cpu_attention_neon.aarch64)
  add_custom_command(OUTPUT ${neon_fa_exe}
    COMMAND ${BP_AARCH64_CC} -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE
      -march=armv8.2-a+dotprod -I${CMAKE_SOURCE_DIR}/abi -I${CMAKE_SOURCE_DIR}/plugins/cpu
      -o ${neon_fa_exe} ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_attention_isa.c
      ${CMAKE_SOURCE_DIR}/plugins/cpu/ops/attention.c -lm
    DEPENDS test_cpu_attention_isa.c ${CMAKE_SOURCE_DIR}/plugins/cpu/ops/attention.c
      ${CMAKE_SOURCE_DIR}/plugins/cpu/ops.h
    COMMENT "Cross-compiling the NEON attention test for aarch64")
  add_custom_target(test_cpu_attention_neon_build ALL DEPENDS ${neon_fa_exe})
  add_test(NAME cpu_attention_neon_qemu
    COMMAND ${BP_QEMU_AARCH64} -L /usr/aarch64-linux-gnu ${neon_fa_exe})
  set_tests_properties(cpu_attention_neon_qemu PROPERTIES TIMEOUT 300)
endif()
