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

#endif
