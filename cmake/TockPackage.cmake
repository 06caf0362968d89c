# CPack: `cpack -G DEB` in a build directory makes libtock-dev_<version>_<arch>.deb from the install rules
# (headers, libtock.a, the CMake package and tock.pc under /usr). Included only when tock is the top-level
# project, so that a project that adds tock as a subdirectory keeps its own CPack settings.
set(TOCK_DEB_MAINTAINER "tock maintainers <maintainers@users.noreply.a-seed-a012f2aa.example>"
  CACHE STRING "Maintainer field of the .deb made by cpack -G DEB")

set(CPACK_PACKAGE_NAME "libtock-dev")
set(CPACK_PACKAGE_VENDOR "tock")
set(CPACK_PACKAGE_CONTACT "${TOCK_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 timers for Asio (development files)")
string(JOIN " " CPACK_PACKAGE_DESCRIPTION
  "tock replaces one Asio timer per timeout with one heap of deadlines and one steady_timer per io_context."
  "This package has the headers, the static library libtock.a, the CMake package"
  "(find_package(tock CONFIG), target tock::tock) and the pkg-config file tock.pc.")
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")

set(CPACK_DEBIAN_PACKAGE_NAME "libtock-dev")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TOCK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Boost 1.81 (Asio 1.26) or newer. Debian 12's libboost-dev is 1.74, hence libboost1.81-dev first; the
# alternative covers later releases whose default Boost is newer.
# Built on standalone Asio: Debian has no Asio >= 1.26 to depend on (libasio-dev is 1.22); tock.pc and the CMake
# package point at the Asio it was built with.
if(TOCK_ASIO STREQUAL "boost")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libboost1.81-dev | libboost-dev (>= 1.81)")
endif()

# The io_uring backend: libtock.a's users link liburing (-luring).
if(TOCK_ASIO_IO_URING)
  list(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS "liburing-dev")
  list(JOIN CPACK_DEBIAN_PACKAGE_DEPENDS ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
endif()

include(CPack)
