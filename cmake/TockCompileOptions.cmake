# Compiler flags shared by every target of the tock build.

# tock_sanitize(<list>): compile and link everything defined after this call with the
# given sanitizers ("address,undefined" or "thread"); an empty list does nothing.
function(tock_sanitize sanitizers)
  if(sanitizers STREQUAL "")
    return()
  endif()
  if(NOT sanitizers MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "TOCK_SANITIZE='${sanitizers}': use address,undefined or thread")
  endif()
  set(flags "-fsanitize=${sanitizers}" -fno-omit-frame-pointer)
  if(NOT TOCK_SANITIZE_O1)
    list(APPEND flags -g)
  else()
    # After the build type's -O2 -g, so these win: half the compile time (CI's sanitizer builds were 40 of its
    # minutes), the same checks; reports keep file:line for each frame, not the inlined frames within it.
    list(APPEND flags -O1 -g1)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12 at -O1 reports a false -Wmaybe-uninitialized in Boost's use_future.hpp (its `completion`); the
      # Release builds (-O2, GCC and clang) keep the warning for tock's code.
      list(APPEND flags -Wno-maybe-uninitialized)
    endif()
  endif()
  if(sanitizers MATCHES "undefined")
    list(APPEND flags -fno-sanitize-recover=all) # a UBSan report fails the test
  endif()
  add_compile_options(${flags})
  add_link_options(${flags})
  if(sanitizers STREQUAL "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 warns that TSan does not model the atomic_thread_fence inside Asio's fenced_block;
    # Asio's handler queues are mutex-protected, so the warning is noise that -Werror would make fatal.
    # GCC 12 under -fsanitize=thread also reports a false -Wmaybe-uninitialized on std::optional<executor_work_guard>
    # (timer_service.hpp's idle_work) in some build types.
    add_compile_options(-Wno-tsan -Wno-maybe-uninitialized)
  endif()
endfunction()

# tock_target_warnings(<target>): the project's warning level, for its own targets only
# (consumers of the installed package do not inherit it).
function(tock_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra $<$<BOOL:${TOCK_WERROR}>:-Werror>)
endfunction()
