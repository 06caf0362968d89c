// tock/manual_clock.hpp: a clock that moves only when told, to test timeout logic in virtual time.
#ifndef TOCK_MANUAL_CLOCK_HPP
#define TOCK_MANUAL_CLOCK_HPP

#include <tock/config.hpp>
#include <tock/detail/block_pool.hpp>
#include <tock/detail/driver.hpp>

#include <algorithm>
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

  static registry& state() noexcept {
    static registry r;
    return r;
  }
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
  explicit manual_driver(const asio::io_context::executor_type& ex) : ex_(ex) {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.armed.reserve(++r.drivers);  // a place in `armed` for each driver: arming never allocates there
  }
  ~manual_driver() {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (handler_) r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
    --r.drivers;
  }
  manual_driver(const manual_driver&) = delete;
  manual_driver& operator=(const manual_driver&) = delete;

  // As asio_driver::arm. Throws std::bad_alloc with nothing changed.
  template <typename Handler>
  void arm(const manual_clock::time_point& t, Handler handler) {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    memory_.reserve(handler_ ? 2 : 1);  // the superseded wait's post, and this one's
    handler_type h(std::move(handler));
    drop_locked(r);
    at_ = t;
    handler_ = std::move(h);
    work_.emplace(ex_);
    r.armed.push_back(this);
    if (!(manual_clock::now() < at_)) fire_locked(r);
  }

  void cancel() noexcept {
    auto& r = manual_clock::state();
    std::lock_guard<std::mutex> lock(r.mutex);
    drop_locked(r);
  }

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

  void complete_locked(manual_clock::registry& r, const sys::error_code& ec) noexcept {
    asio::post(ex_, completion{std::exchange(handler_, nullptr), ec, &memory_});  // reserved: no throw
    r.armed.erase(std::find(r.armed.begin(), r.armed.end(), this));
    work_.reset();  // after the post, which holds work of its own
  }

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

inline void manual_clock::advance_to(time_point t) {
  registry& r = state();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!(now() < t)) return;
  r.now.store(t.time_since_epoch().count(), std::memory_order_release);
  // Backwards, as fire_locked() takes the driver out of `armed`; nothing here allocates (see manual_driver).
  for (std::size_t i = r.armed.size(); i-- > 0;)
    if (!(t < r.armed[i]->at_)) r.armed[i]->fire_locked(r);
}

}  // namespace tock

#endif
