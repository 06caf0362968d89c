# Install the headers, the library and a CMake package: find_package(tock CONFIG) gives tock::tock.
include(CMakePackageConfigHelpers)

set(TOCK_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/tock")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS tock EXPORT tockTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(EXPORT tockTargets NAMESPACE tock:: DESTINATION "${TOCK_CMAKE_DIR}")

configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/tockConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/tockConfig.cmake" INSTALL_DESTINATION "${TOCK_CMAKE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/tockConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion) # 0.x: a minor release may break the API
install(FILES "${PROJECT_BINARY_DIR}/tockConfig.cmake" "${PROJECT_BINARY_DIR}/tockConfigVersion.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/TockFindStandaloneAsio.cmake" DESTINATION "${TOCK_CMAKE_DIR}")

# pkg-config: <libdir>/pkgconfig/tock.pc, with paths relative to its own directory so that it stays right for
# `cmake --install --prefix <elsewhere>`, DESTDIR and the .deb (an absolute CMAKE_INSTALL_<dir> is kept as is).
function(tock_pc_dir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH TOCK_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" TOCK_PC_PREFIX "${TOCK_PC_PREFIX}")
  set(TOCK_PC_PREFIX "\${pcfiledir}/${TOCK_PC_PREFIX}")
endif()
tock_pc_dir(TOCK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
tock_pc_dir(TOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
# Standalone Asio is header-only and has no .pc file: its directory and macros go into tock's Cflags.
if(TOCK_ASIO STREQUAL "standalone")
  set(TOCK_PC_ASIO_CFLAGS " -DTOCK_STANDALONE_ASIO -DASIO_STANDALONE -I${TOCK_ASIO_INCLUDE_DIR}")
  set(TOCK_PC_DESCRIPTION "standalone Asio")
else()
  set(TOCK_PC_ASIO_CFLAGS "")
  set(TOCK_PC_DESCRIPTION "Boost.Asio")
endif()
# The io_uring backend (TOCK_ASIO_IO_URING): its macros in Cflags, liburing in Libs.
set(TOCK_PC_URING_LIBS "")
if(TOCK_ASIO_IO_URING)
  list(TRANSFORM TOCK_URING_DEFINITIONS PREPEND " -D" OUTPUT_VARIABLE tock_pc_uring_flags)
  string(JOIN "" tock_pc_uring_flags ${tock_pc_uring_flags})
  string(APPEND TOCK_PC_ASIO_CFLAGS "${tock_pc_uring_flags}")
  string(APPEND TOCK_PC_DESCRIPTION ", io_uring backend")
  set(TOCK_PC_URING_LIBS " -luring")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/tock.pc.in" "${PROJECT_BINARY_DIR}/tock.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/tock.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
