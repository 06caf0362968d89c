// The steady_clock timer service, compiled once for every user (the extern templates of tock/timer_service.hpp),
// and the tag of the mode libtock was built in (tock/detail/libtock_abi.hpp).
#include <tock/timer_service.hpp>

#include <chrono>

namespace tock {

template class basic_timer_service<std::chrono::steady_clock>;

namespace detail {

template class timer_queue<std::chrono::steady_clock::time_point>;
template class deadline_heap<std::chrono::steady_clock::time_point>;
template class sleep_lanes<std::chrono::steady_clock::time_point>;
template class timer_driver<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>>;
template class locked_section<basic_timer_service<std::chrono::steady_clock>>;

#if TOCK_TSAN
extern const char libtock_built_with_tsan = 0;
#elif TOCK_DETAIL_EXTERN_STEADY_SERVICE
extern const char libtock_built_without_checks = 0;
#endif

}  // namespace detail
}  // namespace tock
