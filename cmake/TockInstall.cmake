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
  DESTINATION "${TOCK_CMAKE_DIR}")
