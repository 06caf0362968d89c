// tock/detail/driver.hpp: which timer wakes a service when its earliest deadline comes.
#ifndef TOCK_DETAIL_DRIVER_HPP
#define TOCK_DETAIL_DRIVER_HPP

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>

namespace tock::detail {

// The driver of basic_timer_service<Clock, WaitTraits>: anything with Asio's waitable-timer members
// expires_at(t), async_wait(void(error_code) handler) and cancel(), constructed from the context's executor.
// One Asio timer on the context's own executor, unless the clock says otherwise (see manual_clock.hpp).
template <typename Clock, typename WaitTraits>
struct driver_for {
  using type = boost::asio::basic_waitable_timer<Clock, WaitTraits, boost::asio::io_context::executor_type>;
};

}  // namespace tock::detail

#endif
