# TOCK_ASIO=boost: Boost >= 1.81 (Boost.Asio 1.26), with a message that says what to install when it is missing.
find_package(Boost 1.81 CONFIG)
if(NOT Boost_FOUND)
  if(Boost_CONSIDERED_VERSIONS)
    set(tock_boost_found "only Boost ${Boost_CONSIDERED_VERSIONS} was found (${Boost_CONSIDERED_CONFIGS})")
  else()
    set(tock_boost_found "no Boost CMake package (BoostConfig.cmake) was found")
  endif()
  message(FATAL_ERROR "tock needs Boost >= 1.81 (Boost.Asio >= 1.26): ${tock_boost_found}. "
    "On Debian 12: apt-get install libboost1.81-dev (libboost-dev is 1.74 there); elsewhere set Boost_DIR or "
    "CMAKE_PREFIX_PATH to a Boost >= 1.81 installed with its CMake files. "
    "Or build on standalone Asio >= 1.26: -DTOCK_ASIO=standalone -DTOCK_ASIO_INCLUDE_DIR=<dir of asio.hpp>.")
endif()
