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
#   tables/    ABI 1.1 table floors: tables cut short, ending at a guard
#              page, optional or required fields NULL, registry abi_version
#   names/     device names: one not named after its family, a duplicate
#   versions/  a 1.0-built plugin, and N / N+1 minors with and without a
#              minimum host version
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
  DEFS FAULT_FAMILY="meta" FAULT_DEVICE="metafake0" FAULT_META
       FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_META)
# The same capability under a family the host has never heard of: composing
# is asked of every plugin, never known by name.
bp_add_fault_plugin(bp_fault_composer libbackplane-acomposer DIR composer
  DEFS FAULT_FAMILY="acomposer" FAULT_DEVICE="acomposer0" FAULT_META
       FAULT_DEVICE_TYPE=BP_DEVICE_TYPE_META)

# ---- table floors (bp_iface_check.h); every one must be refused or work,
# never crash, in-process, in the probe child, in the CLI and under meta ----
bp_add_fault_plugin(bp_fault_short_backend libbackplane-shortbackend DIR tables
  DEFS FAULT_FAMILY="shortbackend" FAULT_DEVICE="shortbackend0"
       "FAULT_BACKEND_SIZE=offsetof(struct bp_backend_iface, graph_compute)")
bp_add_fault_plugin(bp_fault_short_buffer libbackplane-shortbuffer DIR tables
  DEFS FAULT_FAMILY="shortbuffer" FAULT_DEVICE="shortbuffer0" FAULT_STATIC_BUFFERS
       "FAULT_BUFFER_SIZE=sizeof(size_t)")
bp_add_fault_plugin(bp_fault_dev_size0 libbackplane-devsize0 DIR tables
  DEFS FAULT_FAMILY="devsize0" FAULT_DEVICE="devsize00" FAULT_DEVICE_SIZE=0)
# Every table exactly at its floor, ending at a PROT_NONE page: a valid
# plugin that faults on any read past a table's size.
bp_add_fault_plugin(bp_fault_guarded libbackplane-guarded DIR tables
  DEFS FAULT_FAMILY="guarded" FAULT_DEVICE="guarded0" FAULT_GUARD_PAGE
       "FAULT_REGISTRY_SIZE=BP_IFACE_SLOT(4)" "FAULT_DEVICE_SIZE=BP_IFACE_SLOT(10)"
       "FAULT_BUFT_SIZE=BP_IFACE_SLOT(4)" "FAULT_BUFFER_SIZE=BP_IFACE_SLOT(6)"
       "FAULT_BACKEND_SIZE=BP_IFACE_SLOT(8)")
# Below the device floor and against a guard page: refused by name, not CRASHED.
bp_add_fault_plugin(bp_fault_guard_short libbackplane-guardshort DIR tables
  DEFS FAULT_FAMILY="guardshort" FAULT_DEVICE="guardshort0" FAULT_GUARD_PAGE
       "FAULT_DEVICE_SIZE=BP_IFACE_SLOT(3)")
bp_add_fault_plugin(bp_fault_null_optional libbackplane-nullopt DIR tables
  DEFS FAULT_FAMILY="nullopt" FAULT_DEVICE="nullopt0" FAULT_NULL_OPTIONAL)
bp_add_fault_plugin(bp_fault_null_compute libbackplane-nullcompute DIR tables
  DEFS FAULT_FAMILY="nullcompute" FAULT_DEVICE="nullcompute0" FAULT_NULL_GRAPH_COMPUTE)
bp_add_fault_plugin(bp_fault_registry_abi libbackplane-regabi DIR tables
  DEFS FAULT_FAMILY="regabi" FAULT_DEVICE="regabi0" "FAULT_REGISTRY_ABI=BP_ABI_VERSION_MAKE(2, 0)")

# ---- device names ----
bp_add_fault_plugin(bp_fault_acme libbackplane-acme DIR names
  DEFS FAULT_FAMILY="acme" FAULT_DEVICE="cpu")
bp_add_fault_plugin(bp_fault_dup_device libbackplane-dupdev DIR names
  DEFS FAULT_FAMILY="dupdev" FAULT_DEVICE="dupdev0" FAULT_N_DEVICES=2)

# ---- versions: the host is N = BP_ABI_MINOR ----
# Built as ABI 1.0 with the 1.0 table sizes: binary compatibility in CI.
bp_add_fault_plugin(bp_fault_ver_old libbackplane-verold DIR versions
  DEFS FAULT_FAMILY="verold" FAULT_DEVICE="verold0" FAULT_ABI_1_0)
bp_add_fault_plugin(bp_fault_ver_cur libbackplane-vercur DIR versions
  DEFS FAULT_FAMILY="vercur" FAULT_DEVICE="vercur0" "FAULT_MIN_HOST=BP_ABI_MINOR")
bp_add_fault_plugin(bp_fault_ver_new libbackplane-vernew DIR versions
  DEFS FAULT_FAMILY="vernew" FAULT_DEVICE="vernew0" "FAULT_ABI_MINOR=(BP_ABI_MINOR + 1)")
bp_add_fault_plugin(bp_fault_ver_needs libbackplane-verneeds DIR versions
  DEFS FAULT_FAMILY="verneeds" FAULT_DEVICE="verneeds0" "FAULT_ABI_MINOR=(BP_ABI_MINOR + 1)"
       "FAULT_MIN_HOST=(BP_ABI_MINOR + 1)")

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
