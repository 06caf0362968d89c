# cmake -P script behind the consumer_package test: install the current build into a prefix
# inside the build dir, then configure, build and run test/consumer against that prefix.
# Inputs: TOCK_BINARY_DIR, CONSUMER_SOURCE_DIR, CXX_COMPILER.
set(prefix "${TOCK_BINARY_DIR}/consumer-prefix")
set(build "${TOCK_BINARY_DIR}/consumer-build")
file(REMOVE_RECURSE "${prefix}" "${build}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "failed (${result}): ${command}")
  endif()
endfunction()

run("${CMAKE_COMMAND}" --install "${TOCK_BINARY_DIR}" --prefix "${prefix}")
run("${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}"
  "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
run("${CMAKE_COMMAND}" --build "${build}")

execute_process(COMMAND "${build}/consumer" OUTPUT_VARIABLE output RESULT_VARIABLE result)
message(STATUS "consumer printed: ${output}")
if(NOT result EQUAL 0 OR NOT output MATCHES "^ok")
  message(FATAL_ERROR "consumer failed (${result})")
endif()
