# install.cmake — what `cmake --install` puts where, and the SDK that lets a
# third party build an application or a plugin without the source tree:
#   lib/libbackplane.so.<major>          the host library (SOVERSION = major)
#   lib/backplane/libbackplane-*.so      plugins (installed by bp_add_plugin)
#   bin/backplane                        the CLI
#   include/backplane/*.h                ABI headers + backplane.h
#   lib/cmake/backplane/                 find_package(backplane CONFIG)
#   lib/pkgconfig/backplane{,-plugin}.pc pkg-config for applications / plugins
#   share/doc/backplane/CHANGELOG.md     the ABI changelog
include(CMakePackageConfigHelpers)

set(BP_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/backplane)

# backplane_abi is exported as backplane::abi, the library as backplane::backplane.
set_target_properties(backplane_abi PROPERTIES EXPORT_NAME abi)
install(TARGETS backplane_abi backplane EXPORT backplaneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(TARGET backplane_cli)
  install(TARGETS backplane_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# One include directory for both audiences: <backplane/bp_abi.h> for plugins,
# <backplane/backplane.h> (which includes the former) for applications.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/abi/backplane/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/backplane FILES_MATCHING PATTERN "*.h")
# Every public application header (backplane.h, bp_quantize.h, bp_meta.h, ...).
file(GLOB BP_HOST_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/host/include/backplane/*.h)
install(FILES ${BP_HOST_PUBLIC_HEADERS}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/backplane)
install(FILES ${PROJECT_SOURCE_DIR}/abi/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Plugin authors can check the ABI they compile for without a compiler
# (pkg-config abi_major, CMake BACKPLANE_ABI_MAJOR/MINOR). Read before any
# file that substitutes them is configured.
foreach(part MAJOR MINOR)
  file(STRINGS ${PROJECT_SOURCE_DIR}/abi/backplane/bp_plugin.h bp_abi_line
    REGEX "^#define BP_ABI_${part} [0-9]+")
  string(REGEX REPLACE "^#define BP_ABI_${part} ([0-9]+).*" "\\1" BP_PC_ABI_${part} "${bp_abi_line}")
  if(NOT BP_PC_ABI_${part} MATCHES "^[0-9]+$")
    message(FATAL_ERROR "cannot read BP_ABI_${part} from abi/backplane/bp_plugin.h")
  endif()
endforeach()

# ---- CMake package ----
install(EXPORT backplaneTargets NAMESPACE backplane::
  DESTINATION ${BP_CMAKE_INSTALL_DIR})
set(BACKPLANE_PLUGIN_INSTALL_DIR ${BP_PLUGIN_INSTALL_DIR})
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/backplaneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/backplaneConfig.cmake
  INSTALL_DESTINATION ${BP_CMAKE_INSTALL_DIR}
  PATH_VARS BACKPLANE_PLUGIN_INSTALL_DIR CMAKE_INSTALL_INCLUDEDIR)
# Same major = compatible, exactly like the ABI rule for plugins.
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/cmake/backplaneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_BINARY_DIR}/cmake/backplaneConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/backplaneConfigVersion.cmake
  DESTINATION ${BP_CMAKE_INSTALL_DIR})

# ---- pkg-config ----
# The prefix is computed from the .pc file's own location so that an install
# tree can be moved (or installed with `cmake --install --prefix`) and still work.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(BP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(BP_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH bp_pc_up "/bp/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/bp")
  string(REGEX REPLACE "/$" "" bp_pc_up "${bp_pc_up}")
  set(BP_PC_PREFIX "\${pcfiledir}/${bp_pc_up}")
  set(BP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(BP_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(BP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
foreach(pc backplane backplane-plugin)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
