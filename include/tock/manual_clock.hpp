// tock/manual_clock.hpp: a clock that moves only when told, to test timeout logic in virtual time.
#ifndef TOCK_MANUAL_CLOCK_HPP
#define TOCK_MANUAL_CLOCK_HPP

#include <tock/config.hpp>
#include <tock/detail/block_pool.hpp>
#include <tock/detail/driver.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace tock {

namespace detail {
class manual_driver;
}

/// A steady clock whose time starts at zero and moves only through advance(): timers, deadlines and sleeps
/// on it (tock::basic_timer<tock::manual_clock>, tock::basic_deadline<tock::manual_clock>, async_sleep_until
/// with its time points) fire when a test moves time past them, and not before, however long the test takes.
/// Waits on it are outstanding work like any timer's, so drive the context with poll() (or run_one()) after
/// advancing, or advance from another thread. There is one manual time per process: tests that share it
/// should measure from now(), not from zero.
struct manual_clock {
  ///@{
  /// What std::chrono asks of a clock: nanoseconds since the clock's zero, steady.
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;
  ///@}

  /// The virtual time. O(1), thread-safe.
  static time_point now() noexcept { return time_point(duration(state().now.load(std::memory_order_acquire))); }

  /// Moves time forward by `d` (nothing for d <= 0) and queues, on their contexts, the services whose next
  /// deadline has come. O(services using the clock); thread-safe.
  static void advance(duration d) {
    if (d > duration::zero()) advance_to(now() + d);
  }

  /// Moves time forward to `t` (nothing if `t` is not later than now()). Same as advance().
  static void advance_to(time_point t);

 private:
  friend class detail::manual_driver;

  struct registry {
    std::atomic<rep> now{0};
    std::mutex mutex;
    std::vector<detail::manual_driver*> armed;  // drivers with a pending wait
    std::size_t drivers = 0;                    // armed has room for all of them
  };

  static registry& state() noexcept;  // one per process: libtock's (src/manual_clock.cpp)
};

namespace detail {

// The driver of a service on manual_clock: instead of an Asio timer it registers with the clock, which
// posts its handler to the context when advance() reaches the armed time. While armed it holds outstanding
// work on the context, as a pending Asio timer wait does, and a superseded or cancelled wait completes with
// operation_aborted, as with Asio. Every arming ends in exactly one post (fired or aborted), whose memory
// arm() reserves, so that cancel() and advance() never allocate.
class manual_driver {
  using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;
  using handler_type = std::function<void(const sys::error_code&)>;

 public:
  // Reserves a place in the clock's armed list for this driver: arming never allocates there.
  explicit manual_driver(const asio::io_context::executor_type& ex);
  ~manual_driver();
  manual_driver(const manual_driver&) = delete;
  manual_driver& operator=(const manual_driver&) = delete;

  // As asio_driver::arm. Throws std::bad_alloc with nothing changed (the handler is wrapped before the call).
  void arm(const manual_clock::time_point& t, handler_type handler);

  void cancel() noexcept;

  std::size_t fallbacks() const { return memory_.fallbacks(); }

 private:
  friend struct tock::manual_clock;

  // What the driver posts: the handler and its error, in the driver's reserved memory.
  struct completion {
    using allocator_type = block_pool::allocator<void>;
    handler_type handler;
    sys::error_code ec;
    block_pool* memory;
    allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
    void operator()() { handler(ec); }
  };

  // Takes this driver out of the armed list and completes its pending wait with operation_aborted, as an
  // Asio timer does: the posted completion keeps the context's work count up, so that the service can
  // re-arm (or post its own completions) before run() could see no work. Under the registry's lock.
  void drop_locked(manual_clock::registry& r) noexcept {
    if (handler_) complete_locked(r, asio::error::operation_aborted);
  }

  // Posts the handler: the wait is over. Under the registry's lock.
  void fire_locked(manual_clock::registry& r) noexcept { complete_locked(r, sys::error_code()); }

  void complete_locked(manual_clock::registry& r, const sys::error_code& ec) noexcept;

  asio::io_context::executor_type ex_;
  block_pool memory_;  // its posts are destroyed at the context's shutdown, before the service that owns this
  manual_clock::time_point at_{};
  handler_type handler_;
  std::optional<work_guard> work_;
};

template <typename WaitTraits>
struct driver_for<manual_clock, WaitTraits> {
  using type = manual_driver;
};

}  // namespace detail

}  // namespace tock

#endif
