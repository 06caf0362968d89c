// tock/detail/libtock_abi.hpp: which of tock's code a translation unit takes from libtock instead of compiling
// it, and the link-time check that libtock was built in the mode that code needs.
#ifndef TOCK_DETAIL_LIBTOCK_ABI_HPP
#define TOCK_DETAIL_LIBTOCK_ABI_HPP

#include <tock/detail/sanitizers.hpp>

// 1 when this translation unit uses the steady_clock service compiled in libtock (the extern templates at the end
// of tock/timer_service.hpp, instantiated in src/timer_service.cpp) rather than instantiating it: in plain builds.
// With the invariant checks or ThreadSanitizer (the sanitizer builds) it instantiates its own, so that the checks
// and the lock's annotations are in every body it runs, whatever mode libtock was built in.
#define TOCK_DETAIL_EXTERN_STEADY_SERVICE (!TOCK_CHECK_INVARIANTS && !TOCK_TSAN)

namespace tock::detail {

// Defined in libtock when it was built in that mode (src/timer_service.cpp). A translation unit that relies on
// libtock's compiled code in one mode refers to that mode's tag, so that linking it to a libtock built in another
// fails, naming the tag, instead of silently mixing bodies with and without the checks or the annotations (the
// service's lock, taken in src/service_core.cpp, is annotated only under TSan). A build with the checks but
// without TSan (AddressSanitizer) needs no tag: the code it takes from libtock is the same in every mode.
#if TOCK_TSAN
extern const char libtock_built_with_tsan;
[[gnu::used]] static const char* const libtock_mode_check = &libtock_built_with_tsan;
#elif TOCK_DETAIL_EXTERN_STEADY_SERVICE
extern const char libtock_built_without_checks;
[[gnu::used]] static const char* const libtock_mode_check = &libtock_built_without_checks;
#endif

}  // namespace tock::detail

#endif
