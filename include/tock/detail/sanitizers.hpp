// tock/detail/sanitizers.hpp: which sanitizer the code is built with, for GCC and clang alike.
#ifndef TOCK_DETAIL_SANITIZERS_HPP
#define TOCK_DETAIL_SANITIZERS_HPP

// TOCK_ASAN: AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang answers __has_feature); TOCK_TSAN:
// ThreadSanitizer. Each is 0 or 1.
#if defined(__SANITIZE_ADDRESS__)
#define TOCK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOCK_ASAN 1
#endif
#endif
#ifndef TOCK_ASAN
#define TOCK_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define TOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TOCK_TSAN 1
#endif
#endif
#ifndef TOCK_TSAN
#define TOCK_TSAN 0
#endif

// TOCK_CHECK_INVARIANTS: the rules the code relies on (the driver's arming rule, who holds work on the
// context) are checked where they must hold, and a broken one aborts with its name: on in the sanitizer builds
// (CI's and the fuzzers'), off elsewhere; define it to 0 or 1 to choose.
#ifndef TOCK_CHECK_INVARIANTS
#define TOCK_CHECK_INVARIANTS (TOCK_ASAN || TOCK_TSAN)
#endif

#if TOCK_CHECK_INVARIANTS
#include <cstdio>
#include <cstdlib>

namespace tock::detail {
[[noreturn]] inline void invariant_broken(const char* rule) noexcept {
  std::fprintf(stderr, "tock: invariant broken: %s\n", rule);
  std::abort();
}
}  // namespace tock::detail
#endif

#endif
