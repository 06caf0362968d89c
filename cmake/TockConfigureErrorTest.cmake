# cmake -P script behind the configure_rejects_<case> tests: configuring tock against an Asio older than 1.26 stops
# at configure time with a message that says what to install, not with template errors later.
# CASE:
#   old_boost   only a Boost 1.74 is visible (a fake BoostConfig.cmake, as Debian 12's libboost-dev has)
#   old_asio    TOCK_ASIO=standalone on an Asio 1.22.1 (a fake asio/version.hpp, as Debian 12's libasio-dev has)
# Inputs: CASE, TOCK_SOURCE_DIR, TOCK_BINARY_DIR, GENERATOR.
set(work "${TOCK_BINARY_DIR}/configure-${CASE}")
file(REMOVE_RECURSE "${work}")
set(args -DTOCK_BUILD_TESTS=OFF -DTOCK_BUILD_EXAMPLES=OFF -DTOCK_BUILD_BENCH=OFF)
if(CASE STREQUAL "old_boost")
  set(fake "${work}/root/usr/lib/cmake/Boost-1.74.0")
  file(WRITE "${fake}/BoostConfig.cmake" "set(Boost_VERSION 1.74.0)\n")
  file(WRITE "${fake}/BoostConfigVersion.cmake" "set(PACKAGE_VERSION 1.74.0)\n"
    "if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n  set(PACKAGE_VERSION_COMPATIBLE FALSE)\n"
    "else()\n  set(PACKAGE_VERSION_COMPATIBLE TRUE)\nendif()\n")
  # Packages are searched under the fake root only, so the Boost 1.81 of this machine stays out of sight.
  list(APPEND args "-DCMAKE_FIND_ROOT_PATH=${work}/root" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY)
  set(expected "tock needs Boost >= 1.81 .*only Boost 1.74.0 was found.*apt-get install libboost1.81-dev")
elseif(CASE STREQUAL "old_asio")
  file(WRITE "${work}/asio/asio/version.hpp" "#define ASIO_VERSION 102201 // 1.22.1\n")
  list(APPEND args -DTOCK_ASIO=standalone "-DTOCK_ASIO_INCLUDE_DIR=${work}/asio")
  set(expected "tock needs standalone Asio >= 1.26; .* has Asio 1.22.1")
else()
  message(FATAL_ERROR "CASE='${CASE}': use old_boost or old_asio")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${TOCK_SOURCE_DIR}" -B "${work}/build" -G "${GENERATOR}" ${args}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " said "${err}") # CMake wraps its messages
if(result EQUAL 0)
  message(FATAL_ERROR "configuring with ${CASE} succeeded; expected it to stop")
elseif(NOT said MATCHES "${expected}")
  message(FATAL_ERROR "configuring with ${CASE} failed without the expected message /${expected}/:\n${err}")
endif()
message(STATUS "configure stopped as expected:\n${err}")
