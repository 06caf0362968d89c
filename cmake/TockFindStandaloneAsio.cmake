# TOCK_ASIO=standalone: standalone Asio >= 1.26 (header-only), from TOCK_ASIO_INCLUDE_DIR or the default include
# path (TOCK_ASIO_HINTS: more places to look). Sets TOCK_ASIO_INCLUDE_DIR, TOCK_ASIO_VERSION (e.g. 1.38.2) and
# TOCK_ASIO_ERROR: empty, or what is wrong and what to do. Used by the build, and by the installed tockConfig.cmake
# with the directory tock was built with as a hint.
if(NOT TOCK_ASIO_INCLUDE_DIR)
  unset(TOCK_ASIO_INCLUDE_DIR CACHE)
  find_path(TOCK_ASIO_INCLUDE_DIR asio/version.hpp HINTS ${TOCK_ASIO_HINTS}
    DOC "standalone Asio: the directory holding asio.hpp")
endif()
set(TOCK_ASIO_ERROR "")
set(TOCK_ASIO_VERSION "")
if(NOT EXISTS "${TOCK_ASIO_INCLUDE_DIR}/asio/version.hpp")
  string(CONCAT TOCK_ASIO_ERROR "tock with TOCK_ASIO=standalone needs standalone Asio >= 1.26 and found none "
    "(TOCK_ASIO_INCLUDE_DIR='${TOCK_ASIO_INCLUDE_DIR}'): set TOCK_ASIO_INCLUDE_DIR to the directory holding "
    "asio.hpp (Asio is header-only: https://think-async.com), or use -DTOCK_ASIO=boost.")
  return()
endif()
file(STRINGS "${TOCK_ASIO_INCLUDE_DIR}/asio/version.hpp" tock_asio_version_line
  REGEX "^#define ASIO_VERSION [0-9]+")
string(REGEX REPLACE "^#define ASIO_VERSION ([0-9]+).*" "\\1" tock_asio_version "${tock_asio_version_line}")
math(EXPR tock_asio_major "${tock_asio_version} / 100000")
math(EXPR tock_asio_minor "${tock_asio_version} / 100 % 1000")
math(EXPR tock_asio_patch "${tock_asio_version} % 100")
set(TOCK_ASIO_VERSION "${tock_asio_major}.${tock_asio_minor}.${tock_asio_patch}")
if(tock_asio_version LESS 102600)
  string(CONCAT TOCK_ASIO_ERROR "tock needs standalone Asio >= 1.26; ${TOCK_ASIO_INCLUDE_DIR} has Asio ${TOCK_ASIO_VERSION} "
    "(Debian 12's libasio-dev is 1.22, whose append and as_tuple are still experimental): set "
    "TOCK_ASIO_INCLUDE_DIR to a newer Asio's include directory, or use -DTOCK_ASIO=boost with Boost >= 1.81.")
endif()
