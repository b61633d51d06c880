# CPU plugin suites: every op against a scalar computation in the test,
# threading, concurrency, a direct ABI smoke test of the scalar .so, the
# quantized mul_mat and pool suite run once per variant, and the dot kernels
# of every ISA build against the scalar references (NEON under qemu-user).
get_property(BP_CPU_VARIANTS GLOBAL PROPERTY BP_CPU_VARIANTS)

bp_add_check_test(test_cpu_ops SOURCES test_cpu_ops.c cpu_test_util.c)
add_dependencies(test_cpu_ops bp_plugin_cpu)
bp_add_check_test(test_cpu_moe SOURCES test_cpu_moe.c cpu_test_util.c)
add_dependencies(test_cpu_moe bp_plugin_cpu)
bp_add_check_test(test_cpu_threads SOURCES test_cpu_threads.c cpu_test_util.c)
add_dependencies(test_cpu_threads bp_plugin_cpu)
# How a step's tasks are shared between threads (task_claim.h), alone.
bp_add_check_test(test_cpu_task_claim SOURCES test_cpu_task_claim.c)
target_include_directories(test_cpu_task_claim PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
# MUL_MAT's chunk grid (ops/matmul.c, compiled in with recording kernels):
# every output element computed exactly once, by the same kernel, for any
# thread count and chunk order.
bp_add_check_test(test_cpu_mm_grid SOURCES test_cpu_mm_grid.c
  ${CMAKE_SOURCE_DIR}/plugins/cpu/ops/matmul.c)
target_include_directories(test_cpu_mm_grid PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)

# Quantized mul_mat / get_rows, chunking regimes, the pool, variant choice:
# one registration per variant (a variant this CPU cannot run is skipped).
add_executable(test_cpu_fast test_cpu_fast.c cpu_test_util.c cpu_variant_util.c)
target_compile_definitions(test_cpu_fast PRIVATE _GNU_SOURCE
  BP_TEST_PLUGIN_DIR="${BP_PLUGIN_OUTPUT_DIR}")
target_include_directories(test_cpu_fast PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
  ${CMAKE_SOURCE_DIR}/plugins/cpu)
target_link_libraries(test_cpu_fast PRIVATE backplane bp_check Threads::Threads
  ${CMAKE_DL_LIBS} m)
add_dependencies(test_cpu_fast bp_plugin_cpu)
# The scalar registration carries the target's name, so valgrind.cmake
# wraps it (valgrind runs the scalar variant).
foreach(v ${BP_CPU_VARIANTS})
  if(v STREQUAL "scalar")
    set(name test_cpu_fast)
  else()
    set(name test_cpu_fast_${v})
  endif()
  add_test(NAME ${name} COMMAND test_cpu_fast)
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_CPU_VARIANT=${v};BP_TEST_EXPECT_VARIANT=${v}"
    SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()

# The ABI smoke test links neither libbackplane nor the plugin: it dlopens
# the built scalar .so and plays the host itself.
add_executable(test_cpu_abi test_cpu_abi.c)
target_compile_definitions(test_cpu_abi PRIVATE _GNU_SOURCE
  BP_TEST_PLUGIN_DIR="${BP_PLUGIN_OUTPUT_DIR}")
target_link_libraries(test_cpu_abi PRIVATE backplane_abi bp_check Threads::Threads
  ${CMAKE_DL_LIBS} m)
add_dependencies(test_cpu_abi bp_plugin_cpu)
add_test(NAME test_cpu_abi COMMAND test_cpu_abi)
set_tests_properties(test_cpu_abi PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" TIMEOUT 600)

# ---- kernels of each ISA build against the scalar references ----
get_property(BP_CPU_KERNEL_SOURCES GLOBAL PROPERTY BP_CPU_KERNEL_SOURCES)
foreach(v ${BP_CPU_VARIANTS})
  get_property(flags GLOBAL PROPERTY BP_CPU_FLAGS_${v})
  add_executable(test_cpu_kernels_${v} test_cpu_kernels.c $<TARGET_OBJECTS:bp_cpu_kernels_${v}>
    ${CMAKE_SOURCE_DIR}/plugins/cpu/cpu_features.c)
  target_include_directories(test_cpu_kernels_${v} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
  target_compile_definitions(test_cpu_kernels_${v} PRIVATE _GNU_SOURCE)
  target_compile_options(test_cpu_kernels_${v} PRIVATE ${flags})
  target_link_libraries(test_cpu_kernels_${v} PRIVATE backplane_abi m)
  # not named like its target: valgrind cannot run the AVX-512 builds
  add_test(NAME cpu_kernels_${v} COMMAND test_cpu_kernels_${v})
  set_tests_properties(cpu_kernels_${v} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

# The x8 kernels at their edges (negative scales, saturating quants, long
# rows, output stride) against a double dot, once per variant.
foreach(v ${BP_CPU_VARIANTS})
  get_property(flags GLOBAL PROPERTY BP_CPU_FLAGS_${v})
  add_executable(test_cpu_x8_${v} test_cpu_x8.c $<TARGET_OBJECTS:bp_cpu_kernels_${v}>
    ${CMAKE_SOURCE_DIR}/plugins/cpu/cpu_features.c)
  target_include_directories(test_cpu_x8_${v} PRIVATE ${CMAKE_SOURCE_DIR}/plugins/cpu)
  target_compile_definitions(test_cpu_x8_${v} PRIVATE _GNU_SOURCE)
  target_compile_options(test_cpu_x8_${v} PRIVATE ${flags})
  target_link_libraries(test_cpu_x8_${v} PRIVATE backplane_abi m)
  add_test(NAME cpu_x8_${v} COMMAND test_cpu_x8_${v})
  set_tests_properties(cpu_x8_${v} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# The AMX tile kernels (avx512 build) at the same edges; skipped (77) where
# the CPU or the OS has no AMX-INT8.
if(TARGET test_cpu_x8_avx512)
  add_test(NAME cpu_amx_avx512 COMMAND test_cpu_x8_avx512 --amx)
  set_tests_properties(cpu_amx_avx512 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# NEON: cross-compiled with Debian's gcc-aarch64-linux-gnu and run under
# qemu-aarch64, so the sdot kernels are executed, not only compiled.
find_program(BP_AARCH64_CC aarch64-linux-gnu-gcc)
find_program(BP_QEMU_AARCH64 qemu-aarch64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  if(BP_AARCH64_CC AND BP_QEMU_AARCH64 AND EXISTS /usr/aarch64-linux-gnu/lib)
    set(neon_exe ${CMAKE_BINARY_DIR}/tests/test_cpu_kernels_neon.aarch64)
    add_custom_command(OUTPUT ${neon_exe}
      COMMAND ${BP_AARCH64_CC} -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE
        -march=armv8.2-a+dotprod -I${CMAKE_SOURCE_DIR}/abi -I${CMAKE_SOURCE_DIR}/plugins/cpu
        -o ${neon_exe} ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_kernels.c ${BP_CPU_KERNEL_SOURCES}
        ${CMAKE_SOURCE_DIR}/plugins/cpu/cpu_features.c -lm
      DEPENDS test_cpu_kernels.c ${BP_CPU_KERNEL_SOURCES} ${CMAKE_SOURCE_DIR}/plugins/cpu/cpu_features.c
        ${CMAKE_SOURCE_DIR}/plugins/cpu/kernels/kernels.h ${CMAKE_SOURCE_DIR}/plugins/cpu/kernels/simd.h
        ${CMAKE_SOURCE_DIR}/plugins/cpu/kernels/repack.h
      COMMENT "Cross-compiling the NEON kernel test for aarch64")
    add_custom_target(test_cpu_kernels_neon_build ALL DEPENDS ${neon_exe})
    add_test(NAME cpu_kernels_neon_qemu
      COMMAND ${BP_QEMU_AARCH64} -L /usr/aarch64-linux-gnu ${neon_exe})
    set_tests_properties(cpu_kernels_neon_qemu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  else()
    message(STATUS "NEON kernel test not registered: it needs gcc-aarch64-linux-gnu, "
      "libc6-dev-arm64-cross and qemu-user (scripts/packages.txt).")
  endif()
endif()

# FLASH_ATTN_EXT against a double-precision reference, once per variant (the
# SIMD ones accumulate in float; a variant this CPU cannot run is skipped).
# The scalar registration carries the target's name, so valgrind wraps it.
bp_add_check_test(test_cpu_attention SOURCES test_cpu_attention.c cpu_test_util.c cpu_variant_util.c
  LIBS ${CMAKE_DL_LIBS} ENV BACKPLANE_CPU_VARIANT=scalar BP_TEST_EXPECT_VARIANT=scalar)
add_dependencies(test_cpu_attention bp_plugin_cpu)
set_tests_properties(test_cpu_attention PROPERTIES SKIP_RETURN_CODE 77)
foreach(v ${BP_CPU_VARIANTS})
  if(NOT v STREQUAL "scalar")
    add_test(NAME test_cpu_attention_${v} COMMAND test_cpu_attention)
    set_tests_properties(test_cpu_attention_${v} PROPERTIES
      ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_CPU_VARIANT=${v};BP_TEST_EXPECT_VARIANT=${v}"
      SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endforeach()

bp_add_check_test(test_cpu_silu SOURCES test_cpu_silu.c cpu_test_util.c cpu_variant_util.c
  LIBS ${CMAKE_DL_LIBS} ENV BACKPLANE_CPU_VARIANT=scalar BP_TEST_EXPECT_VARIANT=scalar)
add_dependencies(test_cpu_silu bp_plugin_cpu)
set_tests_properties(test_cpu_silu PROPERTIES SKIP_RETURN_CODE 77)
foreach(v ${BP_CPU_VARIANTS})
  if(NOT v STREQUAL "scalar")
    add_test(NAME test_cpu_silu_${v} COMMAND test_cpu_silu)
    set_tests_properties(test_cpu_silu_${v} PROPERTIES
      ENVIRONMENT "${BP_TEST_ENV};BACKPLANE_CPU_VARIANT=${v};BP_TEST_EXPECT_VARIANT=${v}"
      SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endforeach()

# The SIMD builds must still contain the x8 kernels' software prefetches
# (see the script for the compiler behaviour this guards against).
set(bp_prefetch_sos "")
foreach(v ${BP_CPU_VARIANTS})
  if(v STREQUAL "avx2" OR v STREQUAL "avx512")
    list(APPEND bp_prefetch_sos $<TARGET_FILE:bp_plugin_cpu_${v}>)
  endif()
endforeach()
if(bp_prefetch_sos)
  add_test(NAME cpu_prefetch_check COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_prefetch_check.sh
    ${bp_prefetch_sos})
  set_tests_properties(cpu_prefetch_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
