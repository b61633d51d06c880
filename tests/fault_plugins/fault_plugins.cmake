# Fault-injection plugins for the loader tests, all built from fault_plugin.c
# with a compile definition naming the fault. They go under
# BP_TEST_FAULT_DIR (build/tests/fault_plugins), never into the real plugin
# directory that the CLI scans:
#   safe/      plugins a test may load in-process (good, refused ones, junk)
#   unsafe/    crash and hang in init: only ever loaded with isolate_probe
#   dup/       a second "fakegood" for the duplicate-family test
#   variants/  fakevar-low/-high/-cannot, scores 1/5/0
#   meta/      a stand-in "meta" family exporting bp_meta_device_from_spec
#   identity/  GPUs with UUIDs and PCI ids (two alike), and a software one
#   deps/      the helper library missingdep needs; not on any search path
set(BP_FAULT_DIR ${CMAKE_BINARY_DIR}/tests/fault_plugins)
set(BP_FAULT_SOURCE ${CMAKE_CURRENT_LIST_DIR}/fault_plugin.c)
set(BP_FAULT_TARGETS "")

# bp_add_fault_plugin(<target> <file stem> DIR <subdir> [DEFS ...] [LIBS ...])
function(bp_add_fault_plugin tgt stem)
  cmake_parse_arguments(F "" "DIR" "DEFS;LIBS" ${ARGN})
  add_library(${tgt} MODULE ${BP_FAULT_SOURCE})
  target_link_libraries(${tgt} PRIVATE backplane_abi ${F_LIBS})
  target_compile_definitions(${tgt} PRIVATE ${F_DEFS})
  set_target_properties(${tgt} PROPERTIES PREFIX "" SUFFIX ".so" OUTPUT_NAME ${stem}
    LIBRARY_OUTPUT_DIRECTORY ${BP_FAULT_DIR}/${F_DIR})
  set(BP_FAULT_TARGETS ${BP_FAULT_TARGETS} ${tgt} PARENT_SCOPE)
endfunction()

bp_add_fault_plugin(bp_fault_good libbackplane-fakegood DIR safe
  DEFS FAULT_FAMILY="fakegood" FAULT_DEVICE="fakegood0" FAULT_DESCRIPTION="fake good device")
bp_add_fault_plugin(bp_fault_gpu libbackplane-fakegpu DIR safe
  DEFS FAULT_FAMILY="fakegpu" FAULT_DEVICE="fakegpu0" FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_GPU)
bp_add_fault_plugin(bp_fault_abi_major libbackplane-abimajor DIR safe
  DEFS FAULT_FAMILY="abimajor" FAULT_DEVICE="abimajor0" FAULT_ABI_MAJOR=2)
bp_add_fault_plugin(bp_fault_no_entry libbackplane-noentry DIR safe
  DEFS FAULT_FAMILY="noentry" FAULT_DEVICE="noentry0" FAULT_NO_INIT)
bp_add_fault_plugin(bp_fault_init_fail libbackplane-initfail DIR safe
  DEFS FAULT_FAMILY="initfail" FAULT_DEVICE="initfail0" FAULT_INIT_FAIL)
bp_add_fault_plugin(bp_fault_mismatch libbackplane-mismatch DIR safe
  DEFS FAULT_FAMILY="somethingelse" FAULT_DEVICE="mismatch0")

# missingdep needs libbp_fault_helper.so, which lives in deps/ and is not
# on the plugin's RPATH: dlopen must report it missing by name.
add_library(bp_fault_helper SHARED ${CMAKE_CURRENT_LIST_DIR}/fault_helper.c)
set_target_properties(bp_fault_helper PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${BP_FAULT_DIR}/deps
  C_VISIBILITY_PRESET default)
bp_add_fault_plugin(bp_fault_missing_dep libbackplane-missingdep DIR safe
  DEFS FAULT_FAMILY="missingdep" FAULT_DEVICE="missingdep0" FAULT_NEEDS_HELPER
  LIBS bp_fault_helper)
set_target_properties(bp_fault_missing_dep PROPERTIES SKIP_BUILD_RPATH TRUE)

bp_add_fault_plugin(bp_fault_crash libbackplane-crash DIR unsafe
  DEFS FAULT_FAMILY="crash" FAULT_DEVICE="crash0" FAULT_CRASH)
# A real NULL store, not a sanitizer report: the probe must see the signal.
target_compile_options(bp_fault_crash PRIVATE -fno-sanitize=all)
bp_add_fault_plugin(bp_fault_hang libbackplane-hang DIR unsafe
  DEFS FAULT_FAMILY="hang" FAULT_DEVICE="hang0" FAULT_HANG)

bp_add_fault_plugin(bp_fault_dup libbackplane-fakegood DIR dup
  DEFS FAULT_FAMILY="fakegood" FAULT_DEVICE="fakegood0_dup")

foreach(v low:1 high:5 cannot:0)
  string(REPLACE ":" ";" pair ${v})
  list(GET pair 0 name)
  list(GET pair 1 score)
  bp_add_fault_plugin(bp_fault_var_${name} libbackplane-fakevar-${name} DIR variants
    DEFS FAULT_FAMILY="fakevar" FAULT_DEVICE="fakevar0" FAULT_SCORE=${score}
         FAULT_DESCRIPTION="fakevar ${name}")
endforeach()

bp_add_fault_plugin(bp_fault_meta libbackplane-meta DIR meta
  DEFS FAULT_FAMILY="meta" FAULT_DEVICE="fakemeta0" FAULT_META
       FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_META)

# Device identities (test_identity): idgpua and idgpub are one GPU seen
# through two plugins (same UUID and bus), idother a second GPU, idsoft a
# software rasterizer that calls itself a GPU.
foreach(v "idgpua:0xab:0000:65:00.0" "idgpub:0xab:0000:65:00.0" "idother:0xac:0000:b3:00.0")
  string(REGEX MATCH "^([a-z]+):(0x[0-9a-f]+):(.*)$" _m ${v})
  bp_add_fault_plugin(bp_fault_${CMAKE_MATCH_1} libbackplane-${CMAKE_MATCH_1} DIR identity
    DEFS FAULT_FAMILY="${CMAKE_MATCH_1}" FAULT_DEVICE="${CMAKE_MATCH_1}0"
         FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_GPU FAULT_UUID_BYTE=${CMAKE_MATCH_2}
         FAULT_PCI="${CMAKE_MATCH_3}")
endforeach()
bp_add_fault_plugin(bp_fault_idsoft libbackplane-idsoft DIR identity
  DEFS FAULT_FAMILY="idsoft" FAULT_DEVICE="idsoft0" FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_GPU
       FAULT_UUID_BYTE=0x5f FAULT_SOFTWARE)

# Not a shared object at all, under a plugin's name.
file(WRITE ${BP_FAULT_DIR}/safe/libbackplane-junk.so
  "This is a text file named like a plugin; the loader must refuse it.\n")

add_custom_target(bp_fault_plugins DEPENDS ${BP_FAULT_TARGETS} bp_fault_helper)
