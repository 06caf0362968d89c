# cmake -P script behind the consumer_<mode> tests: build test/consumer/main.cpp the way a project outside the
# tock tree would, run it and require it to print "ok" (it does only if a tock timer completed).
# MODE:
#   package       install the current build into a prefix; find_package(tock CONFIG) from CMAKE_PREFIX_PATH
#   subdirectory  add_subdirectory(<tock source dir>) in the consumer project
#   fetchcontent  FetchContent_Declare(tock SOURCE_DIR <tock source dir>) + FetchContent_MakeAvailable
#   pkgconfig     install into a prefix; compile main.cpp with `pkg-config --cflags --libs tock` (PKG_CONFIG_PATH)
#   deb           cpack -G DEB; extract the .deb with dpkg-deb -x (not installed); find_package from its usr/
# Inputs: MODE, TOCK_SOURCE_DIR, TOCK_BINARY_DIR, CONSUMER_SOURCE_DIR, CXX_COMPILER, GENERATOR, TOCK_ASIO and
#         TOCK_ASIO_INCLUDE_DIR, TOCK_ASIO_IO_URING (the Asio the tock build uses; a subproject is configured with
#         the same),
#         PKG_CONFIG (pkgconfig), CPACK and DPKG_DEB (deb).
# Everything goes to <build>/consumer-<mode>/, so that the tests can run in parallel.
if(NOT MODE MATCHES "^(package|subdirectory|fetchcontent|pkgconfig|deb)$")
  message(FATAL_ERROR "MODE='${MODE}': use package, subdirectory, fetchcontent, pkgconfig or deb")
endif()
set(work "${TOCK_BINARY_DIR}/consumer-${MODE}")
set(prefix "${work}/prefix")
set(build "${work}/build")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "failed (${result}): ${command}")
  endif()
endfunction()

# build_consumer(<args>...): configure and build test/consumer into ${build}.
function(build_consumer)
  run("${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" ${ARGN})
  run("${CMAKE_COMMAND}" --build "${build}")
endfunction()

# expect_tock_from(<dir>): the consumer's find_package found tock under <dir>, not some other installed tock.
function(expect_tock_from dir)
  file(STRINGS "${build}/CMakeCache.txt" tock_dir REGEX "^tock_DIR:")
  string(REGEX REPLACE "^tock_DIR:[A-Z]*=" "" tock_dir "${tock_dir}")
  file(REAL_PATH "${dir}" dir)
  file(REAL_PATH "${tock_dir}" tock_dir)
  string(FIND "${tock_dir}/" "${dir}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "the consumer found tock in '${tock_dir}', not under '${dir}'")
  endif()
  message(STATUS "tock_DIR=${tock_dir}")
endfunction()

if(MODE STREQUAL "package")
  run("${CMAKE_COMMAND}" --install "${TOCK_BINARY_DIR}" --prefix "${prefix}")
  build_consumer("-DCMAKE_PREFIX_PATH=${prefix}")
  expect_tock_from("${prefix}")
elseif(MODE MATCHES "^(subdirectory|fetchcontent)$")
  build_consumer("-DTOCK_CONSUMER_MODE=${MODE}" "-DTOCK_SOURCE_DIR=${TOCK_SOURCE_DIR}" "-DTOCK_ASIO=${TOCK_ASIO}"
    "-DTOCK_ASIO_INCLUDE_DIR=${TOCK_ASIO_INCLUDE_DIR}" "-DTOCK_ASIO_IO_URING=${TOCK_ASIO_IO_URING}")
elseif(MODE STREQUAL "pkgconfig")
  if(NOT PKG_CONFIG)
    message(FATAL_ERROR "pkg-config not found (Debian: apt-get install pkgconf)")
  endif()
  run("${CMAKE_COMMAND}" --install "${TOCK_BINARY_DIR}" --prefix "${prefix}")
  file(GLOB_RECURSE pc_files "${prefix}/tock.pc")
  list(LENGTH pc_files count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "expected one tock.pc under ${prefix}, found [${pc_files}]")
  endif()
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs tock
    OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs tock failed (${result})")
  endif()
  message(STATUS "pkg-config --cflags --libs tock: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY "${build}")
  run("${CXX_COMPILER}" "${CONSUMER_SOURCE_DIR}/main.cpp" ${flags} -o "${build}/consumer")
elseif(MODE STREQUAL "deb")
  run("${CPACK}" -G DEB --config "${TOCK_BINARY_DIR}/CPackConfig.cmake" -B "${work}/cpack")
  file(GLOB debs "${work}/cpack/*.deb")
  list(LENGTH debs count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "expected one .deb in ${work}/cpack, found [${debs}]")
  endif()
  execute_process(COMMAND "${DPKG_DEB}" --field "${debs}" Package Depends OUTPUT_VARIABLE fields)
  message(STATUS "${debs}:\n${fields}")
  if(NOT fields MATCHES "Package: libtock-dev\n")
    message(FATAL_ERROR "the package is not named libtock-dev")
  endif()
  run("${DPKG_DEB}" -x "${debs}" "${prefix}")
  if(PKG_CONFIG) # the packaged tock.pc points into the extracted tree (it is relative to its own directory)
    set(ENV{PKG_CONFIG_PATH} "${prefix}/usr/lib/pkgconfig")
    execute_process(COMMAND "${PKG_CONFIG}" --cflags tock OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
    string(FIND "${flags}" "-I${prefix}/usr/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "the .deb's tock.pc gives '${flags}', not -I${prefix}/usr/...")
    endif()
  endif()
  build_consumer("-DCMAKE_PREFIX_PATH=${prefix}/usr")
  expect_tock_from("${prefix}/usr")
endif()

execute_process(COMMAND "${build}/consumer" OUTPUT_VARIABLE output RESULT_VARIABLE result)
message(STATUS "consumer printed: ${output}")
if(NOT result EQUAL 0 OR NOT output MATCHES "^ok")
  message(FATAL_ERROR "consumer failed (${result})")
endif()
