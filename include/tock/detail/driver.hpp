// tock/detail/driver.hpp: which timer wakes a service when its earliest deadline comes.
#ifndef TOCK_DETAIL_DRIVER_HPP
#define TOCK_DETAIL_DRIVER_HPP

#include <tock/config.hpp>
#include <tock/detail/block_pool.hpp>

#include <utility>

namespace tock::detail {

// A driver handler with the driver's own memory for the operation that carries it.
template <typename Handler>
struct pooled_handler {
  using allocator_type = block_pool::allocator<void>;
  Handler handler;
  block_pool* memory;
  allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  template <typename... Args>
  void operator()(Args&&... args) {
    handler(std::forward<Args>(args)...);
  }
};

// The driver of a service: one Asio timer on the context's own executor. Its operations take their memory
// from a pool that the firing operation returns to before its handler runs, so the re-arm at the end of a
// batch (which has no caller to throw to) never allocates.
template <typename Clock, typename WaitTraits>
class asio_driver {
 public:
  using time_point = typename Clock::time_point;

  explicit asio_driver(const asio::io_context::executor_type& ex) : timer_(ex) {}

  // Supersedes the pending wait, if any (it completes with operation_aborted), with one for `t`. Throws
  // std::bad_alloc with nothing changed; the one exception is Asio's own timer queue, which may need to grow
  // when a timer it had dropped is queued again. O(log timers on the context).
  template <typename Handler>
  void arm(const time_point& t, Handler handler) {
    memory_.reserve(1);
    timer_.expires_at(t);
    timer_.async_wait(pooled_handler<Handler>{std::move(handler), &memory_});
  }

  // Completes the pending wait, if any, with operation_aborted. Never allocates.
  void cancel() noexcept { timer_.cancel(); }  // Asio's cancel of a timer cannot fail

  // Operations that did not fit a pool block, for tests.
  std::size_t fallbacks() const { return memory_.fallbacks(); }

 private:
  block_pool memory_;  // outlives the timer; its operations are destroyed at the context's shutdown
  asio::basic_waitable_timer<Clock, WaitTraits, asio::io_context::executor_type> timer_;
};

// The driver of basic_timer_service<Clock, WaitTraits>: anything with arm(t, handler), cancel() and
// fallbacks() as asio_driver's, constructed from the context's executor. An Asio timer unless the clock says
// otherwise (see manual_clock.hpp).
template <typename Clock, typename WaitTraits>
struct driver_for {
  using type = asio_driver<Clock, WaitTraits>;
};

}  // namespace tock::detail

#endif
